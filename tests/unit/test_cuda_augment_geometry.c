/* test_cuda_augment_geometry.c — the GPU's geometric augmentation (src/cuda/cuda_augment.h)
 * against the CPU reference (sp_augment_geometry_batch): byte for byte, for the affine map with
 * either border, the crop, the elastic field and all of them at once, on patches of a size that
 * is no multiple of the kernel's block, and a batch of one patch. Skipped where no CUDA device is
 * present (or the library was built without the backend); bad arguments are refused either way
 * before any device is asked for. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_augment.h"
#include "slidepipe.h"
#include "unit.h"

enum { W = 45, H = 37, COUNT = 6 };

static void fill(uint8_t *p, size_t n, uint32_t seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (uint8_t)(seed >> 24);
    }
}

static void params(sp_geometry_params *p, int which) {
    sp_geometry_params_default(p);
    if (which == 0 || which == 1 || which == 4) {
        p->rotation[0] = -40, p->rotation[1] = 40;
        p->scale[0] = 0.7, p->scale[1] = 1.3;
        p->scale_x[0] = 0.9, p->scale_x[1] = 1.1;
        p->shear_x[0] = -12, p->shear_x[1] = 12;
        p->shear_y[0] = -6, p->shear_y[1] = 6;
        p->translate_x[0] = -0.2, p->translate_x[1] = 0.2;
        p->translate_y[0] = -0.1, p->translate_y[1] = 0.1;
    }
    if (which == 1) {
        p->border = SP_BORDER_CONSTANT;
        p->fill[0] = 200, p->fill[1] = 10, p->fill[2] = 99;
    }
    if (which == 2 || which == 4) {
        p->crop = 1;
    }
    if (which == 3 || which == 4) {
        p->elastic = 1;
        p->elastic_alpha[0] = 0.4, p->elastic_alpha[1] = 0.6;
        p->elastic_sigma = 5.0;
        p->elastic_kernel = 15;
    }
}

static void test_refuses(void) {
    sp_geometry_params p;
    sp_geometry_params_default(&p);
    uint8_t px[3] = {0};
    uint64_t seed = 1;
    CHECK_EQ_INT(sp_cuda_augment_geometry(px, 1, 1, 1, NULL, &p, NULL, 0), SP_E_INVALID_ARG);
    p.scale[0] = -1;
    CHECK_EQ_INT(sp_cuda_augment_geometry(px, 1, 1, 1, &seed, &p, NULL, 0), SP_E_INVALID_ARG);
}

static void test_parity(void) {
    size_t patch = (size_t)W * H * 3;
    uint8_t *a = malloc(patch * COUNT), *cpu = malloc(patch * COUNT), *gpu = malloc(patch * COUNT);
    uint64_t seeds[COUNT];
    fill(a, patch * COUNT, 11);
    for (int i = 0; i < COUNT; i++) {
        seeds[i] = 0x1234567ull * (uint64_t)(i + 1);
    }
    for (int which = 0; which < 5; which++) {
        sp_geometry_params p;
        params(&p, which);
        memcpy(cpu, a, patch * COUNT);
        memcpy(gpu, a, patch * COUNT);
        CHECK_EQ_INT(sp_augment_geometry_batch(cpu, COUNT, W, H, seeds, &p, 2), SP_OK);
        char err[256] = "";
        sp_status st = sp_cuda_augment_geometry(gpu, COUNT, W, H, seeds, &p, err, sizeof err);
        if (st != SP_OK) {
            fprintf(stderr, "case %d: %s\n", which, err);
        }
        CHECK_EQ_INT(st, SP_OK);
        size_t differ = 0;
        for (size_t i = 0; i < patch * COUNT; i++) {
            differ += cpu[i] != gpu[i];
        }
        if (differ != 0) {
            fprintf(stderr, "case %d: %zu bytes differ\n", which, differ);
        }
        CHECK_EQ_INT(differ, 0);
        CHECK(memcmp(cpu, a, patch * COUNT) != 0);
    }
    /* one patch */
    sp_geometry_params p;
    params(&p, 4);
    memcpy(cpu, a, patch);
    memcpy(gpu, a, patch);
    CHECK_EQ_INT(sp_augment_geometry(cpu, W, H, 5, &p), SP_OK);
    uint64_t five = 5;
    CHECK_EQ_INT(sp_cuda_augment_geometry(gpu, 1, W, H, &five, &p, NULL, 0), SP_OK);
    CHECK(memcmp(cpu, gpu, patch) == 0);
    free(a);
    free(cpu);
    free(gpu);
}

void unit_run(void) {
    test_refuses();
    char why[256] = "";
    if (sp_cuda_device_count(why, sizeof why) <= 0) {
        char msg[300];
        snprintf(msg, sizeof msg, "no CUDA device: %s", why);
        unit_skip(msg);
        return;
    }
    test_parity();
}
