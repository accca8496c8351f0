/* augment_color_kernels.cu — the photometric augmentation on the GPU for a batch of RGB8 patches:
 * the colour jitter one step at a time (a per-patch grey sum, reduced in integers, before a
 * contrast step; then a per-pixel kernel), the separable blur (rows into a float32 scratch, then
 * columns) and the noise from the counter-based generator. The draws and the kernel weights are
 * made on the host by the CPU code, and every pixel is computed by the functions the CPU uses
 * (src/ops/augment_color_math.h); this file is compiled with --fmad=false, so the bytes are the
 * CPU's. The host entry is sp_cuda_augment_photometric (cuda_augment_color.h). */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_augment_color.h"
#include "ops/augment_color_math.h"
extern "C" {
#include "ops/augment_color.h"
}

namespace {

constexpr int THREADS = 256;
constexpr int GRID_Y_MAX = 65535; /* patches per launch (the grid's y extent) */

/* What the host drew for one patch. */
struct patch_plan {
    int32_t step[4]; /* jitter step applied at position s, or -1 */
    float ratio[4], rest[4];
    int32_t k; /* blur kernel size, 0 for no blur */
    float w[SP_BLUR_KERNEL_MAX];
    double noise_sigma; /* 0 for no noise */
    uint64_t noise_key;
};

__global__ void grey_sums(const uint8_t *rgb, int64_t npix, const patch_plan *plans, int s,
                          unsigned long long *sums) {
    __shared__ unsigned long long shared[THREADS];
    int patch = blockIdx.x;
    if (plans[patch].step[s] != SP_JITTER_CONTRAST) {
        return; /* the whole block leaves together */
    }
    const uint8_t *px = rgb + (int64_t)patch * npix * 3;
    unsigned long long sum = 0;
    for (int64_t i = threadIdx.x; i < npix; i += THREADS) {
        sum += sp_aug_grey(px + 3 * i);
    }
    shared[threadIdx.x] = sum;
    __syncthreads();
    for (int h = THREADS / 2; h > 0; h >>= 1) {
        if ((int)threadIdx.x < h) {
            shared[threadIdx.x] += shared[threadIdx.x + h];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        sums[patch] = shared[0];
    }
}

__global__ void jitter_step(uint8_t *rgb, int64_t npix, const patch_plan *plans, int s,
                            const unsigned long long *sums, int base) {
    int patch = base + blockIdx.y;
    int64_t i = (int64_t)blockIdx.x * THREADS + threadIdx.x;
    const patch_plan *pl = plans + patch;
    int step = pl->step[s];
    if (i >= npix || step < 0) {
        return;
    }
    float mean = 0.0f;
    if (step == SP_JITTER_CONTRAST) {
        mean = (float)sums[patch] / (float)npix; /* sp_jitter_grey_mean */
    }
    sp_aug_jitter_step(rgb + ((int64_t)patch * npix + i) * 3, step, pl->ratio[s], pl->rest[s],
                       mean);
}

__global__ void blur_rows(const uint8_t *rgb, int64_t width, int64_t height,
                          const patch_plan *plans, float *scratch, int base) {
    int patch = base + blockIdx.y;
    int64_t npix = width * height;
    int64_t i = (int64_t)blockIdx.x * THREADS + threadIdx.x;
    const patch_plan *pl = plans + patch;
    if (i >= npix || pl->k == 0) {
        return;
    }
    int64_t y = i / width, x = i % width, r = pl->k / 2;
    const uint8_t *row = rgb + ((int64_t)patch * npix + y * width) * 3;
    float acc[3] = {0.0f, 0.0f, 0.0f};
    for (int32_t j = 0; j < pl->k; j++) {
        const uint8_t *px = row + 3 * sp_aug_reflect(x + j - r, width);
        for (int c = 0; c < 3; c++) {
            acc[c] += pl->w[j] * (float)px[c];
        }
    }
    float *out = scratch + ((int64_t)patch * npix + i) * 3;
    for (int c = 0; c < 3; c++) {
        out[c] = acc[c];
    }
}

__global__ void blur_cols(uint8_t *rgb, int64_t width, int64_t height, const patch_plan *plans,
                          const float *scratch, int base) {
    int patch = base + blockIdx.y;
    int64_t npix = width * height;
    int64_t i = (int64_t)blockIdx.x * THREADS + threadIdx.x;
    const patch_plan *pl = plans + patch;
    if (i >= npix || pl->k == 0) {
        return;
    }
    int64_t y = i / width, x = i % width, r = pl->k / 2;
    const float *plane = scratch + (int64_t)patch * npix * 3;
    float acc[3] = {0.0f, 0.0f, 0.0f};
    for (int32_t j = 0; j < pl->k; j++) {
        const float *px = plane + (sp_aug_reflect(y + j - r, height) * width + x) * 3;
        for (int c = 0; c < 3; c++) {
            acc[c] += pl->w[j] * px[c];
        }
    }
    uint8_t *out = rgb + ((int64_t)patch * npix + i) * 3;
    for (int c = 0; c < 3; c++) {
        float v = rintf(acc[c]);
        out[c] = (uint8_t)(v < 0.0f ? 0.0f : (v > 255.0f ? 255.0f : v));
    }
}

__global__ void noise(uint8_t *rgb, int64_t npix, const patch_plan *plans, int base) {
    int patch = base + blockIdx.y;
    int64_t e = (int64_t)blockIdx.x * THREADS + threadIdx.x;
    const patch_plan *pl = plans + patch;
    if (e >= npix * 3 || pl->noise_sigma <= 0.0) {
        return;
    }
    uint8_t *v = rgb + (int64_t)patch * npix * 3 + e;
    *v = sp_aug_noisy(*v, pl->noise_sigma, sp_aug_normal(pl->noise_key, (uint64_t)e));
}

/* The plans of every patch from the CPU's draws; *any_blur set when some patch blurs. */
void make_plans(int64_t count, const uint64_t *seeds, const sp_photometric_params *p,
                patch_plan *plans, bool *any_blur) {
    *any_blur = false;
    for (int64_t n = 0; n < count; n++) {
        sp_photometric_draws d;
        d.struct_size = sizeof(d);
        sp_photometric_draws_of(seeds[n], p, &d);
        patch_plan *pl = plans + n;
        memset(pl, 0, sizeof(*pl));
        for (int s = 0; s < 4; s++) {
            int step = d.order[s];
            double f = step == SP_JITTER_BRIGHTNESS   ? d.brightness
                       : step == SP_JITTER_CONTRAST   ? d.contrast
                       : step == SP_JITTER_SATURATION ? d.saturation
                                                      : d.hue;
            bool on = d.jitter && (step == SP_JITTER_HUE ? f != 0.0 : f != 1.0);
            pl->step[s] = on ? step : -1;
            sp_jitter_ratio(&d, step, &pl->ratio[s], &pl->rest[s]);
        }
        if (d.blur) {
            pl->k = d.blur_kernel;
            sp_blur_weights(d.blur_kernel, d.blur_sigma, pl->w);
            *any_blur = true;
        }
        pl->noise_sigma = d.noise ? d.noise_sigma : 0.0;
        pl->noise_key = seeds[n] ^ SP_NOISE_STREAM;
    }
}

struct gpu {
    uint8_t *rgb = nullptr;
    float *scratch = nullptr;
    patch_plan *plans = nullptr;
    unsigned long long *sums = nullptr;
    ~gpu() {
        cudaFree(rgb);
        cudaFree(scratch);
        cudaFree(plans);
        cudaFree(sums);
    }
};

sp_status fail(sp_err *err, cudaError_t e, const char *what) {
    return sp_err_set(err, e == cudaErrorMemoryAllocation ? SP_E_NOMEM : SP_E_IO,
                      "photometric augmentation on the GPU: %s: %s", what, cudaGetErrorString(e));
}

/* The kernels over `count` patches in device memory (rgb), in place; g holds the rest. */
sp_status run(uint8_t *rgb, int64_t count, int64_t width, int64_t height, const patch_plan *plans,
              bool any_blur, gpu &g, sp_err *err) {
    int64_t npix = width * height;
    size_t bytes = (size_t)(count * npix * 3);
    cudaError_t e = cudaSuccess;
    if (any_blur) {
        e = cudaMalloc((void **)&g.scratch, bytes * sizeof(float));
    }
    if (e == cudaSuccess) {
        e = cudaMalloc((void **)&g.plans, (size_t)count * sizeof(patch_plan));
    }
    if (e == cudaSuccess) {
        e = cudaMalloc((void **)&g.sums, (size_t)count * sizeof(unsigned long long));
    }
    if (e != cudaSuccess) {
        return fail(err, e, "allocating");
    }
    e = cudaMemcpy(g.plans, plans, (size_t)count * sizeof(patch_plan), cudaMemcpyHostToDevice);
    if (e != cudaSuccess) {
        return fail(err, e, "uploading");
    }
    unsigned pixel_blocks = (unsigned)((npix + THREADS - 1) / THREADS);
    unsigned element_blocks = (unsigned)((npix * 3 + THREADS - 1) / THREADS);
    for (int s = 0; s < 4; s++) {
        grey_sums<<<(unsigned)count, THREADS>>>(rgb, npix, g.plans, s, g.sums);
        for (int64_t base = 0; base < count; base += GRID_Y_MAX) {
            unsigned n = (unsigned)(count - base < GRID_Y_MAX ? count - base : GRID_Y_MAX);
            jitter_step<<<dim3(pixel_blocks, n), THREADS>>>(rgb, npix, g.plans, s, g.sums,
                                                            (int)base);
        }
    }
    for (int64_t base = 0; base < count; base += GRID_Y_MAX) {
        unsigned n = (unsigned)(count - base < GRID_Y_MAX ? count - base : GRID_Y_MAX);
        if (any_blur) {
            blur_rows<<<dim3(pixel_blocks, n), THREADS>>>(rgb, width, height, g.plans, g.scratch,
                                                          (int)base);
            blur_cols<<<dim3(pixel_blocks, n), THREADS>>>(rgb, width, height, g.plans, g.scratch,
                                                          (int)base);
        }
        noise<<<dim3(element_blocks, n), THREADS>>>(rgb, npix, g.plans, (int)base);
    }
    e = cudaGetLastError();
    if (e == cudaSuccess) {
        e = cudaDeviceSynchronize();
    }
    return e == cudaSuccess ? SP_OK : fail(err, e, "running the kernels");
}

bool args_ok(const uint8_t *rgb, int64_t count, int64_t width, int64_t height,
             const uint64_t *seeds, const sp_photometric_params *p) {
    return count >= 0 && sp_photometric_check(p) == SP_OK &&
           (count == 0 || (rgb != NULL && seeds != NULL && width >= 1 && height >= 1 &&
                           width <= SP_PHOTOMETRIC_SIDE_MAX && height <= SP_PHOTOMETRIC_SIDE_MAX));
}

/* The plans of `count` patches and the kernels over rgb (device memory, the current device's),
 * with a copy of the patches up and down around them when `host` is not NULL. */
sp_status plan_and_run(uint8_t *host, uint8_t *device_rgb, int64_t count, int64_t width,
                       int64_t height, const uint64_t *seeds, const sp_photometric_params *p,
                       sp_err *err) {
    patch_plan *plans = (patch_plan *)malloc((size_t)count * sizeof(patch_plan));
    if (plans == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "photometric augmentation: out of memory");
    }
    bool any_blur;
    make_plans(count, seeds, p, plans, &any_blur);
    size_t bytes = (size_t)(count * width * height * 3);
    gpu g;
    sp_status s = SP_OK;
    cudaError_t e = cudaSuccess;
    if (host != NULL) {
        e = cudaMalloc((void **)&g.rgb, bytes);
        if (e == cudaSuccess) {
            e = cudaMemcpy(g.rgb, host, bytes, cudaMemcpyHostToDevice);
        }
        s = e == cudaSuccess ? SP_OK : fail(err, e, "uploading");
        device_rgb = g.rgb;
    }
    if (s == SP_OK) {
        s = run(device_rgb, count, width, height, plans, any_blur, g, err);
    }
    if (s == SP_OK && host != NULL) {
        e = cudaMemcpy(host, g.rgb, bytes, cudaMemcpyDeviceToHost);
        s = e == cudaSuccess ? SP_OK : fail(err, e, "downloading");
    }
    free(plans);
    return s;
}

} // namespace

extern "C" sp_status sp_cuda_augment_photometric(uint8_t *rgb, int64_t count, int64_t width,
                                                 int64_t height, const uint64_t *seeds,
                                                 const sp_photometric_params *p, sp_err *err) {
    if (!args_ok(rgb, count, width, height, seeds, p)) {
        return sp_err_set(err, SP_E_INVALID_ARG, "photometric augmentation: bad arguments");
    }
    if (count == 0) {
        return SP_OK;
    }
    int device = sp_cuda_default_device();
    if (device < 0) {
        return sp_err_set(err, SP_E_UNSUPPORTED, "photometric augmentation: no CUDA device");
    }
    cudaError_t e = cudaSetDevice(device);
    if (e != cudaSuccess) {
        return fail(err, e, "selecting the device");
    }
    return plan_and_run(rgb, nullptr, count, width, height, seeds, p, err);
}

extern "C" sp_status sp_cuda_augment_photometric_device(uint8_t *device_rgb, int64_t count,
                                                        int64_t width, int64_t height,
                                                        const uint64_t *seeds,
                                                        const sp_photometric_params *p,
                                                        sp_err *err) {
    if (!args_ok(device_rgb, count, width, height, seeds, p)) {
        return sp_err_set(err, SP_E_INVALID_ARG, "photometric augmentation: bad arguments");
    }
    return count == 0 ? SP_OK
                      : plan_and_run(nullptr, device_rgb, count, width, height, seeds, p, err);
}
