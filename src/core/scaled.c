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
 * whole-pixel offsets this is an exact copy. docs/reading.md says how DCT scaling differs from
 * this average.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/slide_internal.h"

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

sp_status sp_slide_read_region_scaled(sp_slide *s, sp_pixel_format fmt, void *dst,
                                      int64_t stride, double downsample, int64_t x, int64_t y,
                                      int64_t w, int64_t h) {
    int bpp = sp_pixel_format_bytes(fmt);
    if (s == NULL || dst == NULL || bpp == 0 || w < 0 || h < 0 || stride < w * bpp ||
        !(downsample >= 1.0 && downsample <= 1e6) || w > (1 << 24) || h > (1 << 24)) {
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
    /* The source under the request (and the weight tables, ceil(f) + 2 per output pixel) must
     * stay within the allocation limit, checked before anything is allocated. */
    double max_alloc = (double)s->limits.value[SP_LIMIT_MAX_ALLOC];
    if ((double)w * f * (double)h * f * 4 > max_alloc || (double)h * f * (double)w * 32 > max_alloc ||
        (double)(w > h ? w : h) * (f + 3) * 8 > max_alloc) {
        for (int64_t j = 0; j < h; j++) {
            memset((uint8_t *)dst + j * stride, 0, (size_t)(w * bpp));
        }
        return SP_E_LIMIT;
    }
    double *wx = NULL, *wy = NULL;
    int64_t sx0 = (int64_t)floor(u0), sy0 = (int64_t)floor(v0);
    span *cols = make_spans(u0 - (double)sx0, f, w, &wx);
    span *rows = make_spans(v0 - (double)sy0, f, h, &wy);
    int64_t sw = cols ? cols[w - 1].first + cols[w - 1].n : 0;
    int64_t sh = rows ? rows[h - 1].first + rows[h - 1].n : 0;
    uint8_t *src = NULL;
    double *tmp = NULL; /* rows of the source averaged across: sh x w x 4 (premultiplied) */
    sp_status st = SP_E_NOMEM;
    if (cols && rows && (uint64_t)sw * (uint64_t)sh <= ((uint64_t)1 << 31)) {
        src = malloc((size_t)(sw * sh * 4));
        tmp = malloc((size_t)(sh * w * 4) * sizeof *tmp);
    }
    if (src != NULL && tmp != NULL) {
        st = sp_slide_read_level_area(s, SP_PIXEL_RGBA8, src, sw * 4, level, scale, sx0, sy0, sw,
                                      sh, 0);
    }
    if (st == SP_OK) {
        for (int64_t r = 0; r < sh; r++) {
            const uint8_t *in = src + r * sw * 4;
            double *out = tmp + r * w * 4;
            for (int64_t i = 0; i < w; i++) {
                double acc[4] = {0, 0, 0, 0};
                const double *wt = wx + cols[i].weight0;
                for (int k = 0; k < cols[i].n; k++) {
                    const uint8_t *p = in + (cols[i].first + k) * 4;
                    double a = wt[k] * p[3];
                    acc[0] += a * p[0];
                    acc[1] += a * p[1];
                    acc[2] += a * p[2];
                    acc[3] += a;
                }
                memcpy(out + i * 4, acc, sizeof acc);
            }
        }
        uint8_t *o = dst;
        for (int64_t j = 0; j < h; j++) {
            const double *wt = wy + rows[j].weight0;
            for (int64_t i = 0; i < w; i++) {
                double acc[4] = {0, 0, 0, 0};
                for (int k = 0; k < rows[j].n; k++) {
                    const double *p = tmp + ((rows[j].first + k) * w + i) * 4;
                    for (int c = 0; c < 4; c++) {
                        acc[c] += wt[k] * p[c];
                    }
                }
                uint8_t px[4] = {0, 0, 0, 0};
                double area = f * f * 255.0;
                if (acc[3] > 0) {
                    px[0] = to_byte(acc[0] / acc[3]);
                    px[1] = to_byte(acc[1] / acc[3]);
                    px[2] = to_byte(acc[2] / acc[3]);
                    px[3] = to_byte(acc[3] / area * 255.0);
                }
                uint8_t *q = o + j * stride + i * bpp;
                if (fmt == SP_PIXEL_RGBA8) {
                    memcpy(q, px, 4);
                } else {
                    for (int c = 0; c < 3; c++) {
                        q[c] = (uint8_t)((px[c] * px[3] + s->background[c] * (255 - px[3]) + 127) /
                                         255);
                    }
                }
            }
        }
    } else {
        for (int64_t j = 0; j < h; j++) {
            memset((uint8_t *)dst + j * stride, 0, (size_t)(w * bpp));
        }
    }
    free(src);
    free(tmp);
    free(cols);
    free(rows);
    free(wx);
    free(wy);
    return st;
}
