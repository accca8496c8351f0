/* tiff_write.h — a streaming writer for little-endian TIFF and BigTIFF files.
 *
 * A writer puts chunk bytes (tiles, strips) into the file first, as they are produced, and keeps
 * only each directory's small entry table in memory; the directories (IFDs) go at the end of the
 * file, chained in the order they were added, once every offset is known. The file is built under
 * a temporary name in the target's directory and appears under its real name only when finished,
 * so a reader never sees a half-written file and a failure leaves nothing behind.
 */
#ifndef SP_TIFF_TIFF_WRITE_H
#define SP_TIFF_TIFF_WRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

/* Field types the writer knows. */
typedef enum sp_tiff_type {
    SP_TIFF_ASCII = 2,    /* values: char[], count includes the terminating NUL */
    SP_TIFF_SHORT = 3,    /* values: uint16_t[] */
    SP_TIFF_LONG = 4,     /* values: uint32_t[] */
    SP_TIFF_RATIONAL = 5, /* values: uint32_t[2 * count], numerator then denominator */
    SP_TIFF_LONG8 = 16,   /* values: uint64_t[]; BigTIFF only */
} sp_tiff_type;

/* One tag to write. The values are copied (or written to the file) by the call that takes them. */
typedef struct sp_tiff_wtag {
    uint16_t tag;
    uint16_t type; /* an sp_tiff_type */
    uint64_t count;
    const void *values;
} sp_tiff_wtag;

typedef struct sp_tiff_writer sp_tiff_writer;

/* Start a file that will become `path`: a temporary "path.tmp-XXXXXX" is created next to it and
 * the header written. `bigtiff` picks BigTIFF (needed once any offset passes 4 GiB; a classic
 * file that would grow past that fails with SP_E_LIMIT). On failure *out is NULL. */
sp_status sp_tiff_writer_create(const char *path, bool bigtiff, sp_tiff_writer **out, sp_err *err);

/* Append raw chunk bytes at the end of the file; *offset (may be NULL) receives where they start.
 */
sp_status sp_tiff_writer_append(sp_tiff_writer *w, const void *data, size_t len, uint64_t *offset,
                                sp_err *err);

/* Add a directory after those already added. `tags` need not be sorted but may not repeat a tag
 * or name `offsets_tag` / `counts_tag`; the `nchunks` chunk offsets and byte counts are written
 * under those two tags (TileOffsets/TileByteCounts or StripOffsets/StripByteCounts) as LONG in
 * classic TIFF and LONG8 in BigTIFF. Values too large for an entry are written to the file now. */
sp_status sp_tiff_writer_add_directory(sp_tiff_writer *w, const sp_tiff_wtag *tags, size_t ntags,
                                       uint16_t offsets_tag, uint16_t counts_tag,
                                       const uint64_t *offsets, const uint64_t *counts,
                                       uint64_t nchunks, sp_err *err);

/* Write the directory chain, flush, fsync and rename the file over `path`. The writer is freed
 * whatever the outcome; on failure the temporary file is removed. */
sp_status sp_tiff_writer_finish(sp_tiff_writer *w, sp_err *err);

/* Give up: remove the temporary file and free the writer. NULL is accepted. */
void sp_tiff_writer_abort(sp_tiff_writer *w);

#endif
