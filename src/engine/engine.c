/* engine.c — the tile scheduler (see engine.h): input tiles with halos in a bounded set of slots,
 * worker threads that either read the next tile into a free slot or compute a tile that has been
 * read, and the whole-level baseline.
 *
 * Slot life cycle: FREE -> READING (a worker reads tile t into it) -> READY -> COMPUTING (a worker
 * runs the op into its own chunk buffer and hands the chunk to the sink) -> FREE. Tiles are
 * started in row-major order, so neighbouring tiles, which share the slide's storage tiles
 * through their halos, are read close together in time (the tile cache keeps them). The workers
 * are items of the library's thread pool (base/thread_pool.c, or the host program's pool), the
 * calling thread among them; whichever finishes a tile reports progress.
 */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/limits.h"
#include "base/thread_pool.h"
#include "cuda/cuda_ops.h"
#include "engine/engine.h"
#include "slide/slide.h"
#include "slide/tile_cache.h"

enum { SLOT_FREE = 0, SLOT_READING, SLOT_READY, SLOT_COMPUTING };

/* Rows of output per task in the global mode. */
#define GLOBAL_STRIPE 64

typedef struct geometry {
    int64_t width, height; /* the level */
    double downsample;
    int64_t chunk, cols, rows, tiles;
    int halo;
    size_t elem;        /* bytes per output element */
    size_t chunk_bytes; /* channels x chunk x chunk x elem */
} geometry;

typedef struct slot {
    int state;
    int64_t tile;
    uint8_t *pixels; /* (chunk + 2 halo)² RGB8 */
} slot;

typedef struct engine {
    const sp_engine_job *job;
    geometry g;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    slot *slots;
    int n_slots;
    int64_t next_tile, done;
    int64_t held, max_held;
    sp_err err;
    bool failed;
    /* global mode */
    uint8_t *whole;  /* (W + 2 halo) x (H + 2 halo) RGB8 */
    void *whole_out; /* channels planes of W x H */
    atomic_llong next_task;
    int64_t n_tasks;
    int64_t read_rows; /* level rows per read task */
    void (*task)(struct engine *e, int64_t t, float *scratch, uint8_t *chunk);
    void *(*worker_fn)(void *e); /* the loop the pool's items run */
    pthread_mutex_t progress_lock;
    int64_t reported; /* the last count given to the progress callback */
} engine;

static void fail(engine *e, const sp_err *err) {
    pthread_mutex_lock(&e->lock);
    bool first = !e->failed;
    if (first) {
        e->err = *err;
        e->failed = true;
    }
    pthread_cond_broadcast(&e->changed);
    pthread_mutex_unlock(&e->lock);
    if (first && e->job->sink_abort != NULL) {
        e->job->sink_abort(e->job->sink_ctx);
    }
}

static void worker_item(void *arg, size_t i) {
    (void)i;
    engine *e = arg;
    e->worker_fn(e);
}

/* Tell the job's progress callback, from whichever worker finished a tile: one call at a time,
 * counts never decreasing. */
static void report_progress(engine *e) {
    const sp_engine_job *job = e->job;
    if (job->progress == NULL) {
        return;
    }
    pthread_mutex_lock(&e->progress_lock);
    pthread_mutex_lock(&e->lock);
    int64_t done = e->done;
    pthread_mutex_unlock(&e->lock);
    if (done > e->reported) {
        e->reported = done;
        job->progress(job->progress_user, done, e->g.tiles);
    }
    pthread_mutex_unlock(&e->progress_lock);
}

static bool failed(engine *e) {
    pthread_mutex_lock(&e->lock);
    bool f = e->failed;
    pthread_mutex_unlock(&e->lock);
    return f;
}

/* scipy.ndimage's 'reflect' (half-sample symmetric) index into [0, n): periodic with period 2n,
 * so it also holds where the halo is wider than the level. */
static int64_t reflect(int64_t i, int64_t n) {
    int64_t m = i % (2 * n);
    if (m < 0) {
        m += 2 * n;
    }
    return m < n ? m : 2 * n - 1 - m;
}

/* Fill a block of bw x bh RGB8 pixels whose pixel (0, 0) is level pixel (bx0, by0): read the
 * part inside the level, then reflect the rest from it. `shared`: the band along the block's
 * edges that other blocks read too (see sp_slide_read_level_area). */
static sp_status read_block(engine *e, uint8_t *buf, int64_t stride, int64_t bx0, int64_t by0,
                            int64_t bw, int64_t bh, int64_t shared, sp_err *err) {
    const geometry *g = &e->g;
    int64_t ix0 = bx0 < 0 ? 0 : bx0, iy0 = by0 < 0 ? 0 : by0;
    int64_t ix1 = bx0 + bw > g->width ? g->width : bx0 + bw;
    int64_t iy1 = by0 + bh > g->height ? g->height : by0 + bh;
    sp_slide *s = e->job->slide;
    uint8_t *dst = buf + (iy0 - by0) * stride + (ix0 - bx0) * 3;
    sp_status st = sp_slide_read_level_area(s, SP_PIXEL_RGB8, dst, stride, e->job->level, 1, ix0,
                                            iy0, ix1 - ix0, iy1 - iy0, shared);
    if (st != SP_OK) {
        const char *msg = sp_slide_error(s);
        return sp_err_set(err, st, "reading level %d at (%lld, %lld): %s", (int)e->job->level,
                          (long long)ix0, (long long)iy0, msg ? msg : sp_status_str(st));
    }
    if (ix0 > bx0 || ix1 < bx0 + bw) {
        for (int64_t y = iy0; y < iy1; y++) {
            uint8_t *row = buf + (y - by0) * stride;
            for (int64_t x = bx0; x < ix0; x++) {
                memcpy(row + (x - bx0) * 3, row + (reflect(x, g->width) - bx0) * 3, 3);
            }
            for (int64_t x = ix1; x < bx0 + bw; x++) {
                memcpy(row + (x - bx0) * 3, row + (reflect(x, g->width) - bx0) * 3, 3);
            }
        }
    }
    for (int64_t y = by0; y < by0 + bh; y++) {
        if (y < iy0 || y >= iy1) {
            memcpy(buf + (y - by0) * stride, buf + (reflect(y, g->height) - by0) * stride,
                   (size_t)(bw * 3));
        }
    }
    return SP_OK;
}

/* ---- tile mode --------------------------------------------------------------------------- */

static void tile_rect(const geometry *g, int64_t t, int64_t *x0, int64_t *y0, int64_t *w,
                      int64_t *h) {
    *x0 = (t % g->cols) * g->chunk;
    *y0 = (t / g->cols) * g->chunk;
    *w = g->width - *x0 < g->chunk ? g->width - *x0 : g->chunk;
    *h = g->height - *y0 < g->chunk ? g->height - *y0 : g->chunk;
}

static sp_status compute_tile(engine *e, const slot *sl, float *scratch, uint8_t *chunk,
                              sp_cuda_op_runner *gpu, sp_err *err) {
    const geometry *g = &e->g;
    const sp_op *op = e->job->op;
    int64_t x0, y0, w, h;
    tile_rect(g, sl->tile, &x0, &y0, &w, &h);
    int64_t stride = (w + 2 * g->halo) * 3;
    if (w < g->chunk || h < g->chunk) {
        memset(chunk, 0, g->chunk_bytes);
    }
    sp_op_block b = {
        .src = sl->pixels + g->halo * stride + g->halo * 3,
        .src_stride = stride,
        .width = w,
        .height = h,
        .dst = chunk,
        .dst_stride = g->chunk,
        .dst_plane = g->chunk * g->chunk,
        .scratch = scratch,
    };
    sp_status st = gpu != NULL ? sp_cuda_op_runner_run(gpu, &b, err) : op->cpu(&e->job->params, &b);
    if (st != SP_OK) {
        return gpu != NULL ? st : sp_err_set(err, st, "op %s failed", op->name);
    }
    return e->job->sink(e->job->sink_ctx, sl->tile / g->cols, sl->tile % g->cols, chunk, err);
}

static void *tile_worker(void *arg) {
    engine *e = arg;
    const geometry *g = &e->g;
    const sp_op *op = e->job->op;
    size_t nscratch =
        op->scratch_floats ? op->scratch_floats(&e->job->params, g->chunk, g->chunk) : 0;
    float *scratch = nscratch ? malloc(nscratch * sizeof(float)) : NULL;
    uint8_t *chunk = malloc(g->chunk_bytes);
    sp_cuda_op_runner *gpu = NULL;
    sp_err setup = {0};
    if ((nscratch && scratch == NULL) || chunk == NULL) {
        sp_err_set(&setup, SP_E_NOMEM, "out of memory for a worker's buffers");
    } else if (e->job->cuda) {
        sp_cuda_op_runner_create(op, &e->job->params, g->chunk, &gpu, &setup);
    }
    if (setup.status != SP_OK) {
        fail(e, &setup);
        free(scratch);
        free(chunk);
        return NULL;
    }
    pthread_mutex_lock(&e->lock);
    for (;;) {
        if (e->failed) {
            break;
        }
        /* Compute first: it frees a slot. Take the lowest ready tile, so output advances in
         * order and the store's memory for pending shards stays small. */
        slot *ready = NULL, *free_slot = NULL;
        for (int i = 0; i < e->n_slots; i++) {
            slot *s = &e->slots[i];
            if (s->state == SLOT_READY && (ready == NULL || s->tile < ready->tile)) {
                ready = s;
            } else if (s->state == SLOT_FREE && free_slot == NULL) {
                free_slot = s;
            }
        }
        if (ready != NULL) {
            ready->state = SLOT_COMPUTING;
            pthread_mutex_unlock(&e->lock);
            sp_err err = {0};
            sp_status st = compute_tile(e, ready, scratch, chunk, gpu, &err);
            if (st != SP_OK) {
                fail(e, &err);
            }
            pthread_mutex_lock(&e->lock);
            ready->state = SLOT_FREE;
            e->held--;
            e->done++;
            pthread_cond_broadcast(&e->changed);
            pthread_mutex_unlock(&e->lock);
            report_progress(e);
            pthread_mutex_lock(&e->lock);
            continue;
        }
        if (free_slot != NULL && e->next_tile < g->tiles) {
            free_slot->state = SLOT_READING;
            free_slot->tile = e->next_tile++;
            if (++e->held > e->max_held) {
                e->max_held = e->held;
            }
            pthread_mutex_unlock(&e->lock);
            int64_t x0, y0, w, h;
            tile_rect(g, free_slot->tile, &x0, &y0, &w, &h);
            int64_t bw = w + 2 * g->halo, bh = h + 2 * g->halo;
            sp_err err = {0};
            sp_status st = read_block(e, free_slot->pixels, bw * 3, x0 - g->halo, y0 - g->halo, bw,
                                      bh, 2 * (int64_t)g->halo, &err);
            if (st != SP_OK) {
                fail(e, &err);
            }
            pthread_mutex_lock(&e->lock);
            /* A tile that could not be read is never computed: its slot goes back. */
            free_slot->state = st == SP_OK ? SLOT_READY : SLOT_FREE;
            if (st != SP_OK) {
                e->held--;
            }
            pthread_cond_broadcast(&e->changed);
            continue;
        }
        if (e->next_tile >= g->tiles) {
            bool busy = false;
            for (int i = 0; i < e->n_slots; i++) {
                busy |= e->slots[i].state == SLOT_READING;
            }
            if (!busy) {
                break; /* nothing left to read; what is being computed is someone else's */
            }
        }
        pthread_cond_wait(&e->changed, &e->lock);
    }
    pthread_mutex_unlock(&e->lock);
    sp_cuda_op_runner_destroy(gpu);
    free(scratch);
    free(chunk);
    return NULL;
}

/* Run `n` copies of a worker loop on the library's thread pool (or the host's) and wait for
 * them. A pool that runs fewer at once, even one, is still correct: a worker only waits while
 * another is reading. */
static void run_workers(engine *e, int n, void *(*fn)(void *)) {
    e->worker_fn = fn;
    sp_pool_run((size_t)n, n, worker_item, e);
}

static sp_status run_tiles(engine *e, sp_err *err) {
    const geometry *g = &e->g;
    int threads = e->job->threads;
    e->n_slots = e->job->in_flight > 0 ? e->job->in_flight : 2 * threads;
    if (e->n_slots < 1) {
        e->n_slots = 1;
    }
    if (e->n_slots > g->tiles) {
        e->n_slots = (int)g->tiles;
    }
    int64_t side = g->chunk + 2 * g->halo;
    size_t slot_bytes = (size_t)(side * side * 3);
    e->slots = calloc((size_t)e->n_slots, sizeof *e->slots);
    if (e->slots == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory for the tile slots");
    }
    for (int i = 0; i < e->n_slots; i++) {
        e->slots[i].pixels = malloc(slot_bytes);
        if (e->slots[i].pixels == NULL) {
            return sp_err_set(err, SP_E_NOMEM, "out of memory for %d tiles of %lld x %lld",
                              e->n_slots, (long long)side, (long long)side);
        }
    }
    run_workers(e, threads, tile_worker);
    if (e->failed) {
        *err = e->err;
        return e->err.status;
    }
    return SP_OK;
}

/* ---- global mode ------------------------------------------------------------------------- */

static void *global_worker(void *arg) {
    engine *e = arg;
    const geometry *g = &e->g;
    const sp_op *op = e->job->op;
    size_t nscratch =
        op->scratch_floats ? op->scratch_floats(&e->job->params, g->width, GLOBAL_STRIPE) : 0;
    float *scratch = nscratch ? malloc(nscratch * sizeof(float)) : NULL;
    uint8_t *chunk = malloc(g->chunk_bytes);
    if ((nscratch && scratch == NULL) || chunk == NULL) {
        sp_err err = {0};
        sp_err_set(&err, SP_E_NOMEM, "out of memory for a worker's buffers");
        fail(e, &err);
    } else {
        for (;;) {
            int64_t t = atomic_fetch_add(&e->next_task, 1);
            if (t >= e->n_tasks || failed(e)) {
                break;
            }
            e->task(e, t, scratch, chunk);
        }
    }
    free(scratch);
    free(chunk);
    return NULL;
}

static sp_status global_phase(engine *e, int64_t n,
                              void (*task)(engine *, int64_t, float *, uint8_t *), sp_err *err) {
    atomic_store(&e->next_task, 0);
    e->n_tasks = n;
    e->task = task;
    run_workers(e, e->job->threads, global_worker);
    if (e->failed) {
        *err = e->err;
        return e->err.status;
    }
    return SP_OK;
}

/* Task t: read level rows [t R, (t + 1) R) into the padded whole-level buffer, R = the level's
 * storage tile height (read_rows), so every storage tile is decoded once; the border columns are
 * reflected here, the border rows once all rows are in (see run_global). */
static void global_read(engine *e, int64_t t, float *scratch, uint8_t *chunk) {
    (void)scratch;
    (void)chunk;
    const geometry *g = &e->g;
    int64_t bw = g->width + 2 * g->halo;
    int64_t y0 = t * e->read_rows;
    int64_t rows = g->height - y0 < e->read_rows ? g->height - y0 : e->read_rows;
    sp_err err = {0};
    uint8_t *row0 = e->whole + (y0 + g->halo) * bw * 3;
    if (read_block(e, row0, bw * 3, -g->halo, y0, bw, rows, 0, &err) != SP_OK) {
        fail(e, &err);
    }
}

/* Task t: the op over output rows [t S, (t + 1) S) of the whole level. */
static void global_compute(engine *e, int64_t t, float *scratch, uint8_t *chunk) {
    (void)chunk;
    const geometry *g = &e->g;
    int64_t bw = g->width + 2 * g->halo;
    int64_t y0 = t * GLOBAL_STRIPE;
    int64_t rows = g->height - y0 < GLOBAL_STRIPE ? g->height - y0 : GLOBAL_STRIPE;
    sp_op_block b = {
        .src = e->whole + (y0 + g->halo) * bw * 3 + g->halo * 3,
        .src_stride = bw * 3,
        .width = g->width,
        .height = rows,
        .dst = (uint8_t *)e->whole_out + (size_t)(y0 * g->width) * g->elem,
        .dst_stride = g->width,
        .dst_plane = g->width * g->height,
        .scratch = scratch,
    };
    sp_err err = {0};
    sp_status st = e->job->op->cpu(&e->job->params, &b);
    if (st != SP_OK) {
        sp_err_set(&err, st, "op %s failed", e->job->op->name);
        fail(e, &err);
    }
}

/* Task t: copy chunk t out of the whole-level output and hand it to the sink. */
static void global_sink(engine *e, int64_t t, float *scratch, uint8_t *chunk) {
    (void)scratch;
    const geometry *g = &e->g;
    int64_t x0, y0, w, h;
    tile_rect(g, t, &x0, &y0, &w, &h);
    if (w < g->chunk || h < g->chunk) {
        memset(chunk, 0, g->chunk_bytes);
    }
    int channels = e->job->op->channels;
    for (int c = 0; c < channels; c++) {
        for (int64_t y = 0; y < h; y++) {
            const uint8_t *src =
                (const uint8_t *)e->whole_out +
                ((size_t)c * (size_t)(g->width * g->height) + (size_t)((y0 + y) * g->width + x0)) *
                    g->elem;
            memcpy(chunk + ((size_t)c * (size_t)(g->chunk * g->chunk) + (size_t)(y * g->chunk)) *
                               g->elem,
                   src, (size_t)w * g->elem);
        }
    }
    sp_err err = {0};
    if (e->job->sink(e->job->sink_ctx, t / g->cols, t % g->cols, chunk, &err) != SP_OK) {
        fail(e, &err);
        return;
    }
    pthread_mutex_lock(&e->lock);
    e->done++;
    pthread_cond_broadcast(&e->changed);
    pthread_mutex_unlock(&e->lock);
    report_progress(e);
}

static sp_status run_global(engine *e, uint64_t *bytes, sp_err *err) {
    const geometry *g = &e->g;
    int64_t bw = g->width + 2 * g->halo, bh = g->height + 2 * g->halo;
    uint64_t in_bytes, out_bytes;
    if (!sp_mul_u64((uint64_t)bw * 3, (uint64_t)bh, &in_bytes) ||
        !sp_mul_u64((uint64_t)(g->width * g->height), (uint64_t)e->job->op->channels * g->elem,
                    &out_bytes) ||
        in_bytes > SIZE_MAX / 2 || out_bytes > SIZE_MAX / 2) {
        return sp_err_set(err, SP_E_LIMIT, "the level is too large to hold in memory");
    }
    e->whole = malloc((size_t)in_bytes);
    e->whole_out = malloc((size_t)out_bytes);
    if (e->whole == NULL || e->whole_out == NULL) {
        return sp_err_set(err, SP_E_NOMEM,
                          "out of memory: the global mode needs %.2f GiB for a %lld x %lld level",
                          (double)(in_bytes + out_bytes) / 1073741824.0, (long long)g->width,
                          (long long)g->height);
    }
    *bytes = in_bytes + out_bytes;
    int64_t tw = 0, th = 0;
    sp_slide_level_tile_size(e->job->slide, e->job->level, &tw, &th);
    e->read_rows = th >= 16 && th <= 4096 ? th : 256;
    sp_status st = global_phase(e, (g->height + e->read_rows - 1) / e->read_rows, global_read, err);
    if (st != SP_OK) {
        return st;
    }
    /* The border rows, reflected from level rows now all in memory. */
    for (int64_t y = -g->halo; y < g->height + g->halo; y++) {
        if (y < 0 || y >= g->height) {
            memcpy(e->whole + (y + g->halo) * bw * 3,
                   e->whole + (reflect(y, g->height) + g->halo) * bw * 3, (size_t)(bw * 3));
        }
    }
    st = global_phase(e, (g->height + GLOBAL_STRIPE - 1) / GLOBAL_STRIPE, global_compute, err);
    if (st != SP_OK) {
        return st;
    }
    atomic_store(&e->next_task, 0);
    e->n_tasks = g->tiles;
    e->task = global_sink;
    run_workers(e, e->job->threads, global_worker);
    if (e->failed) {
        *err = e->err;
        return e->err.status;
    }
    return SP_OK;
}

/* ---- row mode --------------------------------------------------------------------------- */

/* A level whose storage tiles are too large for the tile cache would have each tile decoded again
 * for every chunk it touches. Row mode reads it instead in bands of whole tile rows, each band
 * with one read (so each tile is decoded once), and keeps the last rows in a ring of `ring_n`
 * level rows from which the chunks of a chunk row are built (halo reflected as in tile mode) as
 * soon as the rows they need are in; the chunks of a chunk row are computed on the library's
 * thread pool. Memory: one band of tile rows plus the ring, both the level's width. */

typedef struct kit {
    uint8_t *block; /* (chunk + 2 halo)² RGB8 */
    uint8_t *chunk;
    float *scratch;
} kit;

typedef struct rows_run {
    engine *e;
    uint8_t *ring; /* level row y at (y % ring_n) * width * 3 */
    int64_t ring_n;
    int64_t chunk_row; /* the chunk row being computed */
    kit *kits;         /* one per thread, handed out under the engine's lock */
    int n_kits, free_kits;
} rows_run;

/* The level rows chunk row r needs, [lo, hi): its rows and halo, reflected into the level. */
static void rows_needed(const geometry *g, int64_t r, int64_t *lo, int64_t *hi) {
    int64_t y0 = r * g->chunk, h = g->height - y0 < g->chunk ? g->height - y0 : g->chunk;
    *lo = g->height;
    *hi = 0;
    for (int64_t y = y0 - g->halo; y < y0 + h + g->halo; y++) {
        int64_t m = reflect(y, g->height);
        *lo = m < *lo ? m : *lo;
        *hi = m + 1 > *hi ? m + 1 : *hi;
    }
}

static void rows_chunk(void *user, size_t col) {
    rows_run *rr = user;
    engine *e = rr->e;
    const geometry *g = &e->g;
    if (failed(e)) {
        return;
    }
    pthread_mutex_lock(&e->lock);
    kit k = rr->kits[--rr->free_kits]; /* by value: the stack's slot is reused meanwhile */
    pthread_mutex_unlock(&e->lock);
    int64_t x0, y0, w, h, t = rr->chunk_row * g->cols + (int64_t)col;
    tile_rect(g, t, &x0, &y0, &w, &h);
    int64_t bw = w + 2 * g->halo, stride = bw * 3;
    for (int64_t j = 0; j < h + 2 * g->halo; j++) {
        const uint8_t *src = rr->ring + (reflect(y0 - g->halo + j, g->height) % rr->ring_n) *
                                            g->width * 3;
        uint8_t *dst = k.block + j * stride;
        for (int64_t i = 0; i < bw; i++) {
            int64_t x = x0 - g->halo + i;
            if (x >= 0 && x < g->width) {
                int64_t run = (x0 + w + g->halo < g->width ? x0 + w + g->halo : g->width) - x;
                memcpy(dst + i * 3, src + x * 3, (size_t)(run * 3));
                i += run - 1;
            } else {
                memcpy(dst + i * 3, src + reflect(x, g->width) * 3, 3);
            }
        }
    }
    slot sl = {.state = SLOT_COMPUTING, .tile = t, .pixels = k.block};
    sp_err err = {0};
    if (compute_tile(e, &sl, k.scratch, k.chunk, NULL, &err) != SP_OK) {
        fail(e, &err);
    }
    pthread_mutex_lock(&e->lock);
    rr->kits[rr->free_kits++] = k;
    e->done++;
    pthread_mutex_unlock(&e->lock);
}

/* Compute every chunk row whose rows are all in the ring (rows [0, have) of the level read). */
static void rows_compute_ready(rows_run *rr, int64_t have) {
    engine *e = rr->e;
    const geometry *g = &e->g;
    int64_t lo, hi;
    while (rr->chunk_row < g->rows && !failed(e)) {
        rows_needed(g, rr->chunk_row, &lo, &hi);
        if (hi > have) {
            return;
        }
        sp_pool_run((size_t)g->cols, rr->n_kits, rows_chunk, rr);
        rr->chunk_row++;
        report_progress(e);
    }
}

static sp_status run_rows(engine *e, uint64_t *bytes, sp_err *err) {
    const geometry *g = &e->g;
    int64_t tw = 0, th = 0;
    sp_slide_level_tile_size(e->job->slide, e->job->level, &tw, &th);
    th = th > 0 && th < g->height ? th : g->height;
    rows_run rr = {.e = e, .n_kits = e->job->threads};
    for (int64_t r = 0; r < g->rows; r++) {
        int64_t lo, hi;
        rows_needed(g, r, &lo, &hi);
        rr.ring_n = hi - lo > rr.ring_n ? hi - lo : rr.ring_n;
    }
    /* A row enters the ring before the chunk rows it completes run: one row more. */
    rr.ring_n = rr.ring_n + 1 < g->height ? rr.ring_n + 1 : g->height;
    uint64_t row_bytes = (uint64_t)g->width * 3, band_bytes, ring_bytes;
    if (!sp_mul_u64(row_bytes, (uint64_t)th, &band_bytes) ||
        !sp_mul_u64(row_bytes, (uint64_t)rr.ring_n, &ring_bytes) ||
        band_bytes + ring_bytes > (uint64_t)e->job->slide->limits.value[SP_LIMIT_MAX_ALLOC]) {
        return sp_err_set(err, SP_E_LIMIT,
                          "level %d: a band of %lld rows of %lld pixels is over the allocation limit",
                          (int)e->job->level, (long long)th, (long long)g->width);
    }
    *bytes = band_bytes + ring_bytes;
    uint8_t *band = malloc((size_t)band_bytes);
    rr.ring = malloc((size_t)ring_bytes);
    rr.kits = calloc((size_t)rr.n_kits, sizeof *rr.kits);
    const sp_op *op = e->job->op;
    size_t nscratch =
        op->scratch_floats ? op->scratch_floats(&e->job->params, g->chunk, g->chunk) : 0;
    int64_t side = g->chunk + 2 * g->halo;
    bool ok = band != NULL && rr.ring != NULL && rr.kits != NULL;
    for (int i = 0; ok && i < rr.n_kits; i++) {
        kit *k = &rr.kits[i];
        k->block = malloc((size_t)(side * side * 3));
        k->chunk = malloc(g->chunk_bytes);
        k->scratch = nscratch ? malloc(nscratch * sizeof(float)) : NULL;
        ok = k->block != NULL && k->chunk != NULL && (nscratch == 0 || k->scratch != NULL);
        rr.free_kits++;
    }
    sp_status st = ok ? SP_OK : sp_err_set(err, SP_E_NOMEM, "out of memory for bands of level %d",
                                           (int)e->job->level);
    for (int64_t y0 = 0; st == SP_OK && y0 < g->height && !failed(e); y0 += th) {
        int64_t n = g->height - y0 < th ? g->height - y0 : th;
        st = read_block(e, band, (int64_t)row_bytes, 0, y0, g->width, n, 0, err);
        for (int64_t y = y0; st == SP_OK && y < y0 + n && !failed(e); y++) {
            memcpy(rr.ring + (y % rr.ring_n) * (int64_t)row_bytes, band + (y - y0) * (int64_t)row_bytes,
                   (size_t)row_bytes);
            rows_compute_ready(&rr, y + 1);
        }
    }
    for (int i = 0; rr.kits != NULL && i < rr.n_kits; i++) {
        free(rr.kits[i].block);
        free(rr.kits[i].chunk);
        free(rr.kits[i].scratch);
    }
    free(rr.kits);
    free(rr.ring);
    free(band);
    if (st == SP_OK && e->failed) {
        *err = e->err;
        st = e->err.status;
    }
    return st;
}

/* ---- entry ------------------------------------------------------------------------------- */

sp_status sp_engine_run(const sp_engine_job *job, sp_engine_stats *stats, sp_err *err) {
    if (stats != NULL) {
        memset(stats, 0, sizeof *stats);
    }
    if (job == NULL || job->slide == NULL || job->op == NULL || job->sink == NULL ||
        job->chunk < 1 || job->threads < 1) {
        return sp_err_set(err, SP_E_INVALID_ARG, "sp_engine_run: bad job");
    }
    engine e = {0};
    e.job = job;
    geometry *g = &e.g;
    sp_status st = sp_slide_level_dimensions(job->slide, job->level, &g->width, &g->height);
    if (st == SP_OK) {
        st = sp_slide_level_downsample(job->slide, job->level, &g->downsample);
    }
    if (st != SP_OK) {
        return sp_err_set(err, SP_E_INVALID_ARG, "level %d does not exist (the slide has %d)",
                          (int)job->level, (int)sp_slide_level_count(job->slide));
    }
    if (g->width <= 0 || g->height <= 0) {
        return sp_err_set(err, SP_E_INVALID_ARG, "level %d is empty", (int)job->level);
    }
    g->chunk = job->chunk;
    g->cols = (g->width + g->chunk - 1) / g->chunk;
    g->rows = (g->height + g->chunk - 1) / g->chunk;
    g->tiles = g->cols * g->rows;
    g->halo = job->op->halo(&job->params);
    g->elem = job->op->output == SP_ZARR_F32 ? 4 : 1;
    g->chunk_bytes = (size_t)job->op->channels * (size_t)(g->chunk * g->chunk) * g->elem;
    pthread_mutex_init(&e.lock, NULL);
    pthread_mutex_init(&e.progress_lock, NULL);
    pthread_cond_init(&e.changed, NULL);
    uint64_t bytes = 0;
    int64_t tw = 0, th = 0;
    sp_slide_level_tile_size(job->slide, job->level, &tw, &th);
    bool rows = job->rows || (!job->global && !job->cuda && !sp_tile_cache_admits(tw, th));
    if (job->global) {
        st = run_global(&e, &bytes, err);
    } else if (rows) {
        st = run_rows(&e, &bytes, err);
    } else {
        st = run_tiles(&e, err);
        int64_t side = g->chunk + 2 * g->halo;
        bytes = (uint64_t)e.n_slots * (uint64_t)(side * side * 3);
    }
    if (stats != NULL) {
        stats->tiles = e.done;
        stats->max_in_flight = e.max_held;
        stats->buffer_bytes = bytes;
    }
    for (int i = 0; e.slots != NULL && i < e.n_slots; i++) {
        free(e.slots[i].pixels);
    }
    free(e.slots);
    free(e.whole);
    free(e.whole_out);
    pthread_cond_destroy(&e.changed);
    pthread_mutex_destroy(&e.progress_lock);
    pthread_mutex_destroy(&e.lock);
    return st;
}
