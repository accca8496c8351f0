/* thread_pool.h — run n independent work items on up to t threads and wait for them all.
 *
 * A fork-join pool: the calling thread works too, the others are started for the call and
 * joined before it returns, so nothing outlives the call and there is no global pool to set up
 * or tear down; or, when the host program supplied one (sp_set_thread_pool), the host's pool. Items are handed out one at a time from a shared atomic counter, so a slow item
 * (a corrupt tile, a JPEG 2000 tile) does not hold up a whole fixed share of the work.
 */
#ifndef SP_BASE_THREAD_POOL_H
#define SP_BASE_THREAD_POOL_H

#include <stddef.h>

#include "slidepipe.h"

/* Number of online cores (at least 1). */
int sp_pool_cores(void);

/* Call fn(user, i) for every i in [0, n) on up to `threads` threads (<= 0: sp_pool_cores()).
 * Returns SP_OK, or SP_E_NOMEM when not even one extra thread could start and n > 1 — then
 * everything ran on the calling thread anyway, so the work is done in every case. */
sp_status sp_pool_run(size_t n, int threads, void (*fn)(void *user, size_t i), void *user);

#endif
