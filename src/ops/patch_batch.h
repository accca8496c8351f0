/* patch_batch.h — one seeded per-patch step run over a batch of patches on the thread pool
 * (patch_batch.c), for the batch entry points of the augmentations. */
#ifndef SP_OPS_PATCH_BATCH_H
#define SP_OPS_PATCH_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "slidepipe.h"

/* What a batch does to one patch: `patch` in place, from its own `seed`. */
typedef sp_status (*sp_patch_fn)(const void *ctx, uint8_t *patch, uint64_t seed);

/* Call fn(ctx, rgb + i * patch_bytes, seeds[i]) for i in [0, count) on up to `threads` threads
 * (0 or less: one per core); every patch is done whatever the others give. SP_OK, or the failure
 * of one patch that failed (the result does not depend on the thread count otherwise). */
sp_status sp_patch_batch(uint8_t *rgb, int64_t count, size_t patch_bytes, const uint64_t *seeds,
                         sp_patch_fn fn, const void *ctx, int threads);

#endif
