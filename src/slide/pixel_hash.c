/* pixel_hash.c — the pixel hash: a SHA-256 of a pyramid's decoded RGB8 pixels alone, so that it
 * survives what the dataset hash does not (a renamed slide, another codec, chunk size, container
 * or slidepipe version). docs/pixel-hash.md defines it:
 *
 *   block digest  SHA-256 of one block's RGB8 bytes, rows top to bottom, no padding; the blocks
 *                 are a fixed 256 x 256 grid from (0, 0) of each level, edge blocks cut to it
 *   level digest  SHA-256( u64le width || u64le height || block digests in row-major order )
 *   pixel hash    SHA-256( "slidepipe-pixels-v1" || u32le levels || level digests, level 0 first )
 *
 * The hasher below is that definition, once: it accepts rectangles of any level in any order from
 * any thread (a converter's chunks, a processed tile, a block read here) and hashes each block as
 * soon as it is whole, so memory is 48 bytes per block (its digest, fill count and buffer
 * pointer) plus the blocks still partly filled, never a level. sp_pixel_hash reads a slide in cells
 * of whole blocks (a cell covers the level's storage tile, so each tile is decoded about once) on
 * the thread pool; each block's digest lands in its own slot, so the result does not depend on the
 * thread count or order.
 */
#include <openssl/evp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/thread_pool.h"
#include "slide/pixel_hash.h"
#include "slide/slide.h"

#define BLOCK SP_PIXEL_HASH_BLOCK
/* The widest cell sp_pixel_hash reads at once (3 MiB of RGB per thread). */
#define MAX_CELL 1024

typedef struct hash_level {
    int64_t width, height;
    int64_t blocks_x, blocks_y;
    uint8_t *digests;  /* 32 bytes per block, row-major */
    int64_t *filled;   /* pixels received per block */
    uint8_t **partial; /* a block's pixels while it is incomplete (interleaved RGB), or NULL */
} hash_level;

struct sp_pixel_hasher {
    int32_t n_levels;
    hash_level *levels;
    pthread_mutex_t lock; /* partial buffers and fill counts */
};

static void put_le64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

static void to_hex(const uint8_t *md, char *hex) {
    static const char DIGITS[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        hex[2 * i] = DIGITS[md[i] >> 4];
        hex[2 * i + 1] = DIGITS[md[i] & 15];
    }
    hex[64] = '\0';
}

sp_status sp_pixel_hasher_create(int32_t levels, const int64_t *widths, const int64_t *heights,
                                 sp_pixel_hasher **out, sp_err *err) {
    *out = NULL;
    if (levels < 1 || widths == NULL || heights == NULL) {
        return sp_err_set(err, SP_E_INVALID_ARG, "pixel hash: no levels");
    }
    sp_pixel_hasher *h = calloc(1, sizeof *h);
    if (h == NULL || (h->levels = calloc((size_t)levels, sizeof *h->levels)) == NULL) {
        free(h);
        return sp_err_set(err, SP_E_NOMEM, "out of memory for the pixel hash");
    }
    h->n_levels = levels;
    pthread_mutex_init(&h->lock, NULL);
    for (int32_t k = 0; k < levels; k++) {
        hash_level *l = &h->levels[k];
        if (widths[k] < 1 || heights[k] < 1) {
            sp_pixel_hasher_free(h);
            return sp_err_set(err, SP_E_INVALID_ARG, "pixel hash: level %d is empty", (int)k);
        }
        l->width = widths[k];
        l->height = heights[k];
        l->blocks_x = (l->width + BLOCK - 1) / BLOCK;
        l->blocks_y = (l->height + BLOCK - 1) / BLOCK;
        size_t n = (size_t)(l->blocks_x * l->blocks_y);
        l->digests = malloc(n * 32);
        l->filled = calloc(n, sizeof *l->filled);
        l->partial = calloc(n, sizeof *l->partial);
        if (l->digests == NULL || l->filled == NULL || l->partial == NULL) {
            sp_pixel_hasher_free(h);
            return sp_err_set(err, SP_E_NOMEM, "out of memory for the pixel hash");
        }
    }
    *out = h;
    return SP_OK;
}

void sp_pixel_hasher_free(sp_pixel_hasher *h) {
    if (h == NULL) {
        return;
    }
    for (int32_t k = 0; k < h->n_levels; k++) {
        hash_level *l = &h->levels[k];
        if (l->partial != NULL) {
            for (int64_t b = 0; b < l->blocks_x * l->blocks_y; b++) {
                free(l->partial[b]);
            }
        }
        free(l->partial);
        free(l->filled);
        free(l->digests);
    }
    pthread_mutex_destroy(&h->lock);
    free(h->levels);
    free(h);
}

/* Hash `rows` rows of `w` pixels read through (src, step, stride) into md (32 bytes). */
static bool hash_rows(const uint8_t *const src[3], int64_t step, int64_t stride, int64_t w,
                      int64_t rows, uint8_t *md) {
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    bool ok = ctx != NULL && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1;
    bool interleaved = step == 3 && src[1] == src[0] + 1 && src[2] == src[0] + 2;
    uint8_t row[BLOCK * 3];
    for (int64_t j = 0; ok && j < rows; j++) {
        const uint8_t *line = src[0] + j * stride;
        if (!interleaved) {
            /* Plain loops over three row pointers: the compiler vectorises the planar case,
             * which is what convert's c,y,x bands and process's chunks hand over. */
            const uint8_t *r = src[0] + j * stride, *g = src[1] + j * stride,
                          *b = src[2] + j * stride;
            if (step == 1) {
                for (int64_t i = 0; i < w; i++) {
                    row[3 * i] = r[i];
                    row[3 * i + 1] = g[i];
                    row[3 * i + 2] = b[i];
                }
            } else {
                for (int64_t i = 0; i < w; i++) {
                    row[3 * i] = r[i * step];
                    row[3 * i + 1] = g[i * step];
                    row[3 * i + 2] = b[i * step];
                }
            }
            line = row;
        }
        ok = EVP_DigestUpdate(ctx, line, (size_t)(w * 3)) == 1;
    }
    unsigned int len = 0;
    ok = ok && EVP_DigestFinal_ex(ctx, md, &len) == 1 && len == 32;
    EVP_MD_CTX_free(ctx);
    return ok;
}

/* The part of a put that falls into block b: (ox, oy) its offset in the block, (iw, ih) its size,
 * `at` the sources moved to its first pixel. */
static sp_status put_block(sp_pixel_hasher *h, hash_level *l, int64_t b, int64_t bw, int64_t bh,
                           int64_t ox, int64_t oy, int64_t iw, int64_t ih,
                           const uint8_t *const at[3], int64_t step, int64_t stride, sp_err *err) {
    if (iw == bw && ih == bh) {
        if (!hash_rows(at, step, stride, bw, bh, l->digests + 32 * b)) {
            return sp_err_set(err, SP_E_NOMEM, "SHA-256 failed (out of memory)");
        }
        pthread_mutex_lock(&h->lock);
        l->filled[b] += bw * bh;
        pthread_mutex_unlock(&h->lock);
        return SP_OK;
    }
    pthread_mutex_lock(&h->lock);
    uint8_t *buf = l->partial[b];
    if (buf == NULL) {
        buf = l->partial[b] = malloc((size_t)(bw * bh * 3));
    }
    pthread_mutex_unlock(&h->lock);
    if (buf == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory for a pixel-hash block");
    }
    /* Other puts fill other pixels of the buffer; only the one that completes it hashes it. */
    for (int64_t j = 0; j < ih; j++) {
        uint8_t *d = buf + ((oy + j) * bw + ox) * 3;
        for (int64_t i = 0; i < iw; i++) {
            for (int c = 0; c < 3; c++) {
                d[3 * i + c] = at[c][j * stride + i * step];
            }
        }
    }
    pthread_mutex_lock(&h->lock);
    l->filled[b] += iw * ih;
    bool whole = l->filled[b] == bw * bh;
    if (whole) {
        l->partial[b] = NULL;
    }
    pthread_mutex_unlock(&h->lock);
    if (!whole) {
        return SP_OK;
    }
    const uint8_t *rgb[3] = {buf, buf + 1, buf + 2};
    bool ok = hash_rows(rgb, 3, bw * 3, bw, bh, l->digests + 32 * b);
    free(buf);
    return ok ? SP_OK : sp_err_set(err, SP_E_NOMEM, "SHA-256 failed (out of memory)");
}

sp_status sp_pixel_hasher_put(sp_pixel_hasher *h, int32_t level, int64_t x, int64_t y, int64_t w,
                              int64_t rows, const uint8_t *const src[3], int64_t step,
                              int64_t stride, sp_err *err) {
    if (h == NULL || level < 0 || level >= h->n_levels || src == NULL) {
        return sp_err_set(err, SP_E_INVALID_ARG, "pixel hash: bad level");
    }
    hash_level *l = &h->levels[level];
    if (x < 0 || y < 0 || w < 0 || rows < 0 || x > l->width - w || y > l->height - rows) {
        return sp_err_set(err, SP_E_INVALID_ARG, "pixel hash: rectangle outside level %d",
                          (int)level);
    }
    if (w == 0 || rows == 0) {
        return SP_OK;
    }
    for (int64_t by = y / BLOCK; by <= (y + rows - 1) / BLOCK; by++) {
        int64_t top = by * BLOCK, bh = l->height - top < BLOCK ? l->height - top : BLOCK;
        int64_t y0 = y > top ? y : top, y1 = y + rows < top + bh ? y + rows : top + bh;
        for (int64_t bx = x / BLOCK; bx <= (x + w - 1) / BLOCK; bx++) {
            int64_t left = bx * BLOCK, bw = l->width - left < BLOCK ? l->width - left : BLOCK;
            int64_t x0 = x > left ? x : left, x1 = x + w < left + bw ? x + w : left + bw;
            int64_t off = (y0 - y) * stride + (x0 - x) * step;
            const uint8_t *at[3] = {src[0] + off, src[1] + off, src[2] + off};
            sp_status st = put_block(h, l, by * l->blocks_x + bx, bw, bh, x0 - left, y0 - top,
                                     x1 - x0, y1 - y0, at, step, stride, err);
            if (st != SP_OK) {
                return st;
            }
        }
    }
    return SP_OK;
}

sp_status sp_pixel_hasher_finish(sp_pixel_hasher *h, char *hex, sp_err *err) {
    hex[0] = '\0';
    EVP_MD_CTX *all = EVP_MD_CTX_new(), *one = EVP_MD_CTX_new();
    bool ok = all != NULL && one != NULL && EVP_DigestInit_ex(all, EVP_sha256(), NULL) == 1;
    uint8_t head[16], md[32];
    static const char DEFINITION[] = SP_PIXEL_HASH_DEFINITION;
    head[0] = (uint8_t)h->n_levels;
    head[1] = (uint8_t)(h->n_levels >> 8);
    head[2] = (uint8_t)(h->n_levels >> 16);
    head[3] = (uint8_t)(h->n_levels >> 24);
    ok = ok && EVP_DigestUpdate(all, DEFINITION, sizeof DEFINITION - 1) == 1 &&
         EVP_DigestUpdate(all, head, 4) == 1;
    sp_status st = SP_OK;
    for (int32_t k = 0; ok && st == SP_OK && k < h->n_levels; k++) {
        hash_level *l = &h->levels[k];
        int64_t n = l->blocks_x * l->blocks_y;
        for (int64_t b = 0; b < n && st == SP_OK; b++) {
            int64_t bw = l->width - (b % l->blocks_x) * BLOCK;
            int64_t bh = l->height - (b / l->blocks_x) * BLOCK;
            if (l->filled[b] != (bw < BLOCK ? bw : BLOCK) * (bh < BLOCK ? bh : BLOCK)) {
                st = sp_err_set(err, SP_E_INVALID_ARG,
                                "pixel hash: block %lld of level %d is incomplete", (long long)b,
                                (int)k);
            }
        }
        put_le64(head, (uint64_t)l->width);
        put_le64(head + 8, (uint64_t)l->height);
        unsigned int len = 0;
        ok = st != SP_OK || (EVP_DigestInit_ex(one, EVP_sha256(), NULL) == 1 &&
                             EVP_DigestUpdate(one, head, 16) == 1 &&
                             EVP_DigestUpdate(one, l->digests, (size_t)n * 32) == 1 &&
                             EVP_DigestFinal_ex(one, md, &len) == 1 && len == 32 &&
                             EVP_DigestUpdate(all, md, 32) == 1);
    }
    unsigned int len = 0;
    if (st == SP_OK && !(ok && EVP_DigestFinal_ex(all, md, &len) == 1 && len == 32)) {
        st = sp_err_set(err, SP_E_NOMEM, "SHA-256 failed (out of memory)");
    }
    EVP_MD_CTX_free(all);
    EVP_MD_CTX_free(one);
    if (st == SP_OK) {
        to_hex(md, hex);
    }
    return st;
}

/* ---- sp_pixel_hash: a slide read through its own region painter ------------------------- */

typedef struct cell_level {
    int64_t cell;    /* cell side: a multiple of BLOCK */
    int64_t cells_x; /* cells across */
    int64_t first;   /* index of the level's first cell among all */
} cell_level;

typedef struct hash_job {
    sp_slide *slide;
    sp_pixel_hasher *hasher;
    cell_level levels[64];
    int32_t n_levels;
    atomic_bool failed;
    pthread_mutex_t lock; /* err, progress */
    sp_err err;
    sp_progress_fn progress;
    void *user;
    int64_t blocks_done, blocks_total;
} hash_job;

/* The cell side for a level: its storage tile rounded up to whole blocks, at most MAX_CELL, so
 * that a thread decodes a tile once for all the blocks it holds. */
static int64_t cell_side(int64_t tile_w, int64_t tile_h) {
    int64_t t = tile_w > tile_h ? tile_w : tile_h;
    t = t < BLOCK ? BLOCK : t > MAX_CELL ? MAX_CELL : t;
    return (t + BLOCK - 1) / BLOCK * BLOCK;
}

static void fail(hash_job *j, const sp_err *e) {
    pthread_mutex_lock(&j->lock);
    if (j->err.status == SP_OK) {
        j->err = *e;
    }
    atomic_store(&j->failed, true);
    pthread_mutex_unlock(&j->lock);
}

static void hash_cell(void *user, size_t i) {
    hash_job *j = user;
    if (atomic_load(&j->failed)) {
        return;
    }
    int32_t k = 0;
    while (k + 1 < j->n_levels && (int64_t)i >= j->levels[k + 1].first) {
        k++;
    }
    const cell_level *cl = &j->levels[k];
    int64_t width = 0, height = 0;
    sp_slide_level_dimensions(j->slide, k, &width, &height);
    int64_t c = (int64_t)i - cl->first;
    int64_t x = (c % cl->cells_x) * cl->cell, y = (c / cl->cells_x) * cl->cell;
    int64_t w = width - x < cl->cell ? width - x : cl->cell;
    int64_t h = height - y < cl->cell ? height - y : cl->cell;
    sp_err e = {0};
    uint8_t *rgb = malloc((size_t)(w * h * 3));
    if (rgb == NULL) {
        sp_err_set(&e, SP_E_NOMEM, "out of memory for a %lld x %lld cell", (long long)w,
                   (long long)h);
        fail(j, &e);
        return;
    }
    sp_status st =
        sp_slide_read_level_area(j->slide, SP_PIXEL_RGB8, rgb, w * 3, k, 1, x, y, w, h, 0);
    if (st != SP_OK) {
        const char *msg = sp_slide_error(j->slide);
        sp_err_set(&e, st, "reading level %d at (%lld, %lld): %s", (int)k, (long long)x,
                   (long long)y, msg ? msg : sp_status_str(st));
    } else {
        const uint8_t *src[3] = {rgb, rgb + 1, rgb + 2};
        st = sp_pixel_hasher_put(j->hasher, k, x, y, w, h, src, 3, w * 3, &e);
    }
    free(rgb);
    if (st != SP_OK) {
        fail(j, &e);
        return;
    }
    if (j->progress != NULL) {
        int64_t blocks = ((w + BLOCK - 1) / BLOCK) * ((h + BLOCK - 1) / BLOCK);
        pthread_mutex_lock(&j->lock);
        j->blocks_done += blocks;
        j->progress(j->user, j->blocks_done, j->blocks_total);
        pthread_mutex_unlock(&j->lock);
    }
}

static sp_status pixel_hash(sp_slide *slide, int threads, char *hex, sp_progress_fn progress,
                            void *user, sp_err *err) {
    hash_job j = {.slide = slide, .progress = progress, .user = user};
    j.n_levels = sp_slide_level_count(slide);
    if (j.n_levels < 1 || j.n_levels > (int32_t)(sizeof j.levels / sizeof j.levels[0])) {
        return sp_err_set(err, SP_E_UNSUPPORTED, "pixel hash: %d levels", (int)j.n_levels);
    }
    int64_t widths[64], heights[64], cells = 0;
    for (int32_t k = 0; k < j.n_levels; k++) {
        int64_t tw = 0, th = 0;
        sp_slide_level_dimensions(slide, k, &widths[k], &heights[k]);
        sp_slide_level_tile_size(slide, k, &tw, &th);
        cell_level *cl = &j.levels[k];
        cl->cell = cell_side(tw, th);
        cl->cells_x = (widths[k] + cl->cell - 1) / cl->cell;
        cl->first = cells;
        cells += cl->cells_x * ((heights[k] + cl->cell - 1) / cl->cell);
        j.blocks_total += ((widths[k] + BLOCK - 1) / BLOCK) * ((heights[k] + BLOCK - 1) / BLOCK);
    }
    sp_status st = sp_pixel_hasher_create(j.n_levels, widths, heights, &j.hasher, err);
    if (st != SP_OK) {
        return st;
    }
    atomic_init(&j.failed, false);
    pthread_mutex_init(&j.lock, NULL);
    /* When no extra thread starts, the calling thread has done every cell itself. */
    sp_pool_run((size_t)cells, threads, hash_cell, &j);
    pthread_mutex_destroy(&j.lock);
    if (j.err.status != SP_OK) {
        st = sp_err_set(err, j.err.status, "%s", j.err.msg);
    } else {
        st = sp_pixel_hasher_finish(j.hasher, hex, err);
    }
    sp_pixel_hasher_free(j.hasher);
    return st;
}

sp_status sp_pixel_hash(sp_slide *slide, int threads, char *hex, sp_progress_fn progress,
                        void *progress_user, char *errbuf, size_t err_len) {
    sp_err err = {0};
    sp_status st;
    char out[65] = "";
    if (slide == NULL || hex == NULL) {
        st = sp_err_set(&err, SP_E_INVALID_ARG, "sp_pixel_hash: null argument");
    } else {
        st = pixel_hash(slide, threads, out, progress, progress_user, &err);
    }
    if (hex != NULL) {
        memcpy(hex, st == SP_OK ? out : "", st == SP_OK ? 65 : 1);
    }
    sp_err_report(st, &err, errbuf, err_len);
    return st;
}
