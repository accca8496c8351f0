/* patch_batch.c — a per-patch step over a batch on the fork-join pool. Patches are independent
 * (each draws from its own seed), so any thread may do any patch and the bytes are the same on
 * any thread count; a failure (only ever running out of scratch memory) is kept, and the other
 * patches are still done. */
#include "ops/patch_batch.h"

#include <stdatomic.h>

#include "base/thread_pool.h"

typedef struct batch {
    uint8_t *rgb;
    size_t patch_bytes;
    const uint64_t *seeds;
    sp_patch_fn fn;
    const void *ctx;
    atomic_int failure; /* an sp_status; SP_OK while none */
} batch;

static void run_one(void *user, size_t i) {
    batch *b = user;
    sp_status st = b->fn(b->ctx, b->rgb + i * b->patch_bytes, b->seeds[i]);
    if (st != SP_OK) {
        atomic_store(&b->failure, (int)st);
    }
}

sp_status sp_patch_batch(uint8_t *rgb, int64_t count, size_t patch_bytes, const uint64_t *seeds,
                         sp_patch_fn fn, const void *ctx, int threads) {
    if (count <= 0) {
        return SP_OK;
    }
    batch b = {.rgb = rgb, .patch_bytes = patch_bytes, .seeds = seeds, .fn = fn, .ctx = ctx};
    atomic_init(&b.failure, SP_OK);
    sp_pool_run((size_t)count, threads, run_one, &b); /* runs everything even on SP_E_NOMEM */
    return (sp_status)atomic_load(&b.failure);
}
