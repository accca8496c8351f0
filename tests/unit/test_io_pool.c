/* test_io_pool.c — the process-wide pool of waiting threads (src/io/io_pool.c): every started
 * task runs exactly once; a burst of tasks runs side by side (tasks that wait for each other all
 * finish, so a thread was started for each instead of one idle thread taking them in turn), also
 * right after the pool has idle threads; threads starting tasks at once each get theirs run; and
 * a child forked after the pool has started threads sees another generation, starts its own
 * threads and runs its tasks. Runs under ThreadSanitizer (make test), which cannot follow a fork
 * from a process with threads: that part is left out there.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io/io_pool.h"
#include "unit.h"

#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif

#define TASKS 300

/* A set of started tasks: each counts its calls; the caller polls until all are done. */
typedef struct started {
    atomic_int calls[TASKS];
    atomic_int done;
    int meet; /* > 0: each task waits until this many have arrived */
    atomic_int arrived, met;
} started;

typedef struct task {
    started *st;
    int i;
} task;

static void run_task(void *user) {
    task *t = user;
    started *st = t->st;
    atomic_fetch_add(&st->calls[t->i], 1);
    if (st->meet > 0) {
        atomic_fetch_add(&st->arrived, 1);
        for (int waited = 0; waited < 10000 && atomic_load(&st->arrived) < st->meet; waited++) {
            usleep(1000);
        }
        atomic_fetch_add(&st->met, atomic_load(&st->arrived) >= st->meet);
    }
    atomic_fetch_add(&st->done, 1);
}

/* Start n tasks (that wait for each other when `meet`) and wait up to 20 s until all have run.
 * Returns how many ran exactly once and, when meeting, also met the others; -1 on a timeout. */
static int start_tasks(int n, bool meet) {
    static task tasks[TASKS];
    static started st;
    st = (started){.meet = meet ? n : 0};
    for (int i = 0; i < n; i++) {
        tasks[i] = (task){&st, i};
        sp_io_pool_start(run_task, &tasks[i]);
    }
    for (int waited = 0; waited < 20000 && atomic_load(&st.done) < n; waited++) {
        usleep(1000);
    }
    if (atomic_load(&st.done) < n) {
        return -1;
    }
    int ok = 0;
    for (int i = 0; i < n; i++) {
        ok += atomic_load(&st.calls[i]) == 1;
    }
    return meet && atomic_load(&st.met) != n ? 0 : ok;
}

/* Four threads starting tasks at once: each counts its own tasks' runs. */
typedef struct starter {
    pthread_t id;
    atomic_int runs;
} starter;

static void count_run(void *user) { atomic_fetch_add(&((starter *)user)->runs, 1); }

static void *start_many(void *arg) {
    for (int i = 0; i < 50; i++) {
        sp_io_pool_start(count_run, arg);
    }
    return NULL;
}

void unit_run(void) {
    CHECK(start_tasks(TASKS, false) == TASKS);
    CHECK(start_tasks(12, true) == 12); /* a burst, all side by side */
    CHECK(start_tasks(12, true) == 12); /* again, now that threads are idle */

    starter starters[4] = {0};
    for (int i = 0; i < 4; i++) {
        CHECK(pthread_create(&starters[i].id, NULL, start_many, &starters[i]) == 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(starters[i].id, NULL);
    }
    for (int waited = 0; waited < 10000; waited++) {
        int all = 0;
        for (int i = 0; i < 4; i++) {
            all += atomic_load(&starters[i].runs) == 50;
        }
        if (all == 4) {
            break;
        }
        usleep(1000);
    }
    for (int i = 0; i < 4; i++) {
        CHECK(atomic_load(&starters[i].runs) == 50);
    }

    unsigned generation = sp_io_pool_generation();
    CHECK(sp_io_pool_generation() == generation);
#ifdef UNDER_TSAN
    printf("test_io_pool: the fork check is left out under ThreadSanitizer\n");
#else
    pid_t child = fork();
    if (child == 0) {
        bool ok = sp_io_pool_generation() != generation && start_tasks(8, true) == 8 &&
                  start_tasks(TASKS, false) == TASKS;
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    CHECK(child > 0 && waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
#endif
}
