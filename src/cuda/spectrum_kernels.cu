/* spectrum_kernels.cu — the spectral statistics on the GPU, around cuFFT's batched real-to-complex
 * transform: a kernel that turns a strip of RGB8 patches into offset-free grey planes (and each
 * patch's exact sum), and a kernel that turns each patch's half spectrum into dB values, their
 * histogram slots (mirrored columns counted twice) and the patch's sums. Every step but the FFT
 * repeats the CPU kernel's arithmetic (src/ops/spectrum_kernel.c) in the same order — grey
 * as (R 0.299 + G 0.587) + B 0.114 with each product rounded, the same offset removal, the same
 * branch-free logarithm and bin search (spectrum_math.h, one source for both) — and this file is
 * compiled with --fmad=false, so GPU and CPU differ only by the two FFTs' rounding. Per-patch
 * sums are reduced in a fixed tree order and histogram counts are integers, so a run's result
 * does not depend on scheduling. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "ops/spectrum_math.h"

namespace {

constexpr int THREADS = 256;
constexpr int SLOTS = 802; /* below, 800 bins, above */

/* Sum `v` over the block in a fixed tree order (deterministic); thread 0 gets the total. */
__device__ double block_sum(double v, double *shared) {
    shared[threadIdx.x] = v;
    __syncthreads();
    for (int s = THREADS / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) {
            shared[threadIdx.x] += shared[threadIdx.x + s];
        }
        __syncthreads();
    }
    double total = shared[0];
    __syncthreads();
    return total;
}

/* One block per patch of the strip: patches are numbered row-major over the strip's patch grid
 * (across = patches per row). rgb: the strip, rows of `stride` bytes. */
__global__ void grey_patches(const uint8_t *__restrict__ rgb, int64_t stride, int patch,
                             int across, float *__restrict__ grey, double *__restrict__ totals) {
    __shared__ double shared[THREADS];
    int index = blockIdx.x;
    int prow = index / across, pcol = index % across;
    int64_t n = (int64_t)patch * patch;
    const uint8_t *origin = rgb + (int64_t)prow * patch * stride + (int64_t)pcol * patch * 3;
    float *out = grey + (int64_t)index * n;
    double sum = 0;
    for (int64_t i = threadIdx.x; i < n; i += THREADS) {
        const uint8_t *px = origin + (i / patch) * stride + (i % patch) * 3;
        float g = ((float)px[0] * 0.299f + (float)px[1] * 0.587f) + (float)px[2] * 0.114f;
        out[i] = g;
        sum += g; /* exact in double whatever the order: floats under 256 over at most 2^24 */
    }
    double total = block_sum(sum, shared);
    float offset = (float)rint(total / (double)n);
    for (int64_t i = threadIdx.x; i < n; i += THREADS) {
        out[i] -= offset;
    }
    if (threadIdx.x == 0) {
        totals[index] = total;
    }
}

/* One block per patch: dB values of its half spectrum (patch rows x (patch/2 + 1) complex), the
 * DC term taken from the exact sum, histogram slots into `hist` (802 counters), the patch's sum
 * and sum of squares (each value weighted by how many full-spectrum values it stands for) into
 * sums[2 * index]. */
__global__ void spectrum_stats(const float2 *__restrict__ freq, int patch,
                               const double *__restrict__ totals, unsigned long long *hist,
                               double *__restrict__ sums) {
    __shared__ unsigned int counts[SLOTS];
    __shared__ double shared[THREADS];
    for (int i = threadIdx.x; i < SLOTS; i += THREADS) {
        counts[i] = 0;
    }
    __syncthreads();
    int index = blockIdx.x, half = patch / 2 + 1;
    int64_t n = (int64_t)patch * half;
    const float2 *f = freq + (int64_t)index * n;
    double s = 0, s2 = 0;
    for (int64_t i = threadIdx.x; i < n; i += THREADS) {
        int col = (int)(i % half);
        float2 c = i == 0 ? make_float2((float)totals[index], 0.0f) : f[i];
        float db = sp_spectrum_db_of(c.x * c.x + c.y * c.y);
        unsigned weight = (col == 0 || (patch % 2 == 0 && col == half - 1)) ? 1u : 2u;
        atomicAdd(&counts[sp_spectrum_slot_of(db)], weight);
        s += (double)weight * db;
        s2 += (double)weight * ((double)db * db);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < SLOTS; i += THREADS) {
        if (counts[i] != 0) {
            atomicAdd(&hist[i], (unsigned long long)counts[i]);
        }
    }
    double total = block_sum(s, shared);
    double total_sq = block_sum(s2, shared);
    if (threadIdx.x == 0) {
        sums[2 * index] = total;
        sums[2 * index + 1] = total_sq;
    }
}

} // namespace

extern "C" {

int sp_cuda_launch_grey_patches(const uint8_t *rgb, int64_t stride, int patch, int across,
                                int count, float *grey, double *totals, cudaStream_t stream) {
    grey_patches<<<count, THREADS, 0, stream>>>(rgb, stride, patch, across, grey, totals);
    return (int)cudaGetLastError();
}

int sp_cuda_launch_spectrum_stats(const void *freq, int patch, int count, const double *totals,
                                  unsigned long long *hist, double *sums, cudaStream_t stream) {
    spectrum_stats<<<count, THREADS, 0, stream>>>((const float2 *)freq, patch, totals, hist,
                                                  sums);
    return (int)cudaGetLastError();
}

} // extern "C"
