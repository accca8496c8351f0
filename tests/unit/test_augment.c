/* test_augment.c — sp_augment_patch and sp_augment_patches at the C API: rejected arguments leave
 * the pixels alone, flips permute pixels without changing them, four quarter-turn draws of a
 * known patch land where numpy's rules put them, and a batch equals its patches augmented one by
 * one on any thread count. (The colour arithmetic is checked against numpy in
 * python/tests/test_train.py.)
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "slidepipe.h"
#include "unit.h"

enum { SIZE = 13, COUNT = 37 };

static void fill(uint8_t *p, size_t n, uint32_t seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (uint8_t)(seed >> 24);
    }
}

static void histogram(const uint8_t *p, size_t n, size_t h[256]) {
    memset(h, 0, 256 * sizeof *h);
    for (size_t i = 0; i < n; i++) {
        h[p[i]]++;
    }
}

static void test_rejects(void) {
    uint8_t patch[SIZE * SIZE * 3], copy[sizeof patch];
    fill(patch, sizeof patch, 1);
    memcpy(copy, patch, sizeof patch);
    uint64_t seeds[1] = {5};
    CHECK_EQ_INT(sp_augment_patch(NULL, SIZE, 1, 1, 0.1), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_augment_patch(patch, 0, 1, 1, 0.1), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_augment_patch(patch, SIZE, 1, 1, -0.1), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_augment_patch(patch, SIZE, 1, 1, 1.5), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_augment_patches(patch, 1, SIZE, NULL, 1, 0.1, 1), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_augment_patches(patch, -1, SIZE, seeds, 1, 0.1, 1), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_augment_patches(patch, 1, SIZE, seeds, 1, 2.0, 1), SP_E_INVALID_ARG);
    CHECK(memcmp(patch, copy, sizeof patch) == 0);
    CHECK_EQ_INT(sp_augment_patches(NULL, 0, 0, NULL, 1, 0.0, 1), SP_OK);
}

static void test_flips_permute(void) {
    uint8_t patch[SIZE * SIZE * 3];
    size_t before[256], after[256];
    for (uint64_t seed = 0; seed < 64; seed++) {
        fill(patch, sizeof patch, (uint32_t)seed + 7);
        histogram(patch, sizeof patch, before);
        CHECK_EQ_INT(sp_augment_patch(patch, SIZE, seed, 1, 0.0), SP_OK);
        histogram(patch, sizeof patch, after);
        CHECK(memcmp(before, after, sizeof before) == 0);
    }
    /* A patch whose pixel (x, y) is (x, y, 0): after any flip every pixel is still some (x, y)
     * and the corners map to corners. */
    for (uint64_t seed = 0; seed < 32; seed++) {
        for (int y = 0; y < SIZE; y++) {
            for (int x = 0; x < SIZE; x++) {
                uint8_t *px = patch + (y * SIZE + x) * 3;
                px[0] = (uint8_t)x, px[1] = (uint8_t)y, px[2] = 0;
            }
        }
        CHECK_EQ_INT(sp_augment_patch(patch, SIZE, seed, 1, 0.0), SP_OK);
        uint8_t c0 = patch[0], c1 = patch[1];
        CHECK((c0 == 0 || c0 == SIZE - 1) && (c1 == 0 || c1 == SIZE - 1));
    }
}

static void test_batch_equals_single(void) {
    size_t patch = SIZE * SIZE * 3;
    uint8_t *batch = malloc(COUNT * patch), *one = malloc(COUNT * patch);
    uint64_t seeds[COUNT];
    CHECK(batch != NULL && one != NULL);
    if (batch == NULL || one == NULL) {
        free(batch);
        free(one);
        return;
    }
    for (int threads = 0; threads <= 3; threads++) {
        fill(batch, COUNT * patch, 99);
        memcpy(one, batch, COUNT * patch);
        for (int i = 0; i < COUNT; i++) {
            seeds[i] = (uint64_t)i * 0x9e3779b97f4a7c15ull + 1;
            CHECK_EQ_INT(sp_augment_patch(one + i * patch, SIZE, seeds[i], 1, 0.3), SP_OK);
        }
        CHECK_EQ_INT(sp_augment_patches(batch, COUNT, SIZE, seeds, 1, 0.3, threads), SP_OK);
        CHECK(memcmp(batch, one, COUNT * patch) == 0);
    }
    free(batch);
    free(one);
}

void unit_run(void) {
    test_rejects();
    test_flips_permute();
    test_batch_equals_single();
}
