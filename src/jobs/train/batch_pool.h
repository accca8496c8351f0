/* batch_pool.h — a loader's batch memory, kept for reuse.
 *
 * A loader's batches are all one size, tens of MiB each. Allocated anew for every batch, that
 * memory is paid again each time: in page faults as it is first written (the kernel clears every
 * page), and for page-locked memory in a slow cudaHostAlloc. Memory released by a batch goes back
 * to the pool instead (up to `spares` buffers; more are freed) and the next batch takes it. The
 * pool is shared by the loader and the batches it handed out, reference counted, so a batch freed
 * after its loader frees its memory correctly.
 */
#ifndef SP_JOBS_TRAIN_BATCH_POOL_H
#define SP_JOBS_TRAIN_BATCH_POOL_H

#include <stdbool.h>
#include <stddef.h>

typedef struct sp_batch_pool sp_batch_pool;

/* A pool of buffers of `bytes` each, page-locked when `want_pinned` and a CUDA device is there,
 * keeping at most `spares` released ones; NULL when out of memory. The caller holds one
 * reference. */
sp_batch_pool *sp_batch_pool_new(size_t bytes, bool want_pinned, int spares);

/* A buffer (a spare, else a new one), with *pinned set when it is page-locked, and a reference
 * on the pool for it; NULL when out of memory. */
void *sp_batch_pool_take(sp_batch_pool *pool, int *pinned);

/* Give back a buffer from sp_batch_pool_take (kept as a spare or freed) and its reference. */
void sp_batch_pool_give(sp_batch_pool *pool, void *buffer, int pinned);

/* Drop the caller's reference; the last one frees the pool and its spares. NULL is accepted. */
void sp_batch_pool_release(sp_batch_pool *pool);

#endif
