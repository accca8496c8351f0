/* reinhard.c — Reinhard colour transfer (E. Reinhard et al., "Color transfer between images",
 * 2001) for H&E slides: a slide's colour statistics (mean and standard deviation of each CIELAB
 * channel over its tissue pixels, read at low resolution as the stain estimate reads it), the
 * reference statistics, and the per-pixel map that moves a pixel from one set of statistics to
 * the other. The colour space is CIELAB (sRGB, D65) as scikit-image and torchstain compute it,
 * not the lαβ of Reinhard's paper, so the tests can hold it against torchstain's normalizer;
 * docs/stains.md defines every step. Everything is computed in double precision on the pixel
 * alone, so the bytes do not depend on the thread, the tile or the call.
 */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ops/reinhard.h"
#include "ops/reinhard_math.h"
#include "slide/overview.h"

/* sRGB primaries to XYZ (the matrix scikit-image and OpenCV use) and the D65 white. */
static const double RGB_TO_XYZ[3][3] = {
    {0.412453, 0.357580, 0.180423}, {0.212671, 0.715160, 0.072169}, {0.019334, 0.119193, 0.950227}};
static const double WHITE[3] = {0.95047, 1.0, 1.08883};

/* The inverse of RGB_TO_XYZ, by the adjugate in double. */
static void xyz_to_rgb_matrix(double inv[3][3]) {
    const double(*m)[3] = RGB_TO_XYZ;
    double c[3][3];
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 3; j++) {
            int i1 = (i + 1) % 3, i2 = (i + 2) % 3, j1 = (j + 1) % 3, j2 = (j + 2) % 3;
            c[i][j] = m[i1][j1] * m[i2][j2] - m[i1][j2] * m[i2][j1];
        }
    }
    double det = m[0][0] * c[0][0] + m[0][1] * c[0][1] + m[0][2] * c[0][2];
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 3; j++) {
            inv[i][j] = c[j][i] / det;
        }
    }
}

void sp_reinhard_xyz_to_rgb(double inv[3][3]) {
    xyz_to_rgb_matrix(inv);
}

/* The linear value of each 8-bit code: the same doubles sp_srgb_to_linear gives, computed once. */
typedef struct linear_table {
    double v[256];
} linear_table;

static void linear_table_init(linear_table *t) {
    for (int i = 0; i < 256; i++) {
        t->v[i] = sp_srgb_to_linear(i / 255.0);
    }
}

static void lab_of(const linear_table *t, const uint8_t rgb[3], double lab[3]) {
    double lin[3] = {t->v[rgb[0]], t->v[rgb[1]], t->v[rgb[2]]}, f[3];
    for (int i = 0; i < 3; i++) {
        double x =
            RGB_TO_XYZ[i][0] * lin[0] + RGB_TO_XYZ[i][1] * lin[1] + RGB_TO_XYZ[i][2] * lin[2];
        f[i] = sp_lab_f(x / WHITE[i]);
    }
    lab[0] = 116.0 * f[1] - 16.0;
    lab[1] = 500.0 * (f[0] - f[1]);
    lab[2] = 200.0 * (f[1] - f[2]);
}

void sp_reinhard_rgb_to_lab(const uint8_t rgb[3], double lab[3]) {
    linear_table t;
    linear_table_init(&t);
    lab_of(&t, rgb, lab);
}

static void lab_to_rgb_with(const double inv[3][3], const double lab[3], uint8_t rgb[3]) {
    double fy = (lab[0] + 16.0) / 116.0;
    double f[3] = {lab[1] / 500.0 + fy, fy, fy - lab[2] / 200.0};
    double xyz[3];
    for (int i = 0; i < 3; i++) {
        xyz[i] = sp_lab_f_inv(f[i]) * WHITE[i];
    }
    for (int k = 0; k < 3; k++) {
        rgb[k] = sp_linear_to_byte(inv[k][0] * xyz[0] + inv[k][1] * xyz[1] + inv[k][2] * xyz[2]);
    }
}

void sp_reinhard_lab_to_rgb(const double lab[3], uint8_t rgb[3]) {
    double inv[3][3];
    xyz_to_rgb_matrix(inv);
    lab_to_rgb_with(inv, lab, rgb);
}

/* ---- statistics ----------------------------------------------------------------------- */

sp_status sp_reinhard_check(const sp_reinhard_stats *s, const char *which, sp_err *err) {
    if (s == NULL) {
        return sp_err_set(err, SP_E_INVALID_ARG, "reinhard: null %s statistics", which);
    }
    static const double mean_lo[3] = {0, -200, -200}, mean_hi[3] = {100, 200, 200};
    for (int k = 0; k < 3; k++) {
        if (!(s->mean[k] >= mean_lo[k] && s->mean[k] <= mean_hi[k])) {
            return sp_err_set(err, SP_E_INVALID_ARG,
                              "reinhard: %s mean of channel %d (%g) is outside [%g, %g]", which, k,
                              s->mean[k], mean_lo[k], mean_hi[k]);
        }
        if (!(s->std[k] >= 1e-6 && s->std[k] <= 200)) {
            return sp_err_set(err, SP_E_INVALID_ARG,
                              "reinhard: %s standard deviation of channel %d (%g) is outside "
                              "[1e-6, 200]",
                              which, k, s->std[k]);
        }
    }
    return SP_OK;
}

static bool is_tissue(const uint8_t *p) {
    return p[0] <= SP_REINHARD_TISSUE_MAX || p[1] <= SP_REINHARD_TISSUE_MAX ||
           p[2] <= SP_REINHARD_TISSUE_MAX;
}

/* Two passes (mean, then the squared deviations), each summed in pixel order. */
static int64_t stats_of(const uint8_t *rgb, int64_t n, bool tissue_only, sp_reinhard_stats *out) {
    linear_table t;
    linear_table_init(&t);
    double sum[3] = {0, 0, 0}, sq[3] = {0, 0, 0};
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++) {
        if (tissue_only && !is_tissue(rgb + 3 * i)) {
            continue;
        }
        double lab[3];
        lab_of(&t, rgb + 3 * i, lab);
        for (int k = 0; k < 3; k++) {
            sum[k] += lab[k];
        }
        m++;
    }
    if (m == 0) {
        return 0;
    }
    double mean[3];
    for (int k = 0; k < 3; k++) {
        mean[k] = sum[k] / (double)m;
    }
    for (int64_t i = 0; i < n; i++) {
        if (tissue_only && !is_tissue(rgb + 3 * i)) {
            continue;
        }
        double lab[3];
        lab_of(&t, rgb + 3 * i, lab);
        for (int k = 0; k < 3; k++) {
            double d = lab[k] - mean[k];
            sq[k] += d * d;
        }
    }
    for (int k = 0; k < 3; k++) {
        out->mean[k] = mean[k];
        out->std[k] = sqrt(sq[k] / (double)m);
    }
    out->pixels = m;
    return m;
}

sp_status sp_reinhard_stats_compute(const uint8_t *rgb, int64_t npixels, int tissue_only,
                                    sp_reinhard_stats *out) {
    if (out == NULL) {
        return SP_E_INVALID_ARG;
    }
    memset(out, 0, sizeof *out);
    if ((rgb == NULL && npixels > 0) || npixels < 0) {
        return SP_E_INVALID_ARG;
    }
    return stats_of(rgb, npixels, tissue_only != 0, out) > 0 ? SP_OK : SP_E_UNSUPPORTED;
}

sp_status sp_reinhard_estimate_slide(sp_slide *slide, int64_t max_side, sp_reinhard_stats *out,
                                     sp_err *err) {
    if (out != NULL) {
        memset(out, 0, sizeof *out);
    }
    if (slide == NULL || out == NULL) {
        return sp_err_set(err, SP_E_INVALID_ARG, "sp_reinhard_estimate: null argument");
    }
    sp_overview img;
    sp_status st = sp_overview_read(slide, max_side, "reinhard", &img, err);
    if (st == SP_OK) {
        int64_t m = stats_of(img.rgb, img.width * img.height, true, out);
        if (m < SP_REINHARD_MIN_PIXELS) {
            st = sp_err_set(err, SP_E_UNSUPPORTED,
                            "too few tissue pixels (%lld) to estimate colour statistics from",
                            (long long)m);
        }
    }
    free(img.rgb);
    if (st != SP_OK) {
        memset(out, 0, sizeof *out);
    }
    return st;
}

sp_status sp_reinhard_estimate(sp_slide *slide, int64_t max_side, sp_reinhard_stats *out, char *err,
                               size_t err_len) {
    sp_err e = {0};
    sp_status st = sp_reinhard_estimate_slide(slide, max_side, out, &e);
    sp_err_report(st, &e, err, err_len);
    return st;
}

void sp_reinhard_reference(sp_reinhard_stats *out) {
    if (out == NULL) {
        return;
    }
    /* The tissue statistics of CMU-1-Small-Region.svs (OpenSlide's test data) at max side
     * 2048, rounded to 4 decimals (docs/stains.md). */
    static const sp_reinhard_stats ref = {
        .mean = {49.2844, 27.8775, -12.0771}, .std = {19.5856, 12.1380, 8.2900}, .pixels = 0};
    *out = ref;
}

/* ---- normalization -------------------------------------------------------------------- */

sp_status sp_reinhard_map_init(const sp_reinhard_stats *source, const sp_reinhard_stats *target,
                               sp_reinhard_map *map, sp_err *err) {
    if (map == NULL) {
        return sp_err_set(err, SP_E_INVALID_ARG, "reinhard: null map");
    }
    sp_status st = sp_reinhard_check(source, "source", err);
    if (st == SP_OK) {
        st = sp_reinhard_check(target, "target", err);
    }
    if (st != SP_OK) {
        return st;
    }
    for (int k = 0; k < 3; k++) {
        map->source_mean[k] = source->mean[k];
        map->source_std[k] = source->std[k];
        map->target_mean[k] = target->mean[k];
        map->target_std[k] = target->std[k];
    }
    return SP_OK;
}

void sp_reinhard_map_apply(const sp_reinhard_map *map, const uint8_t *rgb, int64_t n, uint8_t *out,
                           int64_t pixel_step, int64_t channel_step) {
    double inv[3][3];
    xyz_to_rgb_matrix(inv);
    linear_table t;
    linear_table_init(&t);
    for (int64_t i = 0; i < n; i++) {
        double lab[3];
        lab_of(&t, rgb + 3 * i, lab);
        for (int k = 0; k < 3; k++) {
            lab[k] = (lab[k] - map->source_mean[k]) / map->source_std[k] * map->target_std[k] +
                     map->target_mean[k];
        }
        uint8_t o[3];
        lab_to_rgb_with(inv, lab, o);
        for (int k = 0; k < 3; k++) {
            out[i * pixel_step + k * channel_step] = o[k];
        }
    }
}

sp_status sp_reinhard_normalize(const sp_reinhard_stats *source, const sp_reinhard_stats *target,
                                uint8_t *rgb, int64_t npixels) {
    if (rgb == NULL || npixels < 0) {
        return SP_E_INVALID_ARG;
    }
    sp_reinhard_map map;
    sp_status st = sp_reinhard_map_init(source, target, &map, NULL);
    if (st == SP_OK) {
        sp_reinhard_map_apply(&map, rgb, npixels, rgb, 3, 1);
    }
    return st;
}
