/* tile_qc_kernels.cu — the tile QC sums on the GPU: one block per tile, each thread classifies
 * its share of the tile's pixels and sums the Laplacian of the luma over the interior tissue
 * pixels, by the rules of ops/tile_qc_math.h (the CPU reference's own code). Every sum is an
 * integer, added in shared memory with atomics, so the order the threads run in cannot change
 * it; the host turns the sums into scores with the same sp_qc_finish as the CPU, so GPU and CPU
 * scores are bit for bit the same. Compiled with --fmad=false like the other kernels, though no
 * floating point is done here. */
#include <cuda_runtime.h>
#include <stdint.h>

#include "ops/tile_qc_math.h"

namespace {

constexpr int THREADS = 256;

__device__ int luma_at(const uint8_t *p) {
    return sp_qc_luma(p[0], p[1], p[2]);
}

/* Tiles are packed back to back, size * size * 3 bytes each; sums gets SP_QC_SUMS per tile. */
__global__ void tile_qc_sums(const uint8_t *__restrict__ rgb, int size,
                             long long *__restrict__ sums) {
    __shared__ unsigned long long acc[SP_QC_SUMS];
    if (threadIdx.x < SP_QC_SUMS) {
        acc[threadIdx.x] = 0;
    }
    __syncthreads();
    const int64_t n = (int64_t)size * size;
    const uint8_t *tile = rgb + (int64_t)blockIdx.x * n * 3;
    unsigned long long counts[SP_QC_CLASSES] = {0};
    long long lap_n = 0, lap_s = 0, lap_s2 = 0;
    for (int64_t i = threadIdx.x; i < n; i += THREADS) {
        const uint8_t *p = tile + i * 3;
        int c = sp_qc_classify(p[0], p[1], p[2]);
        counts[c]++;
        int64_t x = i % size, y = i / size;
        if (x < 1 || y < 1 || x + 1 >= size || y + 1 >= size || !sp_qc_is_tissue(c)) {
            continue;
        }
        const int64_t row = (int64_t)size * 3;
        long long lap =
            luma_at(p - row) + luma_at(p + row) + luma_at(p - 3) + luma_at(p + 3) - 4 * luma_at(p);
        lap_n++;
        lap_s += lap;
        lap_s2 += lap * lap;
    }
    for (int c = 0; c < SP_QC_CLASSES; c++) {
        if (counts[c]) {
            atomicAdd(&acc[c], counts[c]);
        }
    }
    /* Two's complement: adding the negative sums as unsigned wraps to the right signed total. */
    atomicAdd(&acc[SP_QC_SUM_N], (unsigned long long)lap_n);
    atomicAdd(&acc[SP_QC_SUM_S], (unsigned long long)lap_s);
    atomicAdd(&acc[SP_QC_SUM_S2], (unsigned long long)lap_s2);
    __syncthreads();
    if (threadIdx.x < SP_QC_SUMS) {
        sums[(int64_t)blockIdx.x * SP_QC_SUMS + threadIdx.x] = (long long)acc[threadIdx.x];
    }
}

} // namespace

extern "C" {

int sp_cuda_launch_tile_qc(const uint8_t *rgb, int size, int count, long long *sums,
                           cudaStream_t stream) {
    tile_qc_sums<<<count, THREADS, 0, stream>>>(rgb, size, sums);
    return (int)cudaGetLastError();
}

} // extern "C"
