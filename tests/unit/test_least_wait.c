/* test_least_wait.c — the least of the recent waits (src/io/least_wait.c), which tells whether
 * sending HTTP requests ahead pays: 0 before the first wait; one fast answer among
 * slow ones (a server next door whose other answers waited for a core) sets the least and is
 * remembered for at least a window; a link that has become slow shows within two windows; and
 * four threads noting at once lose no window's least beyond the documented race.
 */
#include <pthread.h>

#include "io/least_wait.h"
#include "unit.h"

static void test_empty_and_one(void) {
    sp_least_wait w = {0};
    CHECK_EQ_INT(sp_least_wait_us(&w), 0);
    sp_least_wait_note(&w, 5000);
    CHECK_EQ_INT(sp_least_wait_us(&w), 5000);
    sp_least_wait_note(&w, 0); /* an answer within a microsecond */
    CHECK_EQ_INT(sp_least_wait_us(&w), 0);
    sp_least_wait_note(&w, 7000);
    CHECK_EQ_INT(sp_least_wait_us(&w), 0);
}

/* A busy machine: most waits several milliseconds, one in SP_LEAST_WAIT_WINDOW a quarter of one:
 * the least always covers the last window, so it always holds one of those. */
static void test_fast_answer_among_slow(void) {
    sp_least_wait w = {0};
    for (int i = 0; i < 400; i++) {
        sp_least_wait_note(&w,
                           i % SP_LEAST_WAIT_WINDOW == 7 ? 250 : 3000 + (uint64_t)(i * 37 % 9000));
        if (i >= 7) {
            CHECK(sp_least_wait_us(&w) == 250);
        }
    }
}

/* Every wait is forgotten once two whole windows have come after it, and not before. */
static void test_forgets_after_two_windows(void) {
    sp_least_wait w = {0};
    sp_least_wait_note(&w, 100);
    for (int i = 1; i < 2 * SP_LEAST_WAIT_WINDOW; i++) {
        sp_least_wait_note(&w, 20000);
        CHECK_EQ_INT(sp_least_wait_us(&w), 100);
    }
    sp_least_wait_note(&w, 20000); /* the first window starts again */
    CHECK_EQ_INT(sp_least_wait_us(&w), 20000);
    for (int i = 0; i < 3 * SP_LEAST_WAIT_WINDOW; i++) {
        sp_least_wait_note(&w, 20000 + (uint64_t)i);
    }
    CHECK(sp_least_wait_us(&w) >= 20000 + SP_LEAST_WAIT_WINDOW);
}

typedef struct noter {
    sp_least_wait *w;
    uint64_t base;
} noter;

static void *note_many(void *arg) {
    noter *n = arg;
    for (int i = 0; i < 20000; i++) {
        sp_least_wait_note(n->w, n->base + (uint64_t)(i % 97));
    }
    return NULL;
}

static void test_threads_at_once(void) {
    sp_least_wait w = {0};
    pthread_t t[4];
    noter n[4];
    for (int i = 0; i < 4; i++) {
        n[i] = (noter){&w, 1000 * (uint64_t)(i + 1)};
        CHECK(pthread_create(&t[i], NULL, note_many, &n[i]) == 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
    }
    CHECK_EQ_INT(atomic_load(&w.noted), 80000);
    uint64_t least = sp_least_wait_us(&w);
    CHECK(least >= 1000 && least < 4097); /* one of the waits noted, not a torn or lost value */
}

void unit_run(void) {
    test_empty_and_one();
    test_fast_answer_among_slow();
    test_forgets_after_two_windows();
    test_threads_at_once();
}
