/* source.h — the byte-source layer: every read of slide bytes goes through an sp_source.
 *
 * A source is a random-access, read-only byte range with a known size: a local file (pread) or a
 * memory buffer now, HTTP and S3 objects later. Formats and containers never touch files
 * directly, so remote storage and injected I/O faults reach every format without changes there.
 * Reads are thread-safe: sources keep no file position.
 */
#ifndef SP_IO_SOURCE_H
#define SP_IO_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

typedef struct sp_source sp_source;

typedef struct sp_byte_range {
    uint64_t offset, length;
} sp_byte_range;

/* What a source implementation provides. read_at reads up to `len` bytes at `offset` and reports
 * how many it got in *got (fewer only at end of data); it must be safe to call concurrently.
 * prefetch is optional (NULL for local data): it is told the ranges that reads will ask for
 * next, and may fetch them at once and keep them for those reads (a remote source sends their
 * requests concurrently). It is advice: it reports nothing, and a range it could not fetch is
 * fetched, or its failure reported, by the read that asks for it. */
typedef struct sp_source_impl {
    sp_status (*read_at)(void *ctx, uint64_t offset, void *buf, size_t len, size_t *got,
                         sp_err *err);
    void (*close)(void *ctx);
    void (*prefetch)(void *ctx, const sp_byte_range *ranges, size_t n);
    /* Optional: hand over the whole object's bytes when the source holds all of them in memory
     * (malloc'd, the caller's; *len), or NULL. Called only before any read. */
    void *(*take_whole)(void *ctx, size_t *len);
    /* Optional: the descriptor of the local file the bytes are read from (a byte's offset in
     * the source is its offset in the file), for readers that read the file themselves (the
     * GPU's cuFile); NULL, or -1, for anything else. */
    int (*local_fd)(void *ctx);
} sp_source_impl;

/* Wrap an implementation; `name` (copied) is used in messages. Takes ownership of ctx. */
sp_status sp_source_create(const sp_source_impl *impl, void *ctx, uint64_t size, const char *name,
                           sp_source **out, sp_err *err);

/* Open a local file. */
sp_status sp_source_open_file(const char *path, sp_source **out, sp_err *err);

/* A source over caller memory (not copied; it must outlive the source). For tests and fuzzing. */
sp_status sp_source_open_memory(const void *data, size_t len, const char *name, sp_source **out,
                                sp_err *err);

/* Read exactly `len` bytes at `offset`. A range past the end of the source is SP_E_CORRUPT
 * ("truncated"), an operating-system failure SP_E_IO. */
sp_status sp_source_read(sp_source *src, uint64_t offset, void *buf, size_t len, sp_err *err);

/* Whether the source takes prefetch advice (a remote one), and the advice itself: the ranges
 * that reads will ask for next (see sp_source_impl). Ranges past the end are ignored. */
bool sp_source_can_prefetch(const sp_source *src);
void sp_source_prefetch(sp_source *src, const sp_byte_range *ranges, size_t n);

/* The whole object's bytes, handed over (malloc'd, the caller's; *len = the size) when the
 * source holds all of them in memory already (a remote file fetched whole by its opening
 * request), so that they need not be copied; NULL otherwise. Only on a source not read yet; it
 * reads as before afterwards, just without that copy. */
void *sp_source_take_whole(sp_source *src, size_t *len);

/* The open descriptor of the local file whose bytes the source reads, at the same offsets (still
 * the source's: not to be closed), or -1 when the source is not such a file. */
int sp_source_local_fd(const sp_source *src);

uint64_t sp_source_size(const sp_source *src);
const char *sp_source_name(const sp_source *src);

/* Close and free; NULL is accepted. */
void sp_source_close(sp_source *src);

/* Read all of `src` (closed here, whatever happens) into a new NUL-terminated buffer (free it),
 * its length in *len; SP_E_LIMIT naming `name` when it holds more than `max` bytes. */
sp_status sp_source_read_whole(sp_source *src, const char *name, uint64_t max, char **out,
                               size_t *len, sp_err *err);

#endif
