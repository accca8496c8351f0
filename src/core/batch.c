/* batch.c — sp_read_regions: many regions, possibly of several slides, read by a pool of
 * threads, each region exactly as sp_slide_read_region reads it and with its own status.
 *
 * Regions are the unit of work (a region's tiles are painted by one thread, in order), so a
 * batch of one region runs on the calling thread, and results never depend on the thread
 * count: slides are safe to read concurrently and each region writes only its own buffer.
 * Where a slide's data is remote, up to GROUP consecutive regions of it at one level go to one
 * thread together, and their tiles are announced before they are read, together and AHEAD
 * groups in advance: their requests go out at once (the source does not wait for them), so a
 * round trip fetches the tiles of several regions, and the next groups' tiles are on their way
 * while this group's are decoded.
 */
#include <stdatomic.h>
#include <stdlib.h>

#include "core/slide_internal.h"
#include "core/thread_pool.h"

#define GROUP 4
#define AHEAD 2

typedef struct batch {
    const sp_region_request *reqs;
    sp_status *statuses;
    size_t *starts; /* group g is regions [starts[g], starts[g + 1]) */
    size_t groups;
    atomic_size_t announced; /* groups before this one have been announced */
} batch;

/* Announce every group up to `last` not announced yet, each once whichever thread gets there. */
static void announce_until(batch *b, size_t last) {
    size_t g = atomic_load(&b->announced);
    while (g <= last && g < b->groups) {
        if (atomic_compare_exchange_weak(&b->announced, &g, g + 1)) {
            size_t first = b->starts[g];
            sp_slide_prefetch_regions(b->reqs[first].slide, &b->reqs[first],
                                      b->starts[g + 1] - first);
            g++;
        }
    }
}

static void read_group(void *user, size_t g) {
    batch *b = user;
    size_t first = b->starts[g], end = b->starts[g + 1];
    announce_until(b, g + AHEAD);
    for (size_t i = first; i < end; i++) {
        const sp_region_request *r = &b->reqs[i];
        b->statuses[i] = sp_slide_read_region(r->slide, r->format, r->dst, r->stride, r->level,
                                              r->x, r->y, r->width, r->height);
    }
}

/* Whether region i can join the group that region `first` starts, groups holding at most
 * `most` regions. */
static bool joins(const sp_region_request *reqs, size_t first, size_t i, size_t most) {
    const sp_slide *s = reqs[first].slide;
    return i - first < most && s != NULL && s->prefetch && reqs[i].slide == s &&
           reqs[i].level == reqs[first].level;
}

sp_status sp_read_regions(const sp_region_request *reqs, size_t n, int threads,
                          sp_status *statuses) {
    if (reqs == NULL && n > 0) {
        return SP_E_INVALID_ARG;
    }
    sp_status local[64];
    size_t local_starts[65];
    batch b = {.reqs = reqs, .statuses = statuses, .starts = local_starts};
    /* The verdict is the first failure in request order, so statuses are needed even when the
     * caller does not want them: on the stack when few, else on the heap. */
    sp_status *owned = NULL;
    if (statuses == NULL) {
        owned = n <= 64 ? local : malloc(n * sizeof *owned);
        b.statuses = owned;
    }
    if (n > 64) {
        b.starts = malloc((n + 1) * sizeof *b.starts);
    }
    if (b.statuses == NULL || b.starts == NULL) {
        if (owned != local) {
            free(owned);
        }
        if (b.starts != local_starts) {
            free(b.starts);
        }
        return SP_E_NOMEM;
    }
    /* Groups no larger than leaves every thread a group. */
    size_t t = threads > 0 ? (size_t)threads : (size_t)sp_pool_cores();
    size_t most = n / t < 1 ? 1 : n / t > GROUP ? GROUP : n / t;
    size_t groups = 0;
    for (size_t i = 0; i < n; i++) {
        if (groups == 0 || !joins(reqs, b.starts[groups - 1], i, most)) {
            b.starts[groups++] = i;
        }
    }
    b.starts[groups] = n;
    b.groups = groups;
    atomic_init(&b.announced, 0);
    sp_pool_run(groups, threads, read_group, &b);
    sp_status first = SP_OK;
    for (size_t i = 0; i < n && first == SP_OK; i++) {
        first = b.statuses[i];
    }
    if (owned != local) {
        free(owned);
    }
    if (b.starts != local_starts) {
        free(b.starts);
    }
    return first;
}
