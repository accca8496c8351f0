/* thread_pool.c — the fork-join pool behind batched reads (see thread_pool.h). */
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

int sp_pool_cores(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 1024 ? 1024 : (int)n;
}

sp_status sp_pool_run(size_t n, int threads, void (*fn)(void *user, size_t i), void *user) {
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
