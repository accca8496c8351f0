/* test_augment_color.c — the photometric augmentation at the C API: parameters out of range are
 * refused and leave the pixels alone, identity parameters change nothing, a uniform grey patch
 * gets the values the definitions give (contrast moves it by the grey weights' 0.9999, hue and
 * saturation and blur leave it), the noise has the drawn standard deviation, the draws of one
 * stage do not move when another is switched off, every permutation of the jitter's steps is
 * drawn, and a batch equals its patches done one by one on any thread count and split; the hue
 * and saturation steps over a run of pixels (eight at a time with AVX2) give the one-pixel
 * code's bytes on every 8-bit colour. (The arithmetic is compared with torchvision in
 * python/tests/test_augment_color.py.)
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/augment_color_math.h"
#include "ops/augment_color_rows.h"
#include "slidepipe.h"
#include "unit.h"

enum { W = 23, H = 17, COUNT = 29 };

static void fill(uint8_t *p, size_t n, uint32_t seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (uint8_t)(seed >> 24);
    }
}

static sp_photometric_params off(void) {
    sp_photometric_params p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    return p;
}

static sp_photometric_params everything(void) {
    sp_photometric_params p = off();
    p.jitter_p = 0.9;
    p.brightness = 0.4, p.contrast = 0.4, p.saturation = 0.4, p.hue = 0.1;
    p.blur_p = 0.5, p.blur_sigma_min = 0.3, p.blur_sigma_max = 2.0;
    p.noise_p = 0.7, p.noise_sigma_min = 1.0, p.noise_sigma_max = 8.0;
    return p;
}

static void test_rejects(void) {
    uint8_t px[W * H * 3], copy[sizeof px];
    fill(px, sizeof px, 1);
    memcpy(copy, px, sizeof px);
    sp_photometric_params bad[12];
    for (int i = 0; i < 12; i++) {
        bad[i] = everything();
    }
    bad[0].struct_size = sizeof(sp_photometric_params) - 1;
    bad[1].jitter_p = 1.5;
    bad[2].brightness = -0.1;
    bad[3].hue = 0.6;
    bad[4].saturation = NAN;
    bad[5].blur_sigma_min = 0.0;
    bad[6].blur_sigma_min = 3.0; /* above the max */
    bad[7].blur_kernel_size = 4;
    bad[8].noise_sigma_max = 300.0;
    bad[9].noise_sigma_min = 9.0; /* above the max */
    bad[10].blur_sigma_max = 41.0;
    bad[11].noise_p = -0.5;
    for (int i = 0; i < 12; i++) {
        CHECK_EQ_INT(sp_augment_photometric(px, W, H, 7, &bad[i]), SP_E_INVALID_ARG);
    }
    sp_photometric_params ok = everything();
    uint64_t seed = 3;
    CHECK_EQ_INT(sp_augment_photometric(NULL, W, H, 7, &ok), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_augment_photometric(px, W, H, 7, NULL), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_augment_photometric(px, 0, H, 7, &ok), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_augment_photometric(px, W, -1, 7, &ok), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_augment_photometric_batch(px, -1, W, H, &seed, &ok, 1), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_augment_photometric_batch(px, 1, W, H, NULL, &ok, 1), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_augment_photometric_batch(px, 1, W, H, &seed, &bad[3], 1), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_augment_photometric_batch(NULL, 0, W, H, NULL, &ok, 1), SP_OK);
    CHECK(memcmp(px, copy, sizeof px) == 0);
    sp_photometric_draws d = {.struct_size = sizeof d - 1};
    CHECK_EQ_INT(sp_photometric_draw(1, &ok, &d), SP_E_INVALID_ARG);
    d.struct_size = sizeof d;
    CHECK_EQ_INT(sp_photometric_draw(1, &bad[7], &d), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_photometric_draw(1, &ok, &d), SP_OK);
}

static void test_identity(void) {
    uint8_t px[W * H * 3], copy[sizeof px];
    fill(px, sizeof px, 2);
    memcpy(copy, px, sizeof px);
    sp_photometric_params id[3] = {off(), off(), off()};
    id[1].jitter_p = 1.0; /* every range zero: every step skipped */
    id[1].noise_p = 1.0;  /* sigma 0 */
    id[2].blur_p = 1.0, id[2].blur_sigma_min = 0.5, id[2].blur_sigma_max = 2.0;
    id[2].blur_kernel_size = 1; /* a one-tap kernel is the identity */
    for (int i = 0; i < 3; i++) {
        for (uint64_t seed = 0; seed < 20; seed++) {
            CHECK_EQ_INT(sp_augment_photometric(px, W, H, seed * 977, &id[i]), SP_OK);
        }
        CHECK(memcmp(px, copy, sizeof px) == 0);
    }
}

static void grey_patch(uint8_t *px, size_t n, uint8_t v) {
    memset(px, v, n);
}

static int all_equal(const uint8_t *px, size_t n, uint8_t v) {
    for (size_t i = 0; i < n; i++) {
        if (px[i] != v) {
            return 0;
        }
    }
    return 1;
}

static void test_grey_patch(void) {
    uint8_t px[W * H * 3];
    sp_photometric_params p = off();
    p.jitter_p = 1.0;
    /* Contrast: the grey of (128, 128, 128) is trunc(0.9999 * 128) = 127, so the blend
     * f * 128 + (1 - f) * 127 truncates to 127 below f = 1 and to 128 above. */
    p.contrast = 0.5;
    int below = 0, above = 0;
    for (uint64_t seed = 0; seed < 40; seed++) {
        sp_photometric_draws d = {.struct_size = sizeof d};
        CHECK_EQ_INT(sp_photometric_draw(seed, &p, &d), SP_OK);
        CHECK(d.contrast >= 0.5 && d.contrast <= 1.5);
        grey_patch(px, sizeof px, 128);
        CHECK_EQ_INT(sp_augment_photometric(px, W, H, seed, &p), SP_OK);
        CHECK(all_equal(px, sizeof px, d.contrast < 1.0 ? 127 : 128));
        below += d.contrast < 1.0;
        above += d.contrast > 1.0;
    }
    CHECK(below > 5 && above > 5);
    /* Brightness: trunc(f * 200) clamped. */
    p = off(), p.jitter_p = 1.0, p.brightness = 0.5;
    for (uint64_t seed = 0; seed < 20; seed++) {
        sp_photometric_draws d = {.struct_size = sizeof d};
        sp_photometric_draw(seed, &p, &d);
        grey_patch(px, sizeof px, 200);
        sp_augment_photometric(px, W, H, seed, &p);
        float v = (float)d.brightness * 200.0f;
        CHECK(all_equal(px, sizeof px, (uint8_t)(v > 255.0f ? 255.0f : v)));
    }
    /* Hue and blur leave a uniform grey patch as it is. */
    p = off(), p.jitter_p = 1.0, p.hue = 0.5;
    p.blur_p = 1.0, p.blur_sigma_min = 0.5, p.blur_sigma_max = 3.0;
    for (uint64_t seed = 0; seed < 20; seed++) {
        grey_patch(px, sizeof px, 90);
        sp_augment_photometric(px, W, H, seed, &p);
        CHECK(all_equal(px, sizeof px, 90));
    }
    /* Saturation blends v with its grey trunc(0.9999 v), which is v only at 0. */
    p = off(), p.jitter_p = 1.0, p.saturation = 1.0;
    for (uint64_t seed = 0; seed < 20; seed++) {
        grey_patch(px, sizeof px, 0);
        sp_augment_photometric(px, W, H, seed, &p);
        CHECK(all_equal(px, sizeof px, 0));
    }
}

static void test_noise_statistics(void) {
    enum { S = 128 };
    uint8_t *px = malloc(S * S * 3);
    sp_photometric_params p = off();
    p.noise_p = 1.0, p.noise_sigma_min = 10.0, p.noise_sigma_max = 10.0;
    grey_patch(px, S * S * 3, 128);
    CHECK_EQ_INT(sp_augment_photometric(px, S, S, 99, &p), SP_OK);
    double sum = 0, sq = 0;
    for (int i = 0; i < S * S * 3; i++) {
        sum += px[i];
        sq += (double)px[i] * px[i];
    }
    double mean = sum / (S * S * 3), sd = sqrt(sq / (S * S * 3) - mean * mean);
    CHECK(fabs(mean - 128.0) < 0.3);
    CHECK(fabs(sd - 10.0) < 0.3); /* rounding adds 1/12 to the variance */
    free(px);
}

static void test_draws_independent(void) {
    sp_photometric_params all = everything(), some = everything();
    some.jitter_p = 0.0, some.blur_p = 0.0;
    int seen[24] = {0};
    for (uint64_t seed = 0; seed < 2000; seed++) {
        sp_photometric_draws a = {.struct_size = sizeof a}, b = {.struct_size = sizeof b};
        sp_photometric_draw(seed * 0x9e3779b97f4a7c15ull, &all, &a);
        sp_photometric_draw(seed * 0x9e3779b97f4a7c15ull, &some, &b);
        CHECK(a.noise == b.noise && a.noise_sigma == b.noise_sigma);
        CHECK(!b.jitter && !b.blur && b.brightness == 1.0 && b.hue == 0.0);
        int mask = 0;
        for (int s = 0; s < 4; s++) {
            mask |= 1 << a.order[s];
        }
        CHECK_EQ_INT(mask, 15);
        /* The order's rank among the 24 (its Lehmer code). */
        int rank = 0, f[4] = {6, 2, 1, 0};
        for (int s = 0; s < 3; s++) {
            int smaller = 0;
            for (int t = s + 1; t < 4; t++) {
                smaller += a.order[t] < a.order[s];
            }
            rank += smaller * f[s];
        }
        seen[rank]++;
    }
    for (int r = 0; r < 24; r++) {
        CHECK(seen[r] > 40); /* about 83 each */
    }
}

static void test_batch_equals_single(void) {
    size_t patch = W * H * 3;
    uint8_t *src = malloc(patch * COUNT), *one = malloc(patch * COUNT),
            *many = malloc(patch * COUNT);
    uint64_t seeds[COUNT];
    fill(src, patch * COUNT, 9);
    for (int i = 0; i < COUNT; i++) {
        seeds[i] = (uint64_t)i * 0x2545f4914f6cdd1dull + 5;
    }
    sp_photometric_params p = everything();
    memcpy(one, src, patch * COUNT);
    for (int i = 0; i < COUNT; i++) {
        CHECK_EQ_INT(sp_augment_photometric(one + i * patch, W, H, seeds[i], &p), SP_OK);
    }
    CHECK(memcmp(one, src, patch * COUNT) != 0);
    int threads[] = {1, 2, 4, 0};
    for (int t = 0; t < 4; t++) {
        memcpy(many, src, patch * COUNT);
        CHECK_EQ_INT(sp_augment_photometric_batch(many, COUNT, W, H, seeds, &p, threads[t]), SP_OK);
        CHECK(memcmp(one, many, patch * COUNT) == 0);
    }
    memcpy(many, src, patch * COUNT); /* split 10 + 19 */
    sp_augment_photometric_batch(many, 10, W, H, seeds, &p, 3);
    sp_augment_photometric_batch(many + 10 * patch, COUNT - 10, W, H, seeds + 10, &p, 2);
    CHECK(memcmp(one, many, patch * COUNT) == 0);
    free(src);
    free(one);
    free(many);
}

/* Every colour `step` apart (1: all 2^24), as RGB8 pixels; returns how many. */
static int64_t colours(uint8_t *px, uint32_t step) {
    int64_t n = 0;
    for (uint32_t c = 0; c < (1u << 24); c += step, n++) {
        px[3 * n] = (uint8_t)(c >> 16);
        px[3 * n + 1] = (uint8_t)(c >> 8);
        px[3 * n + 2] = (uint8_t)c;
    }
    return n;
}

/* How many of n bytes differ between a and b, printed with `what` and its value when some do. */
static int64_t bytes_differing(const uint8_t *a, const uint8_t *b, int64_t n, const char *what,
                               double value) {
    int64_t differ = 0;
    for (int64_t i = 0; i < n; i++) {
        differ += a[i] != b[i];
    }
    if (differ != 0) {
        fprintf(stderr, "%s %g: %lld of %lld bytes differ\n", what, value, (long long)differ,
                (long long)n);
    }
    return differ;
}

/* The hue and saturation steps over a run of pixels against the one-pixel code. */
static void test_runs_equal_one_pixel_at_a_time(void) {
    uint8_t *fast = malloc((size_t)3 << 24), *one = malloc((size_t)3 << 24);
    CHECK(fast != NULL && one != NULL);
    if (fast == NULL || one == NULL) {
        free(fast);
        free(one);
        return;
    }
    /* Hue: every colour at one shift; every 13th (an odd count: the run's tail too) at the ends
     * of the range, none and a small one. */
    const float shifts[] = {0.2f, -0.5f, -0.0371f, 0.0f, 0.5f};
    for (size_t s = 0; s < sizeof shifts / sizeof shifts[0]; s++) {
        int64_t n = colours(fast, s == 0 ? 1 : 13);
        memcpy(one, fast, (size_t)n * 3);
        sp_hue_pixels(fast, n, shifts[s]);
        for (int64_t i = 0; i < n; i++) {
            sp_aug_hue(one + 3 * i, shifts[s]);
        }
        CHECK_EQ_INT(bytes_differing(fast, one, n * 3, "hue shift", shifts[s]), 0);
    }
    /* Saturation, with factors as the draws give them (ratio f, rest 1 - f): every colour at
     * one, every 13th at the others, grey (0) and past 1 (clamped) among them. */
    const double factors[] = {0.8125, 0.0, 1.2, 2.0, 0.37};
    for (size_t s = 0; s < sizeof factors / sizeof factors[0]; s++) {
        float ratio = (float)factors[s], rest = (float)(1.0 - factors[s]);
        int64_t n = colours(fast, s == 0 ? 1 : 13);
        memcpy(one, fast, (size_t)n * 3);
        sp_saturation_pixels(fast, n, ratio, rest);
        for (int64_t i = 0; i < n; i++) {
            sp_aug_jitter_step(one + 3 * i, SP_JITTER_SATURATION, ratio, rest, 0.0f);
        }
        CHECK_EQ_INT(bytes_differing(fast, one, n * 3, "saturation", factors[s]), 0);
    }
    free(fast);
    free(one);
}

void unit_run(void) {
    test_rejects();
    test_identity();
    test_grey_patch();
    test_noise_statistics();
    test_draws_independent();
    test_batch_equals_single();
    test_runs_equal_one_pixel_at_a_time();
}
