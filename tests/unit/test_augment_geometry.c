/* test_augment_geometry.c — sp_augment_geometry at the C API: identity parameters give the patch
 * back byte for byte (both borders, also through the crop at full scale), a 90-degree rotation of
 * a square patch is the exact quarter turn, translating by whole pixels shifts the patch with the
 * fill coming in, bad parameters are refused with the patch untouched, drawn numbers stay in
 * their ranges, and a batch equals its patches one by one on 1, 2 and 4 threads. (The arithmetic
 * is checked against Kornia and torchvision in python/tests/test_augment_geometry.py.) */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "slidepipe.h"
#include "unit.h"

enum { W = 17, H = 11, COUNT = 9 };

static void fill(uint8_t *p, size_t n, uint32_t seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (uint8_t)(seed >> 24);
    }
}

static void test_identity(void) {
    uint8_t a[W * H * 3], b[W * H * 3];
    fill(a, sizeof a, 1);
    sp_geometry_params p;
    sp_geometry_params_default(&p);
    for (int border = 0; border < 2; border++) {
        p.border = border;
        memcpy(b, a, sizeof a);
        CHECK_EQ_INT(sp_augment_geometry(b, W, H, 42, &p), SP_OK);
        CHECK(memcmp(a, b, sizeof a) == 0);
    }
    /* a crop of the whole patch (scale and ratio fixed to the patch's) is the identity too */
    p.crop = 1;
    p.crop_scale[0] = p.crop_scale[1] = 1.0;
    p.crop_ratio[0] = p.crop_ratio[1] = (double)W / H;
    memcpy(b, a, sizeof a);
    CHECK_EQ_INT(sp_augment_geometry(b, W, H, 7, &p), SP_OK);
    CHECK(memcmp(a, b, sizeof a) == 0);
    /* and so is an elastic field of alpha 0 */
    sp_geometry_params_default(&p);
    p.elastic = 1;
    p.elastic_alpha[0] = p.elastic_alpha[1] = 0.0;
    p.elastic_sigma = 3.0;
    memcpy(b, a, sizeof a);
    CHECK_EQ_INT(sp_augment_geometry(b, W, H, 7, &p), SP_OK);
    CHECK(memcmp(a, b, sizeof a) == 0);
}

/* Rotation by +90 degrees (counter-clockwise as displayed) is numpy's rot90(a, 1):
 * out[y][x] = in[x][n - 1 - y]; -90 and 180 likewise. */
static void test_quarter_turns(void) {
    enum { N = 12 };
    uint8_t a[N * N * 3], b[N * N * 3];
    fill(a, sizeof a, 2);
    sp_geometry_params p;
    sp_geometry_params_default(&p);
    for (int k = -1; k <= 2; k++) {
        p.rotation[0] = p.rotation[1] = 90.0 * k;
        memcpy(b, a, sizeof a);
        CHECK_EQ_INT(sp_augment_geometry(b, N, N, 3, &p), SP_OK);
        int bad = 0;
        for (int y = 0; y < N; y++) {
            for (int x = 0; x < N; x++) {
                int sx, sy;
                switch ((k + 4) % 4) {
                case 1: sy = x, sx = N - 1 - y; break;
                case 2: sy = N - 1 - y, sx = N - 1 - x; break;
                case 3: sy = N - 1 - x, sx = y; break;
                default: sy = y, sx = x;
                }
                bad += memcmp(b + (y * N + x) * 3, a + (sy * N + sx) * 3, 3) != 0;
            }
        }
        CHECK_EQ_INT(bad, 0);
    }
    /* 90 degrees plus a hair is still within one level of the quarter turn on a smooth ramp */
    for (int y = 0; y < N; y++) {
        for (int x = 0; x < N; x++) {
            for (int c = 0; c < 3; c++) {
                a[(y * N + x) * 3 + c] = (uint8_t)(10 * x + 3 * y + c);
            }
        }
    }
    p.rotation[0] = p.rotation[1] = 90.0 + 1e-9;
    memcpy(b, a, sizeof a);
    CHECK_EQ_INT(sp_augment_geometry(b, N, N, 3, &p), SP_OK);
    int worst = 0;
    for (int y = 0; y < N; y++) {
        for (int x = 0; x < N; x++) {
            for (int c = 0; c < 3; c++) {
                int d = abs(b[(y * N + x) * 3 + c] - a[(x * N + N - 1 - y) * 3 + c]);
                worst = d > worst ? d : worst;
            }
        }
    }
    CHECK(worst <= 1);
}

/* Translating by exactly 2 pixels right with a constant border: columns 0 and 1 are the fill. */
static void test_translate_fill(void) {
    uint8_t a[W * H * 3], b[W * H * 3];
    fill(a, sizeof a, 3);
    sp_geometry_params p;
    sp_geometry_params_default(&p);
    p.translate_x[0] = p.translate_x[1] = 2.0 / W;
    p.border = SP_BORDER_CONSTANT;
    p.fill[0] = 9, p.fill[1] = 8, p.fill[2] = 7;
    memcpy(b, a, sizeof a);
    CHECK_EQ_INT(sp_augment_geometry(b, W, H, 5, &p), SP_OK);
    int bad = 0;
    for (int y = 0; y < H; y++) {
        for (int x = 0; x < W; x++) {
            const uint8_t *want = x < 2 ? p.fill : a + (y * W + x - 2) * 3;
            bad += memcmp(b + (y * W + x) * 3, want, 3) != 0;
        }
    }
    CHECK_EQ_INT(bad, 0);
}

static void test_rejects(void) {
    uint8_t a[W * H * 3], b[W * H * 3];
    fill(a, sizeof a, 4);
    memcpy(b, a, sizeof a);
    sp_geometry_params p;
    sp_geometry_params_default(&p);
    CHECK_EQ_INT(sp_augment_geometry(NULL, W, H, 1, &p), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_augment_geometry(b, 0, H, 1, &p), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_augment_geometry(b, W, -1, 1, &p), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_augment_geometry(b, W, H, 1, NULL), SP_E_INVALID_ARG);
    sp_geometry_params q = p;
    q.struct_size = 8;
    CHECK_EQ_INT(sp_augment_geometry(b, W, H, 1, &q), SP_E_INVALID_ARG);
    q = p, q.rotation[0] = 10, q.rotation[1] = -10; /* lo > hi */
    CHECK_EQ_INT(sp_augment_geometry(b, W, H, 1, &q), SP_E_INVALID_ARG);
    q = p, q.scale[0] = 0.0;
    CHECK_EQ_INT(sp_augment_geometry(b, W, H, 1, &q), SP_E_INVALID_ARG);
    q = p, q.scale_y[1] = 1.0 / 0.0;
    CHECK_EQ_INT(sp_augment_geometry(b, W, H, 1, &q), SP_E_INVALID_ARG);
    q = p, q.shear_x[1] = 45.0;
    CHECK_EQ_INT(sp_augment_geometry(b, W, H, 1, &q), SP_E_INVALID_ARG);
    q = p, q.translate_y[0] = -1.5;
    CHECK_EQ_INT(sp_augment_geometry(b, W, H, 1, &q), SP_E_INVALID_ARG);
    q = p, q.border = 2;
    CHECK_EQ_INT(sp_augment_geometry(b, W, H, 1, &q), SP_E_INVALID_ARG);
    q = p, q.crop = 1, q.crop_scale[0] = 0.0;
    CHECK_EQ_INT(sp_augment_geometry(b, W, H, 1, &q), SP_E_INVALID_ARG);
    q = p, q.crop = 1, q.crop_scale[1] = 1.5;
    CHECK_EQ_INT(sp_augment_geometry(b, W, H, 1, &q), SP_E_INVALID_ARG);
    q = p, q.crop = 1, q.crop_ratio[0] = 2.0, q.crop_ratio[1] = 1.0;
    CHECK_EQ_INT(sp_augment_geometry(b, W, H, 1, &q), SP_E_INVALID_ARG);
    q = p, q.elastic = 1, q.elastic_sigma = 0.0;
    CHECK_EQ_INT(sp_augment_geometry(b, W, H, 1, &q), SP_E_INVALID_ARG);
    q = p, q.elastic = 1, q.elastic_kernel = 4;
    CHECK_EQ_INT(sp_augment_geometry(b, W, H, 1, &q), SP_E_INVALID_ARG);
    q = p, q.elastic = 1, q.elastic_alpha[1] = -1.0;
    CHECK_EQ_INT(sp_augment_geometry(b, W, H, 1, &q), SP_E_INVALID_ARG);
    CHECK(memcmp(a, b, sizeof a) == 0);
    uint64_t seeds[2] = {1, 2};
    CHECK_EQ_INT(sp_augment_geometry_batch(b, -1, W, H, seeds, &p, 1), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_augment_geometry_batch(b, 1, W, H, NULL, &p, 1), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_augment_geometry_batch(NULL, 0, W, H, NULL, &p, 1), SP_OK);
    sp_geometry_drawn d = {.struct_size = sizeof d};
    CHECK_EQ_INT(sp_geometry_draw(W, H, 1, &q, &d), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_geometry_elastic_noise(W, H, 1, &p, NULL), SP_E_INVALID_ARG);
}

static void full_params(sp_geometry_params *p) {
    sp_geometry_params_default(p);
    p->rotation[0] = -30, p->rotation[1] = 30;
    p->scale[0] = 0.8, p->scale[1] = 1.25;
    p->scale_x[0] = 0.9, p->scale_x[1] = 1.1;
    p->scale_y[0] = 0.95, p->scale_y[1] = 1.05;
    p->shear_x[0] = -10, p->shear_x[1] = 10;
    p->shear_y[0] = -5, p->shear_y[1] = 5;
    p->translate_x[0] = -0.1, p->translate_x[1] = 0.1;
    p->translate_y[0] = -0.2, p->translate_y[1] = 0.2;
    p->crop = 1;
    p->elastic = 1;
    p->elastic_alpha[0] = 0.5, p->elastic_alpha[1] = 0.3;
    p->elastic_sigma = 4.0;
}

static void test_draws_in_range(void) {
    sp_geometry_params p;
    full_params(&p);
    for (uint64_t s = 0; s < 200; s++) {
        sp_geometry_drawn d = {.struct_size = sizeof d};
        CHECK_EQ_INT(sp_geometry_draw(W, H, s * 0x9e3779b97f4a7c15ull, &p, &d), SP_OK);
        int ok = d.rotation >= -30 && d.rotation < 30 && d.scale >= 0.8 && d.scale < 1.25 &&
                 d.shear_x >= -10 && d.shear_x < 10 && d.translate_y >= -0.2 * H &&
                 d.translate_y < 0.2 * H && d.crop_width >= 1 && d.crop_height >= 1 &&
                 d.crop_left >= 0 && d.crop_top >= 0 && d.crop_left + d.crop_width <= W &&
                 d.crop_top + d.crop_height <= H;
        if (!ok) {
            CHECK(ok);
            break;
        }
    }
    /* the scalar draws do not depend on which steps are on */
    sp_geometry_params q = p;
    q.crop = 0, q.elastic = 0;
    sp_geometry_drawn d1 = {.struct_size = sizeof d1}, d2 = {.struct_size = sizeof d2};
    sp_geometry_draw(W, H, 99, &p, &d1);
    sp_geometry_draw(W, H, 99, &q, &d2);
    CHECK(memcmp(d1.matrix, d2.matrix, sizeof d1.matrix) == 0);
}

static void test_batch_equals_single(void) {
    size_t patch = W * H * 3;
    uint8_t *a = malloc(patch * COUNT), *b = malloc(patch * COUNT), *c = malloc(patch * COUNT);
    uint64_t seeds[COUNT];
    fill(a, patch * COUNT, 5);
    for (int i = 0; i < COUNT; i++) {
        seeds[i] = 1000 + 77 * (uint64_t)i;
    }
    sp_geometry_params p;
    full_params(&p);
    memcpy(b, a, patch * COUNT);
    for (int i = 0; i < COUNT; i++) {
        CHECK_EQ_INT(sp_augment_geometry(b + i * patch, W, H, seeds[i], &p), SP_OK);
    }
    CHECK(memcmp(a, b, patch * COUNT) != 0);
    int threads[3] = {1, 2, 4};
    for (int t = 0; t < 3; t++) {
        memcpy(c, a, patch * COUNT);
        CHECK_EQ_INT(sp_augment_geometry_batch(c, COUNT, W, H, seeds, &p, threads[t]), SP_OK);
        CHECK(memcmp(b, c, patch * COUNT) == 0);
    }
    free(a);
    free(b);
    free(c);
}

/* A 1 x 1 patch under reflect is its one pixel whatever the map; a 1-pixel-wide column only
 * ever shows its own values, blended. */
static void test_tiny(void) {
    sp_geometry_params p;
    full_params(&p);
    for (uint64_t s = 0; s < 20; s++) {
        uint8_t px[3] = {12, 200, 77};
        CHECK_EQ_INT(sp_augment_geometry(px, 1, 1, s, &p), SP_OK);
        CHECK(px[0] == 12 && px[1] == 200 && px[2] == 77);
    }
    uint8_t col[1 * 9 * 3];
    for (int i = 0; i < 9; i++) {
        col[3 * i] = col[3 * i + 1] = col[3 * i + 2] = (uint8_t)(100 + i);
    }
    CHECK_EQ_INT(sp_augment_geometry(col, 1, 9, 3, &p), SP_OK);
    int ok = 1;
    for (int i = 0; i < 27; i++) {
        ok &= col[i] >= 100 && col[i] <= 108;
    }
    CHECK(ok);
}

void unit_run(void) {
    test_tiny();
    test_identity();
    test_quarter_turns();
    test_translate_fill();
    test_rejects();
    test_draws_in_range();
    test_batch_equals_single();
}
