/* tiff.h — the TIFF and BigTIFF container: directories (IFDs), their tags, and their chunks.
 *
 * sp_tiff_open walks the main IFD chain and every SubIFD of a file through a byte source, in
 * either byte order, classic or BigTIFF. Every offset, count and size read from the file is
 * checked against the file size and the limits before it is used; IFD cycles are detected (an
 * offset seen twice is an error) and the number of directories is bounded. A directory's pixel
 * data is a grid of chunks (tiles, or strips treated as full-width tiles); chunk offsets and
 * byte counts are loaded at open, chunk bytes on demand.
 */
#ifndef SP_TIFF_TIFF_H
#define SP_TIFF_TIFF_H

#include <stdbool.h>
#include <stdint.h>

#include "base/limits.h"
#include "io/source.h"

/* Tags the readers use. */
enum {
    SP_TAG_NEW_SUBFILE_TYPE = 254,
    SP_TAG_IMAGE_WIDTH = 256,
    SP_TAG_IMAGE_LENGTH = 257,
    SP_TAG_BITS_PER_SAMPLE = 258,
    SP_TAG_COMPRESSION = 259,
    SP_TAG_PHOTOMETRIC = 262,
    SP_TAG_IMAGE_DESCRIPTION = 270,
    SP_TAG_MAKE = 271,
    SP_TAG_MODEL = 272,
    SP_TAG_STRIP_OFFSETS = 273,
    SP_TAG_ORIENTATION = 274,
    SP_TAG_SAMPLES_PER_PIXEL = 277,
    SP_TAG_ROWS_PER_STRIP = 278,
    SP_TAG_STRIP_BYTE_COUNTS = 279,
    SP_TAG_X_RESOLUTION = 282,
    SP_TAG_Y_RESOLUTION = 283,
    SP_TAG_PLANAR_CONFIG = 284,
    SP_TAG_RESOLUTION_UNIT = 296,
    SP_TAG_SOFTWARE = 305,
    SP_TAG_DATE_TIME = 306,
    SP_TAG_ARTIST = 315,
    SP_TAG_HOST_COMPUTER = 316,
    SP_TAG_PREDICTOR = 317,
    SP_TAG_TILE_WIDTH = 322,
    SP_TAG_TILE_LENGTH = 323,
    SP_TAG_TILE_OFFSETS = 324,
    SP_TAG_TILE_BYTE_COUNTS = 325,
    SP_TAG_SUB_IFDS = 330,
    SP_TAG_EXTRA_SAMPLES = 338,
    SP_TAG_SAMPLE_FORMAT = 339,
    SP_TAG_JPEG_TABLES = 347,
    SP_TAG_YCBCR_SUBSAMPLING = 530,
    SP_TAG_REFERENCE_BLACK_WHITE = 532,
    SP_TAG_COPYRIGHT = 33432,
    SP_TAG_NDPI_FORMAT_FLAG = 65420, /* Hamamatsu NDPI's first tag (sp_tiff.ndpi) */
};

/* Compression codes. */
enum {
    SP_COMPRESSION_NONE = 1,
    SP_COMPRESSION_LZW = 5,
    SP_COMPRESSION_OJPEG = 6,
    SP_COMPRESSION_JPEG = 7,
    SP_COMPRESSION_ADOBE_DEFLATE = 8,
    SP_COMPRESSION_APERIO_J2K_YCBCR = 33003,
    SP_COMPRESSION_APERIO_J2K_RGB = 33005,
    SP_COMPRESSION_J2K = 34712,
    SP_COMPRESSION_PACKBITS = 32773,
    SP_COMPRESSION_DEFLATE = 32946,
    SP_COMPRESSION_ZSTD = 50000,
    SP_COMPRESSION_WEBP = 50001,
};

/* Photometric interpretations. */
enum {
    SP_PHOTOMETRIC_MINISWHITE = 0,
    SP_PHOTOMETRIC_MINISBLACK = 1,
    SP_PHOTOMETRIC_RGB = 2,
    SP_PHOTOMETRIC_PALETTE = 3,
    SP_PHOTOMETRIC_YCBCR = 6,
};

/* One tag as stored: its raw value bytes, in the file's byte order. */
typedef struct sp_tiff_entry {
    uint16_t tag;
    uint16_t type;
    uint64_t count;
    uint8_t *data;  /* count * type size bytes */
    uint64_t size;
} sp_tiff_entry;

typedef struct sp_tiff_dir sp_tiff_dir;

struct sp_tiff_dir {
    uint64_t offset;       /* where the IFD starts in the file */
    uint32_t n_entries;
    sp_tiff_entry *entries; /* sorted by tag */

    /* Image structure, decoded from the tags with TIFF defaults applied. */
    uint64_t width, height;
    bool tiled;
    uint64_t chunk_width, chunk_height;   /* tile size, or width x rows-per-strip */
    uint64_t chunks_across, chunks_down; /* per plane */
    uint64_t n_chunks;                    /* chunks_across * chunks_down * planes */
    uint64_t *chunk_offsets;
    uint64_t *chunk_byte_counts;
    uint16_t compression, photometric, planar_config, predictor;
    uint16_t bits_per_sample, samples_per_pixel, sample_format;
    uint16_t extra_samples;   /* count of ExtraSamples */
    uint16_t extra_sample0;   /* kind of the first: 0 unspecified, 1 associated, 2 unassociated alpha */
    uint16_t ycbcr_sub_h, ycbcr_sub_v;
    uint32_t subfile_type;
    const uint8_t *jpeg_tables; /* points into the entry's data, or NULL */
    uint64_t jpeg_tables_len;
    const char *description;    /* ImageDescription, NUL-terminated, or NULL */

    uint32_t n_subifds;
    sp_tiff_dir *subifds;
};

typedef struct sp_tiff {
    sp_source *src; /* not owned */
    sp_limits limits;
    bool big_endian;
    bool bigtiff;
    /* Hamamatsu NDPI past 4 GiB: classic TIFF whose first directory holds tag 65420, with 64-bit
     * offsets (the header's and each next-directory offset are 8 bytes, and 4 bytes after each
     * directory per entry hold the high half of its value or value offset). */
    bool ndpi;
    uint32_t n_dirs; /* main chain, in file order */
    sp_tiff_dir *dirs;
} sp_tiff;

/* True when the first bytes look like classic or BigTIFF (needs at least 4 bytes). */
bool sp_tiff_magic(const uint8_t *head, size_t len);

/* Parse the whole directory structure. The source must outlive the sp_tiff. */
sp_status sp_tiff_open(sp_source *src, const sp_limits *limits, sp_tiff **out, sp_err *err);
void sp_tiff_close(sp_tiff *tiff);

/* The entry for `tag`, or NULL. */
const sp_tiff_entry *sp_tiff_find(const sp_tiff_dir *dir, uint16_t tag);

/* Element `i` of an integer-typed entry (BYTE, SHORT, LONG, LONG8, IFD, IFD8, signed too);
 * false when the type is not an integer or i is out of range. */
bool sp_tiff_entry_uint(const sp_tiff *tiff, const sp_tiff_entry *e, uint64_t i, uint64_t *out);
/* Element `i` of a numeric entry as a double (RATIONAL, SRATIONAL, FLOAT, DOUBLE or integer). */
bool sp_tiff_entry_double(const sp_tiff *tiff, const sp_tiff_entry *e, uint64_t i, double *out);
/* An ASCII entry as a NUL-terminated string (the stored data always ends in NUL), or NULL. */
const char *sp_tiff_entry_string(const sp_tiff_entry *e);

/* A compression code's short name ("jpeg", "lzw", ...), or "unknown". */
const char *sp_tiff_compression_name(uint16_t compression);

/* Whether this reader can decode the directory's pixels; when not, the message says why. */
sp_status sp_tiff_check_decodable(const sp_tiff *tiff, const sp_tiff_dir *dir, sp_err *err);

/* Decode chunk `index` (row-major over the chunk grid) into `rgba`, a chunk_width x chunk_height
 * straight-RGBA8 buffer with rows of `stride` bytes. A missing chunk (offset or byte count 0)
 * is all (0,0,0,0). Rows beyond a short last strip are left (0,0,0,0). */
sp_status sp_tiff_decode_chunk(const sp_tiff *tiff, const sp_tiff_dir *dir, uint64_t index,
                               uint8_t *rgba, uint64_t stride, sp_err *err);

/* Read the compressed bytes of chunk `index` (index < n_chunks) into a new buffer (*data, to
 * free; its size checked against the file and the limits); *data is NULL and *length 0 for a
 * missing chunk (offset or byte count 0). */
sp_status sp_tiff_read_chunk(const sp_tiff *tiff, const sp_tiff_dir *dir, uint64_t index,
                             uint8_t **data, uint64_t *length, sp_err *err);

/* The scales (bit k set: 1/2^k, so 1 = full size only, 15 = 1, 1/2, 1/4, 1/8) at which chunks
 * of `dir` can be decoded in part straight into a caller's buffer; 0 when they cannot
 * (only JPEG and JPEG 2000 chunks can, JPEG 2000 at full size only). */
unsigned sp_tiff_area_scales(const sp_tiff *tiff, const sp_tiff_dir *dir);

/* Decode only the area (x, y, w, h) of chunk `index` decoded at 1/scale into `dst` as RGB8
 * (bpp 3) or RGBA8 (bpp 4), rows of `stride` bytes: equal to sp_tiff_decode_chunk at that
 * scale followed by a crop. Where the chunk has no pixels (a missing chunk, the part of the
 * area outside the decoded image) the area gets the pixel `empty` (bpp bytes). `scale` must be
 * one sp_tiff_area_scales allows. */
sp_status sp_tiff_decode_chunk_area(const sp_tiff *tiff, const sp_tiff_dir *dir, uint64_t index,
                                    unsigned scale, uint64_t x, uint64_t y, uint64_t w,
                                    uint64_t h, unsigned bpp, uint8_t *dst, uint64_t stride,
                                    const uint8_t empty[4], sp_err *err);

/* Decode a whole directory image into width x height RGBA8 (rows of `stride` bytes). */
sp_status sp_tiff_decode_image(const sp_tiff *tiff, const sp_tiff_dir *dir, uint8_t *rgba,
                               uint64_t stride, sp_err *err);

#endif
