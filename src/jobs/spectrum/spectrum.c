/* spectrum.c — sp_spectrum_compute: one slide's spectral statistics, as an op plus a reducing
 * sink on the tile engine.
 *
 * The engine (engine/engine.h) walks the level in square chunks: its workers read each chunk
 * (through the slide's tile cache), run sp_op_spectrum_grey on it (RGB8 to the reference's float
 * grey values) and hand the grey chunk to reduce_chunk below, concurrently; the engine bounds
 * the chunks in flight and reads the next ones while others are transformed. The sink
 * transforms every full patch of its chunk with a spectrum kernel (FFT buffers and a working
 * histogram) that it takes from a free list under a lock and gives back afterwards. The engine
 * does not say which worker calls, and at most `threads` calls run at once, so `threads`
 * kernels suffice; one kernel per chunk column instead would grow with the slide's width (half
 * a megabyte each at P = 256) and would still need a lock, since two chunk rows of one column
 * can be in the sink at once.
 *
 * Determinism: the chunk side is the column piece this job has always cut the level into
 * (about 1024 columns, a multiple of the patch and, when the least common multiple is small, of
 * the tile width: piece_width), and each (patch row, chunk column) has its own sums, which one
 * sink call alone adds to, patch by patch from left to right. They are added in raster order at
 * the end, and histograms are integer counts; so the same float additions happen in the same
 * order whatever the thread count, the read-ahead or the block. Only full patches count: the
 * parts of the chunks over the level's partial right and bottom edge are ignored.
 *
 * The block B (a multiple of the patch) is the read-ahead: the engine may hold up to ceil(B /
 * chunk) rows of chunks, at least threads + 1 chunks and, when more than that, at most
 * SP_SPECTRUM_BUFFER_BYTES of them. Memory is therefore bounded by the in-flight chunks (3 bytes
 * a pixel), one float chunk per worker (4 bytes a pixel), one kernel per worker and 16 bytes
 * per (patch row, chunk column); never by the slide's size.
 */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cuda/cuda_spectrum.h"
#include "engine/engine.h"
#include "jobs/spectrum/spectrum_options.h"
#include "ops/spectrum_grey.h"
#include "ops/spectrum_kernel.h"

/* The most memory the read-ahead chunks may take, unless threads + 1 chunks need more. */
#define SP_SPECTRUM_BUFFER_BYTES ((int64_t)512 << 20)

/* What to analyse and how the level is cut. */
typedef struct layout {
    sp_slide *slide;
    int32_t level;
    double downsample;
    int patch;
    int64_t block; /* B, a multiple of the patch: the read-ahead in rows */
    int64_t level_width, level_height;
    int64_t width, height; /* the part of the level covered by full patches */
    int64_t chunk;         /* the engine's chunk side = the piece width */
    int64_t pieces, rows;  /* chunk columns holding full patches; patch rows */
} layout;

/* The reducing sink's state, shared by the engine's workers. */
typedef struct reducer {
    const layout *l;
    sp_spectrum_sums *sums; /* per (patch row, chunk column), [row * pieces + column] */
    fftwf_plan plan;
    pthread_mutex_t lock; /* guards idle, n_idle, compute_seconds */
    sp_spectrum_kernel *kernels;
    sp_spectrum_kernel **idle; /* free list (a stack) of kernels */
    int n_kernels, n_idle;
    double compute_seconds;
} reducer;

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int64_t gcd64(int64_t a, int64_t b) {
    while (b != 0) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Column pieces: about 1024 columns, a multiple of the patch and, when the least common
 * multiple is small, of the tile width, so that no tile is decoded twice for one row of chunks.
 * The statistics' sums are kept per piece, so this width is part of their definition: changing
 * it would change the last bits of the mean. */
static int64_t piece_width(int patch, int64_t tile_width, int64_t covered) {
    int64_t unit = patch;
    if (tile_width > 0 && tile_width <= 4096) {
        int64_t lcm = patch / gcd64(patch, tile_width) * tile_width;
        if (lcm <= 4096) {
            unit = lcm;
        }
    }
    int64_t w = unit * ((1024 + unit - 1) / unit);
    return w < covered ? w : covered;
}

/* The sink: transform the full patches of one grey chunk (chunk x chunk floats, zeros past the
 * level's edge) into its (patch row, chunk column) sums and a kernel's histogram. */
static sp_status reduce_chunk(void *ctx, int64_t chunk_row, int64_t chunk_col, const void *chunk,
                              sp_err *err) {
    reducer *r = ctx;
    const layout *l = r->l;
    int64_t per_chunk = l->chunk / l->patch;
    int64_t row0 = chunk_row * per_chunk;
    if (chunk_col >= l->pieces || row0 >= l->rows) {
        return SP_OK; /* past the last full patch */
    }
    pthread_mutex_lock(&r->lock);
    sp_spectrum_kernel *k = r->n_idle > 0 ? r->idle[--r->n_idle] : NULL;
    pthread_mutex_unlock(&r->lock);
    if (k == NULL) {
        return sp_err_set(err, SP_E_INVALID_ARG,
                          "spectrum: more chunks at once than the %d workers", r->n_kernels);
    }
    double t0 = now_seconds();
    const float *grey = chunk;
    int64_t x0 = chunk_col * l->chunk;
    int64_t across = (l->width - x0 < l->chunk ? l->width - x0 : l->chunk) / l->patch;
    int64_t down = l->rows - row0 < per_chunk ? l->rows - row0 : per_chunk;
    for (int64_t py = 0; py < down; py++) {
        /* Only this call adds to this (row, column) entry: no lock needed. */
        sp_spectrum_sums *sums = &r->sums[(row0 + py) * l->pieces + chunk_col];
        const float *line = grey + py * l->patch * l->chunk;
        for (int64_t px = 0; px < across; px++) {
            sp_spectrum_patch_grey(k, line + px * l->patch, l->chunk, sums);
        }
    }
    double dt = now_seconds() - t0;
    pthread_mutex_lock(&r->lock);
    r->idle[r->n_idle++] = k;
    r->compute_seconds += dt;
    pthread_mutex_unlock(&r->lock);
    return SP_OK;
}

static sp_status set_error(char *err, size_t err_len, sp_status st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static sp_status set_error(char *err, size_t err_len, sp_status st, const char *fmt, ...) {
    if (err != NULL && err_len > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, err_len, fmt, ap);
        va_end(ap);
    }
    return st;
}

/* Check the options against the slide and cut the level. */
static sp_status plan_layout(layout *l, sp_slide *slide, const sp_spectrum_options *o, char *err,
                             size_t err_len) {
    int64_t level = o->value[SP_SPECTRUM_LEVEL];
    l->patch = (int)o->value[SP_SPECTRUM_PATCH];
    l->block = o->value[SP_SPECTRUM_BLOCK];
    if (l->block % l->patch != 0) {
        return set_error(err, err_len, SP_E_INVALID_ARG,
                         "the block (%lld rows) must be a multiple of the patch (%d)",
                         (long long)l->block, l->patch);
    }
    if (level >= sp_slide_level_count(slide)) {
        return set_error(err, err_len, SP_E_INVALID_ARG, "level %lld does not exist (%d levels)",
                         (long long)level, (int)sp_slide_level_count(slide));
    }
    l->slide = slide;
    l->level = (int32_t)level;
    int64_t w = 0, h = 0, tw = 0, th = 0;
    sp_slide_level_dimensions(slide, l->level, &w, &h);
    sp_slide_level_downsample(slide, l->level, &l->downsample);
    sp_slide_level_tile_size(slide, l->level, &tw, &th);
    l->level_width = w;
    l->level_height = h;
    l->width = w / l->patch * l->patch;
    l->height = h / l->patch * l->patch;
    if (l->width == 0 || l->height == 0) {
        return set_error(err, err_len, SP_E_INVALID_ARG,
                         "level %d (%lldx%lld) is smaller than one %dx%d patch", (int)l->level,
                         (long long)w, (long long)h, l->patch, l->patch);
    }
    l->chunk = piece_width(l->patch, tw, l->width);
    l->pieces = (l->width + l->chunk - 1) / l->chunk;
    l->rows = l->height / l->patch;
    return SP_OK;
}

/* The GPU path (cuFFT, src/cuda/cuda_spectrum.c) over the same pieces, in strips of B rows: the
 * pieces of each strip are read on `threads` threads while the GPU transforms the previous
 * strip. */
static sp_status compute_on_gpu(const layout *l, int threads, sp_progress_fn progress, void *user,
                                sp_spectrum_stats *out, char *err, size_t err_len) {
    sp_cuda_spectrum_job g = {
        .slide = l->slide,
        .level = l->level,
        .downsample = l->downsample,
        .patch = l->patch,
        .width = l->width,
        .height = l->height,
        .strip_rows = l->block,
        .piece_cols = l->chunk,
        .threads = threads,
        .progress = progress,
        .progress_user = user,
    };
    sp_err e = {0};
    sp_status st = sp_cuda_spectrum(&g, out, &e);
    if (st != SP_OK) {
        sp_spectrum_stats_init(out);
        set_error(err, err_len, st, "%s", e.msg);
    }
    return st;
}

/* Chunks the engine may hold at once (see the top of the file). */
static int in_flight(const layout *l, int threads) {
    int64_t cols = (l->level_width + l->chunk - 1) / l->chunk;
    int64_t rows = (l->block + l->chunk - 1) / l->chunk;
    int64_t n = rows * cols;
    int64_t cap = SP_SPECTRUM_BUFFER_BYTES / (l->chunk * l->chunk * 3);
    if (n > cap) {
        n = cap;
    }
    if (n < (int64_t)threads + 1) {
        n = (int64_t)threads + 1;
    }
    return (int)n; /* at most 512 MiB / 48 bytes, or 1025 */
}

/* Run the engine with the reducing sink; the sums and histograms go into `out`. */
static sp_status compute_on_cpu(const layout *l, int threads, sp_progress_fn progress, void *user,
                                sp_spectrum_stats *out, char *err, size_t err_len) {
    reducer r = {.l = l};
    r.sums = calloc((size_t)(l->rows * l->pieces), sizeof *r.sums);
    r.kernels = calloc((size_t)threads, sizeof *r.kernels);
    r.idle = calloc((size_t)threads, sizeof *r.idle);
    r.plan = sp_spectrum_plan_create(l->patch);
    pthread_mutex_init(&r.lock, NULL);
    sp_status st = SP_OK;
    if (r.sums == NULL || r.kernels == NULL || r.idle == NULL) {
        st = set_error(err, err_len, SP_E_NOMEM, "out of memory");
    } else if (r.plan == NULL) {
        st = set_error(err, err_len, SP_E_NOMEM, "FFTW could not plan a %dx%d transform", l->patch,
                       l->patch);
    }
    for (int i = 0; st == SP_OK && i < threads; i++) {
        r.n_kernels++;
        if (sp_spectrum_kernel_init(&r.kernels[i], l->patch, r.plan) != SP_OK) {
            st = set_error(err, err_len, SP_E_NOMEM, "out of memory for FFT buffers");
        }
        r.idle[r.n_idle++] = &r.kernels[i];
    }
    double wall = 0;
    if (st == SP_OK) {
        sp_engine_job job = {
            .slide = l->slide,
            .level = l->level,
            .op = &sp_op_spectrum_grey,
            .chunk = l->chunk,
            .threads = threads,
            .in_flight = in_flight(l, threads),
            .sink = reduce_chunk,
            .sink_ctx = &r,
            .progress = progress,
            .progress_user = user,
        };
        sp_err e = {0};
        double t0 = now_seconds();
        st = sp_engine_run(&job, NULL, &e);
        wall = now_seconds() - t0;
        if (st != SP_OK) {
            set_error(err, err_len, st, "%s", e.msg);
        }
    }
    if (st == SP_OK) {
        int64_t hist[SP_SPECTRUM_SLOTS] = {0};
        for (int i = 0; i < r.n_kernels; i++) {
            for (int s = 0; s < SP_SPECTRUM_SLOTS; s++) {
                hist[s] += r.kernels[i].hist[s];
            }
        }
        out->patches = (l->width / l->patch) * l->rows;
        out->values = out->patches * (int64_t)l->patch * l->patch;
        out->below = hist[0];
        out->above = hist[SP_SPECTRUM_SLOTS - 1];
        memcpy(out->histogram, hist + 1, sizeof out->histogram);
        for (int64_t i = 0; i < l->rows * l->pieces; i++) {
            out->sum += r.sums[i].sum;
            out->sum_squares += r.sums[i].sum_squares;
        }
        /* The engine does not time its reads: the workers' time outside the transforms is
         * reading, decoding, the grey conversion and waiting. */
        double other = wall * threads - r.compute_seconds;
        out->read_seconds = other > 0 ? other : 0;
        out->compute_seconds = r.compute_seconds;
    }
    for (int i = 0; i < r.n_kernels; i++) {
        sp_spectrum_kernel_free(&r.kernels[i]);
    }
    sp_spectrum_plan_destroy(r.plan);
    pthread_mutex_destroy(&r.lock);
    free(r.kernels);
    free(r.idle);
    free(r.sums);
    return st;
}

sp_status sp_spectrum_compute(sp_slide *slide, const sp_spectrum_options *options,
                              sp_progress_fn progress, void *progress_user, sp_spectrum_stats *out,
                              char *err, size_t err_len) {
    if (out == NULL) {
        return set_error(err, err_len, SP_E_INVALID_ARG, "no statistics record given");
    }
    sp_spectrum_stats_init(out);
    if (slide == NULL) {
        return set_error(err, err_len, SP_E_INVALID_ARG, "no slide given");
    }
    sp_spectrum_options defaults;
    if (options == NULL) {
        sp_spectrum_options *d = NULL;
        if (sp_spectrum_options_create(&d) != SP_OK) {
            return set_error(err, err_len, SP_E_NOMEM, "out of memory");
        }
        defaults = *d;
        sp_spectrum_options_destroy(d);
        options = &defaults;
    }
    layout l = {0};
    sp_status st = plan_layout(&l, slide, options, err, err_len);
    if (st != SP_OK) {
        return st;
    }
    int64_t threads = options->value[SP_SPECTRUM_THREADS];
    if (threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? n : 1;
    }
    if (options->value[SP_SPECTRUM_DEVICE] == SP_DEVICE_CUDA) {
        return compute_on_gpu(&l, (int)threads, progress, progress_user, out, err, err_len);
    }
    /* More workers than chunks would only hold kernels that never run. */
    int64_t chunks =
        ((l.level_width + l.chunk - 1) / l.chunk) * ((l.level_height + l.chunk - 1) / l.chunk);
    if (threads > chunks) {
        threads = chunks;
    }
    return compute_on_cpu(&l, (int)threads, progress, progress_user, out, err, err_len);
}
