/* batch_blocks.c — the regions of a batch (sp_read_regions) whose slide's format decodes blocks
 * of its own (Zarr chunks: sp_slide_ops.block_of), read block by block instead of region by
 * region.
 *
 * Read region by region, a block that several regions share is decoded into a new tile-cache
 * entry by the first and found there by the others. That entry is memory the process has not
 * touched for long — fresh pages the kernel must fault in and zero, or an entry evicted from the
 * cold end of the cache — and writing a decoded block into it costs about as much again as the
 * decoding itself (docs/reading.md, "Batches of Zarr regions"). Here the batch is turned around: every part of a
 * region that lies in a block is listed under that block, the blocks are taken in Z-order of
 * their place (so that neighbours, and the requests a remote store sends ahead for them, come
 * together), and each is decoded once into a buffer its thread reuses, which stays in the
 * processor's cache, and painted at once into every region part it holds. A block the tile cache
 * holds already is painted from there. The blocks decoded here are not offered to the cache:
 * the batch has used them. A remote slide is told the blocks AHEAD of the furthest taken, so
 * that their files are on their way; from a server next door only while no more threads read
 * than there are cores (with more, receiving ahead on other threads costs more than it saves).
 *
 * Taken: regions of RGB8 or RGBA8 wholly inside a level of a slide without a recorded error or a
 * colour transform, whose every tile is part of a block the format can paint that pixel format from,
 * when the batch has at least two of them. Any other region is left to the caller, and a region
 * whose block failed to decode is read again region by region, which records the error and
 * gives its status; so the bytes and statuses are sp_slide_read_region's either way. */
#include <stdatomic.h>
#include <stdlib.h>

#include "base/thread_pool.h"
#include "io/http_source.h"
#include "slide/icc.h"
#include "slide/slide.h"

#define AHEAD 32 /* blocks announced ahead of the furthest taken, for a remote slide */

/* One region's part that lies in one block, [x0, x1) x [y0, y1) in level pixels. */
typedef struct part {
    sp_slide *slide;
    int32_t level;
    uint64_t z; /* Z-order of the block's place */
    sp_tile_key key;
    uint64_t bytes; /* the block's decoded size */
    size_t region;
    int64_t x0, y0, x1, y1;
} part;

typedef struct plan {
    const sp_region_request *reqs;
    part *parts;
    size_t *starts; /* block b's parts are parts[starts[b] .. starts[b + 1]) */
    size_t blocks;
    int64_t *lx, *ly;        /* each region's origin in its level */
    atomic_bool *failed;     /* per region: a block it needs did not decode */
    atomic_size_t next;      /* the first block no thread has taken */
    atomic_size_t announced; /* blocks before this one have been announced */
    bool busy;               /* more threads read than there are cores */
} plan;

static int by_block(const void *pa, const void *pb) {
    const part *a = pa, *b = pb;
    if (a->slide != b->slide) {
        return (uintptr_t)a->slide < (uintptr_t)b->slide ? -1 : 1;
    }
    if (a->level != b->level) {
        return a->level < b->level ? -1 : 1;
    }
    if (a->z != b->z) {
        return a->z < b->z ? -1 : 1;
    }
    if (a->key.col != b->key.col || a->key.row != b->key.row) {
        return a->key.row != b->key.row ? (a->key.row < b->key.row ? -1 : 1)
                                        : (a->key.col < b->key.col ? -1 : 1);
    }
    return a->region < b->region ? -1 : a->region > b->region;
}

static bool same_block(const part *a, const part *b) {
    return a->slide == b->slide && a->level == b->level && a->key.col == b->key.col &&
           a->key.row == b->key.row;
}

/* Append region i's parts to parts[*n..cap), one per tile it covers; false (nothing appended)
 * when the region is not one this file takes. */
static bool list_parts(const sp_region_request *r, size_t i, int64_t *lx, int64_t *ly, part *parts,
                       size_t *n, size_t cap) {
    sp_slide *s = r->slide;
    int bpp = sp_pixel_format_bytes(r->format);
    if (s == NULL || r->level < 0 || r->level >= s->n_levels || s->ops->block_of == NULL ||
        (r->format != SP_PIXEL_RGB8 && r->format != SP_PIXEL_RGBA8) || r->dst == NULL ||
        r->width <= 0 || r->height <= 0 || r->width > INT64_MAX / 4 || r->stride < r->width * bpp ||
        sp_slide_error(s) != NULL || sp_slide_icc_active(s)) {
        return false;
    }
    const sp_level *l = &s->levels[r->level];
    if (!sp_level_origin(l, r->x, r->y, lx, ly) || *lx < 0 || *ly < 0 ||
        *lx > l->width - r->width || *ly > l->height - r->height || l->tile_width <= 0 ||
        l->tile_height <= 0) {
        return false;
    }
    int64_t x1 = *lx + r->width, y1 = *ly + r->height;
    size_t first = *n;
    for (int64_t row = *ly / l->tile_height; row * l->tile_height < y1; row++) {
        for (int64_t col = *lx / l->tile_width; col * l->tile_width < x1; col++) {
            part p = {.slide = s, .level = r->level, .region = i};
            if (*n == cap ||
                !sp_slide_block_key(s, r->level, 1, col, row, r->format, &p.key, &p.bytes) ||
                p.bytes > (uint64_t)s->limits.value[SP_LIMIT_MAX_ALLOC]) {
                *n = first;
                return false;
            }
            int64_t tx = col * l->tile_width, ty = row * l->tile_height;
            p.x0 = tx > *lx ? tx : *lx;
            p.y0 = ty > *ly ? ty : *ly;
            p.x1 = tx + l->tile_width < x1 ? tx + l->tile_width : x1;
            p.y1 = ty + l->tile_height < y1 ? ty + l->tile_height : y1;
            uint32_t bx = p.key.col >= 0 && p.key.col < 1 << 30 ? (uint32_t)p.key.col : 0;
            uint32_t by = p.key.row >= 0 && p.key.row < 1 << 30 ? (uint32_t)p.key.row : 0;
            p.z = sp_z_order(bx, by);
            parts[(*n)++] = p;
        }
    }
    return true;
}

/* Announce blocks up to `last` not announced yet to their remote slides, each once whichever
 * thread gets there, a few at a time (the tiles that name them). */
static void announce_until(plan *p, size_t last) {
    size_t b = atomic_load(&p->announced);
    while (b <= last && b < p->blocks) {
        size_t end = last + 1 < p->blocks ? last + 1 : p->blocks;
        end = end - b > SP_PREFETCH_TILES ? b + SP_PREFETCH_TILES : end;
        if (!atomic_compare_exchange_weak(&p->announced, &b, end)) {
            continue;
        }
        const part *first = &p->parts[p->starts[b]];
        sp_slide *s = first->slide;
        /* From a server next door, sending ahead pays only while a core is free to receive
         * (docs/reading.md): with every core reading, each thread fetches its own, unless even
         * the quickest recent request waited for the network (waits for a core do not count). */
        if (s->prefetch && s->ops->prefetch != NULL && (!p->busy || sp_http_prefetch_pays_busy())) {
            const sp_level *l = &s->levels[first->level];
            sp_tile_pos tiles[SP_PREFETCH_TILES];
            size_t n = 0;
            for (size_t k = b; k < end; k++) {
                const part *q = &p->parts[p->starts[k]];
                if (q->slide == s && q->level == first->level && !sp_tile_cache_holds(&q->key)) {
                    /* a tile of the block: the part's corner lies in it */
                    tiles[n++] = (sp_tile_pos){q->x0 / l->tile_width, q->y0 / l->tile_height};
                }
            }
            if (n > 0) {
                s->ops->prefetch(s, l, tiles, n);
            }
        }
        b = end;
    }
}

/* Paint block b's parts from its decoded pixels. */
static void paint_parts(const plan *p, size_t b, const uint8_t *pixels) {
    for (size_t k = p->starts[b]; k < p->starts[b + 1]; k++) {
        const part *q = &p->parts[k];
        const sp_region_request *r = &p->reqs[q->region];
        sp_slide *s = q->slide;
        uint8_t *out = (uint8_t *)r->dst + (q->y0 - p->ly[q->region]) * r->stride +
                       (q->x0 - p->lx[q->region]) * sp_pixel_format_bytes(r->format);
        s->ops->paint_block(s, &s->levels[q->level], pixels, (sp_tile_pos){q->key.col, q->key.row},
                            q->x0, q->y0, q->x1 - q->x0, q->y1 - q->y0, r->format, out, r->stride);
    }
}

/* One thread's share: blocks one at a time, in order, until none is left. */
static void read_blocks(void *user, size_t thread) {
    (void)thread;
    plan *p = user;
    uint8_t *scratch = NULL;
    uint64_t scratch_bytes = 0;
    for (size_t b; (b = atomic_fetch_add(&p->next, 1)) < p->blocks;) {
        announce_until(p, b + AHEAD);
        const part *first = &p->parts[p->starts[b]];
        sp_cached_tile *held = sp_tile_cache_get(&first->key);
        if (held != NULL) {
            paint_parts(p, b, sp_cached_tile_pixels(held));
            sp_tile_cache_release(held);
            continue;
        }
        sp_slide *s = first->slide;
        sp_err err = {0};
        bool decoded = false;
        if (scratch_bytes < first->bytes) {
            free(scratch);
            scratch = malloc((size_t)first->bytes);
            scratch_bytes = scratch != NULL ? first->bytes : 0;
        }
        if (scratch != NULL) {
            decoded = s->ops->decode_block(s, &s->levels[first->level],
                                           (sp_tile_pos){first->key.col, first->key.row}, scratch,
                                           &err) == SP_OK;
        }
        if (decoded) {
            paint_parts(p, b, scratch);
        } else {
            for (size_t k = p->starts[b]; k < p->starts[b + 1]; k++) {
                atomic_store(&p->failed[p->parts[k].region], true);
            }
        }
    }
    free(scratch);
}

size_t sp_read_regions_by_block(const sp_region_request *reqs, size_t n, size_t threads,
                                sp_status *statuses, bool *done) {
    /* Count the tiles first, to size the list of parts. */
    size_t cap = 0;
    for (size_t i = 0; i < n; i++) {
        const sp_region_request *r = &reqs[i];
        const sp_slide *s = r->slide;
        if (s == NULL || r->level < 0 || r->level >= s->n_levels || s->ops->block_of == NULL ||
            r->width <= 0 || r->height <= 0) {
            continue;
        }
        const sp_level *l = &s->levels[r->level];
        if (l->tile_width > 0 && l->tile_height > 0 && r->width <= l->width &&
            r->height <= l->height) {
            cap += (size_t)((r->width / l->tile_width + 2) * (r->height / l->tile_height + 2));
        }
    }
    if (cap == 0) {
        return 0;
    }
    plan p = {.reqs = reqs};
    p.parts = malloc(cap * sizeof *p.parts);
    p.starts = malloc((cap + 1) * sizeof *p.starts);
    p.lx = malloc(n * sizeof *p.lx);
    p.ly = malloc(n * sizeof *p.ly);
    p.failed = malloc(n * sizeof *p.failed);
    size_t taken = 0, count = 0;
    if (p.parts != NULL && p.starts != NULL && p.lx != NULL && p.ly != NULL && p.failed != NULL) {
        for (size_t i = 0; i < n; i++) {
            atomic_init(&p.failed[i], false);
            taken += list_parts(&reqs[i], i, &p.lx[i], &p.ly[i], p.parts, &count, cap);
        }
    }
    if (taken >= 2) {
        qsort(p.parts, count, sizeof *p.parts, by_block);
        for (size_t k = 0; k < count; k++) {
            if (k == 0 || !same_block(&p.parts[k - 1], &p.parts[k])) {
                p.starts[p.blocks++] = k;
            }
        }
        p.starts[p.blocks] = count;
        atomic_init(&p.next, 0);
        atomic_init(&p.announced, 0);
        size_t t = threads < p.blocks ? threads : p.blocks;
        p.busy = t > (size_t)sp_pool_cores();
        sp_pool_run(t, (int)t, read_blocks, &p);
        for (size_t k = 0; k < count; k++) {
            done[p.parts[k].region] = true;
        }
        for (size_t i = 0; i < n; i++) {
            if (done[i]) {
                const sp_region_request *r = &reqs[i];
                statuses[i] = !atomic_load(&p.failed[i])
                                  ? SP_OK
                                  : sp_slide_read_region(r->slide, r->format, r->dst, r->stride,
                                                         r->level, r->x, r->y, r->width, r->height);
            }
        }
    }
    free(p.parts);
    free(p.starts);
    free(p.lx);
    free(p.ly);
    free(p.failed);
    return taken >= 2 ? taken : 0;
}
