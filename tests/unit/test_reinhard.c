/* test_reinhard.c — Reinhard statistics and normalization (src/ops/reinhard.c, docs/stains.md),
 * and the stain augmentation's fixed points (src/ops/stain_augment.c).
 *
 * The LAB conversion is checked at points whose CIELAB values are known (white, black, pure
 * primaries as scikit-image gives them); the round trip through LAB must give every one of the
 * 4096 colours of a 16-level grid back within one level; normalizing with source == target is
 * the identity within that rounding; statistics of a known set match the values worked out
 * here; invalid statistics are refused with the pixels untouched; the `reinhard` op gives the
 * same bytes as sp_reinhard_normalize. Stain augmentation with sigma 0 is the identity, is the
 * same for the same seed and refuses bad arguments.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/op.h"
#include "ops/reinhard.h"
#include "ops/stain_augment.h"
#include "unit.h"

static void test_lab_points(void) {
    /* (rgb, CIELAB) from skimage.color.rgb2lab. */
    static const struct {
        uint8_t rgb[3];
        double lab[3];
    } cases[] = {
        {{255, 255, 255}, {100.0, -2.45493786e-03, 4.65342115e-03}},
        {{0, 0, 0}, {0.0, 0.0, 0.0}},
        {{255, 0, 0}, {53.2405879, 80.0923082, 67.2027510}},
        {{0, 255, 0}, {87.7350995, -86.1830297, 83.1797032}},
        {{0, 0, 255}, {32.2956726, 79.1855909, -107.857300}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double lab[3];
        sp_reinhard_rgb_to_lab(cases[i].rgb, lab);
        for (int k = 0; k < 3; k++) {
            CHECK(fabs(lab[k] - cases[i].lab[k]) < 1e-6);
        }
    }
}

static void test_round_trip(void) {
    int worst = 0;
    for (int r = 0; r < 256; r += 17) {
        for (int g = 0; g < 256; g += 17) {
            for (int b = 0; b < 256; b += 17) {
                uint8_t px[3] = {(uint8_t)r, (uint8_t)g, (uint8_t)b}, back[3];
                double lab[3];
                sp_reinhard_rgb_to_lab(px, lab);
                sp_reinhard_lab_to_rgb(lab, back);
                for (int k = 0; k < 3; k++) {
                    int d = abs((int)back[k] - (int)px[k]);
                    worst = d > worst ? d : worst;
                }
            }
        }
    }
    CHECK(worst <= 1);
}

static uint8_t *random_pixels(int64_t n, uint64_t seed) {
    uint8_t *p = malloc((size_t)n * 3);
    for (int64_t i = 0; i < n * 3; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = (uint8_t)(seed >> 56);
    }
    return p;
}

static void test_identity_and_stats(void) {
    const int64_t n = 20000;
    uint8_t *px = random_pixels(n, 7), *copy = malloc((size_t)n * 3);
    sp_reinhard_stats s;
    CHECK_EQ_INT(sp_reinhard_stats_compute(px, n, 0, &s), SP_OK);
    CHECK_EQ_INT(s.pixels, n);
    /* The mean and population standard deviation written out directly. */
    double sum[3] = {0, 0, 0}, sq[3] = {0, 0, 0};
    for (int64_t i = 0; i < n; i++) {
        double lab[3];
        sp_reinhard_rgb_to_lab(px + 3 * i, lab);
        for (int k = 0; k < 3; k++) {
            sum[k] += lab[k];
            sq[k] += lab[k] * lab[k];
        }
    }
    for (int k = 0; k < 3; k++) {
        double mean = sum[k] / n, var = sq[k] / n - mean * mean;
        CHECK(fabs(s.mean[k] - mean) < 1e-9);
        CHECK(fabs(s.std[k] - sqrt(var)) < 1e-6);
    }
    memcpy(copy, px, (size_t)n * 3);
    CHECK_EQ_INT(sp_reinhard_normalize(&s, &s, copy, n), SP_OK);
    int64_t equal = 0;
    int worst = 0;
    for (int64_t i = 0; i < n * 3; i++) {
        int d = abs((int)copy[i] - (int)px[i]);
        worst = d > worst ? d : worst;
        equal += d == 0;
    }
    CHECK(worst <= 1);
    CHECK((double)equal / (double)(n * 3) > 0.999);

    /* Tissue only: white and near-white left out. */
    uint8_t mixed[3 * 3] = {255, 255, 255, 220, 230, 240, 219, 250, 250};
    CHECK_EQ_INT(sp_reinhard_stats_compute(mixed, 3, 1, &s), SP_OK);
    CHECK_EQ_INT(s.pixels, 1);
    CHECK(s.std[0] == 0);
    CHECK_EQ_INT(sp_reinhard_stats_compute(mixed, 2, 1, &s), SP_E_UNSUPPORTED);
    CHECK_EQ_INT(sp_reinhard_stats_compute(NULL, 2, 0, &s), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_reinhard_stats_compute(mixed, -1, 0, &s), SP_E_INVALID_ARG);
    free(px);
    free(copy);
}

static void test_refusals(void) {
    uint8_t px[6] = {10, 20, 30, 200, 100, 150}, before[6];
    memcpy(before, px, sizeof px);
    sp_reinhard_stats ref;
    sp_reinhard_reference(&ref);
    CHECK_EQ_INT(sp_reinhard_check(&ref, "reference", NULL), SP_OK);
    sp_reinhard_stats bad[6];
    for (int i = 0; i < 6; i++) {
        bad[i] = ref;
    }
    bad[0].std[1] = 0;
    bad[1].std[2] = -1;
    bad[2].mean[0] = NAN;
    bad[3].mean[0] = 100.5;
    bad[4].std[0] = INFINITY;
    bad[5].mean[2] = -250;
    for (int i = 0; i < 6; i++) {
        CHECK_EQ_INT(sp_reinhard_normalize(&bad[i], &ref, px, 2), SP_E_INVALID_ARG);
        CHECK_EQ_INT(sp_reinhard_normalize(&ref, &bad[i], px, 2), SP_E_INVALID_ARG);
    }
    CHECK_EQ_INT(sp_reinhard_normalize(NULL, &ref, px, 2), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_reinhard_normalize(&ref, NULL, px, 2), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_reinhard_normalize(&ref, &ref, NULL, 2), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_reinhard_normalize(&ref, &ref, px, -1), SP_E_INVALID_ARG);
    CHECK(memcmp(px, before, sizeof px) == 0);
    CHECK_EQ_INT(sp_reinhard_normalize(&ref, &ref, px, 0), SP_OK);
    CHECK_EQ_INT(sp_reinhard_estimate(NULL, 0, &ref, NULL, 0), SP_E_INVALID_ARG);
}

static void test_op(void) {
    const int64_t w = 37, h = 11;
    uint8_t *px = random_pixels(w * h, 99);
    uint8_t *planes = malloc((size_t)(w * h * 3)), *direct = malloc((size_t)(w * h * 3));
    sp_op_params p;
    memset(&p, 0, sizeof p);
    CHECK_EQ_INT(sp_reinhard_stats_compute(px, w * h, 0, &p.colour_source), SP_OK);
    sp_reinhard_reference(&p.colour_target);
    sp_op_block b = {.src = px,
                     .src_stride = w * 3,
                     .width = w,
                     .height = h,
                     .dst = planes,
                     .dst_stride = w,
                     .dst_plane = w * h,
                     .scratch = NULL};
    CHECK_EQ_INT(sp_op_reinhard.cpu(&p, &b), SP_OK);
    memcpy(direct, px, (size_t)(w * h * 3));
    CHECK_EQ_INT(sp_reinhard_normalize(&p.colour_source, &p.colour_target, direct, w * h), SP_OK);
    int mismatches = 0;
    for (int64_t i = 0; i < w * h; i++) {
        for (int k = 0; k < 3; k++) {
            mismatches += planes[k * w * h + i] != direct[3 * i + k];
        }
    }
    CHECK_EQ_INT(mismatches, 0);
    free(px);
    free(planes);
    free(direct);
}

static void test_augment(void) {
    const int64_t n = 5000;
    uint8_t *px = random_pixels(n, 3), *a = malloc((size_t)n * 3), *b = malloc((size_t)n * 3);
    sp_stains s;
    sp_stains_reference(&s);
    memcpy(a, px, (size_t)n * 3);
    CHECK_EQ_INT(sp_stains_augment(&s, a, n, 12345, 0.0), SP_OK);
    CHECK(memcmp(a, px, (size_t)n * 3) == 0);
    memcpy(a, px, (size_t)n * 3);
    memcpy(b, px, (size_t)n * 3);
    CHECK_EQ_INT(sp_stains_augment(&s, a, n, 777, 0.3), SP_OK);
    CHECK_EQ_INT(sp_stains_augment(&s, b, n, 777, 0.3), SP_OK);
    CHECK(memcmp(a, b, (size_t)n * 3) == 0);
    CHECK(memcmp(a, px, (size_t)n * 3) != 0);
    double alpha[2], beta[2];
    sp_stain_augment_draw(777, 0.3, alpha, beta);
    for (int i = 0; i < 2; i++) {
        CHECK(alpha[i] >= 0.7 && alpha[i] < 1.3 && beta[i] >= -0.3 && beta[i] < 0.3);
    }
    memcpy(b, px, (size_t)n * 3);
    CHECK_EQ_INT(sp_stains_augment(&s, b, n, 1, 1.5), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_stains_augment(&s, b, n, 1, -0.1), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_stains_augment(&s, b, n, 1, NAN), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_stains_augment(NULL, b, n, 1, 0.1), SP_E_INVALID_ARG);
    sp_stains parallel = s;
    memcpy(parallel.e, parallel.h, sizeof parallel.e);
    CHECK_EQ_INT(sp_stains_augment(&parallel, b, n, 1, 0.1), SP_E_INVALID_ARG);
    CHECK(memcmp(b, px, (size_t)n * 3) == 0);
    free(px);
    free(a);
    free(b);
}

void unit_run(void) {
    test_lab_points();
    test_round_trip();
    test_identity_and_stats();
    test_refusals();
    test_op();
    test_augment();
}
