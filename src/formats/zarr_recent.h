/* zarr_recent.h — the Zarr chunk this thread decoded last, kept for its next read.
 *
 * A chunk larger than a tile is painted into several tiles, and neighbouring regions often need
 * the same chunk: each read first looks here, and decodes the chunk only when this thread did
 * not just decode it. One buffer per thread, as large as the largest chunk it decoded, freed
 * when the thread ends (a per-thread buffer, beside the tile cache's budget). The key names the
 * slide by its open's unique id, so a closed slide's chunk never matches a new one's.
 */
#ifndef SP_FORMATS_ZARR_RECENT_H
#define SP_FORMATS_ZARR_RECENT_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "base/limits.h"
#include "formats/zarr_meta.h"

typedef struct sp_zarr_recent sp_zarr_recent;

/* This thread's, or NULL when out of memory. */
sp_zarr_recent *sp_zarr_recent_get(void);

/* The decoded chunk at grid position index[0..SP_ZARR_MAX_DIMS) of `array` (an opaque key) of
 * the slide opened as `slide_id`, when it is the one kept; else NULL. */
const uint8_t *sp_zarr_recent_find(const sp_zarr_recent *r, uint64_t slide_id, const void *array,
                                   const int64_t *index);

/* A buffer of `bytes` to decode a chunk into, forgetting the one kept; NULL with a message when
 * `limits` refuse the allocation. */
uint8_t *sp_zarr_recent_prepare(sp_zarr_recent *r, const sp_limits *limits, size_t bytes,
                                sp_err *err);

/* The buffer from sp_zarr_recent_prepare now holds this chunk. */
void sp_zarr_recent_keep(sp_zarr_recent *r, uint64_t slide_id, const void *array,
                         const int64_t *index);

#endif
