/* batch.c — sp_read_regions: many regions, possibly of several slides, read by a pool of
 * threads, each region exactly as sp_slide_read_region reads it and with its own status.
 *
 * Regions are the unit of work (a region's tiles are painted by one thread, in order), so a
 * batch of one region runs on the calling thread, and results never depend on the thread
 * count: slides are safe to read concurrently and each region writes only its own buffer.
 * Regions are read in an order that keeps neighbours together (by slide, level, then the
 * Z-order of the tile at their corner), so regions that share tiles, or a large Zarr chunk, are
 * read one after another and find them in the tile cache or the thread's decoded chunk. Threads
 * take that order in runs, long ones first (take_run), so that two threads rarely read
 * neighbours at the same moment and decode their shared tiles twice.
 * Regions of formats that decode blocks of their own (Zarr chunks) are read block by block
 * first (batch_blocks.c); this file reads the others.
 * Where a slide's data is remote, up to GROUP consecutive regions of it at one level go to one
 * thread together, and their tiles are announced before they are read, together and AHEAD
 * groups in advance: their requests go out at once (the source does not wait for them), so a
 * round trip fetches the tiles of several regions, and the next groups' tiles are on their way
 * while this group's are decoded.
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#include "base/thread_pool.h"
#include "slide/slide.h"

#define GROUP 4
#define AHEAD 4

typedef struct batch {
    const sp_region_request *reqs;
    size_t *order;  /* the regions in reading order */
    sp_status *statuses;
    size_t *starts; /* group g is regions [starts[g], starts[g + 1]) */
    size_t groups;
    size_t threads;
    bool remote;             /* some slide is remote: groups are taken one at a time, announced */
    atomic_size_t next;      /* the first group no thread has taken yet */
    atomic_size_t announced; /* groups before this one have been announced */
} batch;

/* Announce every group up to `last` not announced yet, each once whichever thread gets there. */
static void announce_until(batch *b, size_t last) {
    size_t g = atomic_load(&b->announced);
    while (g <= last && g < b->groups) {
        if (atomic_compare_exchange_weak(&b->announced, &g, g + 1)) {
            sp_region_request group[GROUP];
            size_t n = 0;
            for (size_t i = b->starts[g]; i < b->starts[g + 1] && n < GROUP; i++) {
                group[n++] = b->reqs[b->order[i]];
            }
            sp_slide_prefetch_regions(group[0].slide, group, n);
            g++;
        }
    }
}

/* Take the next run of neighbouring groups into [*first, *end): a share of what is left that
 * shrinks as the batch drains (half of it split between the threads, at least one group).
 * Two threads reading neighbours at once would both miss the tiles those share and decode
 * them twice; long runs first keep the threads apart, short runs last keep them equally busy
 * to the end. Where a slide is remote, groups are taken one at a time: a group already holds
 * neighbouring regions, and runs measured 10-20% slower over HTTP on 8 and 16 threads
 * (docs/reading.md). False when nothing is left. */
static bool take_run(batch *b, size_t *first, size_t *end) {
    size_t g = atomic_load(&b->next);
    for (;;) {
        if (g >= b->groups) {
            return false;
        }
        size_t take = b->remote ? 1 : (b->groups - g) / (2 * b->threads);
        take = take > 0 ? take : 1;
        if (atomic_compare_exchange_weak(&b->next, &g, g + take)) {
            *first = g;
            *end = g + take;
            return true;
        }
    }
}

/* One thread's share of the batch: runs of groups until none is left. Where a slide is remote,
 * before reading a group it announces every group up to AHEAD past those taken, so that the
 * next groups' requests are on their way while this one is decoded. */
static void read_runs(void *user, size_t thread) {
    (void)thread;
    batch *b = user;
    for (size_t first, end; take_run(b, &first, &end);) {
        for (size_t g = first; g < end; g++) {
            if (b->remote) {
                announce_until(b, atomic_load(&b->next) + AHEAD - 1);
            }
            for (size_t i = b->starts[g]; i < b->starts[g + 1]; i++) {
                const sp_region_request *r = &b->reqs[b->order[i]];
                b->statuses[b->order[i]] =
                    sp_slide_read_region(r->slide, r->format, r->dst, r->stride, r->level, r->x,
                                         r->y, r->width, r->height);
            }
        }
    }
}

/* Bits of x spread to the even places (0, 2, 4, ...). */
static uint64_t spread(uint32_t x) {
    uint64_t v = x;
    v = (v | v << 16) & 0x0000FFFF0000FFFFull;
    v = (v | v << 8) & 0x00FF00FF00FF00FFull;
    v = (v | v << 4) & 0x0F0F0F0F0F0F0F0Full;
    v = (v | v << 2) & 0x3333333333333333ull;
    v = (v | v << 1) & 0x5555555555555555ull;
    return v;
}

uint64_t sp_z_order(uint32_t x, uint32_t y) {
    return spread(x) | spread(y) << 1;
}

typedef struct place {
    uintptr_t slide;
    int32_t level;
    uint64_t z; /* Z-order of the tile at the region's corner */
    size_t i;
} place;

static place place_of(const sp_region_request *r, size_t i) {
    place p = {(uintptr_t)r->slide, r->level, 0, i};
    const sp_slide *s = r->slide;
    if (s != NULL && r->level >= 0 && r->level < s->n_levels) {
        const sp_level *l = &s->levels[r->level];
        double ds = l->downsample > 0 ? l->downsample : 1;
        double tx = r->x / ds / (double)(l->tile_width > 0 ? l->tile_width : 1);
        double ty = r->y / ds / (double)(l->tile_height > 0 ? l->tile_height : 1);
        uint32_t cx = tx > 0 && tx < 4e9 ? (uint32_t)tx : 0;
        uint32_t cy = ty > 0 && ty < 4e9 ? (uint32_t)ty : 0;
        p.z = sp_z_order(cx, cy);
    }
    return p;
}

static int by_place(const void *pa, const void *pb) {
    const place *a = pa, *b = pb;
    if (a->slide != b->slide) {
        return a->slide < b->slide ? -1 : 1;
    }
    if (a->level != b->level) {
        return a->level < b->level ? -1 : 1;
    }
    if (a->z != b->z) {
        return a->z < b->z ? -1 : 1;
    }
    return a->i < b->i ? -1 : a->i > b->i;
}

/* The reading order of the regions not done yet into order[0..*m); false when out of memory. */
static bool reading_order(const sp_region_request *reqs, size_t n, const bool *done, size_t *order,
                          size_t *m) {
    place *places = malloc((n ? n : 1) * sizeof *places);
    if (places == NULL) {
        return false;
    }
    *m = 0;
    for (size_t i = 0; i < n; i++) {
        if (!done[i]) {
            places[(*m)++] = place_of(&reqs[i], i);
        }
    }
    qsort(places, *m, sizeof *places, by_place);
    for (size_t i = 0; i < *m; i++) {
        order[i] = places[i].i;
    }
    free(places);
    return true;
}

/* Whether region i can join the group that region `first` starts, groups holding at most
 * `most` regions. */
static bool joins(const sp_region_request *reqs, const size_t *order, size_t first, size_t i,
                  size_t most) {
    const sp_region_request *a = &reqs[order[first]], *r = &reqs[order[i]];
    return i - first < most && a->slide != NULL && a->slide->prefetch && r->slide == a->slide &&
           r->level == a->level;
}

sp_status sp_read_regions(const sp_region_request *reqs, size_t n, int threads,
                          sp_status *statuses) {
    if (reqs == NULL && n > 0) {
        return SP_E_INVALID_ARG;
    }
    sp_status local[64];
    size_t local_starts[65], local_order[64];
    bool local_done[64] = {false};
    batch b = {.reqs = reqs, .statuses = statuses, .starts = local_starts, .order = local_order};
    /* The verdict is the first failure in request order, so statuses are needed even when the
     * caller does not want them: on the stack when few, else on the heap. */
    sp_status *owned = NULL;
    if (statuses == NULL) {
        owned = n <= 64 ? local : malloc(n * sizeof *owned);
        b.statuses = owned;
    }
    bool *done = local_done;
    if (n > 64) {
        b.starts = malloc((n + 1) * sizeof *b.starts);
        b.order = malloc(n * sizeof *b.order);
        done = calloc(n, sizeof *done);
    }
    sp_status first = SP_E_NOMEM;
    size_t t = threads > 0 ? (size_t)threads : (size_t)sp_pool_cores();
    size_t m = 0;
    if (b.statuses == NULL || b.starts == NULL || b.order == NULL || done == NULL) {
        goto done;
    }
    /* Regions in blocks of a format's own (Zarr chunks) block by block; the rest by region. */
    sp_read_regions_by_block(reqs, n, t, b.statuses, done);
    if (!reading_order(reqs, n, done, b.order, &m)) {
        goto done;
    }
    /* Groups no larger than leaves every thread a group. */
    size_t most = m / t < 1 ? 1 : m / t > GROUP ? GROUP : m / t;
    size_t groups = 0;
    for (size_t i = 0; i < m; i++) {
        if (groups == 0 || !joins(reqs, b.order, b.starts[groups - 1], i, most)) {
            b.starts[groups++] = i;
        }
        b.remote |= reqs[b.order[i]].slide != NULL && reqs[b.order[i]].slide->prefetch;
    }
    b.starts[groups] = m;
    b.groups = groups;
    b.threads = t < groups ? t : groups;
    atomic_init(&b.next, 0);
    atomic_init(&b.announced, 0);
    if (groups > 0) {
        sp_pool_run(b.threads, (int)b.threads, read_runs, &b);
    }
    first = SP_OK;
    for (size_t i = 0; i < n && first == SP_OK; i++) {
        first = b.statuses[i];
    }
done:
    if (owned != local) {
        free(owned);
    }
    if (b.starts != local_starts) {
        free(b.starts);
    }
    if (b.order != local_order) {
        free(b.order);
    }
    if (done != local_done) {
        free(done);
    }
    return first;
}
