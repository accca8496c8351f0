/* test_cuda_augment_hed.c — the GPU's flips, quarter turns and HED jitter (src/cuda/cuda_augment.h)
 * against the CPU reference (sp_augment_patches): byte for byte, flips alone, jitter alone and
 * both, on patches of a size that is no multiple of the kernel's block. Skipped where no CUDA
 * device is present (or the library was built without the backend); bad arguments are refused
 * either way before any device is asked for. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_augment.h"
#include "slidepipe.h"
#include "unit.h"

enum { SIZE = 45, COUNT = 24 };

void unit_run(void) {
    size_t bytes = (size_t)COUNT * SIZE * SIZE * 3;
    uint8_t *cpu = malloc(bytes), *gpu = malloc(bytes);
    uint64_t seeds[COUNT] = {0};
    char err[256] = "";
    CHECK_EQ_INT(sp_cuda_augment_patches(NULL, 1, SIZE, seeds, 1, 0.1, err, sizeof err),
                 SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_cuda_augment_patches(cpu, 1, SIZE, seeds, 1, 1.5, err, sizeof err),
                 SP_E_INVALID_ARG);
    char why[256] = "";
    if (sp_cuda_device_count(why, sizeof why) < 1) {
        free(cpu);
        free(gpu);
        char msg[400];
        snprintf(msg, sizeof msg, "no CUDA device: %s", why);
        unit_skip(msg);
        return;
    }
    const struct {
        int dihedral;
        double sigma;
    } cases[] = {{1, 0.0}, {0, 0.1}, {1, 0.3}};
    uint32_t r = 7;
    for (size_t i = 0; i < bytes; i++) {
        r = r * 1664525u + 1013904223u;
        cpu[i] = (uint8_t)(r >> 24);
    }
    for (int i = 0; i < COUNT; i++) {
        seeds[i] = 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1);
    }
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        memcpy(gpu, cpu, bytes);
        uint8_t *want = malloc(bytes);
        memcpy(want, cpu, bytes);
        CHECK_EQ_INT(sp_augment_patches(want, COUNT, SIZE, seeds, cases[k].dihedral,
                                        cases[k].sigma, 1),
                     SP_OK);
        CHECK_EQ_INT(sp_cuda_augment_patches(gpu, COUNT, SIZE, seeds, cases[k].dihedral,
                                             cases[k].sigma, err, sizeof err),
                     SP_OK);
        CHECK(memcmp(gpu, want, bytes) == 0);
        free(want);
    }
    free(cpu);
    free(gpu);
}
