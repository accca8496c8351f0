/* stain_kernels.cu — Reinhard and Macenko normalization and stain augmentation as CUDA kernels,
 * one thread per pixel, with the CPU reference's arithmetic in the same order (src/ops/reinhard.c
 * and its per-value pieces in src/ops/reinhard_math.h, src/ops/stains.c, src/ops/stain_augment.c)
 * in double precision. Compiled with --fmad=false so no multiply-add is
 * fused where the CPU rounds twice; the GPU's pow, cbrt and exp are not correctly rounded, so a
 * byte can differ by one where the exact value lies within an ulp or two of a half-integer
 * (tests/unit/test_cuda_stains.c bounds that). Launchers are C functions returning a
 * cudaError_t as int. */
#include <cuda_runtime.h>
#include <stdint.h>

#include "ops/reinhard_math.h"

namespace {

constexpr int THREADS = 256;

struct reinhard_args {
    double source_mean[3], source_std[3], target_mean[3], target_std[3];
    double inv[3][3];
};

__constant__ double RGB_TO_XYZ[3][3] = {
    {0.412453, 0.357580, 0.180423}, {0.212671, 0.715160, 0.072169}, {0.019334, 0.119193, 0.950227}};
__constant__ double WHITE[3] = {0.95047, 1.0, 1.08883};

/* Pixel i of a block: row i / w, column i % w; output channel k at dst[k * plane + row * stride
 * + column] (planar op output) or, with plane 1 and stride 0 and w = n, in place interleaved. */
__global__ void reinhard_kernel(const uint8_t *__restrict__ src, int64_t src_stride, int64_t w,
                                int64_t h, uint8_t *dst, int64_t dst_stride, int64_t dst_step,
                                int64_t dst_plane, reinhard_args a) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= w * h) {
        return;
    }
    int64_t y = i / w, x = i % w;
    const uint8_t *p = src + y * src_stride + 3 * x;
    double lin[3], f[3], lab[3];
    for (int k = 0; k < 3; k++) {
        lin[k] = sp_srgb_to_linear(p[k] / 255.0);
    }
    for (int r = 0; r < 3; r++) {
        double v =
            RGB_TO_XYZ[r][0] * lin[0] + RGB_TO_XYZ[r][1] * lin[1] + RGB_TO_XYZ[r][2] * lin[2];
        f[r] = sp_lab_f(v / WHITE[r]);
    }
    lab[0] = 116.0 * f[1] - 16.0;
    lab[1] = 500.0 * (f[0] - f[1]);
    lab[2] = 200.0 * (f[1] - f[2]);
    for (int k = 0; k < 3; k++) {
        lab[k] = (lab[k] - a.source_mean[k]) / a.source_std[k] * a.target_std[k] + a.target_mean[k];
    }
    double fy = (lab[0] + 16.0) / 116.0;
    double g[3] = {lab[1] / 500.0 + fy, fy, fy - lab[2] / 200.0};
    double xyz[3];
    for (int r = 0; r < 3; r++) {
        xyz[r] = sp_lab_f_inv(g[r]) * WHITE[r];
    }
    uint8_t o[3];
    for (int k = 0; k < 3; k++) {
        o[k] = sp_linear_to_byte(a.inv[k][0] * xyz[0] + a.inv[k][1] * xyz[1] + a.inv[k][2] * xyz[2]);
    }
    uint8_t *d = dst + y * dst_stride + x * dst_step;
    for (int k = 0; k < 3; k++) {
        d[k * dst_plane] = o[k];
    }
}

struct augment_args {
    double h[3], e[3], p[2][3];
};

/* table: od[256], then alpha_h, alpha_e, beta_h, beta_e per patch. */
__global__ void augment_kernel(uint8_t *rgb, int64_t count, int64_t patch_pixels,
                               const double *__restrict__ table, augment_args a) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= count * patch_pixels) {
        return;
    }
    const double *draw = table + 256 + 4 * (i / patch_pixels);
    uint8_t *px = rgb + 3 * i;
    double od[3] = {table[px[0]], table[px[1]], table[px[2]]};
    double ch = a.p[0][0] * od[0] + a.p[0][1] * od[1] + a.p[0][2] * od[2];
    double ce = a.p[1][0] * od[0] + a.p[1][1] * od[1] + a.p[1][2] * od[2];
    double dh = ch * (draw[0] - 1.0) + draw[2], de = ce * (draw[1] - 1.0) + draw[3];
    for (int k = 0; k < 3; k++) {
        double x = (double)px[k] * exp(-(a.h[k] * dh + a.e[k] * de));
        px[k] = x < 255.0 ? (uint8_t)floor(x + 0.5) : 255;
    }
}

struct macenko_args {
    double w[3][3];
    int tabled;
};

/* The Macenko map of src/ops/stains.c (sp_stains_map_apply): table holds factor[3][3][256]
 * (exp(-w[k][j] od(v))) when tabled, else od[256] and exp runs per pixel. Planar output as the
 * reinhard kernel writes it. */
__global__ void macenko_kernel(const uint8_t *__restrict__ src, int64_t src_stride, int64_t w,
                               int64_t h, uint8_t *dst, int64_t dst_stride, int64_t dst_plane,
                               const double *__restrict__ table, macenko_args a) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= w * h) {
        return;
    }
    int64_t y = i / w, x = i % w;
    const uint8_t *p = src + y * src_stride + 3 * x;
    uint8_t *d = dst + y * dst_stride + x;
    for (int k = 0; k < 3; k++) {
        double v;
        if (a.tabled) {
            const double *f = table + 3 * 256 * k;
            v = 255.0 * f[p[0]] * f[256 + p[1]] * f[512 + p[2]];
        } else {
            v = 255.0 * exp(-(a.w[k][0] * table[p[0]] + a.w[k][1] * table[p[1]] +
                              a.w[k][2] * table[p[2]]));
        }
        d[k * dst_plane] = v < 255.0 ? (uint8_t)(v + 0.5) : 255;
    }
}

} // namespace

extern "C" {

int sp_cuda_launch_macenko(const uint8_t *src, int64_t src_stride, int64_t w, int64_t h,
                           uint8_t *dst, int64_t dst_stride, int64_t dst_plane,
                           const double *device_table, const double *wm /* 9 */, int tabled,
                           cudaStream_t stream) {
    if (w <= 0 || h <= 0) {
        return 0;
    }
    macenko_args a;
    for (int i = 0; i < 9; i++) {
        a.w[i / 3][i % 3] = wm[i];
    }
    a.tabled = tabled;
    int64_t n = w * h;
    macenko_kernel<<<(unsigned)((n + THREADS - 1) / THREADS), THREADS, 0, stream>>>(
        src, src_stride, w, h, dst, dst_stride, dst_plane, device_table, a);
    return (int)cudaGetLastError();
}

int sp_cuda_launch_reinhard(const uint8_t *src, int64_t src_stride, int64_t w, int64_t h,
                            uint8_t *dst, int64_t dst_stride, int64_t dst_step, int64_t dst_plane,
                            const double *means_stds /* 12 */, const double *inv /* 9 */,
                            cudaStream_t stream) {
    if (w <= 0 || h <= 0) {
        return 0;
    }
    reinhard_args a;
    for (int k = 0; k < 3; k++) {
        a.source_mean[k] = means_stds[k];
        a.source_std[k] = means_stds[3 + k];
        a.target_mean[k] = means_stds[6 + k];
        a.target_std[k] = means_stds[9 + k];
        for (int j = 0; j < 3; j++) {
            a.inv[k][j] = inv[3 * k + j];
        }
    }
    int64_t n = w * h;
    reinhard_kernel<<<(unsigned)((n + THREADS - 1) / THREADS), THREADS, 0, stream>>>(
        src, src_stride, w, h, dst, dst_stride, dst_step, dst_plane, a);
    return (int)cudaGetLastError();
}

int sp_cuda_launch_stain_augment(uint8_t *rgb, int64_t count, int64_t patch_pixels,
                                 const double *device_table, const double *hep /* 12 */,
                                 cudaStream_t stream) {
    int64_t n = count * patch_pixels;
    if (n <= 0) {
        return 0;
    }
    augment_args a;
    for (int k = 0; k < 3; k++) {
        a.h[k] = hep[k];
        a.e[k] = hep[3 + k];
        a.p[0][k] = hep[6 + k];
        a.p[1][k] = hep[9 + k];
    }
    augment_kernel<<<(unsigned)((n + THREADS - 1) / THREADS), THREADS, 0, stream>>>(
        rgb, count, patch_pixels, device_table, a);
    return (int)cudaGetLastError();
}

} // extern "C"
