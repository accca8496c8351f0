/* store_prefetch.h — files of a store fetched ahead of their reads, all at once.
 *
 * A region read of a remote Zarr store needs several chunk files, each its own object and so its
 * own request. The painter announces them first; they are fetched whole at the same time (on up
 * to SLIDEPIPE_HTTP_PARALLEL threads) and kept here until the chunk reader takes each one, so the
 * read waits about one round trip instead of one per chunk. What is kept is bounded (count and
 * bytes); a file whose fetch failed is simply not kept, and its read fetches it again and reports
 * the failure. A file that does not exist is kept as missing, which is what its read would learn.
 */
#ifndef SP_IO_STORE_PREFETCH_H
#define SP_IO_STORE_PREFETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/limits.h"

typedef struct sp_store_prefetch sp_store_prefetch;

/* A new, empty set of kept files; NULL when out of memory. */
sp_store_prefetch *sp_store_prefetch_new(void);

/* Free it with everything it keeps; NULL is accepted. */
void sp_store_prefetch_free(sp_store_prefetch *p);

/* Fetch the files at paths[0..n) (each expected to be about `expected` bytes) that are not kept
 * yet, at once, and keep them. Allocations follow `limits`. Returns when all have been tried. */
void sp_store_prefetch_files(sp_store_prefetch *p, const char *const *paths, size_t n,
                             size_t expected, const sp_limits *limits);

/* Take the kept file at `path`: true with its bytes (*bytes, malloc'd, the caller's to free;
 * *len) or *missing set; false when nothing is kept for it. */
bool sp_store_prefetch_take(sp_store_prefetch *p, const char *path, uint8_t **bytes,
                            uint64_t *len, bool *missing);

#endif
