/* store_prefetch.h — files of a store fetched ahead of their reads, all at once.
 *
 * A region read of a remote Zarr store needs several chunk files, each its own object and so its
 * own request. The painter announces them first; they are sent for at once (on the process's
 * waiting threads, up to SLIDEPIPE_HTTP_PARALLEL an announcement) and the call returns; each
 * file is kept here for the chunk reader, the reader waiting for one still on its way, so the
 * region waits about one round trip instead of one per chunk and decodes what has come while
 * the rest arrives. What is kept is bounded (192 files, 64 MiB; files already read are let go
 * first); a file whose fetch failed is kept only for the readers already waiting for it, and a
 * later read fetches it again and reports the failure. A file that does not exist is kept as
 * missing, which is what its read would learn. Files are sent for ahead however near the
 * server is: each is a whole object, so other threads receive the next while a reader decodes
 * one (docs/remote.md has the figures; TIFF byte ranges are fetched on their reader from a near
 * server instead, sp_http_prefetch_pays).
 *
 * The same table is the slide's table of files in flight: a reader that needs a file nobody has
 * sent for claims it there and fetches it itself (sp_store_prefetch_get), so that two threads,
 * or two regions of one batch, needing the same chunk at once make one request: the others wait
 * for it and get its bytes, or its error. A fetch always settles its place, so a failed one
 * wakes its waiters with the failure (after the HTTP layer's own retries) instead of leaving
 * them waiting; with every place of the table waited for, a reader fetches unshared.
 */
#ifndef SP_IO_STORE_PREFETCH_H
#define SP_IO_STORE_PREFETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/limits.h"

typedef struct sp_store_prefetch sp_store_prefetch;

/* A fetched file's bytes, shared by the table and its readers (reference counted). */
typedef struct sp_store_file sp_store_file;
const uint8_t *sp_store_file_bytes(const sp_store_file *f);
uint64_t sp_store_file_len(const sp_store_file *f);
/* Let go of a file from sp_store_prefetch_get or _take; NULL is accepted. */
void sp_store_file_release(sp_store_file *f);

/* A new, empty set of kept files whose allocations follow `limits` (copied), sending for
 * SLIDEPIPE_HTTP_PARALLEL files an announcement as it was set now; NULL when out of memory. */
sp_store_prefetch *sp_store_prefetch_new(const sp_limits *limits);

/* Let it go with everything it keeps, once the files on their way have come (so that none of
 * its work still runs after it, at a process's exit for one); NULL is accepted. */
void sp_store_prefetch_free(sp_store_prefetch *p);

/* Send for the files at paths[0..n) (each expected to be about `expected` bytes) that are
 * neither kept nor on their way, and return at once. */
void sp_store_prefetch_files(sp_store_prefetch *p, const char *const *paths, size_t n,
                             size_t expected);

/* As sp_store_prefetch_files for the few small files that opening a store reads (its metadata),
 * and sent for wherever the server is: the first requests of a process have not been timed yet,
 * and on a near server a handful of requests at once cost next to nothing. Up to 64 files an
 * announcement (SLIDEPIPE_HTTP_PARALLEL=1 still sends none). */
void sp_store_prefetch_metadata(sp_store_prefetch *p, const char *const *paths, size_t n);

/* As sp_store_prefetch_metadata for files a store's opening guesses it holds (some 30 at once),
 * whose requests are left out of the process's timing (sp_http_untimed). */
void sp_store_prefetch_guesses(sp_store_prefetch *p, const char *const *paths, size_t n);

/* Whether the file at `path` exists, as far as the kept files know, waiting for it if it is on
 * its way: true with *missing set, the file staying kept; false when nothing is kept for it. */
bool sp_store_prefetch_peek(sp_store_prefetch *p, const char *path, bool *missing);

/* Fetch the file at `path` whole (about `expected` bytes) through the table: when it is kept or
 * on its way, wait for it; otherwise claim it, fetch it on this thread and share the result with
 * whoever came to wait meanwhile. Gives the file (*file, held: release it), or *missing set
 * (*file NULL), or the fetch's error. */
sp_status sp_store_prefetch_get(sp_store_prefetch *p, const char *path, size_t expected,
                                sp_store_file **file, bool *missing, sp_err *err);

/* The kept file at `path`, waiting for it if it is on its way: true with the file (*file, held:
 * release it) or *missing set; false when nothing is kept for it (or its fetch failed). */
bool sp_store_prefetch_take(sp_store_prefetch *p, const char *path, sp_store_file **file,
                            bool *missing);

#endif
