/* test_thread_pool.c — the library's parallel loop (base/thread_pool.c) and a host program's own
 * pool in its place (sp_set_thread_pool): every item runs exactly once, with slidepipe's threads,
 * with a host that runs the items in turn on its calling thread, and with a host that runs them
 * on threads of its own; and on the Aperio test slide a conversion (tile engine, pyramid sink,
 * nested reductions) and a Sobel run give the same dataset hashes with each of the three, while
 * the hosts' counters show their pools did the work.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/thread_pool.h"
#include "unit.h"

#define ITEMS 1000

static atomic_int seen[ITEMS];

static void mark(void *arg, size_t i) {
    (void)arg;
    atomic_fetch_add(&seen[i], 1);
}

/* Whether every item ran exactly once; clears the marks. */
static int each_once(void) {
    int ok = 1;
    for (int i = 0; i < ITEMS; i++) {
        ok &= atomic_exchange(&seen[i], 0) == 1;
    }
    return ok;
}

/* ---- two hosts --------------------------------------------------------------------------- */

typedef struct host {
    atomic_long calls, items;
} host;

/* Runs the items in turn on the calling thread. */
static void run_in_turn(void *h, size_t n, int threads, void (*work)(void *, size_t), void *arg) {
    (void)threads;
    host *me = h;
    atomic_fetch_add(&me->calls, 1);
    for (size_t i = 0; i < n; i++) {
        atomic_fetch_add(&me->items, 1);
        work(arg, i);
    }
}

typedef struct own_run {
    host *me;
    atomic_size_t next;
    size_t n;
    void (*work)(void *, size_t);
    void *arg;
} own_run;

static void *own_thread(void *p) {
    own_run *r = p;
    for (size_t i; (i = atomic_fetch_add(&r->next, 1)) < r->n;) {
        atomic_fetch_add(&r->me->items, 1);
        r->work(r->arg, i);
    }
    return NULL;
}

/* Runs the items on threads of its own (up to `threads`, at least two); the caller only waits. */
static void run_on_own_threads(void *h, size_t n, int threads, void (*work)(void *, size_t),
                               void *arg) {
    host *me = h;
    atomic_fetch_add(&me->calls, 1);
    own_run r = {.me = me, .n = n, .work = work, .arg = arg};
    atomic_init(&r.next, 0);
    int t = threads < 2 ? 2 : threads > 8 ? 8 : threads;
    pthread_t ids[8];
    int started = 0;
    while (started < t && pthread_create(&ids[started], NULL, own_thread, &r) == 0) {
        started++;
    }
    if (started == 0) {
        own_thread(&r);
    }
    for (int i = 0; i < started; i++) {
        pthread_join(ids[i], NULL);
    }
}

static void test_items(void) {
    CHECK_EQ_INT(sp_pool_run(ITEMS, 4, mark, NULL), SP_OK);
    CHECK(each_once());
    host a = {0}, b = {0};
    sp_set_thread_pool(run_in_turn, &a);
    CHECK_EQ_INT(sp_pool_run(ITEMS, 4, mark, NULL), SP_OK);
    CHECK(each_once());
    CHECK(atomic_load(&a.calls) == 1 && atomic_load(&a.items) == ITEMS);
    sp_set_thread_pool(run_on_own_threads, &b);
    CHECK_EQ_INT(sp_pool_run(ITEMS, 3, mark, NULL), SP_OK);
    CHECK(each_once());
    CHECK(atomic_load(&b.calls) == 1 && atomic_load(&b.items) == ITEMS);
    sp_set_thread_pool(NULL, NULL);
    CHECK_EQ_INT(sp_pool_run(ITEMS, 2, mark, NULL), SP_OK);
    CHECK(each_once());
    CHECK(atomic_load(&b.calls) == 1); /* no longer asked */
}

/* ---- the jobs on each pool --------------------------------------------------------------- */

/* Convert and Sobel-process the slide into fresh folders; their dataset hashes into hashes. */
static void run_jobs(sp_slide *slide, char hashes[2][65]) {
    char dir[] = "/tmp/sp_pool_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char out[64], err[256] = "";
    sp_convert_options *co = NULL;
    sp_convert_options_create(&co);
    sp_convert_options_set(co, SP_CONVERT_CHUNK, 256); /* several bands and levels */
    sp_convert_options_set(co, SP_CONVERT_THREADS, 3);
    snprintf(out, sizeof out, "%s/c.zarr", dir);
    CHECK_EQ_INT(sp_convert_to_zarr(slide, out, co, NULL, NULL, hashes[0], err, sizeof err), SP_OK);
    sp_convert_options_destroy(co);
    sp_process_options *po = NULL;
    sp_process_options_create(&po);
    sp_process_options_set(po, SP_PROCESS_CHUNK, 512);
    sp_process_options_set(po, SP_PROCESS_THREADS, 3);
    snprintf(out, sizeof out, "%s/p.zarr", dir);
    CHECK_EQ_INT(sp_process_to_zarr(slide, "sobel", out, po, NULL, NULL, hashes[1], err, sizeof err),
                 SP_OK);
    sp_process_options_destroy(po);
    if (err[0] != '\0') {
        fprintf(stderr, "%s\n", err);
    }
    char cmd[96];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

static void test_jobs(const char *data) {
    char path[1024];
    snprintf(path, sizeof path, "%s/aperio/CMU-1-Small-Region.svs", data);
    sp_slide *slide = NULL;
    char msg[256];
    if (sp_slide_open(path, &slide, msg, sizeof msg) != SP_OK) {
        fprintf(stderr, "cannot open %s: %s\n", path, msg);
        CHECK(0);
        return;
    }
    char own[2][65], in_turn[2][65], threads[2][65];
    run_jobs(slide, own);
    host a = {0}, b = {0};
    sp_set_thread_pool(run_in_turn, &a);
    run_jobs(slide, in_turn);
    sp_set_thread_pool(run_on_own_threads, &b);
    run_jobs(slide, threads);
    sp_set_thread_pool(NULL, NULL);
    sp_slide_close(slide);
    for (int j = 0; j < 2; j++) {
        CHECK(strlen(own[j]) == 64);
        CHECK(strcmp(own[j], in_turn[j]) == 0);
        CHECK(strcmp(own[j], threads[j]) == 0);
    }
    /* the engine's workers and the pyramid's reductions went through the hosts */
    CHECK(atomic_load(&a.calls) > 2 && atomic_load(&a.items) > 2);
    CHECK(atomic_load(&b.calls) > 2 && atomic_load(&b.items) > 2);
}

void unit_run(void) {
    test_items();
    const char *data = unit_testdata();
    if (data == NULL) {
        unit_skip("shared test data absent: the jobs on each pool not tested");
        return;
    }
    test_jobs(data);
}
