/* gpu_read.c — the timing program behind bench/bench_gpu.sh's read comparisons: it reads slide
 * pixels through the public API into GPU memory (sp_cuda_read_region) or, for the CPU baseline,
 * into host memory (sp_slide_read_region), on T threads with one CUDA context each, and prints one
 * JSON line with the times of each repetition. Two modes:
 *   whole    the whole level into ONE device array (RGB8, rows of width*3 bytes): thread i reads
 *            the i-th horizontal stripe into its rows of that array (comparison 1 of issue 7);
 *   regions  the regions of a list file ("x y w h" per line, level-0 origin, as the Python peers
 *            read them), threads taking the next region from a shared counter, each region into
 *            the thread's own device buffer (comparison 2); with --batch N (cuda), N regions at
 *            a time through sp_cuda_read_regions (their JPEG tiles decoded in one nvJPEG batch).
 * The JSON also says which read paths were taken (sp_cuda_get_decode_stats: regions and tiles
 * through nvJPEG, regions copied directly from uncompressed tiles, regions on the CPU path, the
 * last reason for the CPU path).
 * The first repetition is a warm-up (contexts, pinned staging, the page cache) and is reported
 * but left out of the median. Errors print one line on stderr and exit 1.
 * usage: gpu_read SLIDE whole|regions [--level L] [--list FILE] [--threads T] [--device cuda|cpu]
 *                 [--repeat R] [--batch N] */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "slidepipe.h"

typedef struct region {
    int64_t x, y, w, h;
} region;

typedef struct job {
    sp_slide *slide;
    int32_t level;
    int cuda;
    int whole;
    int threads;
    int64_t level_w, level_h;
    uint8_t *whole_dst; /* whole mode: the one device (or host) array */
    const region *regions;
    size_t n_regions;
    int64_t max_region_bytes;
    int batch; /* regions mode, cuda: regions per sp_cuda_read_regions call (1: sp_cuda_read_region) */
    atomic_size_t next;
    atomic_int failed;
    char error[512];
    pthread_mutex_t error_lock;
} job;

typedef struct worker {
    job *job;
    int index;
    sp_cuda_context *ctx;
    void *buffer; /* regions mode: this thread's destination (batch regions' worth) */
    sp_cuda_region *batch; /* --batch > 1: the regions of one call */
} worker;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void fail_job(job *j, const char *what, sp_status st, const char *why) {
    pthread_mutex_lock(&j->error_lock);
    if (!atomic_load(&j->failed)) {
        snprintf(j->error, sizeof j->error, "%s: %s (%s)", what, sp_status_str(st), why ? why : "");
    }
    atomic_store(&j->failed, 1);
    pthread_mutex_unlock(&j->error_lock);
}

static sp_status read_one(worker *w, void *dst, int64_t stride, int64_t x, int64_t y, int64_t rw,
                          int64_t rh) {
    job *j = w->job;
    if (j->cuda) {
        return sp_cuda_read_region(w->ctx, j->slide, SP_PIXEL_RGB8, dst, stride, j->level, x, y, rw,
                                   rh);
    }
    return sp_slide_read_region(j->slide, SP_PIXEL_RGB8, dst, stride, j->level, x, y, rw, rh);
}

static const char *why_failed(worker *w) {
    const char *why = w->job->cuda ? sp_cuda_context_error(w->ctx) : NULL;
    if (why == NULL || *why == '\0') {
        why = sp_slide_error(w->job->slide);
    }
    return why;
}

/* The smallest level-0 y whose level row, floor(y / downsample), is `row`. */
static int64_t level0_row(sp_slide *slide, int32_t level, int64_t row) {
    double ds = 1.0;
    sp_slide_level_downsample(slide, level, &ds);
    int64_t y = (int64_t)ceil((double)row * ds);
    while (y > 0 && (int64_t)floor((double)(y - 1) / ds) >= row) {
        y--;
    }
    while ((int64_t)floor((double)y / ds) < row) {
        y++;
    }
    return y;
}

static void *run_worker(void *arg) {
    worker *w = arg;
    job *j = w->job;
    if (j->whole) {
        /* stripes of whole rows; level 0 has downsample 1, other levels map rows back */
        int64_t r0 = j->level_h * w->index / j->threads;
        int64_t r1 = j->level_h * (w->index + 1) / j->threads;
        if (r1 > r0) {
            int64_t stride = j->level_w * 3;
            int64_t y0 = level0_row(j->slide, j->level, r0);
            sp_status st =
                read_one(w, j->whole_dst + r0 * stride, stride, 0, y0, j->level_w, r1 - r0);
            if (st != SP_OK) {
                fail_job(j, "reading a stripe", st, why_failed(w));
            }
        }
        return NULL;
    }
    while (j->batch > 1) {
        size_t i = atomic_fetch_add(&j->next, (size_t)j->batch);
        if (i >= j->n_regions || atomic_load(&j->failed)) {
            return NULL;
        }
        size_t n = j->n_regions - i < (size_t)j->batch ? j->n_regions - i : (size_t)j->batch;
        for (size_t k = 0; k < n; k++) {
            const region *r = &j->regions[i + k];
            w->batch[k] = (sp_cuda_region){.level = j->level, .x = r->x, .y = r->y,
                                           .width = r->w, .height = r->h, .stride = r->w * 3,
                                           .dst_device = (uint8_t *)w->buffer +
                                                         k * (size_t)j->max_region_bytes};
        }
        sp_status st = sp_cuda_read_regions(w->ctx, j->slide, SP_PIXEL_RGB8, w->batch, n);
        if (st != SP_OK) {
            fail_job(j, "reading a batch of regions", st, why_failed(w));
            return NULL;
        }
    }
    for (;;) {
        size_t i = atomic_fetch_add(&j->next, 1);
        if (i >= j->n_regions || atomic_load(&j->failed)) {
            break;
        }
        const region *r = &j->regions[i];
        sp_status st = read_one(w, w->buffer, r->w * 3, r->x, r->y, r->w, r->h);
        if (st != SP_OK) {
            fail_job(j, "reading a region", st, why_failed(w));
            break;
        }
    }
    return NULL;
}

static int load_regions(const char *path, region **out, size_t *n, int64_t *max_bytes) {
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        return 0;
    }
    size_t cap = 0;
    *out = NULL;
    *n = 0;
    *max_bytes = 0;
    long long x, y, w, h;
    while (fscanf(f, "%lld %lld %lld %lld", &x, &y, &w, &h) == 4) {
        if (w <= 0 || h <= 0 || w > 65536 || h > 65536) {
            fclose(f);
            return 0;
        }
        if (*n == cap) {
            cap = cap ? cap * 2 : 1024;
            region *grown = realloc(*out, cap * sizeof **out);
            if (grown == NULL) {
                fclose(f);
                return 0;
            }
            *out = grown;
        }
        (*out)[(*n)++] = (region){x, y, w, h};
        if (w * h * 3 > *max_bytes) {
            *max_bytes = w * h * 3;
        }
    }
    fclose(f);
    return *n > 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int die(const char *msg) {
    fprintf(stderr, "gpu_read: %s\n", msg);
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 3 || (strcmp(argv[2], "whole") != 0 && strcmp(argv[2], "regions") != 0)) {
        fprintf(stderr, "usage: gpu_read SLIDE whole|regions [--level L] [--list FILE] "
                        "[--threads T] [--device cuda|cpu] [--repeat R] [--batch N]\n");
        return 2;
    }
    static job j;
    j.whole = strcmp(argv[2], "whole") == 0;
    j.cuda = 1;
    j.threads = 1;
    j.batch = 1;
    int repeat = 3;
    const char *list = NULL;
    for (int a = 3; a + 1 < argc; a += 2) {
        if (strcmp(argv[a], "--level") == 0) {
            j.level = atoi(argv[a + 1]);
        } else if (strcmp(argv[a], "--list") == 0) {
            list = argv[a + 1];
        } else if (strcmp(argv[a], "--threads") == 0) {
            j.threads = atoi(argv[a + 1]);
        } else if (strcmp(argv[a], "--device") == 0) {
            j.cuda = strcmp(argv[a + 1], "cpu") != 0;
        } else if (strcmp(argv[a], "--repeat") == 0) {
            repeat = atoi(argv[a + 1]);
        } else if (strcmp(argv[a], "--batch") == 0) {
            j.batch = atoi(argv[a + 1]);
        } else {
            return die("unknown option");
        }
    }
    if (j.threads < 1 || j.threads > 1024 || repeat < 1 || repeat > 1000 || j.batch < 1 ||
        j.batch > 4096 || (j.batch > 1 && (!j.cuda || j.whole))) {
        return die("bad --threads, --repeat or --batch (regions mode, --device cuda)");
    }
    if (!j.whole && (list == NULL || !load_regions(list, (region **)&j.regions, &j.n_regions,
                                                   &j.max_region_bytes))) {
        return die("regions mode needs a readable --list of 'x y w h' lines");
    }
    char err[1024];
    if (sp_slide_open(argv[1], &j.slide, err, sizeof err) != SP_OK) {
        fprintf(stderr, "gpu_read: %s\n", err);
        return 1;
    }
    if (sp_slide_level_dimensions(j.slide, j.level, &j.level_w, &j.level_h) != SP_OK) {
        return die("no such level");
    }
    pthread_mutex_init(&j.error_lock, NULL);
    worker *ws = calloc((size_t)j.threads, sizeof *ws);
    if (ws == NULL) {
        return die("out of memory");
    }
    size_t whole_bytes = (size_t)j.level_w * (size_t)j.level_h * 3;
    int rc = 0;
    for (int t = 0; t < j.threads && rc == 0; t++) {
        ws[t].job = &j;
        ws[t].index = t;
        if (j.cuda && sp_cuda_context_create(-1, &ws[t].ctx, err, sizeof err) != SP_OK) {
            rc = die(err);
            break;
        }
        if (!j.whole) {
            ws[t].buffer = NULL;
            size_t bytes = (size_t)j.max_region_bytes * (size_t)j.batch;
            sp_status st = j.cuda ? sp_cuda_alloc(ws[t].ctx, bytes, &ws[t].buffer)
                                  : ((ws[t].buffer = malloc(bytes)) != NULL ? SP_OK : SP_E_NOMEM);
            ws[t].batch = calloc((size_t)j.batch, sizeof *ws[t].batch);
            if (st != SP_OK || ws[t].batch == NULL) {
                rc = die("cannot allocate a region buffer");
            }
        }
    }
    if (rc == 0 && j.whole) {
        void *p = NULL;
        sp_status st = j.cuda ? sp_cuda_alloc(ws[0].ctx, whole_bytes, &p)
                              : ((p = malloc(whole_bytes)) != NULL ? SP_OK : SP_E_NOMEM);
        if (st != SP_OK) {
            rc = die("cannot allocate the level's array");
        }
        j.whole_dst = p;
    }
    double *times = calloc((size_t)repeat, sizeof *times);
    pthread_t *tids = calloc((size_t)j.threads, sizeof *tids);
    for (int r = 0; rc == 0 && r < repeat; r++) {
        atomic_store(&j.next, 0);
        double t0 = now();
        int started = 0;
        for (int t = 0; t < j.threads; t++) {
            if (pthread_create(&tids[t], NULL, run_worker, &ws[t]) != 0) {
                break;
            }
            started++;
        }
        for (int t = 0; t < started; t++) {
            pthread_join(tids[t], NULL);
        }
        times[r] = now() - t0;
        if (started < j.threads) {
            rc = die("cannot start threads");
        } else if (atomic_load(&j.failed)) {
            rc = die(j.error);
        }
    }
    if (rc == 0) {
        int64_t pixels = 0;
        if (j.whole) {
            pixels = j.level_w * j.level_h;
        } else {
            for (size_t i = 0; i < j.n_regions; i++) {
                pixels += j.regions[i].w * j.regions[i].h;
            }
        }
        double *sorted = malloc((size_t)repeat * sizeof *sorted);
        int m = repeat > 1 ? repeat - 1 : 1;
        memcpy(sorted, repeat > 1 ? times + 1 : times, (size_t)m * sizeof *sorted);
        qsort(sorted, (size_t)m, sizeof *sorted, cmp_double);
        double median = sorted[m / 2];
        printf("{\"mode\": \"%s\", \"device\": \"%s\", \"threads\": %d, \"level\": %d, "
               "\"width\": %lld, \"height\": %lld, \"regions\": %zu, \"pixels\": %lld, "
               "\"batch\": %d, \"median_s\": %.6f, \"gpix_per_s\": %.4f, \"seconds\": [",
               j.whole ? "whole" : "regions", j.cuda ? "cuda" : "cpu", j.threads, j.level,
               (long long)j.level_w, (long long)j.level_h, j.whole ? (size_t)1 : j.n_regions,
               (long long)pixels, j.batch, median, (double)pixels / median * 1e-9);
        for (int r = 0; r < repeat; r++) {
            printf("%s%.6f", r ? ", " : "", times[r]);
        }
        sp_cuda_decode_stats ds = {.struct_size = sizeof ds};
        sp_cuda_get_decode_stats(&ds);
        printf("], \"nvjpeg_regions\": %llu, \"nvjpeg_tiles\": %llu, \"nvjpeg2k_regions\": %llu, "
               "\"nvjpeg2k_tiles\": %llu, \"direct_regions\": %llu, \"cufile_regions\": %llu, "
               "\"cpu_regions\": %llu, \"last_fallback\": \"",
               (unsigned long long)ds.nvjpeg_regions, (unsigned long long)ds.nvjpeg_tiles,
               (unsigned long long)ds.nvjpeg2k_regions, (unsigned long long)ds.nvjpeg2k_tiles,
               (unsigned long long)ds.direct_regions, (unsigned long long)ds.cufile_regions,
               (unsigned long long)ds.cpu_regions);
        for (const char *p = ds.last_fallback; *p; p++) { /* a JSON string: escape the few */
            if (*p == '"' || *p == '\\') {
                putchar('\\');
            }
            putchar((unsigned char)*p >= 0x20 ? *p : ' ');
        }
        printf("\"}\n");
        free(sorted);
    }
    if (j.whole && j.whole_dst != NULL) {
        if (j.cuda) {
            sp_cuda_free(ws[0].ctx, j.whole_dst);
        } else {
            free(j.whole_dst);
        }
    }
    for (int t = 0; t < j.threads; t++) {
        if (ws[t].buffer != NULL) {
            if (j.cuda) {
                sp_cuda_free(ws[t].ctx, ws[t].buffer);
            } else {
                free(ws[t].buffer);
            }
        }
        free(ws[t].batch);
        sp_cuda_context_destroy(ws[t].ctx);
    }
    free(ws);
    free(times);
    free(tids);
    free((void *)j.regions);
    sp_slide_close(j.slide);
    return rc;
}
