/* zarr_store.h — writing Zarr v2 and v3 arrays into a folder or an object-store prefix,
 * atomically and content-addressed.
 *
 * A store is an output folder (or s3:// or gs:// prefix) being written through an io/ write
 * target (io/write_target.h). Arrays are declared with their shape, chunking, dtype and codec;
 * chunks are then handed over whole (C order, edge chunks padded with zeros) from any thread,
 * encoded, hashed and put atomically (on disk a temporary name renamed into place, on S3 and GCS
 * one PUT), so a crash never leaves a torn chunk. With sharding (Zarr v3) inner chunks are
 * collected per shard and the shard file (chunks + index + crc32c) is written when its last inner
 * chunk arrives. Metadata files are put the same way. sp_zarr_store_finish writes the manifest
 * (one line "SHA256  PATH" per file, sorted by path, metadata included) and then the completion
 * marker; the dataset hash is the SHA-256 of the manifest bytes. In resume mode a chunk whose
 * final file already exists is not rewritten: its bytes are read back and hashed.
 */
#ifndef SP_ZARR_ZARR_STORE_H
#define SP_ZARR_ZARR_STORE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"
#include "slidepipe.h"

#define SP_ZARR_MANIFEST "slidepipe-manifest.sha256"
#define SP_ZARR_COMPLETE "slidepipe-complete"

typedef enum sp_zarr_dtype { SP_ZARR_U8 = 0, SP_ZARR_F32 = 1 } sp_zarr_dtype;

typedef struct sp_zarr_array_spec {
    int zarr_version; /* 2 or 3 */
    int ndim;         /* 2 or 3 */
    int64_t shape[3];
    int64_t chunks[3]; /* chunk shape (inner chunk shape when sharded) */
    int64_t shard[3];  /* v3: shard shape in elements (multiples of chunks), or all 0 */
    sp_zarr_dtype dtype;
    sp_zarr_codec codec;
    int level;                      /* 0 = the codec's default */
    const char *dimension_names[3]; /* v3 dimension_names, e.g. "c","y","x"; may be NULL */
} sp_zarr_array_spec;

typedef struct sp_zarr_store sp_zarr_store;
typedef struct sp_zarr_array sp_zarr_array;

/* Create (or, with resume, reopen) the output folder. Without resume the folder must not exist
 * or be empty. */
sp_status sp_zarr_store_open(const char *path, bool resume, sp_zarr_store **out, sp_err *err);

/* Declare array `name` (a path inside the store, e.g. "0"); its metadata file (.zarray or
 * zarr.json) is written by sp_zarr_store_finish. The array belongs to the store. */
sp_status sp_zarr_array_create(sp_zarr_store *store, const char *name,
                               const sp_zarr_array_spec *spec, sp_zarr_array **out, sp_err *err);

/* Encode and write one whole chunk; `index` gives its chunk coordinates. Thread-safe. */
sp_status sp_zarr_array_write_chunk(sp_zarr_array *array, const int64_t index[3], const void *data,
                                    sp_err *err);

/* Write a JSON metadata document at `relpath` atomically (e.g. ".zattrs", "zarr.json"). */
sp_status sp_zarr_store_write_json(sp_zarr_store *store, const char *relpath, const char *json,
                                   sp_err *err);

/* Write every array's metadata, then the manifest, then the completion marker; fills
 * dataset_hash (65 bytes) and frees the store. On failure the store is freed too. */
sp_status sp_zarr_store_finish(sp_zarr_store *store, char *dataset_hash, sp_err *err);

/* Free a store without finishing it (after an error); what was written stays. */
void sp_zarr_store_abort(sp_zarr_store *store);

/* The file half of sp_zarr_verify (zarr_verify.c): re-hash every file the manifest of the store at
 * `zarr_path` lists, reporting each missing or changed one; arguments as sp_zarr_verify's. */
sp_status sp_zarr_verify_files(const char *zarr_path,
                               void (*report)(void *user, const char *path, const char *problem),
                               void *report_user, int64_t *problems, char *dataset_hash,
                               sp_err *err);

#endif
