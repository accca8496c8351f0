/* cuda_tile_qc.c — the host side of the tile QC kernel (see cuda_tile_qc.h): the tiles go up in
 * batches of at most BATCH_BYTES, the kernel sums each tile's pixel classes and Laplacian, the
 * integer sums come back and sp_qc_finish (the CPU's own step) makes the scores. Synchronous,
 * on the default stream of the current device. */
#include <cuda_runtime.h>
#include <string.h>

#include "cuda/cuda_tile_qc.h"
#include "ops/tile_qc_math.h"

/* Launcher in tile_qc_kernels.cu (returns a cudaError_t). */
int sp_cuda_launch_tile_qc(const uint8_t *rgb, int size, int count, long long *sums,
                           cudaStream_t stream);

#define BATCH_BYTES ((size_t)256 << 20)

static sp_status fail(sp_err *err, cudaError_t e, const char *what) {
    return sp_err_set(err, e == cudaErrorMemoryAllocation ? SP_E_NOMEM : SP_E_IO,
                      "tile QC on the GPU: %s: %s", what, cudaGetErrorString(e));
}

sp_status sp_cuda_tile_qc(const uint8_t *rgb, int64_t size, size_t count, sp_tile_qc *out,
                          sp_err *err) {
    if (out != NULL && count > 0) {
        memset(out, 0, count * sizeof *out);
    }
    if (size < 1 || size > SP_TILE_QC_MAX_SIZE || (count > 0 && (rgb == NULL || out == NULL))) {
        return sp_err_set(err, SP_E_INVALID_ARG, "tile QC on the GPU: bad arguments");
    }
    if (count == 0) {
        return SP_OK;
    }
    size_t tile_bytes = (size_t)size * (size_t)size * 3;
    size_t per_batch = BATCH_BYTES / tile_bytes ? BATCH_BYTES / tile_bytes : 1;
    per_batch = per_batch < count ? per_batch : count;
    uint8_t *d_rgb = NULL;
    long long *d_sums = NULL;
    long long sums[SP_QC_SUMS * 64];
    sp_status st = SP_OK;
    cudaError_t e = cudaMalloc((void **)&d_rgb, per_batch * tile_bytes);
    if (e == cudaSuccess) {
        e = cudaMalloc((void **)&d_sums, per_batch * SP_QC_SUMS * sizeof(long long));
    }
    if (e != cudaSuccess) {
        st = fail(err, e, "allocating device memory");
    }
    for (size_t first = 0; st == SP_OK && first < count; first += per_batch) {
        size_t n = count - first < per_batch ? count - first : per_batch;
        e = cudaMemcpy(d_rgb, rgb + first * tile_bytes, n * tile_bytes, cudaMemcpyHostToDevice);
        if (e == cudaSuccess) {
            e = (cudaError_t)sp_cuda_launch_tile_qc(d_rgb, (int)size, (int)n, d_sums, 0);
        }
        /* The sums come back 64 tiles at a time into a fixed host buffer. */
        for (size_t k = 0; e == cudaSuccess && k < n; k += 64) {
            size_t m = n - k < 64 ? n - k : 64;
            e = cudaMemcpy(sums, d_sums + k * SP_QC_SUMS, m * SP_QC_SUMS * sizeof(long long),
                           cudaMemcpyDeviceToHost);
            for (size_t t = 0; e == cudaSuccess && t < m; t++) {
                int64_t s[SP_QC_SUMS];
                for (int j = 0; j < SP_QC_SUMS; j++) {
                    s[j] = (int64_t)sums[t * SP_QC_SUMS + (size_t)j];
                }
                sp_qc_finish(s, size, &out[first + k + t]);
            }
        }
        if (e != cudaSuccess) {
            st = fail(err, e, "scoring tiles");
        }
    }
    cudaFree(d_rgb);
    cudaFree(d_sums);
    if (st != SP_OK) {
        memset(out, 0, count * sizeof *out);
    }
    return st;
}
