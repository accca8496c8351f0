/* io_pool.c — the process-wide pool of waiting threads (see io_pool.h).
 *
 * Runs in flight are queued under one lock; an idle thread joins the first run that still has
 * items to hand out and room for a helper, claims items one at a time, and goes back to waiting;
 * with no run wanting help it takes the oldest started task.
 * A run lives on its caller's stack: it leaves the queue when its last item is claimed, and the
 * caller returns only after every claimed item has finished, under the lock, so no thread
 * touches a run after that.
 */
#include "core/io_pool.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#define THREADS_MAX 64

typedef struct io_run {
    void (*fn)(void *user, size_t i);
    void *user;
    size_t n, next, done;
    int helpers, helpers_max;
    pthread_cond_t finished;
    struct io_run *link;
} io_run;

typedef struct io_task {
    void (*fn)(void *user);
    void *user;
    struct io_task *next;
} io_task;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work = PTHREAD_COND_INITIALIZER;
static io_run *queue;               /* runs with items not yet claimed */
static io_task *tasks, *tasks_tail; /* started tasks not yet taken, oldest first */
static int n_threads, n_idle;
static unsigned generation;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

/* fork() copies the lock as it is and none of the threads: hold the lock across the fork, then
 * give the child an empty pool with a fresh lock. */
static void before_fork(void) { pthread_mutex_lock(&lock); }
static void after_fork_parent(void) { pthread_mutex_unlock(&lock); }
static void after_fork_child(void) {
    queue = NULL;
    tasks = tasks_tail = NULL; /* the parent's: it runs them (their memory leaks here) */
    generation++;
    n_threads = 0;
    n_idle = 0;
    pthread_cond_init(&work, NULL);
    pthread_mutex_unlock(&lock);
}

static void watch_forks(void) { pthread_atfork(before_fork, after_fork_parent, after_fork_child); }

static void unlink_run(io_run *r) {
    for (io_run **p = &queue; *p != NULL; p = &(*p)->link) {
        if (*p == r) {
            *p = r->link;
            return;
        }
    }
}

/* Claim and run items of r until none is left to claim. Called and returns with the lock held. */
static void drain(io_run *r) {
    while (r->next < r->n) {
        size_t i = r->next++;
        if (r->next == r->n) {
            unlink_run(r);
        }
        pthread_mutex_unlock(&lock);
        r->fn(r->user, i);
        pthread_mutex_lock(&lock);
        if (++r->done == r->n) {
            pthread_cond_broadcast(&r->finished);
        }
    }
}

static io_run *run_wanting_help(void) {
    for (io_run *r = queue; r != NULL; r = r->link) {
        if (r->helpers < r->helpers_max) {
            return r;
        }
    }
    return NULL;
}

static void *pool_thread(void *arg) {
    (void)arg;
    pthread_mutex_lock(&lock);
    for (;;) {
        io_run *r = run_wanting_help();
        if (r != NULL) {
            r->helpers++;
            drain(r);
        } else if (tasks != NULL) {
            io_task *t = tasks;
            tasks = t->next;
            tasks_tail = tasks != NULL ? tasks_tail : NULL;
            pthread_mutex_unlock(&lock);
            t->fn(t->user);
            free(t);
            pthread_mutex_lock(&lock);
        } else {
            n_idle++;
            pthread_cond_wait(&work, &lock);
            n_idle--;
        }
    }
    return NULL;
}

/* Start threads (with the lock held) until `wanted` are idle or the pool is full. */
static void grow(int wanted) {
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) != 0) {
        return;
    }
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, (size_t)256 << 10);
    for (int have = n_idle; have < wanted && n_threads < THREADS_MAX; have++) {
        pthread_t id;
        if (pthread_create(&id, &attr, pool_thread, NULL) != 0) {
            break;
        }
        n_threads++;
    }
    pthread_attr_destroy(&attr);
}

void sp_io_pool_run(size_t n, int parallel, void (*fn)(void *user, size_t i), void *user) {
    if (n < 2 || parallel < 2) {
        for (size_t i = 0; i < n; i++) {
            fn(user, i);
        }
        return;
    }
    pthread_once(&fork_once, watch_forks);
    io_run r = {.fn = fn, .user = user, .n = n};
    r.helpers_max = (size_t)parallel < n ? parallel - 1 : (int)n - 1;
    pthread_cond_init(&r.finished, NULL);
    pthread_mutex_lock(&lock);
    r.link = queue;
    queue = &r;
    grow(r.helpers_max);
    pthread_cond_broadcast(&work);
    drain(&r);
    while (r.done < r.n) {
        pthread_cond_wait(&r.finished, &lock);
    }
    pthread_mutex_unlock(&lock);
    pthread_cond_destroy(&r.finished);
}

void sp_io_pool_start(void (*fn)(void *user), void *user) {
    pthread_once(&fork_once, watch_forks);
    io_task *t = malloc(sizeof *t);
    if (t == NULL) {
        fn(user);
        return;
    }
    *t = (io_task){fn, user, NULL};
    pthread_mutex_lock(&lock);
    grow(1);
    if (n_threads == 0) { /* no thread at all: nobody would ever take it */
        pthread_mutex_unlock(&lock);
        free(t);
        fn(user);
        return;
    }
    if (tasks_tail != NULL) {
        tasks_tail->next = t;
    } else {
        tasks = t;
    }
    tasks_tail = t;
    pthread_cond_signal(&work);
    pthread_mutex_unlock(&lock);
}

unsigned sp_io_pool_generation(void) {
    pthread_mutex_lock(&lock);
    unsigned g = generation;
    pthread_mutex_unlock(&lock);
    return g;
}
