/* augment_geometry_kernels.cu — the geometric augmentation's resampling as a CUDA kernel: one
 * thread per output pixel of one patch (the grid's z is the patch), running sp_geom_pixel from
 * src/ops/augment_geometry.h, the very function the CPU reference runs. Compiled with
 * --fmad=false, as the CPU file is with -ffp-contract=off, so no multiply-add is fused on either
 * side and the bytes agree. The launcher is a C function that returns a cudaError_t as int. */
#include <cuda_runtime.h>
#include <stdint.h>

#include "ops/augment_geometry.h"

namespace {

constexpr int THREADS_X = 32, THREADS_Y = 8;

__global__ void geometry_kernel(const uint8_t *__restrict__ src, uint8_t *__restrict__ dst,
                                const sp_geom_plan *__restrict__ plans,
                                const double *__restrict__ disp, int64_t w, int64_t h) {
    int64_t x = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    int64_t y = blockIdx.y * (int64_t)blockDim.y + threadIdx.y;
    int64_t i = blockIdx.z;
    if (x >= w || y >= h) {
        return;
    }
    int64_t n = w * h;
    sp_geom_plan plan = plans[i];
    const double *d = disp != nullptr ? disp + i * 2 * n : nullptr;
    sp_geom_pixel(src + i * n * 3, &plan, d, x, y, dst + i * n * 3 + (y * w + x) * 3);
}

} // namespace

extern "C" {

/* `count` (<= 65535) patches of w x h from src to dst (device memory); plans[i] and, when disp is
 * not NULL, disp + 2 w h i are patch i's plan and displacement planes. */
int sp_cuda_launch_geometry(const uint8_t *src, uint8_t *dst, const sp_geom_plan *plans,
                            const double *disp, int64_t count, int64_t w, int64_t h,
                            cudaStream_t stream) {
    dim3 grid((unsigned)((w + THREADS_X - 1) / THREADS_X),
              (unsigned)((h + THREADS_Y - 1) / THREADS_Y), (unsigned)count);
    geometry_kernel<<<grid, dim3(THREADS_X, THREADS_Y), 0, stream>>>(src, dst, plans, disp, w, h);
    return (int)cudaGetLastError();
}

} // extern "C"
