/* augment_hed_kernels.cu — the flips, quarter turns and HED jitter of sp_augment_patch as a CUDA
 * kernel: one thread per output pixel of one patch (the grid's z is the patch). The per-patch
 * plan (augment_hed.h) is made on the CPU, exponentials included, so the kernel only multiplies
 * table entries and rounds, the same IEEE products in the same order as the CPU: the bytes
 * agree. The launcher is a C function that returns a cudaError_t as int. */
#include <cuda_runtime.h>
#include <stdint.h>

#include "ops/augment_hed.h"

namespace {

constexpr int THREADS_X = 32, THREADS_Y = 8;

__global__ void hed_kernel(const uint8_t *__restrict__ src, uint8_t *__restrict__ dst,
                           const sp_hed_plan *__restrict__ plans, int64_t size) {
    int64_t x = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    int64_t y = blockIdx.y * (int64_t)blockDim.y + threadIdx.y;
    int64_t i = blockIdx.z;
    if (x >= size || y >= size) {
        return;
    }
    const sp_hed_plan *plan = plans + i;
    int64_t sy = y, sx = x;
    if (plan->flip >= 0) {
        sp_hed_flip_source(plan->flip, size, &sy, &sx);
    }
    int64_t n = size * size;
    const uint8_t *in = src + i * n * 3 + (sy * size + sx) * 3;
    uint8_t *out = dst + i * n * 3 + (y * size + x) * 3;
    uint8_t i0 = in[0], i1 = in[1], i2 = in[2];
    for (int c = 0; c < 3; c++) {
        if (!plan->jitter) {
            out[c] = in[c];
            continue;
        }
        float v = plan->scale[c] * plan->factor[0][c][i0] * plan->factor[1][c][i1] *
                  plan->factor[2][c][i2];
        out[c] = (uint8_t)((v > 255.0f ? 255.0f : v) + 0.5f);
    }
}

} // namespace

extern "C" {

/* `count` (<= 65535) patches of size x size from src to dst (device memory), patch i by
 * plans[i] (device memory). */
int sp_cuda_launch_hed(const uint8_t *src, uint8_t *dst, const sp_hed_plan *plans, int64_t count,
                       int64_t size, cudaStream_t stream) {
    dim3 grid((unsigned)((size + THREADS_X - 1) / THREADS_X),
              (unsigned)((size + THREADS_Y - 1) / THREADS_Y), (unsigned)count);
    hed_kernel<<<grid, dim3(THREADS_X, THREADS_Y), 0, stream>>>(src, dst, plans, size);
    return (int)cudaGetLastError();
}

} // extern "C"
