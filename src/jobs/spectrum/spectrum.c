/* spectrum.c — sp_spectrum_compute: one slide's spectral statistics, reading ahead while
 * transforming.
 *
 * The level's full patches form a grid. It is read in strips of B rows, each strip in column
 * pieces (a multiple of the patch, aligned to the tiles where that is cheap), so a block is
 * (strip, piece). A pool of threads shares the work: a thread reads the next block whenever
 * fewer than one strip's worth of blocks (at least one per thread) are read but not yet taken,
 * and otherwise transforms the oldest block read. Reading strip N+1 thus overlaps transforming
 * strip N, the cores never wait for one reader, and memory is bounded by the blocks in flight,
 * not by the slide. Reads go through the public sp_slide_read_region (RGB8), so this code gets
 * whatever the reader does to be fast.
 *
 * Determinism: each (patch row, piece) has its own sums, added in raster order at the end, and
 * histograms are integer counts; so the result does not depend on the thread count, on the
 * strip height, or on which thread took which block.
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

#include "base/level_coords.h"
#include "cuda/cuda_spectrum.h"
#include "jobs/spectrum/spectrum_options.h"
#include "ops/spectrum_kernel.h"

/* The most memory the read-ahead blocks may take, unless one block per thread needs more. */
#define SP_SPECTRUM_BUFFER_BYTES ((int64_t)512 << 20)

enum { BLOCK_UNREAD = 0, BLOCK_READING, BLOCK_READY, BLOCK_COMPUTING, BLOCK_DONE };

typedef struct job {
    sp_slide *slide;
    int32_t level;
    double downsample;
    int patch;
    int64_t strip_rows, piece_cols; /* B and the piece width, multiples of the patch */
    int64_t width, height;          /* the part of the level covered by full patches */
    int64_t strips, pieces, blocks;
    fftwf_plan plan;
    sp_progress_fn progress;
    void *progress_user;

    sp_spectrum_sums *sums; /* per (patch row, piece), [row * pieces + piece] */
    pthread_mutex_t lock;
    pthread_cond_t changed;
    uint8_t *state;         /* per block */
    uint8_t **buffer;       /* per block while it is read or computed */
    uint8_t **free_buffers; /* stack */
    int64_t n_free, n_allocated, max_buffers, lookahead;
    int64_t next_read, ahead, done, first_open; /* first_open: lowest block not yet taken */
    sp_status status;
    char message[SP_ERR_MSG_MAX];
    int64_t hist[SP_SPECTRUM_SLOTS];
    double read_seconds, compute_seconds;
} job;

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
 * multiple is small, of the tile width, so that no tile is decoded twice for one strip. */
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

static void block_geometry(const job *j, int64_t b, int64_t *x, int64_t *y, int64_t *w,
                           int64_t *h) {
    int64_t strip = b / j->pieces, piece = b % j->pieces;
    *x = piece * j->piece_cols;
    *y = strip * j->strip_rows;
    *w = j->width - *x < j->piece_cols ? j->width - *x : j->piece_cols;
    *h = j->height - *y < j->strip_rows ? j->height - *y : j->strip_rows;
}

static void fail(job *j, sp_status st, const char *msg) {
    if (j->status == SP_OK) {
        j->status = st;
        snprintf(j->message, sizeof j->message, "%s", msg);
    }
    pthread_cond_broadcast(&j->changed);
}

/* Under the lock: a buffer for a block read, or NULL when none may be had now. */
static uint8_t *take_buffer(job *j) {
    if (j->n_free > 0) {
        return j->free_buffers[--j->n_free];
    }
    if (j->n_allocated >= j->max_buffers) {
        return NULL;
    }
    uint8_t *buf = malloc((size_t)(j->strip_rows * j->piece_cols * 3));
    if (buf == NULL) {
        fail(j, SP_E_NOMEM, "out of memory for a block of pixels");
        return NULL;
    }
    j->n_allocated++;
    return buf;
}

static void read_block(job *j, int64_t b, uint8_t *buf, double *seconds) {
    int64_t x, y, w, h;
    block_geometry(j, b, &x, &y, &w, &h);
    double t0 = now_seconds();
    sp_status st = sp_slide_read_region(j->slide, SP_PIXEL_RGB8, buf, w * 3, j->level,
                                        sp_level0_coord(x, j->downsample),
                                        sp_level0_coord(y, j->downsample), w, h);
    *seconds += now_seconds() - t0;
    pthread_mutex_lock(&j->lock);
    if (st != SP_OK) {
        const char *msg = sp_slide_error(j->slide);
        fail(j, st, msg != NULL ? msg : sp_status_str(st));
    }
    j->state[b] = BLOCK_READY;
    pthread_cond_broadcast(&j->changed);
    pthread_mutex_unlock(&j->lock);
}

static void compute_block(job *j, sp_spectrum_kernel *k, int64_t b, const uint8_t *buf,
                          double *seconds) {
    int64_t x, y, w, h;
    block_geometry(j, b, &x, &y, &w, &h);
    double t0 = now_seconds();
    int64_t stride = w * 3, piece = b % j->pieces;
    for (int64_t py = 0; py < h / j->patch; py++) {
        int64_t row = y / j->patch + py;
        /* Only this thread writes this (row, piece) entry: no lock needed. */
        sp_spectrum_sums *sums = &j->sums[row * j->pieces + piece];
        for (int64_t px = 0; px < w / j->patch; px++) {
            sp_spectrum_patch(k, buf + py * j->patch * stride + px * j->patch * 3, stride, sums);
        }
    }
    *seconds += now_seconds() - t0;
}

/* One worker: read when the read-ahead has room, otherwise compute the oldest block read. */
static void run_worker(job *j, sp_spectrum_kernel *k) {
    double read_s = 0, compute_s = 0;
    pthread_mutex_lock(&j->lock);
    while (j->status == SP_OK && j->done < j->blocks) {
        if (j->next_read < j->blocks && j->ahead < j->lookahead) {
            uint8_t *buf = take_buffer(j);
            if (buf != NULL) {
                int64_t b = j->next_read++;
                j->state[b] = BLOCK_READING;
                j->buffer[b] = buf;
                j->ahead++;
                pthread_mutex_unlock(&j->lock);
                read_block(j, b, buf, &read_s);
                pthread_mutex_lock(&j->lock);
                continue;
            }
            if (j->status != SP_OK) {
                break;
            }
        }
        int64_t b = j->first_open;
        while (b < j->next_read && j->state[b] != BLOCK_READY) {
            b++;
        }
        if (b < j->next_read) {
            j->state[b] = BLOCK_COMPUTING;
            j->ahead--;
            while (j->first_open < j->next_read && j->state[j->first_open] >= BLOCK_COMPUTING) {
                j->first_open++;
            }
            uint8_t *buf = j->buffer[b];
            pthread_mutex_unlock(&j->lock);
            compute_block(j, k, b, buf, &compute_s);
            pthread_mutex_lock(&j->lock);
            j->state[b] = BLOCK_DONE;
            j->buffer[b] = NULL;
            j->free_buffers[j->n_free++] = buf;
            j->done++;
            if (j->progress != NULL) {
                j->progress(j->progress_user, j->done, j->blocks);
            }
            pthread_cond_broadcast(&j->changed);
            continue;
        }
        pthread_cond_wait(&j->changed, &j->lock);
    }
    for (int s = 0; s < SP_SPECTRUM_SLOTS; s++) {
        j->hist[s] += k->hist[s];
    }
    j->read_seconds += read_s;
    j->compute_seconds += compute_s;
    pthread_cond_broadcast(&j->changed);
    pthread_mutex_unlock(&j->lock);
}

typedef struct worker {
    job *j;
    sp_spectrum_kernel kernel;
    pthread_t thread;
    bool started;
} worker;

static void *worker_main(void *arg) {
    worker *w = arg;
    run_worker(w->j, &w->kernel);
    return NULL;
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

/* Check the options against the slide and lay out the blocks. */
static sp_status plan_job(job *j, sp_slide *slide, const sp_spectrum_options *o, char *err,
                          size_t err_len) {
    int64_t level = o->value[SP_SPECTRUM_LEVEL];
    j->patch = (int)o->value[SP_SPECTRUM_PATCH];
    j->strip_rows = o->value[SP_SPECTRUM_BLOCK];
    if (j->strip_rows % j->patch != 0) {
        return set_error(err, err_len, SP_E_INVALID_ARG,
                         "the block (%lld rows) must be a multiple of the patch (%d)",
                         (long long)j->strip_rows, j->patch);
    }
    if (level >= sp_slide_level_count(slide)) {
        return set_error(err, err_len, SP_E_INVALID_ARG, "level %lld does not exist (%d levels)",
                         (long long)level, (int)sp_slide_level_count(slide));
    }
    j->slide = slide;
    j->level = (int32_t)level;
    int64_t w = 0, h = 0, tw = 0, th = 0;
    sp_slide_level_dimensions(slide, j->level, &w, &h);
    sp_slide_level_downsample(slide, j->level, &j->downsample);
    sp_slide_level_tile_size(slide, j->level, &tw, &th);
    j->width = w / j->patch * j->patch;
    j->height = h / j->patch * j->patch;
    if (j->width == 0 || j->height == 0) {
        return set_error(err, err_len, SP_E_INVALID_ARG,
                         "level %d (%lldx%lld) is smaller than one %dx%d patch", (int)j->level,
                         (long long)w, (long long)h, j->patch, j->patch);
    }
    j->piece_cols = piece_width(j->patch, tw, j->width);
    j->strips = (j->height + j->strip_rows - 1) / j->strip_rows;
    j->pieces = (j->width + j->piece_cols - 1) / j->piece_cols;
    j->blocks = j->strips * j->pieces;
    return SP_OK;
}

/* The GPU path (cuFFT, src/cuda/cuda_spectrum.c) over the same layout: the pieces of each strip
 * are read on `threads` threads while the GPU transforms the previous strip. */
static sp_status compute_on_gpu(const job *j, int threads, sp_progress_fn progress, void *user,
                                sp_spectrum_stats *out, char *err, size_t err_len) {
    sp_cuda_spectrum_job g = {
        .slide = j->slide,
        .level = j->level,
        .downsample = j->downsample,
        .patch = j->patch,
        .width = j->width,
        .height = j->height,
        .strip_rows = j->strip_rows,
        .piece_cols = j->piece_cols,
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
    job *j = calloc(1, sizeof *j);
    if (j == NULL) {
        return set_error(err, err_len, SP_E_NOMEM, "out of memory");
    }
    sp_status st = plan_job(j, slide, options, err, err_len);
    if (st != SP_OK) {
        free(j);
        return st;
    }
    int64_t threads = options->value[SP_SPECTRUM_THREADS];
    if (threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? n : 1;
    }
    if (options->value[SP_SPECTRUM_DEVICE] == SP_DEVICE_CUDA) {
        st = compute_on_gpu(j, (int)threads, progress, progress_user, out, err, err_len);
        free(j);
        return st;
    }
    if (threads > j->blocks) {
        threads = j->blocks;
    }
    int64_t block_bytes = j->strip_rows * j->piece_cols * 3;
    j->lookahead = j->pieces > threads ? j->pieces : threads;
    j->max_buffers = j->lookahead + threads;
    int64_t cap = SP_SPECTRUM_BUFFER_BYTES / block_bytes;
    if (j->max_buffers > cap) {
        j->max_buffers = cap > threads + 1 ? cap : threads + 1;
    }
    j->progress = progress;
    j->progress_user = progress_user;
    int64_t rows = j->height / j->patch;
    j->sums = calloc((size_t)(rows * j->pieces), sizeof *j->sums);
    j->state = calloc((size_t)j->blocks, 1);
    j->buffer = calloc((size_t)j->blocks, sizeof *j->buffer);
    j->free_buffers = calloc((size_t)j->max_buffers, sizeof *j->free_buffers);
    worker *workers = calloc((size_t)threads, sizeof *workers);
    j->plan = sp_spectrum_plan_create(j->patch);
    pthread_mutex_init(&j->lock, NULL);
    pthread_cond_init(&j->changed, NULL);
    if (j->sums == NULL || j->state == NULL || j->buffer == NULL || j->free_buffers == NULL ||
        workers == NULL) {
        st = set_error(err, err_len, SP_E_NOMEM, "out of memory");
    } else if (j->plan == NULL) {
        st = set_error(err, err_len, SP_E_NOMEM, "FFTW could not plan a %dx%d transform", j->patch,
                       j->patch);
    }
    for (int64_t i = 0; st == SP_OK && i < threads; i++) {
        workers[i].j = j;
        if (sp_spectrum_kernel_init(&workers[i].kernel, j->patch, j->plan) != SP_OK) {
            st = set_error(err, err_len, SP_E_NOMEM, "out of memory for FFT buffers");
        }
    }
    if (st == SP_OK) {
        /* The calling thread is worker 0; if a thread cannot start, the others do its share. */
        for (int64_t i = 1; i < threads; i++) {
            workers[i].started =
                pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]) == 0;
        }
        run_worker(j, &workers[0].kernel);
        for (int64_t i = 1; i < threads; i++) {
            if (workers[i].started) {
                pthread_join(workers[i].thread, NULL);
            }
        }
        st = j->status;
        if (st != SP_OK) {
            set_error(err, err_len, st, "%s", j->message);
        }
    }
    if (st == SP_OK) {
        out->patches = (j->width / j->patch) * rows;
        out->values = out->patches * (int64_t)j->patch * j->patch;
        out->below = j->hist[0];
        out->above = j->hist[SP_SPECTRUM_SLOTS - 1];
        memcpy(out->histogram, j->hist + 1, sizeof out->histogram);
        for (int64_t i = 0; i < rows * j->pieces; i++) {
            out->sum += j->sums[i].sum;
            out->sum_squares += j->sums[i].sum_squares;
        }
        out->read_seconds = j->read_seconds;
        out->compute_seconds = j->compute_seconds;
    }
    for (int64_t i = 0; workers != NULL && i < threads; i++) {
        sp_spectrum_kernel_free(&workers[i].kernel);
    }
    for (int64_t i = 0; i < j->n_free; i++) {
        free(j->free_buffers[i]);
    }
    for (int64_t b = 0; j->buffer != NULL && b < j->blocks; b++) {
        free(j->buffer[b]); /* blocks left read but not computed after an error */
    }
    sp_spectrum_plan_destroy(j->plan);
    pthread_mutex_destroy(&j->lock);
    pthread_cond_destroy(&j->changed);
    free(workers);
    free(j->sums);
    free(j->state);
    free(j->buffer);
    free(j->free_buffers);
    free(j);
    return st;
}
