/* test_pixel_hash.c — the pixel hasher (slide/pixel_hash.h) and sp_pixel_hash: a pyramid given
 * whole, as planar chunks that straddle the 256-pixel block grid, and as shuffled rectangles from
 * four threads (interleaved and planar mixed) hashes the same; a grey plane given three times
 * equals its RGB expansion; one pixel changed changes the hash; a missing rectangle is refused at
 * the end and one outside a level at once. On the Aperio test slide, sp_pixel_hash on 1 and 4
 * threads equals the hasher fed one whole-level sp_slide_read_region. The definition's bytes are
 * checked against an independent numpy + hashlib implementation in tests/cli/test_pixel_hash.py.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "slide/pixel_hash.h"
#include "unit.h"

#define LEVELS 2
static const int64_t W[LEVELS] = {700, 301}, H[LEVELS] = {530, 257};
static uint8_t *rgb[LEVELS];    /* interleaved */
static uint8_t *planes[LEVELS]; /* the same pixels as three planes */

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void make_pyramid(void) {
    for (int k = 0; k < LEVELS; k++) {
        size_t n = (size_t)(W[k] * H[k]);
        rgb[k] = malloc(n * 3);
        planes[k] = malloc(n * 3);
        for (size_t i = 0; i < n; i++) {
            for (int c = 0; c < 3; c++) {
                rgb[k][3 * i + c] = planes[k][c * n + i] = (uint8_t)next();
            }
        }
    }
}

/* Give w x h pixels of level k at (x, y), interleaved or from the planes. */
static sp_status put(sp_pixel_hasher *h, int k, int64_t x, int64_t y, int64_t w, int64_t rows,
                     int planar) {
    sp_err e = {0};
    if (planar) {
        size_t n = (size_t)(W[k] * H[k]);
        const uint8_t *p = planes[k] + y * W[k] + x;
        const uint8_t *src[3] = {p, p + n, p + 2 * n};
        return sp_pixel_hasher_put(h, k, x, y, w, rows, src, 1, W[k], &e);
    }
    const uint8_t *p = rgb[k] + (y * W[k] + x) * 3;
    const uint8_t *src[3] = {p, p + 1, p + 2};
    return sp_pixel_hasher_put(h, k, x, y, w, rows, src, 3, W[k] * 3, &e);
}

static sp_pixel_hasher *new_hasher(void) {
    sp_pixel_hasher *h = NULL;
    sp_err e = {0};
    CHECK_EQ_INT(sp_pixel_hasher_create(LEVELS, W, H, &h, &e), SP_OK);
    return h;
}

static void finish(sp_pixel_hasher *h, char *hex) {
    sp_err e = {0};
    CHECK_EQ_INT(sp_pixel_hasher_finish(h, hex, &e), SP_OK);
    CHECK(strlen(hex) == 64);
    sp_pixel_hasher_free(h);
}

static void whole(char *hex) {
    sp_pixel_hasher *h = new_hasher();
    for (int k = 0; k < LEVELS; k++) {
        CHECK_EQ_INT(put(h, k, 0, 0, W[k], H[k], 0), SP_OK);
    }
    finish(h, hex);
}

typedef struct rect {
    int k;
    int64_t x, y, w, h;
} rect;

typedef struct shared {
    sp_pixel_hasher *h;
    rect *rects;
    size_t n;
    size_t next;
    pthread_mutex_t lock;
    int failures;
} shared;

static void *worker(void *arg) {
    shared *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->lock);
        size_t i = s->next++;
        pthread_mutex_unlock(&s->lock);
        if (i >= s->n) {
            return NULL;
        }
        rect *r = &s->rects[i];
        if (put(s->h, r->k, r->x, r->y, r->w, r->h, (int)(i & 1)) != SP_OK) {
            pthread_mutex_lock(&s->lock);
            s->failures++;
            pthread_mutex_unlock(&s->lock);
        }
    }
}

static void test_any_order_and_shape(void) {
    char want[65], got[65];
    whole(want);

    /* Chunks of 300 (not a multiple of the block), planar, row-major. */
    sp_pixel_hasher *h = new_hasher();
    for (int k = 0; k < LEVELS; k++) {
        for (int64_t y = 0; y < H[k]; y += 300) {
            for (int64_t x = 0; x < W[k]; x += 300) {
                int64_t w = W[k] - x < 300 ? W[k] - x : 300, rows = H[k] - y < 300 ? H[k] - y : 300;
                CHECK_EQ_INT(put(h, k, x, y, w, rows, 1), SP_OK);
            }
        }
    }
    finish(h, got);
    CHECK(strcmp(got, want) == 0);

    /* Uneven rectangles (cut at random columns in strips of random height), shuffled, four
     * threads. */
    /* At most one rectangle per pixel column of each strip: 787 strips x 700 columns bounds it. */
    rect *rects = malloc((size_t)(787 * 700) * sizeof *rects);
    size_t n = 0;
    for (int k = 0; k < LEVELS; k++) {
        for (int64_t y = 0; y < H[k];) {
            int64_t rows = 1 + (int64_t)(next() % 97);
            rows = rows > H[k] - y ? H[k] - y : rows;
            for (int64_t x = 0; x < W[k];) {
                int64_t w = 1 + (int64_t)(next() % 211);
                w = w > W[k] - x ? W[k] - x : w;
                rects[n++] = (rect){k, x, y, w, rows};
                x += w;
            }
            y += rows;
        }
    }
    CHECK(n > 40);
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)(next() % (i + 1));
        rect t = rects[i];
        rects[i] = rects[j];
        rects[j] = t;
    }
    shared s = {.h = new_hasher(), .rects = rects, .n = n};
    pthread_mutex_init(&s.lock, NULL);
    pthread_t ids[4];
    for (int i = 0; i < 4; i++) {
        pthread_create(&ids[i], NULL, worker, &s);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(ids[i], NULL);
    }
    pthread_mutex_destroy(&s.lock);
    CHECK_EQ_INT(s.failures, 0);
    finish(s.h, got);
    CHECK(strcmp(got, want) == 0);

    /* Leave the last rectangle out: refused at the end, and the partial blocks are freed. */
    h = new_hasher();
    for (size_t i = 0; i + 1 < n; i++) {
        CHECK_EQ_INT(put(h, rects[i].k, rects[i].x, rects[i].y, rects[i].w, rects[i].h, 0), SP_OK);
    }
    sp_err e = {0};
    CHECK_EQ_INT(sp_pixel_hasher_finish(h, got, &e), SP_E_INVALID_ARG);
    CHECK(got[0] == '\0' && strstr(e.msg, "incomplete") != NULL);
    sp_pixel_hasher_free(h);
    free(rects);

    /* One pixel changed, anywhere, changes the hash. */
    rgb[1][(200 * W[1] + 300) * 3 + 2] ^= 1;
    whole(got);
    CHECK(strcmp(got, want) != 0);
    rgb[1][(200 * W[1] + 300) * 3 + 2] ^= 1;
    whole(got);
    CHECK(strcmp(got, want) == 0);
}

static void test_grey_and_arguments(void) {
    /* A grey plane given three times is its RGB expansion. */
    int64_t w = 300, hh = 260;
    uint8_t *grey = malloc((size_t)(w * hh)), *expanded = malloc((size_t)(w * hh * 3));
    for (int64_t i = 0; i < w * hh; i++) {
        grey[i] = (uint8_t)next();
        memset(expanded + 3 * i, grey[i], 3);
    }
    char a[65], b[65];
    sp_err e = {0};
    sp_pixel_hasher *h = NULL;
    CHECK_EQ_INT(sp_pixel_hasher_create(1, &w, &hh, &h, &e), SP_OK);
    const uint8_t *g3[3] = {grey, grey, grey};
    CHECK_EQ_INT(sp_pixel_hasher_put(h, 0, 0, 0, w, hh, g3, 1, w, &e), SP_OK);
    finish(h, a);
    CHECK_EQ_INT(sp_pixel_hasher_create(1, &w, &hh, &h, &e), SP_OK);
    const uint8_t *rgb3[3] = {expanded, expanded + 1, expanded + 2};
    CHECK_EQ_INT(sp_pixel_hasher_put(h, 0, 0, 0, w, hh, rgb3, 3, w * 3, &e), SP_OK);
    finish(h, b);
    CHECK(strcmp(a, b) == 0);

    /* Rectangles outside the level, bad levels and empty levels are refused. */
    CHECK_EQ_INT(sp_pixel_hasher_create(1, &w, &hh, &h, &e), SP_OK);
    CHECK_EQ_INT(sp_pixel_hasher_put(h, 0, 1, 0, w, 1, g3, 1, w, &e), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_pixel_hasher_put(h, 0, 0, hh - 1, 1, 2, g3, 1, w, &e), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_pixel_hasher_put(h, 1, 0, 0, 1, 1, g3, 1, w, &e), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_pixel_hasher_put(h, 0, -1, 0, 1, 1, g3, 1, w, &e), SP_E_INVALID_ARG);
    sp_pixel_hasher_free(h);
    int64_t zero = 0;
    CHECK_EQ_INT(sp_pixel_hasher_create(1, &w, &zero, &h, &e), SP_E_INVALID_ARG);
    CHECK(h == NULL);
    sp_pixel_hasher_free(NULL);
    free(grey);
    free(expanded);

    char hex[65] = "x", err[128] = "";
    CHECK_EQ_INT(sp_pixel_hash(NULL, 1, hex, NULL, NULL, err, sizeof err), SP_E_INVALID_ARG);
    CHECK(hex[0] == '\0' && strstr(err, "null") != NULL);
}

typedef struct progress_log {
    int64_t calls, last_done, total;
    int monotonic;
} progress_log;

static void on_progress(void *user, int64_t done, int64_t total) {
    progress_log *p = user;
    p->monotonic &= done > p->last_done && done <= total;
    p->calls++;
    p->last_done = done;
    p->total = total;
}

static void test_slide(const char *data) {
    char path[4096], err[512];
    snprintf(path, sizeof path, "%s/aperio/CMU-1-Small-Region.svs", data);
    sp_slide *s = NULL;
    CHECK_EQ_INT(sp_slide_open(path, &s, err, sizeof err), SP_OK);
    if (s == NULL) {
        return;
    }
    int64_t w = 0, h = 0;
    sp_slide_level_dimensions(s, 0, &w, &h);
    uint8_t *px = malloc((size_t)(w * h * 3));
    CHECK_EQ_INT(sp_slide_read_region(s, SP_PIXEL_RGB8, px, w * 3, 0, 0, 0, w, h), SP_OK);
    sp_pixel_hasher *hs = NULL;
    sp_err e = {0};
    CHECK_EQ_INT(sp_pixel_hasher_create(1, &w, &h, &hs, &e), SP_OK);
    const uint8_t *src[3] = {px, px + 1, px + 2};
    CHECK_EQ_INT(sp_pixel_hasher_put(hs, 0, 0, 0, w, h, src, 3, w * 3, &e), SP_OK);
    char want[65], one[65], four[65];
    finish(hs, want);
    free(px);
    progress_log p = {.monotonic = 1};
    CHECK_EQ_INT(sp_pixel_hash(s, 1, one, on_progress, &p, err, sizeof err), SP_OK);
    /* 2220 x 2967: 9 x 12 blocks, reported as they are done, up to the total. */
    CHECK(p.calls > 1 && p.monotonic && p.last_done == p.total && p.total == 9 * 12);
    CHECK_EQ_INT(sp_pixel_hash(s, 4, four, NULL, NULL, err, sizeof err), SP_OK);
    CHECK(strcmp(one, want) == 0 && strcmp(four, want) == 0);
    sp_slide_close(s);
}

void unit_run(void) {
    make_pyramid();
    test_any_order_and_shape();
    test_grey_and_arguments();
    for (int k = 0; k < LEVELS; k++) {
        free(rgb[k]);
        free(planes[k]);
    }
    const char *data = unit_testdata();
    if (data != NULL) {
        test_slide(data);
    }
}
