/* test_cuda_augment_color.c — the photometric augmentation on the GPU against the CPU reference:
 * the same patches and seeds through sp_cuda_augment_photometric and
 * sp_augment_photometric_batch must give the same bytes (the GPU kernels run the CPU's
 * per-pixel functions without fused multiply-adds, on the CPU's draws and kernel weights), for
 * each stage alone and all together, on odd sizes and a one-pixel-wide patch. Skipped without a
 * CUDA device.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "cuda/cuda_augment_color.h"
#include "slidepipe.h"
#include "unit.h"

static void fill(uint8_t *p, size_t n, uint32_t seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (uint8_t)(seed >> 24);
    }
}

static void compare(const char *name, const sp_photometric_params *p, int64_t count, int64_t w,
                    int64_t h) {
    size_t bytes = (size_t)(count * w * h * 3);
    uint8_t *cpu = malloc(bytes), *gpu = malloc(bytes);
    uint64_t *seeds = malloc((size_t)count * sizeof(uint64_t));
    fill(cpu, bytes, (uint32_t)(w * 31 + h));
    memcpy(gpu, cpu, bytes);
    for (int64_t i = 0; i < count; i++) {
        seeds[i] = (uint64_t)i * 0x9e3779b97f4a7c15ull ^ 0x1234;
    }
    CHECK_EQ_INT(sp_augment_photometric_batch(cpu, count, w, h, seeds, p, 2), SP_OK);
    sp_err err = {0};
    sp_status st = sp_cuda_augment_photometric(gpu, count, w, h, seeds, p, &err);
    CHECK_EQ_INT(st, SP_OK);
    if (st != SP_OK) {
        fprintf(stderr, "%s: %s\n", name, err.msg);
    }
    size_t differ = 0;
    int worst = 0;
    for (size_t i = 0; i < bytes; i++) {
        int d = abs((int)cpu[i] - (int)gpu[i]);
        differ += d != 0;
        worst = d > worst ? d : worst;
    }
    printf("%-10s %lld x %lldx%lld: %zu of %zu bytes differ, max %d\n", name, (long long)count,
           (long long)w, (long long)h, differ, bytes, worst);
    CHECK_EQ_INT(differ, 0);
    free(cpu);
    free(gpu);
    free(seeds);
}

void unit_run(void) {
    char why[256];
    if (sp_cuda_device_count(why, sizeof why) <= 0) {
        char msg[300];
        snprintf(msg, sizeof msg, "no CUDA device: %s", why);
        unit_skip(msg);
        return;
    }
    sp_photometric_params base;
    memset(&base, 0, sizeof base);
    base.struct_size = sizeof base;
    sp_photometric_params jitter = base, blur = base, noise = base, all = base;
    jitter.jitter_p = 1.0;
    jitter.brightness = jitter.contrast = jitter.saturation = 0.5, jitter.hue = 0.3;
    blur.blur_p = 1.0, blur.blur_sigma_min = 0.2, blur.blur_sigma_max = 5.0;
    noise.noise_p = 1.0, noise.noise_sigma_min = 0.5, noise.noise_sigma_max = 20.0;
    all = jitter;
    all.jitter_p = 0.8;
    all.blur_p = 0.6, all.blur_sigma_min = 0.3, all.blur_sigma_max = 2.5;
    all.noise_p = 0.7, all.noise_sigma_min = 1.0, all.noise_sigma_max = 10.0;
    compare("jitter", &jitter, 16, 67, 45);
    compare("blur", &blur, 16, 67, 45);
    compare("noise", &noise, 16, 67, 45);
    compare("all", &all, 64, 224, 224);
    compare("all-thin", &all, 8, 1, 37);
    all.blur_kernel_size = 9;
    compare("all-k9", &all, 8, 5, 300);
    sp_err err = {0};
    uint64_t seed = 1;
    uint8_t px[3] = {1, 2, 3};
    all.hue = 0.7;
    CHECK_EQ_INT(sp_cuda_augment_photometric(px, 1, 1, 1, &seed, &all, &err), SP_E_INVALID_ARG);
}
