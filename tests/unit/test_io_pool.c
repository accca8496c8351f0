/* test_io_pool.c — the process-wide pool of waiting threads (src/core/io_pool.c): every item of
 * a run is called exactly once and the run returns only after all have returned, with one thread
 * or many; several threads running at once each get their own items; items really run side by
 * side (a run whose items wait for each other finishes); tasks started without waiting each run
 * once, beside the caller; and a child forked after the pool has started threads sees another
 * generation, starts its own threads and finishes its runs and tasks. Runs under
 * ThreadSanitizer (make test), which cannot follow a fork from a process with threads: that part
 * is left out there.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/io_pool.h"
#include "unit.h"

#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif

#define ITEMS 300

typedef struct counts {
    atomic_int calls[ITEMS];
    atomic_int running, most_running;
} counts;

static void count_item(void *user, size_t i) {
    counts *c = user;
    int now = atomic_fetch_add(&c->running, 1) + 1;
    for (int seen = atomic_load(&c->most_running); now > seen;) {
        if (atomic_compare_exchange_weak(&c->most_running, &seen, now)) {
            break;
        }
    }
    atomic_fetch_add(&c->calls[i], 1);
    usleep(50);
    atomic_fetch_sub(&c->running, 1);
}

/* How many items of c were called exactly once, over the first n. */
static int called_once(counts *c, size_t n) {
    int ok = 0;
    for (size_t i = 0; i < n; i++) {
        ok += atomic_load(&c->calls[i]) == 1;
    }
    return ok;
}

static void one_run(size_t n, int parallel, int *once, int *most) {
    counts c = {0};
    sp_io_pool_run(n, parallel, count_item, &c);
    *once = called_once(&c, n);
    *most = atomic_load(&c.most_running);
}

/* Items that wait until `expected` of them have started: they finish only if that many run at
 * the same moment (or after a generous timeout, which the check then catches). */
typedef struct meeting {
    atomic_int arrived;
    int expected;
    atomic_int met;
} meeting;

static void meet(void *user, size_t i) {
    (void)i;
    meeting *m = user;
    atomic_fetch_add(&m->arrived, 1);
    for (int waited = 0; waited < 10000 && atomic_load(&m->arrived) < m->expected; waited++) {
        usleep(1000);
    }
    atomic_fetch_add(&m->met, atomic_load(&m->arrived) >= m->expected);
}

/* Tasks started without waiting: each counts itself; the caller polls for all of them. */
typedef struct started {
    atomic_int calls[ITEMS];
    atomic_int done;
} started;

typedef struct task {
    started *st;
    int i;
} task;

static void run_task(void *user) {
    task *t = user;
    atomic_fetch_add(&t->st->calls[t->i], 1);
    atomic_fetch_add(&t->st->done, 1);
}

/* Start n tasks and wait (up to 10 s) until all have run; how many ran exactly once. */
static int start_tasks(int n) {
    static task tasks[ITEMS];
    started st = {0};
    for (int i = 0; i < n; i++) {
        tasks[i] = (task){&st, i};
        sp_io_pool_start(run_task, &tasks[i]);
    }
    for (int waited = 0; waited < 10000 && atomic_load(&st.done) < n; waited++) {
        usleep(1000);
    }
    int once = 0;
    for (int i = 0; i < n; i++) {
        once += atomic_load(&st.calls[i]) == 1;
    }
    return atomic_load(&st.done) == n ? once : -1;
}

typedef struct caller {
    pthread_t id;
    int runs_all_once; /* runs whose every item was called once */
} caller;

static void *call_runs(void *arg) {
    caller *c = arg;
    for (int r = 0; r < 40; r++) {
        int once, most;
        one_run(20, 4, &once, &most);
        c->runs_all_once += once == 20;
    }
    return NULL;
}

void unit_run(void) {
    int once, most;
    one_run(ITEMS, 8, &once, &most);
    CHECK(once == ITEMS);
    CHECK(most >= 2 && most <= 8);
    one_run(ITEMS, 1, &once, &most);
    CHECK(once == ITEMS && most == 1);
    one_run(1, 8, &once, &most);
    CHECK(once == 1);
    sp_io_pool_run(0, 8, count_item, NULL); /* nothing to do */

    meeting m = {.expected = 6};
    sp_io_pool_run(6, 6, meet, &m);
    CHECK(atomic_load(&m.met) == 6);

    caller callers[4] = {0};
    for (int i = 0; i < 4; i++) {
        CHECK(pthread_create(&callers[i].id, NULL, call_runs, &callers[i]) == 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(callers[i].id, NULL);
        CHECK(callers[i].runs_all_once == 40);
    }

    CHECK(start_tasks(ITEMS) == ITEMS);
    unsigned generation = sp_io_pool_generation();
    CHECK(sp_io_pool_generation() == generation);

#ifdef UNDER_TSAN
    printf("test_io_pool: the fork check is left out under ThreadSanitizer\n");
#else
    pid_t child = fork();
    if (child == 0) {
        meeting cm = {.expected = 4};
        sp_io_pool_run(4, 4, meet, &cm);
        int child_once, child_most;
        one_run(ITEMS, 8, &child_once, &child_most);
        bool ok = atomic_load(&cm.met) == 4 && child_once == ITEMS &&
                  sp_io_pool_generation() != generation && start_tasks(50) == 50;
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    CHECK(child > 0 && waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
#endif
}
