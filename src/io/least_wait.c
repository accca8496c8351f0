/* least_wait.c — the least of a stream's recent waits over two alternating windows (least_wait.h).
 *
 * Wait n goes to window (n / SP_LEAST_WAIT_WINDOW) mod 2; the first wait of a window replaces
 * what the window held two windows ago, and each later one lowers it when smaller. The least of
 * the two windows then covers the last 32 to 64 waits: a fast answer is remembered for at least
 * one window, and a link that has become slow shows within two. */
#include "io/least_wait.h"

void sp_least_wait_note(sp_least_wait *w, uint64_t us) {
    uint64_t n = atomic_fetch_add_explicit(&w->noted, 1, memory_order_relaxed);
    _Atomic uint64_t *window = &w->least[(n / SP_LEAST_WAIT_WINDOW) % 2];
    uint64_t wait = us + 1;
    if (n % SP_LEAST_WAIT_WINDOW == 0) {
        atomic_store_explicit(window, wait, memory_order_relaxed);
        return;
    }
    uint64_t old = atomic_load_explicit(window, memory_order_relaxed);
    while ((old == 0 || wait < old) &&
           !atomic_compare_exchange_weak_explicit(window, &old, wait, memory_order_relaxed,
                                                  memory_order_relaxed)) {
    }
}

uint64_t sp_least_wait_us(sp_least_wait *w) {
    uint64_t a = atomic_load_explicit(&w->least[0], memory_order_relaxed);
    uint64_t b = atomic_load_explicit(&w->least[1], memory_order_relaxed);
    uint64_t least = a == 0 || (b != 0 && b < a) ? b : a;
    return least == 0 ? 0 : least - 1;
}
