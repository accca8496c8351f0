/* test_scaled_read.c — sp_slide_read_region_scaled against its definition: each output pixel is
 * the area average (alpha-weighted, fractional pixel weights) of the level-0 square it covers,
 * computed here independently (direct 2D overlaps over a plain sp_slide_read_region of the best
 * level). Where no DCT scaling applies (Deflate tiles, downsamples below 2 from the level) the
 * two must agree to rounding (at most 1); at a level's own downsample they must be identical to
 * sp_slide_read_region. On a JPEG slide the DCT-scaled result is compared with the average of
 * the full decode and the difference printed (docs/reading.md quotes it). Reads of whole source
 * pixels (f = 1, whole offsets) are copied without the average: they must equal it exactly, and
 * equal the rows the average streams to a sink (sp_slide_read_scaled_rows, which always
 * averages), in RGBA8 and RGB8. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "slide/slide.h"
#include "slidepipe.h"
#include "unit.h"

/* The definition, from the best level read at full size. */
static uint8_t *reference(sp_slide *s, double D, int64_t x, int64_t y, int64_t w, int64_t h) {
    int32_t level = sp_slide_best_level_for_downsample(s, D);
    double d;
    sp_slide_level_downsample(s, level, &d);
    double f = D / d, u0 = (double)x / d, v0 = (double)y / d;
    int64_t sx = (int64_t)floor(u0), sy = (int64_t)floor(v0);
    int64_t sw = (int64_t)ceil(u0 + (double)w * f) - sx + 1;
    int64_t sh = (int64_t)ceil(v0 + (double)h * f) - sy + 1;
    uint8_t *src = malloc((size_t)(sw * sh * 4));
    /* level-0 coordinates whose floor(/ d) is exactly (sx, sy) */
    CHECK_EQ_INT(sp_slide_read_region(s, SP_PIXEL_RGBA8, src, sw * 4, level,
                                      (int64_t)ceil((double)sx * d), (int64_t)ceil((double)sy * d),
                                      sw, sh),
                 SP_OK);
    uint8_t *out = calloc((size_t)(w * h), 4);
    for (int64_t j = 0; j < h; j++) {
        for (int64_t i = 0; i < w; i++) {
            double a0 = u0 + (double)i * f - (double)sx, a1 = a0 + f;
            double b0 = v0 + (double)j * f - (double)sy, b1 = b0 + f;
            double acc[4] = {0, 0, 0, 0};
            for (int64_t q = (int64_t)floor(b0); (double)q < b1; q++) {
                double wy = fmin(b1, (double)q + 1) - fmax(b0, (double)q);
                for (int64_t p = (int64_t)floor(a0); (double)p < a1; p++) {
                    double wx = fmin(a1, (double)p + 1) - fmax(a0, (double)p);
                    const uint8_t *px = src + (q * sw + p) * 4;
                    double a = wx * wy * px[3];
                    for (int c = 0; c < 3; c++) {
                        acc[c] += a * px[c];
                    }
                    acc[3] += a;
                }
            }
            uint8_t *o = out + (j * w + i) * 4;
            if (acc[3] > 0) {
                for (int c = 0; c < 3; c++) {
                    o[c] = (uint8_t)floor(acc[c] / acc[3] + 0.5);
                }
                o[3] = (uint8_t)floor(acc[3] / (f * f) + 0.5);
            }
        }
    }
    free(src);
    return out;
}

static void compare(sp_slide *s, const char *name, double D, int64_t x, int64_t y, int64_t w,
                    int64_t h, int max_allowed, double mean_allowed) {
    uint8_t *got = malloc((size_t)(w * h * 4));
    CHECK_EQ_INT(sp_slide_read_region_scaled(s, SP_PIXEL_RGBA8, got, w * 4, D, x, y, w, h),
                 SP_OK);
    uint8_t *want = reference(s, D, x, y, w, h);
    int max = 0;
    double sum = 0;
    for (int64_t k = 0; k < w * h * 4; k++) {
        int d = abs(got[k] - want[k]);
        max = d > max ? d : max;
        sum += d;
    }
    printf("%s downsample %.3g at (%lld,%lld) %lldx%lld: vs area average mean |d| %.4f, max %d\n",
           name, D, (long long)x, (long long)y, (long long)w, (long long)h,
           sum / (double)(w * h * 4), max);
    CHECK(max <= max_allowed);
    CHECK(sum / (double)(w * h * 4) <= mean_allowed);
    free(got);
    free(want);
}

typedef struct rows_out {
    uint8_t *dst;
    int64_t stride;
} rows_out;

static void keep_row(void *user, int64_t j, const uint8_t *row) {
    rows_out *o = user;
    memcpy(o->dst + j * o->stride, row, (size_t)o->stride);
}

/* The copied read against the averaged one, for a region of whole source pixels. */
static void compare_exact(sp_slide *s, sp_pixel_format fmt, double D, int64_t x, int64_t y,
                          int64_t w, int64_t h) {
    int bpp = fmt == SP_PIXEL_RGB8 ? 3 : 4;
    uint8_t *copied = malloc((size_t)(w * h * bpp)), *averaged = malloc((size_t)(w * h * bpp));
    CHECK_EQ_INT(sp_slide_read_region_scaled(s, fmt, copied, w * bpp, D, x, y, w, h), SP_OK);
    rows_out o = {averaged, w * bpp};
    CHECK_EQ_INT(sp_slide_read_scaled_rows(s, fmt, D, x, y, w, h, keep_row, &o), SP_OK);
    CHECK(memcmp(copied, averaged, (size_t)(w * h * bpp)) == 0);
    free(copied);
    free(averaged);
}

void unit_run(void) {
    const char *data = unit_testdata();
    if (data == NULL) {
        unit_skip("../shared/testdata is absent");
        return;
    }
    char path[4096], err[512];
    sp_slide *s = NULL;
    /* Deflate tiles, three levels: no DCT scaling, only the area average. */
    snprintf(path, sizeof path, "%s/generic-tiff/boxes.tiff", data);
    CHECK_EQ_INT(sp_slide_open(path, &s, err, sizeof err), SP_OK);
    double ds[] = {1.0, 1.5, 2.0, 2.7, 3.0, 4.0, 5.3};
    for (size_t i = 0; i < sizeof ds / sizeof ds[0]; i++) {
        compare(s, "boxes.tiff", ds[i], 7, 3, 50, 40, 1, 0.05);
        compare(s, "boxes.tiff", ds[i], -20, 150, 64, 64, 1, 0.05); /* over the edge */
    }
    /* Whole source pixels: copied, exactly the average, inside and over the edges. */
    compare(s, "boxes.tiff", 1.0, 7, 3, 50, 40, 0, 0.0);
    compare(s, "boxes.tiff", 1.0, -20, 150, 64, 64, 0, 0.0);
    for (int k = 0; k < 2; k++) {
        sp_pixel_format fmt = k ? SP_PIXEL_RGB8 : SP_PIXEL_RGBA8;
        compare_exact(s, fmt, 1.0, 7, 3, 50, 40);
        compare_exact(s, fmt, 1.0, -20, 150, 64, 64);
        compare_exact(s, fmt, 2.0, -6, 10, 64, 64); /* level 1's own downsample, if 2 */
    }
    /* At a level's own downsample: the level itself. */
    uint8_t a[64 * 64 * 4], b[64 * 64 * 4];
    CHECK_EQ_INT(sp_slide_read_region_scaled(s, SP_PIXEL_RGBA8, a, 64 * 4, 2.0, 10, 20, 64, 64),
                 SP_OK);
    CHECK_EQ_INT(sp_slide_read_region(s, SP_PIXEL_RGBA8, b, 64 * 4, 1, 10, 20, 64, 64), SP_OK);
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK_EQ_INT(sp_slide_read_region_scaled(s, SP_PIXEL_RGBA8, a, 64 * 4, 0.5, 0, 0, 8, 8),
                 SP_E_INVALID_ARG);
    /* 64x64 pixels of 100000 level-0 pixels each: far more source than one allocation may hold */
    memset(a, 0x77, sizeof a);
    CHECK_EQ_INT(sp_slide_read_region_scaled(s, SP_PIXEL_RGBA8, a, 64 * 4, 1e5, 0, 0, 64, 64),
                 SP_E_LIMIT);
    CHECK(a[0] == 0 && a[sizeof a - 1] == 0);
    sp_slide_close(s);

    /* JPEG tiles (240x240, one level): 1/2, 1/4, 1/8 come from libjpeg's DCT scaling. */
    snprintf(path, sizeof path, "%s/aperio/CMU-1-Small-Region.svs", data);
    CHECK_EQ_INT(sp_slide_open(path, &s, err, sizeof err), SP_OK);
    double jd[] = {2.0, 3.0, 4.0, 8.0, 11.0};
    for (size_t i = 0; i < sizeof jd / sizeof jd[0]; i++) {
        compare(s, "CMU-1-Small-Region.svs", jd[i], 240, 480, 1500 / (int64_t)jd[i],
                1500 / (int64_t)jd[i], 255, 4.0);
    }
    uint8_t rgb[100 * 100 * 3], rgba[100 * 100 * 4];
    CHECK_EQ_INT(sp_slide_read_region_scaled(s, SP_PIXEL_RGB8, rgb, 300, 4.0, 0, 0, 100, 100),
                 SP_OK);
    CHECK_EQ_INT(sp_slide_read_region_scaled(s, SP_PIXEL_RGBA8, rgba, 400, 4.0, 0, 0, 100, 100),
                 SP_OK);
    int same = 1;
    for (int k = 0; k < 100 * 100; k++) {
        same &= memcmp(rgb + 3 * k, rgba + 4 * k, 3) == 0 && rgba[4 * k + 3] == 255;
    }
    CHECK(same);
    sp_slide_close(s);
}
