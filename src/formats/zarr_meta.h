/* zarr_meta.h — the metadata of OME-Zarr stores, parsed from JSON text into plain descriptors:
 * Zarr arrays (v2 ".zarray", v3 "zarr.json" with the regular chunk grid, the bytes codec, one
 * compressor and the sharding codec), OME-NGFF image groups (0.4 ".zattrs", 0.5 "zarr.json":
 * multiscales axes, datasets and scales, plus the "slidepipe" attributes our converter writes),
 * and the index of a v3 shard. Everything here works on memory only, so the fuzz target reaches
 * the same code the "ome-zarr" format (zarr.c) runs; the files are read there.
 *
 * The text is untrusted: every member's type and range is checked, sizes are bounded by the
 * limits, and a malformed document is SP_E_CORRUPT, a valid one using a feature slidepipe does
 * not read SP_E_UNSUPPORTED (the message names the feature). Messages do not name the file; the
 * caller adds it.
 */
#ifndef SP_FORMATS_ZARR_META_H
#define SP_FORMATS_ZARR_META_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/limits.h"

#define SP_ZARR_MAX_DIMS 5                    /* t, c, z, y, x */
#define SP_ZARR_MAX_EXTENT (INT64_C(1) << 32) /* elements along one dimension */
#define SP_ZARR_MAX_DATASETS 64               /* pyramid levels */
#define SP_ZARR_MAX_ASSOCIATED 64
#define SP_ZARR_MAX_NAME 255 /* bytes of an associated image's name */

/* ---- arrays ---- */

typedef enum sp_zarr_sample {
    SP_ZARR_SAMPLE_U8,
    SP_ZARR_SAMPLE_I8,
    SP_ZARR_SAMPLE_U16,
    SP_ZARR_SAMPLE_I16,
} sp_zarr_sample;

typedef struct sp_zarr_array_meta {
    int zarr_format; /* 2 or 3 */
    int ndim;
    int64_t shape[SP_ZARR_MAX_DIMS];
    int64_t chunk[SP_ZARR_MAX_DIMS]; /* a decoded chunk (the inner chunk when sharded) */
    int64_t file[SP_ZARR_MAX_DIMS];  /* what one chunk file holds: the shard, or = chunk */
    sp_zarr_sample sample;
    int item_size;         /* bytes per element: 1 or 2 */
    bool big_endian;       /* for 2-byte samples */
    int64_t fill;          /* the fill value, within the sample type's range */
    const char *data_type; /* static name: "uint8", "int8", "uint16", "int16" */

    /* The chunk's bytes-to-bytes codecs: one compressor (SP_ZARR_CODEC_NONE for none), then
     * optionally a crc32c checksum (v3). */
    sp_zarr_codec codec;
    bool chunk_crc32c;

    /* Chunk keys: v2 "0.1.2" (or "0/1/2"), v3 default "c/0/1/2" (or "c.0.1.2"). */
    bool key_prefix_c;
    char separator; /* '.' or '/' */

    /* Sharding (v3 sharding_indexed): the index is 16 bytes (offset, nbytes; little-endian) per
     * inner chunk in C order, followed by a crc32c when index_crc32c, at the start or the end. */
    bool sharded;
    bool index_at_start;
    bool index_crc32c;
    uint64_t shard_chunks; /* inner chunks per shard */

    uint64_t chunk_elements; /* product of chunk[] */
    uint64_t chunk_bytes;    /* chunk_elements * item_size */
} sp_zarr_array_meta;

/* Parse an array's metadata: a v2 ".zarray" document (zarr_format 2) or a v3 "zarr.json" of
 * node_type "array" (zarr_format 3). `len` bytes of `text`; no terminator needed. */
sp_status sp_zarr_parse_array(const char *text, size_t len, int zarr_format,
                              const sp_limits *limits, sp_zarr_array_meta *out, sp_err *err);

/* The key of the chunk file at chunk-file grid position `index` (ndim entries; shard positions
 * when sharded), relative to the array's folder. SP_E_LIMIT when it does not fit in `len`. */
sp_status sp_zarr_chunk_key(const sp_zarr_array_meta *m, const int64_t *index, char *buf,
                            size_t len, sp_err *err);

/* ---- shards ---- */

/* Bytes of a shard's index (16 per inner chunk, + 4 for the crc32c). */
uint64_t sp_zarr_shard_index_bytes(const sp_zarr_array_meta *m);

/* Check an index read from a shard of `shard_size` bytes: its length, and its crc32c. */
sp_status sp_zarr_shard_index_check(const sp_zarr_array_meta *m, const uint8_t *index,
                                    size_t index_len, uint64_t shard_size, sp_err *err);

/* Look up inner chunk `which` (C order inside the shard) in a checked index. *present is false
 * for an empty entry (both words all ones); otherwise *offset, *nbytes lie inside the shard's
 * data (outside the index), or the index is SP_E_CORRUPT. */
sp_status sp_zarr_shard_entry(const sp_zarr_array_meta *m, const uint8_t *index,
                              uint64_t shard_size, uint64_t which, bool *present, uint64_t *offset,
                              uint64_t *nbytes, sp_err *err);


/* ---- OME-NGFF image groups ---- */

typedef enum sp_zarr_axis {
    SP_ZARR_AXIS_T,
    SP_ZARR_AXIS_C,
    SP_ZARR_AXIS_Z,
    SP_ZARR_AXIS_Y,
    SP_ZARR_AXIS_X,
} sp_zarr_axis;

typedef struct sp_zarr_dataset {
    char *path; /* relative to the group, checked by sp_zarr_path_is_safe */
    bool has_scale;
    double scale[SP_ZARR_MAX_DIMS]; /* the dataset's scale times the multiscale's, per axis */
} sp_zarr_dataset;

typedef struct sp_zarr_property {
    char *key, *value;
} sp_zarr_property;

typedef struct sp_zarr_associated_meta {
    char *name, *path;
    int64_t width, height;
} sp_zarr_associated_meta;

typedef struct sp_zarr_group_meta {
    int zarr_format;
    /* bioformats2raw layout: the image is the child group "0"; nothing below is filled. */
    bool redirect;
    char *ome_version; /* or NULL */
    char *name;        /* the multiscale's name, or NULL */
    int ndim;
    sp_zarr_axis axes[SP_ZARR_MAX_DIMS];
    char axes_text[4 * SP_ZARR_MAX_DIMS]; /* "c,y,x" */
    double um_per_unit[SP_ZARR_MAX_DIMS]; /* micrometres per unit of the axis; 0 when unknown */
    int32_t n_datasets;
    sp_zarr_dataset *datasets;
    int32_t n_properties; /* slidepipe.properties, in document order */
    sp_zarr_property *properties;
    int32_t n_associated; /* slidepipe.associated */
    sp_zarr_associated_meta *associated;
    char pixel_hash[65]; /* slidepipe.pixel_hash (64 lowercase hex digits), or "" */
} sp_zarr_group_meta;

/* Parse an image group's attributes: the ".zattrs" document (zarr_format 2) or the group's
 * "zarr.json" (zarr_format 3). A group without multiscales (and not a bioformats2raw layout) is
 * SP_E_NOT_A_SLIDE; a plate or well is SP_E_UNSUPPORTED. On success free *out with
 * sp_zarr_group_free; on failure there is nothing to free. */
sp_status sp_zarr_parse_group(const char *text, size_t len, int zarr_format,
                              const sp_limits *limits, sp_zarr_group_meta *out, sp_err *err);

void sp_zarr_group_free(sp_zarr_group_meta *g);

/* A relative path that stays inside the store: non-empty components separated by '/', none of
 * them "." or "..", no leading '/', no backslash or control character. */
bool sp_zarr_path_is_safe(const char *path);

#endif
