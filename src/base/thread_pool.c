/* thread_pool.c — the fork-join pool behind every parallel loop of the library (see
 * thread_pool.h), or the host program's own pool when it supplied one (sp_set_thread_pool). */
#include "base/thread_pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct pool_run {
    atomic_size_t next;
    size_t n;
    void (*fn)(void *user, size_t i);
    void *user;
} pool_run;

static void *worker(void *arg) {
    pool_run *r = arg;
    for (size_t i; (i = atomic_fetch_add(&r->next, 1)) < r->n;) {
        r->fn(r->user, i);
    }
    return NULL;
}

/* The host's pool (sp_set_thread_pool); set while no call runs, so the two are read as a pair. */
static _Atomic(sp_parallel_for_fn) host_run;
static _Atomic(void *) host_user;

void sp_set_thread_pool(sp_parallel_for_fn run, void *host) {
    atomic_store(&host_user, host);
    atomic_store(&host_run, run);
}

int sp_pool_cores(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 1024 ? 1024 : (int)n;
}

sp_status sp_pool_run(size_t n, int threads, void (*fn)(void *user, size_t i), void *user) {
    sp_parallel_for_fn run = atomic_load(&host_run);
    if (run != NULL) {
        if (n > 0) {
            run(atomic_load(&host_user), n, threads > 0 ? threads : sp_pool_cores(), fn, user);
        }
        return SP_OK;
    }
    pool_run r = {.n = n, .fn = fn, .user = user};
    atomic_init(&r.next, 0);
    size_t t = threads > 0 ? (size_t)threads : (size_t)sp_pool_cores();
    t = t < n ? t : n;
    pthread_t *ids = t > 1 ? malloc((t - 1) * sizeof *ids) : NULL;
    size_t started = 0;
    while (ids != NULL && started < t - 1 &&
           pthread_create(&ids[started], NULL, worker, &r) == 0) {
        started++;
    }
    worker(&r);
    for (size_t i = 0; i < started; i++) {
        pthread_join(ids[i], NULL);
    }
    free(ids);
    return t > 1 && started == 0 ? SP_E_NOMEM : SP_OK;
}
