/* io_pool.h — a process-wide pool of threads for work that mostly waits: requests sent ahead of
 * the reads that will want their answers.
 *
 * A remote region read sends its tiles' requests ahead, a few per read. Starting a thread for
 * each would cost more than the request on a fast network, so these threads are started once,
 * when first needed (at most 64 in all), and then wait for tasks. After fork() the child starts
 * with no threads and starts its own when it needs them (a PyTorch data loader forks its workers
 * from a process that may have read already).
 */
#ifndef SP_IO_IO_POOL_H
#define SP_IO_IO_POOL_H

/* Call fn(user) on one of the pool's threads and return at once. Tasks start in the order given,
 * each on a free thread (one is started when none is free, up to the pool's size). Should no pool
 * thread be startable at all, fn runs on the caller before this returns. */
void sp_io_pool_start(void (*fn)(void *user), void *user);

/* Which process this is, as far as forks go: a number that changes in a child after fork().
 * Tasks started before the fork are not run in the child; whoever waits for one checks this. */
unsigned sp_io_pool_generation(void);

#endif
