/* test_stains.c — Macenko stain estimation and normalization (src/ops/stains.c,
 * docs/stains.md).
 *
 * The percentile rule is checked on small arrays against numpy.percentile's values worked out by
 * hand. The estimate is run on synthetic pixels made from known stains and concentrations (pure
 * haematoxylin, pure eosin and mixtures, rounded to 8 bits, with white background that must be
 * left out) and must give those stains back, within what the 8-bit rounding allows. The
 * normalization is compared with a direct double-precision evaluation of its definition written
 * out here (least squares by the normal equations, exp per pixel), on the table path and on the
 * exp-per-pixel path of extreme stains; source == target must be (nearly) the identity on stained
 * pixels; the `macenko` op must give the same bytes as sp_stains_normalize. Bad arguments are
 * refused.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_ops.h"
#include "ops/op.h"
#include "ops/stains.h"
#include "unit.h"

static uint64_t rng_state = 0x2545f4914f6cdd1dull;
static double uniform(double lo, double hi) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return lo + (hi - lo) * (double)(rng_state >> 11) / 9007199254740992.0;
}

static double dot(const double *a, const double *b) {
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

static uint8_t intensity(double od) {
    double v = floor(255.0 * exp(-od) + 0.5);
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

static void test_percentile(void) {
    double a[] = {1, 2, 3, 4};
    CHECK(fabs(sp_stains_percentile(a, 4, 50) - 2.5) < 1e-12);
    double b[] = {4, 3, 2, 1};
    CHECK(fabs(sp_stains_percentile(b, 4, 1) - 1.03) < 1e-12); /* position 0.03 */
    double c[] = {2, 4, 1, 3};
    CHECK(fabs(sp_stains_percentile(c, 4, 99) - 3.97) < 1e-12); /* position 2.97 */
    double d[] = {5, 1, 4, 2, 3};
    CHECK(sp_stains_percentile(d, 5, 25) == 2.0); /* position exactly 1 */
    double e[] = {2, 2, 2, 1, 3, 2, 2};
    CHECK(sp_stains_percentile(e, 7, 50) == 2.0);
    double f[] = {7, -3, 5};
    CHECK(sp_stains_percentile(f, 3, 0) == -3.0);
    double g[] = {7, -3, 5};
    CHECK(sp_stains_percentile(g, 3, 100) == 7.0);
    double one[] = {42};
    CHECK(sp_stains_percentile(one, 1, 99) == 42.0);
    /* 101 values 0..100 shuffled: the p-th percentile is p. */
    double h[101];
    for (int i = 0; i < 101; i++) {
        h[i] = (double)((i * 37) % 101);
    }
    for (int p = 0; p <= 100; p += 7) {
        double copy[101];
        memcpy(copy, h, sizeof copy);
        CHECK(fabs(sp_stains_percentile(copy, 101, p) - p) < 1e-12);
    }
    /* numpy.percentile(np.arange(10.0) ** 2, 99): position 8.91, 81 - 0.09 * 17 = 79.47 */
    double sq[10];
    for (int i = 0; i < 10; i++) {
        sq[9 - i] = (double)(i * i);
    }
    CHECK(fabs(sp_stains_percentile(sq, 10, 99) - 79.47) < 1e-12);
}

/* n stained pixels from stains h, e: 30% pure haematoxylin, 30% pure eosin, 40% mixtures; then
 * `white` background pixels. The true concentrations go to ch, ce. */
static uint8_t *synthetic(const double h[3], const double e[3], int64_t n, int64_t white,
                          double *ch, double *ce) {
    uint8_t *rgb = malloc((size_t)(n + white) * 3);
    for (int64_t i = 0; i < n; i++) {
        double r = uniform(0, 1), a, b;
        if (r < 0.3) {
            a = uniform(0.8, 2.0), b = 0;
        } else if (r < 0.6) {
            a = 0, b = uniform(0.8, 2.0);
        } else {
            a = uniform(0.3, 1.2), b = uniform(0.3, 1.2);
        }
        ch[i] = a;
        ce[i] = b;
        for (int k = 0; k < 3; k++) {
            rgb[3 * i + k] = intensity(a * h[k] + b * e[k]);
        }
    }
    memset(rgb + 3 * n, 255, (size_t)white * 3);
    return rgb;
}

static double angle(const double a[3], const double b[3]) {
    double c = dot(a, b) / sqrt(dot(a, a) * dot(b, b));
    return acos(c > 1 ? 1 : c);
}

static void test_estimate_synthetic(void) {
    sp_stains ref;
    sp_stains_reference(&ref);
    CHECK(fabs(dot(ref.h, ref.h) - 1) < 1e-15 && fabs(dot(ref.e, ref.e) - 1) < 1e-15);
    CHECK(fabs(ref.h[0] - 0.5626 / sqrt(0.5626 * 0.5626 + 0.7201 * 0.7201 + 0.4062 * 0.4062)) <
          1e-15);
    CHECK(ref.max_h == 1.9705 && ref.max_e == 1.0308 && ref.pixels == 0);

    /* Two stain pairs: the reference and a redder, more purple pair. */
    double pairs[2][2][3] = {{{ref.h[0], ref.h[1], ref.h[2]}, {ref.e[0], ref.e[1], ref.e[2]}},
                             {{0.75, 0.58, 0.32}, {0.18, 0.88, 0.44}}};
    for (int t = 0; t < 2; t++) {
        double h[3], e[3];
        for (int k = 0; k < 3; k++) {
            h[k] = pairs[t][0][k] / sqrt(dot(pairs[t][0], pairs[t][0]));
            e[k] = pairs[t][1][k] / sqrt(dot(pairs[t][1], pairs[t][1]));
        }
        int64_t n = 200000, white = 50000;
        double *ch = malloc((size_t)n * sizeof *ch), *ce = malloc((size_t)n * sizeof *ce);
        uint8_t *rgb = synthetic(h, e, n, white, ch, ce);
        sp_stains s;
        sp_err err = {0};
        CHECK_EQ_INT(sp_stains_estimate_rgb(rgb, n + white, &s, &err), SP_OK);
        int64_t stained = 0; /* OD >= 0.15, that is I <= 219, in every channel */
        for (int64_t i = 0; i < n + white; i++) {
            stained += rgb[3 * i] <= 219 && rgb[3 * i + 1] <= 219 && rgb[3 * i + 2] <= 219;
        }
        CHECK_EQ_INT(s.pixels, stained);
        CHECK(stained > n * 95 / 100);
        /* Unit vectors with non-negative component sums. */
        CHECK(fabs(dot(s.h, s.h) - 1) < 1e-12 && fabs(dot(s.e, s.e) - 1) < 1e-12);
        /* The 1st/99th percentile angles fall among the pure pixels, whose directions the 8-bit
         * rounding (|dI| <= 0.5 on I >= 30: OD off by up to 0.017) spreads by a fraction of a
         * degree; measured 0.12-0.2 degrees. */
        double ah = angle(s.h, h) * 180 / M_PI, ae = angle(s.e, e) * 180 / M_PI;
        CHECK(ah < 0.5);
        CHECK(ae < 0.5);
        /* Each stain's 99th-percentile concentration within 2% of the true one's (the same
         * rounding, and the small angle error above; measured 0.02-0.9%). */
        double th = sp_stains_percentile(ch, n, 99), te = sp_stains_percentile(ce, n, 99);
        CHECK(fabs(s.max_h / th - 1) < 0.02);
        CHECK(fabs(s.max_e / te - 1) < 0.02);
        if (ah >= 0.5 || ae >= 0.5 || fabs(s.max_h / th - 1) >= 0.02 ||
            fabs(s.max_e / te - 1) >= 0.02) {
            fprintf(stderr, "pair %d: angles %g %g, max %g/%g %g/%g\n", t, ah, ae, s.max_h, th,
                    s.max_e, te);
        }
        /* The estimate does not depend on where the background is. */
        uint8_t *moved = malloc((size_t)(n + white) * 3);
        memset(moved, 255, (size_t)white * 3);
        memcpy(moved + 3 * white, rgb, (size_t)n * 3);
        sp_stains s2;
        CHECK_EQ_INT(sp_stains_estimate_rgb(moved, n + white, &s2, &err), SP_OK);
        CHECK(memcmp(s.h, s2.h, sizeof s.h) == 0 && memcmp(s.e, s2.e, sizeof s.e) == 0 &&
              s.max_h == s2.max_h && s.max_e == s2.max_e);
        free(moved);
        free(rgb);
        free(ch);
        free(ce);
    }
}

static void test_estimate_errors(void) {
    sp_stains ref, s;
    sp_stains_reference(&ref);
    double ch[1000], ce[1000];
    /* 999 stained pixels and plenty of background: too few. */
    uint8_t *rgb = synthetic(ref.h, ref.e, 999, 5000, ch, ce);
    sp_err err = {0};
    CHECK_EQ_INT(sp_stains_estimate_rgb(rgb, 999 + 5000, &s, &err), SP_E_UNSUPPORTED);
    CHECK(strstr(err.msg, "too few stained pixels (999)") != NULL);
    CHECK(s.max_h == 0 && s.h[0] == 0 && s.pixels == 0); /* zeroed on failure */
    free(rgb);
    /* 1000 are enough. */
    rgb = synthetic(ref.h, ref.e, 1000, 10, ch, ce);
    sp_err_clear(&err);
    CHECK_EQ_INT(sp_stains_estimate_rgb(rgb, 1010, &s, &err), SP_OK);
    CHECK_EQ_INT(s.pixels, 1000);
    free(rgb);
    /* One colour only: no second direction, so the stains come out parallel. */
    uint8_t flat[3000 * 3];
    for (int i = 0; i < 3000; i++) {
        flat[3 * i] = 120, flat[3 * i + 1] = 60, flat[3 * i + 2] = 150;
    }
    sp_err_clear(&err);
    CHECK_EQ_INT(sp_stains_estimate_rgb(flat, 3000, &s, &err), SP_E_UNSUPPORTED);
    CHECK(err.msg[0] != '\0');
    sp_err_clear(&err);
    CHECK_EQ_INT(sp_stains_estimate_rgb(NULL, 10, &s, &err), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_stains_estimate_rgb(flat, 10, NULL, NULL), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_stains_estimate_rgb(flat, -1, &s, NULL), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_stains_estimate(NULL, 0, &s, NULL, 0), SP_E_INVALID_ARG);
    char msg[100];
    CHECK_EQ_INT(sp_stains_estimate_slide(NULL, 0, NULL, NULL), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_stains_estimate(NULL, 0, &s, msg, sizeof msg), SP_E_INVALID_ARG);
    CHECK(msg[0] != '\0');
}

/* The definition, directly: least squares against source (normal equations), scaled, through
 * target, exp per channel, clamped, rounded half up. */
static void oracle(const sp_stains *src, const sp_stains *tgt, const uint8_t in[3], double x[3]) {
    double od[3];
    for (int k = 0; k < 3; k++) {
        od[k] = -log((in[k] < 1 ? 1.0 : in[k]) / 255.0);
    }
    double hh = dot(src->h, src->h), ee = dot(src->e, src->e), he = dot(src->h, src->e);
    double bh = dot(src->h, od), be = dot(src->e, od), det = hh * ee - he * he;
    double ch = (ee * bh - he * be) / det * (tgt->max_h / src->max_h);
    double ce = (hh * be - he * bh) / det * (tgt->max_e / src->max_e);
    for (int k = 0; k < 3; k++) {
        double v = 255.0 * exp(-(tgt->h[k] * ch + tgt->e[k] * ce));
        x[k] = v > 255 ? 255 : v;
    }
}

static void compare_with_oracle(const sp_stains *src, const sp_stains *tgt, const char *what) {
    enum { N = 1 << 18 };
    uint8_t *rgb = malloc(N * 3), *orig = malloc(N * 3);
    for (int i = 0; i < N * 3; i++) {
        orig[i] = (uint8_t)uniform(0, 256);
    }
    /* And every grey level, black and white. */
    for (int i = 0; i < 256; i++) {
        memset(orig + 3 * i, i, 3);
    }
    memcpy(rgb, orig, N * 3);
    CHECK_EQ_INT(sp_stains_normalize(src, tgt, rgb, N), SP_OK);
    int64_t off = 0, equal = 0;
    double near_half = 0;
    for (int i = 0; i < N; i++) {
        double x[3];
        oracle(src, tgt, orig + 3 * i, x);
        for (int k = 0; k < 3; k++) {
            double want = floor(x[k] + 0.5);
            double got = rgb[3 * i + k];
            equal += got == want;
            /* A difference is allowed only where the exact value is a rounding's width from a
             * half-integer. */
            if (got != want) {
                off += fabs(got - want) > 1 || fabs(x[k] - floor(x[k]) - 0.5) > 1e-9;
                near_half++;
            }
        }
    }
    CHECK_EQ_INT(off, 0);
    CHECK(equal >= (int64_t)(3.0 * N * 0.9999));
    if (off != 0) {
        fprintf(stderr, "%s: %lld bytes off, %g near a half\n", what, (long long)off, near_half);
    }
    /* Pixel by pixel gives the same bytes as all at once. */
    for (int i = 0; i < 1000; i++) {
        uint8_t one[3];
        memcpy(one, orig + 3 * i, 3);
        sp_stains_normalize(src, tgt, one, 1);
        CHECK(memcmp(one, rgb + 3 * i, 3) == 0);
    }
    free(rgb);
    free(orig);
}

static void test_normalize(void) {
    sp_stains ref, src = {{0.75, 0.58, 0.32}, {0.18, 0.88, 0.44}, 2.6, 2.4, 0};
    sp_stains_reference(&ref);
    compare_with_oracle(&src, &ref, "table");
    sp_stains_map map;
    CHECK_EQ_INT(sp_stains_map_init(&src, &ref, &map, NULL), SP_OK);
    CHECK(map.tabled);
    /* Extreme scaling: the exp-per-pixel path. */
    sp_stains tiny = src;
    tiny.max_h = 1e-3;
    CHECK_EQ_INT(sp_stains_map_init(&tiny, &ref, &map, NULL), SP_OK);
    CHECK(!map.tabled);
    compare_with_oracle(&tiny, &ref, "exp per pixel");

    /* source == target: the identity on stained pixels made from those stains, within 1. Their
     * optical densities lie in the stains' plane up to the 8-bit rounding (|dI| <= 0.5); the
     * least squares projects that rounding error onto the plane, which moves the value by less
     * than half a level, and rounding it again can land one level away (measured: 96% of the
     * bytes exact, none off by more than 1). Arbitrary colours, off the plane, are not kept:
     * normalization keeps only what the two stains explain. White stays white. */
    double ch[20000], ce[20000];
    uint8_t *rgb = synthetic(src.h, src.e, 20000, 1, ch, ce);
    uint8_t *out = malloc(20001 * 3);
    memcpy(out, rgb, 20001 * 3);
    CHECK_EQ_INT(sp_stains_normalize(&src, &src, out, 20001), SP_OK);
    int worst = 0, same = 0;
    for (int i = 0; i < 20001 * 3; i++) {
        int d = abs(out[i] - rgb[i]);
        worst = d > worst ? d : worst;
        same += d == 0;
    }
    CHECK(worst <= 1);
    CHECK(same >= 20001 * 3 * 0.95);
    CHECK(out[3 * 20000] == 255 && out[3 * 20000 + 1] == 255 && out[3 * 20000 + 2] == 255);
    free(rgb);
    free(out);

    /* Arguments. */
    uint8_t px[6] = {10, 20, 30, 200, 150, 220};
    CHECK_EQ_INT(sp_stains_normalize(NULL, &ref, px, 2), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_stains_normalize(&ref, NULL, px, 2), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_stains_normalize(&ref, &ref, NULL, 2), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_stains_normalize(&ref, &ref, px, -1), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_stains_normalize(&ref, &ref, px, 0), SP_OK);
    sp_stains bad[8];
    for (int i = 0; i < 8; i++) {
        bad[i] = ref;
    }
    bad[0].max_h = 0;
    bad[1].max_e = -1;
    bad[2].max_h = NAN;
    bad[3].max_e = INFINITY;
    bad[4].h[1] = NAN;
    memcpy(bad[5].e, bad[5].h, sizeof bad[5].e); /* parallel */
    for (int k = 0; k < 3; k++) {
        bad[6].e[k] = -2 * bad[6].h[k]; /* anti-parallel */
        bad[7].h[k] = 0;                /* zero */
    }
    for (int i = 0; i < 8; i++) {
        uint8_t before[6];
        memcpy(before, px, 6);
        CHECK_EQ_INT(sp_stains_normalize(&bad[i], &ref, px, 2), SP_E_INVALID_ARG);
        CHECK_EQ_INT(sp_stains_normalize(&ref, &bad[i], px, 2), SP_E_INVALID_ARG);
        CHECK(memcmp(before, px, 6) == 0); /* untouched */
    }
    sp_err err = {0};
    CHECK_EQ_INT(sp_stains_map_init(&bad[5], &ref, &map, &err), SP_E_INVALID_ARG);
    CHECK(strstr(err.msg, "parallel") != NULL);
}

static void test_op(void) {
    const sp_op *op;
    sp_op_params params;
    sp_err err = {0};
    CHECK_EQ_INT(sp_op_parse("macenko", &op, &params, &err), SP_OK);
    CHECK(op == &sp_op_macenko && op->prepare != NULL &&
          sp_cuda_op_kernel(op->name) == sp_cuda_op_macenko);
    CHECK_EQ_INT(op->halo(&params), 0);
    CHECK_EQ_INT(op->channels, 3);
    CHECK(op->output == SP_ZARR_U8);
    CHECK_EQ_INT(sp_op_parse("macenko:1", &op, &params, &err), SP_E_INVALID_ARG);
    CHECK(sp_op_od.prepare == NULL && sp_op_gaussian.prepare == NULL);

    /* A 37 x 23 block with rows of 50 pixels: planar output equals the interleaved normalize. */
    sp_op_params p = {0};
    p.source = (sp_stains){{0.75, 0.58, 0.32}, {0.18, 0.88, 0.44}, 2.6, 2.4, 0};
    sp_stains_reference(&p.target);
    enum { W = 37, H = 23, S = 50 * 3, PLANE = 40 * 23 };
    uint8_t *src = malloc(S * H), *dst = calloc(3, PLANE), *row = malloc(W * 3);
    for (int i = 0; i < S * H; i++) {
        src[i] = (uint8_t)uniform(0, 256);
    }
    sp_op_block b = {.src = src,
                     .src_stride = S,
                     .width = W,
                     .height = H,
                     .dst = dst,
                     .dst_stride = 40,
                     .dst_plane = PLANE};
    CHECK_EQ_INT(sp_op_macenko.cpu(&p, &b), SP_OK);
    int bad = 0;
    for (int y = 0; y < H; y++) {
        memcpy(row, src + y * S, W * 3);
        sp_stains_normalize(&p.source, &p.target, row, W);
        for (int x = 0; x < W; x++) {
            for (int k = 0; k < 3; k++) {
                bad += row[3 * x + k] != dst[k * PLANE + y * 40 + x];
            }
        }
    }
    CHECK_EQ_INT(bad, 0);
    free(src);
    free(dst);
    free(row);
}

void unit_run(void) {
    test_percentile();
    test_estimate_synthetic();
    test_estimate_errors();
    test_normalize();
    test_op();
}
