/* scaled.c — sp_slide_read_region_scaled: a region at any downsample, from the best level, with
 * libjpeg's DCT scaling doing the large part of the reduction and an area average the rest.
 *
 * Output pixel (i, j) covers level-0 [x + i D, x + (i + 1) D) x [y + j D, y + (j + 1) D) for the
 * downsample D. Level L (the best level for D, downsample d) seen at 1/s (s the largest DCT
 * scale in 1, 2, 4, 8 with s <= D / d that the level's tiles allow) has pixels of d s level-0
 * pixels, so the pixel covers the source interval [u0 + i f, u0 + (i + 1) f) with f = D / (d s)
 * and u0 = x / (d s). The source rectangle under the whole request is painted by the region
 * painter at 1/s, then each output pixel is the average of the source pixels weighted by how
 * much of each its interval covers (separable: rows first, then columns), alpha-weighted so
 * that transparent pixels (outside the slide) do not darken their neighbours. With f = 1 and
 * whole-pixel offsets this is an exact copy, and is made as one (exact_copy). docs/reading.md
 * says how DCT scaling differs from this average.
 *
 * The source is painted in bands of whole tile rows, top to bottom, and each painted row is
 * added to the output rows it falls in, which are written as soon as they are complete: memory
 * is one band plus a few output rows of sums, whatever the request, and each tile under the
 * request is decoded once per call, even one too large for the tile cache. Rows go into the
 * caller's buffer, or one by one to a row sink (sp_slide_read_scaled_rows) for callers that
 * convert them on the way (sp_slide_read_image).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "slide/slide.h"

/* For output index i, the source pixels [first, first + n) and their weights. */
typedef struct span {
    int64_t first;
    int n;
    int weight0; /* offset of this span's weights in the shared array */
} span;

/* Spans and weights for `count` outputs of width f starting at u0 (source pixel k covers
 * [k, k + 1) relative to the painted origin); NULL when out of memory. */
static span *make_spans(double u0, double f, int64_t count, double **weights) {
    int per = (int)ceil(f) + 2;
    span *sp = malloc((size_t)count * sizeof *sp);
    double *w = malloc((size_t)count * (size_t)per * sizeof *w);
    if (sp == NULL || w == NULL) {
        free(sp);
        free(w);
        return NULL;
    }
    for (int64_t i = 0; i < count; i++) {
        double a = u0 + (double)i * f, b = a + f;
        int64_t k0 = (int64_t)floor(a);
        sp[i].first = k0;
        sp[i].weight0 = (int)(i * per);
        int n = 0;
        for (int64_t k = k0; (double)k < b && n < per; k++, n++) {
            double lo = a > (double)k ? a : (double)k;
            double hi = b < (double)(k + 1) ? b : (double)(k + 1);
            w[i * per + n] = hi > lo ? hi - lo : 0.0;
        }
        sp[i].n = n;
    }
    *weights = w;
    return sp;
}

static uint8_t to_byte(double v) {
    v = floor(v + 0.5);
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* Source rows painted per band: whole tile rows of the level seen at 1/scale (so a band never
 * cuts a tile that the next band would decode again), at least 64 rows where the tiles are
 * shorter, and no more than SCALED_BAND_BYTES of pixels unless one tile row needs more. */
#define SCALED_BAND_BYTES (32 << 20)

static int64_t band_rows(int64_t tile_h, int64_t sw) {
    int64_t k = (64 + tile_h - 1) / tile_h;
    int64_t fit = SCALED_BAND_BYTES / (sw * 4 * tile_h);
    k = k < fit ? k : fit;
    return (k < 1 ? 1 : k) * tile_h;
}

/* The most output rows whose spans hold a common source row, for the ring of accumulators. */
static int64_t open_rows(const span *rows, int64_t h) {
    int64_t most = 1;
    for (int64_t j = 0, k = 0; j < h; j++) {
        k = k > j ? k : j;
        while (k < h && rows[k].first < rows[j].first + rows[j].n) {
            k++;
        }
        most = k - j > most ? k - j : most;
    }
    return most;
}

/* What a streaming scaled read holds: the output's spans and weights, the band of source rows
 * being painted, one source row averaged across, and the ring of output rows in progress. */
typedef struct scaler {
    sp_slide *s;
    sp_pixel_format fmt;
    uint8_t *dst;
    int64_t stride, w, h;
    double f;
    span *cols, *rows;
    double *wx, *wy;
    double *across; /* w x 4: the current source row averaged across (premultiplied) */
    double *ring;   /* ring_n x w x 4: output rows in progress */
    int64_t ring_n;
    int64_t opened, done; /* output rows [done, opened) are in progress */
    sp_row_sink sink;     /* when set, finished rows go to it (through row) instead of dst */
    void *user;
    uint8_t *row;
} scaler;

static void average_across(scaler *c, const uint8_t *in) {
    for (int64_t i = 0; i < c->w; i++) {
        double acc[4] = {0, 0, 0, 0};
        const double *wt = c->wx + c->cols[i].weight0;
        for (int k = 0; k < c->cols[i].n; k++) {
            const uint8_t *p = in + (c->cols[i].first + k) * 4;
            double a = wt[k] * p[3];
            acc[0] += a * p[0];
            acc[1] += a * p[1];
            acc[2] += a * p[2];
            acc[3] += a;
        }
        memcpy(c->across + i * 4, acc, sizeof acc);
    }
}

/* Output row j, whose every source row has been added, into the caller's buffer. */
static void finish_row(const scaler *c, int64_t j) {
    const double *acc = c->ring + (j % c->ring_n) * c->w * 4;
    uint8_t *o = c->sink ? c->row : c->dst + j * c->stride;
    int bpp = sp_pixel_format_bytes(c->fmt);
    double area = c->f * c->f * 255.0;
    for (int64_t i = 0; i < c->w; i++, acc += 4) {
        uint8_t px[4] = {0, 0, 0, 0};
        if (acc[3] > 0) {
            px[0] = to_byte(acc[0] / acc[3]);
            px[1] = to_byte(acc[1] / acc[3]);
            px[2] = to_byte(acc[2] / acc[3]);
            px[3] = to_byte(acc[3] / area * 255.0);
        }
        uint8_t *q = o + i * bpp;
        if (c->fmt == SP_PIXEL_RGBA8) {
            memcpy(q, px, 4);
        } else {
            for (int k = 0; k < 3; k++) {
                q[k] = (uint8_t)((px[k] * px[3] + c->s->background[k] * (255 - px[3]) + 127) / 255);
            }
        }
    }
    if (c->sink) {
        c->sink(c->user, j, o);
    }
}

/* Add source row r (painted, in `in`) to the output rows whose spans hold it, and finish those
 * it completes. */
static void add_source_row(scaler *c, int64_t r, const uint8_t *in) {
    while (c->opened < c->h && c->rows[c->opened].first <= r) {
        memset(c->ring + (c->opened % c->ring_n) * c->w * 4, 0, (size_t)c->w * 4 * sizeof(double));
        c->opened++;
    }
    average_across(c, in);
    for (int64_t j = c->done; j < c->opened; j++) {
        int64_t k = r - c->rows[j].first;
        if (k < 0 || k >= c->rows[j].n) {
            continue;
        }
        double wt = c->wy[c->rows[j].weight0 + k];
        double *acc = c->ring + (j % c->ring_n) * c->w * 4;
        for (int64_t i = 0; i < c->w * 4; i++) {
            acc[i] += wt * c->across[i];
        }
    }
    while (c->done < c->opened && c->rows[c->done].first + c->rows[c->done].n - 1 <= r) {
        finish_row(c, c->done++);
    }
}

/* A read whose pixels are whole source pixels (f = 1, whole-pixel offsets: the patch reads of a
 * training loader at a level's own downsample): what the average gives, without it. Each output
 * pixel is then its one source pixel, except that the average gives a pixel of alpha 0 as
 * (0, 0, 0, 0); RGB8 composites both the same way. */
static sp_status exact_copy(sp_slide *s, sp_pixel_format fmt, void *dst, int64_t stride,
                            int32_t level, unsigned scale, int64_t x, int64_t y, int64_t w,
                            int64_t h) {
    sp_status st = sp_slide_read_level_area(s, fmt, dst, stride, level, scale, x, y, w, h, 0);
    for (int64_t j = 0; st == SP_OK && fmt == SP_PIXEL_RGBA8 && j < h; j++) {
        uint8_t *row = (uint8_t *)dst + j * stride;
        for (int64_t i = 0; i < w; i++) {
            uint8_t *px = row + i * 4;
            if (px[3] == 0) {
                memset(px, 0, 4);
            }
        }
    }
    return st;
}

/* The scaled read behind both entry points: rows go to dst, or to sink when it is set. */
static sp_status read_scaled(sp_slide *s, sp_pixel_format fmt, void *dst, int64_t stride,
                             sp_row_sink sink, void *user, double downsample, int64_t x,
                             int64_t y, int64_t w, int64_t h) {
    int bpp = sp_pixel_format_bytes(fmt);
    if (s == NULL || (dst == NULL && sink == NULL) || bpp == 0 || w < 0 || h < 0 ||
        (sink == NULL && stride < w * bpp) || !(downsample >= 1.0 && downsample <= 1e6) ||
        w > (1 << 24) || h > (1 << 24)) {
        return SP_E_INVALID_ARG;
    }
    if (w == 0 || h == 0) {
        return SP_OK;
    }
    int32_t level = sp_slide_best_level_for_downsample(s, downsample);
    const sp_level *l = &s->levels[level];
    double rest = downsample / l->downsample;
    unsigned scales = s->ops->area_scales ? s->ops->area_scales(s, l) : 0;
    unsigned scale = 1;
    for (unsigned c = 2; c <= 8; c *= 2) {
        if ((scales & c) && (double)c <= rest + 1e-9 && l->tile_width % c == 0 &&
            l->tile_height % c == 0) {
            scale = c;
        }
    }
    double unit = l->downsample * scale; /* level-0 pixels per source pixel */
    double f = downsample / unit;
    double u0 = (double)x / unit, v0 = (double)y / unit;
    if (!(fabs(u0) < 1e15 && fabs(v0) < 1e15)) {
        return SP_E_INVALID_ARG;
    }
    /* A band of source rows (at least one tile row, ceil(f) + 2 rows of weights per output
     * pixel) must stay within the allocation limit, checked before anything is allocated. */
    double max_alloc = (double)s->limits.value[SP_LIMIT_MAX_ALLOC];
    double tile_rows = (double)(l->tile_height / scale) + f + 2;
    if ((double)w * (f + 2) * tile_rows * 4 > max_alloc ||
        (double)(w > h ? w : h) * (f + 3) * 8 > max_alloc) {
        for (int64_t j = 0; dst != NULL && j < h; j++) {
            memset((uint8_t *)dst + j * stride, 0, (size_t)(w * bpp));
        }
        return SP_E_LIMIT;
    }
    if (f == 1.0 && u0 == floor(u0) && v0 == floor(v0) && sink == NULL &&
        (fmt == SP_PIXEL_RGB8 || fmt == SP_PIXEL_RGBA8)) {
        return exact_copy(s, fmt, dst, stride, level, scale, (int64_t)u0, (int64_t)v0, w, h);
    }
    scaler c = {.s = s, .fmt = fmt, .dst = dst, .stride = stride, .w = w, .h = h, .f = f,
                .sink = sink, .user = user};
    int64_t sx0 = (int64_t)floor(u0), sy0 = (int64_t)floor(v0);
    c.cols = make_spans(u0 - (double)sx0, f, w, &c.wx);
    c.rows = make_spans(v0 - (double)sy0, f, h, &c.wy);
    int64_t sw = c.cols ? c.cols[w - 1].first + c.cols[w - 1].n : 0;
    int64_t sh = c.rows ? c.rows[h - 1].first + c.rows[h - 1].n : 0;
    int64_t tile_h = l->tile_height / scale;
    int64_t band = c.cols && c.rows ? band_rows(tile_h, sw) : 0;
    uint8_t *src = NULL;
    sp_status st = SP_E_NOMEM;
    if (c.cols && c.rows) {
        c.ring_n = open_rows(c.rows, h);
        src = malloc((size_t)(sw * band * 4));
        c.across = malloc((size_t)w * 4 * sizeof *c.across);
        c.ring = malloc((size_t)(c.ring_n * w * 4) * sizeof *c.ring);
        c.row = sink ? malloc((size_t)(w * bpp)) : NULL;
    }
    if (src != NULL && c.across != NULL && c.ring != NULL && (sink == NULL || c.row != NULL)) {
        st = SP_OK;
    } else {
        sp_err e = {0};
        sp_err_set(&e, SP_E_NOMEM, "out of memory for a scaled read of %lldx%lld", (long long)w,
                   (long long)h);
        sp_slide_record_error(s, &e);
    }
    /* Bands end on tile-row boundaries of the level at 1/scale (sy0 + r counts its rows). */
    for (int64_t r0 = 0; st == SP_OK && r0 < sh;) {
        int64_t end = sy0 + r0 + band;
        end -= ((end % tile_h) + tile_h) % tile_h;
        int64_t r1 = end - sy0 > r0 ? end - sy0 : r0 + band;
        r1 = r1 < sh ? r1 : sh;
        st = sp_slide_read_level_area(s, SP_PIXEL_RGBA8, src, sw * 4, level, scale, sx0, sy0 + r0,
                                      sw, r1 - r0, 0);
        for (int64_t r = r0; st == SP_OK && r < r1; r++) {
            add_source_row(&c, r, src + (r - r0) * sw * 4);
        }
        r0 = r1;
    }
    for (int64_t j = 0; st != SP_OK && dst != NULL && j < h; j++) {
        memset((uint8_t *)dst + j * stride, 0, (size_t)(w * bpp));
    }
    free(src);
    free(c.row);
    free(c.across);
    free(c.ring);
    free(c.cols);
    free(c.rows);
    free(c.wx);
    free(c.wy);
    return st;
}

sp_status sp_slide_read_region_scaled(sp_slide *s, sp_pixel_format fmt, void *dst, int64_t stride,
                                      double downsample, int64_t x, int64_t y, int64_t w,
                                      int64_t h) {
    if (dst == NULL) {
        return SP_E_INVALID_ARG;
    }
    return read_scaled(s, fmt, dst, stride, NULL, NULL, downsample, x, y, w, h);
}

sp_status sp_slide_read_scaled_rows(sp_slide *s, sp_pixel_format fmt, double downsample, int64_t x,
                                    int64_t y, int64_t w, int64_t h, sp_row_sink sink,
                                    void *user) {
    if (sink == NULL) {
        return SP_E_INVALID_ARG;
    }
    return read_scaled(s, fmt, NULL, 0, sink, user, downsample, x, y, w, h);
}
