/* batch.c — sp_read_regions: many regions, possibly of several slides, read by a pool of
 * threads, each region exactly as sp_slide_read_region reads it and with its own status.
 *
 * Regions are the unit of work (a region's tiles are painted by one thread, in order), so a
 * batch of one region runs on the calling thread, and results never depend on the thread
 * count: slides are safe to read concurrently and each region writes only its own buffer.
 */
#include <stdlib.h>

#include "core/thread_pool.h"

typedef struct batch {
    const sp_region_request *reqs;
    sp_status *statuses;
} batch;

static void read_one(void *user, size_t i) {
    batch *b = user;
    const sp_region_request *r = &b->reqs[i];
    sp_status st = sp_slide_read_region(r->slide, r->format, r->dst, r->stride, r->level, r->x,
                                        r->y, r->width, r->height);
    if (b->statuses != NULL) {
        b->statuses[i] = st;
    }
}

sp_status sp_read_regions(const sp_region_request *reqs, size_t n, int threads,
                          sp_status *statuses) {
    if (reqs == NULL && n > 0) {
        return SP_E_INVALID_ARG;
    }
    sp_status local[64];
    batch b = {reqs, statuses};
    /* The verdict is the first failure in request order, so statuses are needed even when the
     * caller does not want them: on the stack when few, else on the heap. */
    sp_status *owned = NULL;
    if (statuses == NULL) {
        owned = n <= 64 ? local : malloc(n * sizeof *owned);
        if (owned == NULL) {
            return SP_E_NOMEM;
        }
        b.statuses = owned;
    }
    sp_pool_run(n, threads, read_one, &b);
    sp_status first = SP_OK;
    for (size_t i = 0; i < n && first == SP_OK; i++) {
        first = b.statuses[i];
    }
    if (owned != local) {
        free(owned);
    }
    return first;
}
