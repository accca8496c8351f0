/* stains.c — the H&E stains of a slide by Macenko's method, the reference stains, and stain
 * normalization (docs/stains.md defines every step). Estimation reads the slide's low-resolution
 * image as the tissue mask does, keeps the stained pixels (optical density >= 0.15 in every
 * channel), takes the plane of the two main eigenvectors of their OD covariance, and finds the
 * two extreme stain directions in it (1st and 99th percentiles of the angle) and each stain's
 * 99th-percentile concentration. Normalization maps each pixel's concentrations under the
 * source stains onto the target stains; since that is a fixed 3x3 matrix on optical densities,
 * the exponential splits into per-channel factors tabulated once per call, so a pixel costs
 * nine table loads and multiplies. Everything is computed in double precision, pure and
 * deterministic: the same bytes whatever the thread or the order of calls.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/simd_x86.h"
#include "ops/stains.h"
#include "slide/overview.h"

#ifdef SP_HAVE_X86
#include <immintrin.h>
#endif

/* Beyond this |w| * ln 255, three tabulated factors could overflow or underflow a double before
 * they are multiplied together; such stains take the exp-per-pixel path instead. */
#define TABLE_EXPONENT_LIMIT 230.0

/* -ln(max(i, 1) / 255): the optical density of each 8-bit value. */
void sp_stains_od_table(double od[256]) {
    for (int i = 0; i < 256; i++) {
        od[i] = -log((i < 1 ? 1.0 : (double)i) / 255.0);
    }
}

static double dot3(const double a[3], const double b[3]) {
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

/* Turn v so that its components sum to >= 0. */
static void positive(double v[3]) {
    if (v[0] + v[1] + v[2] < 0) {
        for (int k = 0; k < 3; k++) {
            v[k] = -v[k];
        }
    }
}

/* Scale to unit length, then turn as positive() does. */
static void unit_positive(double v[3]) {
    double len = sqrt(dot3(v, v));
    for (int k = 0; k < 3; k++) {
        v[k] /= len;
    }
    positive(v);
}

/* ---- percentiles ---------------------------------------------------------------------- */

static double median3(double a, double b, double c) {
    if (a > b) {
        double t = a;
        a = b;
        b = t;
    }
    return c < a ? a : c > b ? b : c;
}

/* Reorder v so that v[k] is the k-th smallest value (0-based), everything before it <= it and
 * everything after >= it. Three-way partitions: the values have many ties (a pixel's angle and
 * concentrations depend only on its colour). */
static void select_kth(double *v, int64_t n, int64_t k) {
    int64_t lo = 0, hi = n - 1;
    while (lo < hi) {
        double pivot = median3(v[lo], v[lo + (hi - lo) / 2], v[hi]);
        int64_t lt = lo, i = lo, gt = hi;
        while (i <= gt) {
            double x = v[i];
            if (x < pivot) {
                v[i++] = v[lt];
                v[lt++] = x;
            } else if (x > pivot) {
                v[i] = v[gt];
                v[gt--] = x;
            } else {
                i++;
            }
        }
        if (k < lt) {
            hi = lt - 1;
        } else if (k > gt) {
            lo = gt + 1;
        } else {
            return;
        }
    }
}

double sp_stains_percentile(double *values, int64_t n, double p) {
    double q = p / 100.0;
    double vi = (double)(n - 1) * q;
    int64_t prev = (int64_t)floor(vi);
    if (prev < 0) {
        prev = 0;
    }
    if (prev > n - 1) {
        prev = n - 1;
    }
    double t = vi - (double)prev;
    select_kth(values, n, prev);
    double a = values[prev], b = a;
    if (prev + 1 < n) {
        b = values[prev + 1];
        for (int64_t i = prev + 2; i < n; i++) {
            b = values[i] < b ? values[i] : b;
        }
    }
    /* numpy's _lerp: from the nearer end, so t = 0 gives a and t = 1 gives b exactly. */
    double diff = b - a;
    return t >= 0.5 ? b - diff * (1.0 - t) : a + diff * t;
}

/* ---- estimation ----------------------------------------------------------------------- */

/* Eigen-decomposition of a symmetric 3x3 matrix by cyclic Jacobi rotations: vals[i] with unit
 * eigenvector (vecs[0][i], vecs[1][i], vecs[2][i]). */
static void jacobi3(double a[3][3], double vals[3], double vecs[3][3]) {
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 3; j++) {
            vecs[i][j] = i == j;
        }
    }
    for (int sweep = 0; sweep < 64; sweep++) {
        double off = a[0][1] * a[0][1] + a[0][2] * a[0][2] + a[1][2] * a[1][2];
        if (off < DBL_MIN) {
            break;
        }
        for (int p = 0; p < 2; p++) {
            for (int q = p + 1; q < 3; q++) {
                if (a[p][q] == 0) {
                    continue;
                }
                double theta = (a[q][q] - a[p][p]) / (2.0 * a[p][q]);
                double t = fabs(theta) > 1e150 ? 0.5 / theta
                                               : (theta >= 0 ? 1.0 : -1.0) /
                                                     (fabs(theta) + sqrt(theta * theta + 1.0));
                double c = 1.0 / sqrt(t * t + 1.0), s = t * c;
                for (int k = 0; k < 3; k++) {
                    double kp = a[k][p], kq = a[k][q];
                    a[k][p] = c * kp - s * kq;
                    a[k][q] = s * kp + c * kq;
                }
                for (int k = 0; k < 3; k++) {
                    double pk = a[p][k], qk = a[q][k];
                    a[p][k] = c * pk - s * qk;
                    a[q][k] = s * pk + c * qk;
                }
                for (int k = 0; k < 3; k++) {
                    double kp = vecs[k][p], kq = vecs[k][q];
                    vecs[k][p] = c * kp - s * kq;
                    vecs[k][q] = s * kp + c * kq;
                }
            }
        }
    }
    for (int i = 0; i < 3; i++) {
        vals[i] = a[i][i];
    }
}

/* The least-squares concentrations of od against stains h, e are p[0] . od and p[1] . od, p the
 * pseudo-inverse of the 3x2 matrix [h e] from the 2x2 normal equations. False when h and e are
 * (nearly) parallel or zero, where there is no unique solution. */
static bool pseudo_inverse(const double h[3], const double e[3], double p[2][3]) {
    double hh = dot3(h, h), ee = dot3(e, e), he = dot3(h, e);
    double det = hh * ee - he * he;
    if (!(hh > 0) || !(ee > 0) || !(det > 1e-12 * hh * ee) || !isfinite(det)) {
        return false;
    }
    for (int k = 0; k < 3; k++) {
        p[0][k] = (ee * h[k] - he * e[k]) / det;
        p[1][k] = (hh * e[k] - he * h[k]) / det;
    }
    return true;
}

/* Steps 3-7 on `n` RGB8 pixels, which are overwritten (the stained ones are moved to the
 * front). */
static sp_status estimate_in_place(uint8_t *rgb, int64_t n, sp_stains *out, sp_err *err) {
    double od[256];
    sp_stains_od_table(od);
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++) {
        uint8_t r = rgb[3 * i], g = rgb[3 * i + 1], b = rgb[3 * i + 2];
        if (od[r] >= SP_STAINS_BETA && od[g] >= SP_STAINS_BETA && od[b] >= SP_STAINS_BETA) {
            rgb[3 * m] = r;
            rgb[3 * m + 1] = g;
            rgb[3 * m + 2] = b;
            m++;
        }
    }
    if (m < SP_STAINS_MIN_PIXELS) {
        return sp_err_set(err, SP_E_UNSUPPORTED,
                          "too few stained pixels (%lld) to estimate stains from", (long long)m);
    }

    /* Step 4: the covariance (numpy.cov: mean subtracted, divided by m - 1). */
    double mean[3] = {0, 0, 0};
    for (int64_t i = 0; i < m; i++) {
        for (int k = 0; k < 3; k++) {
            mean[k] += od[rgb[3 * i + k]];
        }
    }
    for (int k = 0; k < 3; k++) {
        mean[k] /= (double)m;
    }
    double s[6] = {0, 0, 0, 0, 0, 0}; /* xx, xy, xz, yy, yz, zz */
    for (int64_t i = 0; i < m; i++) {
        double x = od[rgb[3 * i]] - mean[0], y = od[rgb[3 * i + 1]] - mean[1],
               z = od[rgb[3 * i + 2]] - mean[2];
        s[0] += x * x;
        s[1] += x * y;
        s[2] += x * z;
        s[3] += y * y;
        s[4] += y * z;
        s[5] += z * z;
    }
    double f = 1.0 / (double)(m - 1);
    double cov[3][3] = {{s[0] * f, s[1] * f, s[2] * f},
                        {s[1] * f, s[3] * f, s[4] * f},
                        {s[2] * f, s[4] * f, s[5] * f}};
    double vals[3], vecs[3][3];
    jacobi3(cov, vals, vecs);
    int order[3] = {0, 1, 2};
    for (int i = 0; i < 3; i++) {
        for (int j = i + 1; j < 3; j++) {
            if (vals[order[j]] > vals[order[i]]) {
                int t = order[i];
                order[i] = order[j];
                order[j] = t;
            }
        }
    }
    double v1[3], v2[3];
    for (int k = 0; k < 3; k++) {
        v1[k] = vecs[k][order[0]];
        v2[k] = vecs[k][order[1]];
    }
    positive(v1);
    positive(v2);

    double *work = malloc((size_t)m * sizeof *work);
    if (work == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory for %lld stained pixels", (long long)m);
    }
    /* Step 5: the angle of each pixel in the (v1, v2) plane. */
    for (int64_t i = 0; i < m; i++) {
        double x[3] = {od[rgb[3 * i]], od[rgb[3 * i + 1]], od[rgb[3 * i + 2]]};
        work[i] = atan2(dot3(x, v2), dot3(x, v1));
    }
    double phi_min = sp_stains_percentile(work, m, 1.0);
    double phi_max = sp_stains_percentile(work, m, 99.0);

    /* Step 6: the extreme directions; haematoxylin is the one absorbing more red. */
    double a[3], b[3];
    for (int k = 0; k < 3; k++) {
        a[k] = v1[k] * cos(phi_min) + v2[k] * sin(phi_min);
        b[k] = v1[k] * cos(phi_max) + v2[k] * sin(phi_max);
    }
    unit_positive(a);
    unit_positive(b);
    const double *h = a[0] > b[0] ? a : b, *e = a[0] > b[0] ? b : a;

    /* Step 7: concentrations and their 99th percentiles. */
    double p[2][3];
    sp_status st = SP_OK;
    double max_c[2] = {0, 0};
    if (!pseudo_inverse(h, e, p)) {
        st = sp_err_set(err, SP_E_UNSUPPORTED,
                        "the two stain directions found are parallel (phi %g to %g): not an "
                        "H&E-stained image?",
                        phi_min, phi_max);
    }
    for (int c = 0; c < 2 && st == SP_OK; c++) {
        for (int64_t i = 0; i < m; i++) {
            double x[3] = {od[rgb[3 * i]], od[rgb[3 * i + 1]], od[rgb[3 * i + 2]]};
            work[i] = dot3(p[c], x);
        }
        max_c[c] = sp_stains_percentile(work, m, 99.0);
        if (!isfinite(max_c[c]) || !(max_c[c] > 0)) {
            st = sp_err_set(err, SP_E_UNSUPPORTED,
                            "the %s concentration's 99th percentile is %g, not positive: not an "
                            "H&E-stained image?",
                            c == 0 ? "haematoxylin" : "eosin", max_c[c]);
        }
    }
    free(work);
    if (st != SP_OK) {
        return st;
    }
    memcpy(out->h, h, sizeof out->h);
    memcpy(out->e, e, sizeof out->e);
    out->max_h = max_c[0];
    out->max_e = max_c[1];
    out->pixels = m;
    return SP_OK;
}

sp_status sp_stains_estimate_rgb(const uint8_t *rgb, int64_t npixels, sp_stains *out, sp_err *err) {
    if (out == NULL) {
        return sp_err_set(err, SP_E_INVALID_ARG, "stains: null output");
    }
    memset(out, 0, sizeof *out);
    if ((rgb == NULL && npixels > 0) || npixels < 0) {
        return sp_err_set(err, SP_E_INVALID_ARG, "stains: bad pixel array");
    }
    uint8_t *copy = malloc(npixels > 0 ? (size_t)npixels * 3 : 1);
    if (copy == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory copying %lld pixels", (long long)npixels);
    }
    if (npixels > 0) {
        memcpy(copy, rgb, (size_t)npixels * 3);
    }
    sp_status st = estimate_in_place(copy, npixels, out, err);
    free(copy);
    if (st != SP_OK) {
        memset(out, 0, sizeof *out);
    }
    return st;
}

sp_status sp_stains_estimate_slide(sp_slide *slide, int64_t max_side, sp_stains *out, sp_err *err) {
    if (out != NULL) {
        memset(out, 0, sizeof *out);
    }
    if (slide == NULL || out == NULL) {
        return sp_err_set(err, SP_E_INVALID_ARG, "sp_stains_estimate: null argument");
    }
    sp_overview img;
    sp_status st = sp_overview_read(slide, max_side, "stains", &img, err);
    if (st == SP_OK) {
        st = estimate_in_place(img.rgb, img.width * img.height, out, err); /* steps 2-7 */
    }
    free(img.rgb);
    if (st != SP_OK) {
        memset(out, 0, sizeof *out);
    }
    return st;
}

/* ---- the public calls ----------------------------------------------------------------- */

void sp_stains_reference(sp_stains *out) {
    if (out == NULL) {
        return;
    }
    static const double h[3] = {0.5626, 0.7201, 0.4062}, e[3] = {0.2159, 0.8012, 0.5581};
    memset(out, 0, sizeof *out);
    double lh = sqrt(dot3(h, h)), le = sqrt(dot3(e, e));
    for (int k = 0; k < 3; k++) {
        out->h[k] = h[k] / lh;
        out->e[k] = e[k] / le;
    }
    out->max_h = 1.9705;
    out->max_e = 1.0308;
}

sp_status sp_stains_estimate(sp_slide *slide, int64_t max_side, sp_stains *out, char *err,
                             size_t err_len) {
    sp_err e = {0};
    sp_status st = sp_stains_estimate_slide(slide, max_side, out, &e);
    sp_err_report(st, &e, err, err_len);
    return st;
}

/* ---- normalization -------------------------------------------------------------------- */

static sp_status check_stains(const sp_stains *s, const char *which, double p[2][3], sp_err *err) {
    for (int k = 0; k < 3; k++) {
        if (!isfinite(s->h[k]) || !isfinite(s->e[k])) {
            return sp_err_set(err, SP_E_INVALID_ARG, "%s stain vectors are not finite", which);
        }
    }
    if (!isfinite(s->max_h) || !isfinite(s->max_e) || !(s->max_h > 0) || !(s->max_e > 0)) {
        return sp_err_set(err, SP_E_INVALID_ARG,
                          "%s stain concentrations (%g, %g) must be finite and positive", which,
                          s->max_h, s->max_e);
    }
    if (!pseudo_inverse(s->h, s->e, p)) {
        return sp_err_set(err, SP_E_INVALID_ARG, "%s stain vectors are zero or parallel", which);
    }
    return SP_OK;
}

sp_status sp_stains_map_init(const sp_stains *source, const sp_stains *target, sp_stains_map *map,
                             sp_err *err) {
    if (source == NULL || target == NULL || map == NULL) {
        return sp_err_set(err, SP_E_INVALID_ARG, "stains: null argument");
    }
    double ps[2][3], pt[2][3];
    sp_status st = check_stains(source, "source", ps, err);
    if (st == SP_OK) {
        st = check_stains(target, "target", pt, err);
    }
    if (st != SP_OK) {
        return st;
    }
    /* out_k = 255 exp(-(t.h[k] sh (ps[0] . od) + t.e[k] se (ps[1] . od))) = 255 exp(-w[k] . od) */
    double sh = target->max_h / source->max_h, se = target->max_e / source->max_e;
    double big = 0;
    for (int k = 0; k < 3; k++) {
        for (int j = 0; j < 3; j++) {
            double w = target->h[k] * (sh * ps[0][j]) + target->e[k] * (se * ps[1][j]);
            if (!isfinite(w) || fabs(w) > 1e300) {
                return sp_err_set(err, SP_E_INVALID_ARG,
                                  "the source and target stains are too far apart to normalize "
                                  "between");
            }
            map->w[k][j] = w;
            big = fabs(w) > big ? fabs(w) : big;
        }
    }
    double od[256];
    sp_stains_od_table(od);
    map->tabled = big * od[0] <= TABLE_EXPONENT_LIMIT;
    if (map->tabled) {
        for (int k = 0; k < 3; k++) {
            for (int j = 0; j < 3; j++) {
                for (int v = 0; v < 256; v++) {
                    map->factor[k][j][v] = exp(-map->w[k][j] * od[v]);
                    map->lanes[j][v][k] = map->factor[k][j][v];
                }
            }
        }
        for (int j = 0; j < 3; j++) {
            for (int v = 0; v < 256; v++) {
                map->lanes[j][v][3] = 0.0;
            }
        }
    }
    return SP_OK;
}

static uint8_t to_byte(double x) {
    /* x >= 0; NaN (not expected) and everything from 255 up give 255. */
    return x < 255.0 ? (uint8_t)(x + 0.5) : 255;
}

#ifdef SP_HAVE_X86
/* The tabled map with the three channels of a pixel in the lanes of one AVX vector
 * (map->lanes): each lane is the scalar loop's 255 * f0 * f1 * f2, the same IEEE products in
 * the same order, then to_byte's rounding as trunc(min(255, x) + 0.5), which equals it because
 * the tabled factors are finite and positive (no NaN). So the bytes are the scalar loop's
 * (tests/unit/test_colour_lanes.c checks every colour). */
__attribute__((target("avx"))) static void apply_lanes(const sp_stains_map *map, const uint8_t *rgb,
                                                       int64_t n, uint8_t *out, int64_t pixel_step,
                                                       int64_t channel_step) {
    const __m256d top = _mm256_set1_pd(255.0), half = _mm256_set1_pd(0.5);
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *px = rgb + 3 * i;
        __m256d x = _mm256_mul_pd(top, _mm256_loadu_pd(map->lanes[0][px[0]]));
        x = _mm256_mul_pd(x, _mm256_loadu_pd(map->lanes[1][px[1]]));
        x = _mm256_mul_pd(x, _mm256_loadu_pd(map->lanes[2][px[2]]));
        uint32_t b = sp_x86_bytes4(_mm256_cvttpd_epi32(_mm256_add_pd(_mm256_min_pd(top, x), half)));
        uint8_t *o = out + i * pixel_step;
        o[0] = (uint8_t)b;
        o[channel_step] = (uint8_t)(b >> 8);
        o[2 * channel_step] = (uint8_t)(b >> 16);
    }
}
#endif

void sp_stains_map_apply(const sp_stains_map *map, const uint8_t *rgb, int64_t n, uint8_t *out,
                         int64_t pixel_step, int64_t channel_step) {
#ifdef SP_HAVE_X86
    if (map->tabled && __builtin_cpu_supports("avx")) {
        apply_lanes(map, rgb, n, out, pixel_step, channel_step);
        return;
    }
#endif
    if (map->tabled) {
        const double(*f)[3][256] = map->factor;
        for (int64_t i = 0; i < n; i++) {
            uint8_t r = rgb[3 * i], g = rgb[3 * i + 1], b = rgb[3 * i + 2];
            double x0 = 255.0 * f[0][0][r] * f[0][1][g] * f[0][2][b];
            double x1 = 255.0 * f[1][0][r] * f[1][1][g] * f[1][2][b];
            double x2 = 255.0 * f[2][0][r] * f[2][1][g] * f[2][2][b];
            out[i * pixel_step] = to_byte(x0);
            out[i * pixel_step + channel_step] = to_byte(x1);
            out[i * pixel_step + 2 * channel_step] = to_byte(x2);
        }
        return;
    }
    double od[256];
    sp_stains_od_table(od);
    for (int64_t i = 0; i < n; i++) {
        double x[3] = {od[rgb[3 * i]], od[rgb[3 * i + 1]], od[rgb[3 * i + 2]]};
        for (int k = 0; k < 3; k++) {
            out[i * pixel_step + k * channel_step] = to_byte(255.0 * exp(-dot3(map->w[k], x)));
        }
    }
}

sp_status sp_stains_normalize(const sp_stains *source, const sp_stains *target, uint8_t *rgb,
                              int64_t npixels) {
    if (rgb == NULL || npixels < 0) {
        return SP_E_INVALID_ARG;
    }
    sp_stains_map map;
    sp_status st = sp_stains_map_init(source, target, &map, NULL);
    if (st == SP_OK) {
        sp_stains_map_apply(&map, rgb, npixels, rgb, 3, 1);
    }
    return st;
}
