/* io_pool.c — the process-wide pool of waiting threads (see io_pool.h).
 *
 * Started tasks wait in one queue, oldest first, under one lock; a thread is started whenever
 * more tasks wait than threads are idle, so a burst of requests goes out at once rather than one
 * idle thread taking them in turn.
 */
#include "io/io_pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#define THREADS_MAX 64

typedef struct io_task {
    void (*fn)(void *user);
    void *user;
    struct io_task *next;
} io_task;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work = PTHREAD_COND_INITIALIZER;
static io_task *tasks, *tasks_tail; /* started tasks not yet taken, oldest first */
static int n_waiting;               /* tasks in the queue */
static int n_threads, n_idle;
static atomic_uint generation;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

/* fork() copies the lock as it is and none of the threads: hold the lock across the fork, then
 * give the child an empty pool with a fresh lock. */
static void before_fork(void) { pthread_mutex_lock(&lock); }
static void after_fork_parent(void) { pthread_mutex_unlock(&lock); }
static void after_fork_child(void) {
    tasks = tasks_tail = NULL; /* the parent's: it runs them (their memory leaks here) */
    n_waiting = 0;
    n_threads = 0;
    n_idle = 0;
    atomic_fetch_add(&generation, 1);
    pthread_cond_init(&work, NULL);
    pthread_mutex_unlock(&lock);
}

static void watch_forks(void) { pthread_atfork(before_fork, after_fork_parent, after_fork_child); }

static void *pool_thread(void *arg) {
    (void)arg;
    pthread_mutex_lock(&lock);
    for (;;) {
        if (tasks == NULL) {
            n_idle++;
            pthread_cond_wait(&work, &lock);
            n_idle--;
            continue;
        }
        io_task *t = tasks;
        tasks = t->next;
        tasks_tail = tasks != NULL ? tasks_tail : NULL;
        n_waiting--;
        pthread_mutex_unlock(&lock);
        t->fn(t->user);
        free(t);
        pthread_mutex_lock(&lock);
    }
    return NULL;
}

/* Start a thread (with the lock held) when more tasks wait than threads are idle. */
static void grow(void) {
    pthread_attr_t attr;
    if (n_waiting <= n_idle || n_threads >= THREADS_MAX || pthread_attr_init(&attr) != 0) {
        return;
    }
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, (size_t)256 << 10);
    pthread_t id;
    if (pthread_create(&id, &attr, pool_thread, NULL) == 0) {
        n_threads++;
    }
    pthread_attr_destroy(&attr);
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
    if (tasks_tail != NULL) {
        tasks_tail->next = t;
    } else {
        tasks = t;
    }
    tasks_tail = t;
    n_waiting++;
    grow();
    if (n_threads == 0) { /* no thread at all: nobody would ever take it */
        tasks = tasks_tail = NULL;
        n_waiting = 0;
        pthread_mutex_unlock(&lock);
        free(t);
        fn(user);
        return;
    }
    pthread_cond_signal(&work);
    pthread_mutex_unlock(&lock);
}

unsigned sp_io_pool_generation(void) { return atomic_load(&generation); }
