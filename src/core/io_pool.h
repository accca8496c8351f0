/* io_pool.h — a process-wide pool of threads for work that mostly waits: network requests.
 *
 * A remote region read sends its tiles' requests at once, a few per read. Starting and joining
 * threads for each read (sp_pool_run) would cost more than the requests on a fast network, so
 * these threads are started once, when first needed (at most 64 in all), and then wait for work.
 * sp_io_pool_run hands out items like sp_pool_run, the caller working too. After fork() the
 * child starts with no threads and starts its own when it needs them (a PyTorch data loader
 * forks its workers from a process that may have read already).
 */
#ifndef SP_CORE_IO_POOL_H
#define SP_CORE_IO_POOL_H

#include <stddef.h>

/* Call fn(user, i) for every i in [0, n), on up to `parallel` threads at once (the caller and
 * parallel - 1 of the pool's), and return when all calls have returned. Should no pool thread
 * be free or startable, the caller runs the items itself: the work is done in every case. */
void sp_io_pool_run(size_t n, int parallel, void (*fn)(void *user, size_t i), void *user);

/* Call fn(user) on one of the pool's threads and return at once (a request sent ahead of the
 * read that will want its answer). Tasks start in the order given. Should no pool thread be
 * startable at all, fn runs on the caller before this returns. */
void sp_io_pool_start(void (*fn)(void *user), void *user);

/* Which process this is, as far as forks go: a number that changes in a child after fork().
 * Work started before the fork is not done in the child; whoever waits for it checks this. */
unsigned sp_io_pool_generation(void);

#endif
