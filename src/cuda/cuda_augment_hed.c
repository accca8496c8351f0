/* cuda_augment_hed.c — the host side of the flips and HED jitter on the GPU (cuda_augment.h):
 * each patch's plan is made on the CPU with the reference's own function (sp_hed_plan_make,
 * exponentials included), the patches and plans go up, augment_hed_kernels.cu applies them, and
 * the patches come back down. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda/cuda_augment.h"
#include "ops/augment_hed.h"

/* The launcher in augment_hed_kernels.cu (it returns a cudaError_t). */
int sp_cuda_launch_hed(const uint8_t *src, uint8_t *dst, const sp_hed_plan *plans, int64_t count,
                       int64_t size, cudaStream_t stream);

enum { MAX_GRID_Z = 65535 };

static sp_status failed(cudaError_t e, const char *what, char *err, size_t err_len) {
    if (err != NULL && err_len > 0) {
        snprintf(err, err_len, "%s: %s", what, cudaGetErrorString(e));
    }
    return e == cudaErrorMemoryAllocation ? SP_E_NOMEM : SP_E_IO;
}

sp_status sp_cuda_augment_patches(uint8_t *rgb, int64_t count, int64_t size,
                                  const uint64_t *seeds, int dihedral, double hed_sigma,
                                  char *err, size_t err_len) {
    if (count < 0 || size < 1 || size > (1 << 16) || !(hed_sigma >= 0.0 && hed_sigma <= 1.0) ||
        (count > 0 && (rgb == NULL || seeds == NULL))) {
        return SP_E_INVALID_ARG;
    }
    if (count == 0) {
        return SP_OK;
    }
    int device = sp_cuda_default_device();
    if (device < 0) {
        if (err != NULL && err_len > 0) {
            snprintf(err, err_len, "no CUDA device");
        }
        return SP_E_UNSUPPORTED;
    }
    size_t bytes = (size_t)count * (size_t)(size * size) * 3;
    sp_hed_plan *plans = malloc((size_t)count * sizeof(*plans));
    uint8_t *d_src = NULL, *d_dst = NULL;
    sp_hed_plan *d_plans = NULL;
    sp_status st = SP_OK;
    cudaError_t e = cudaSuccess;
    if (plans == NULL) {
        return SP_E_NOMEM;
    }
    for (int64_t i = 0; i < count; i++) {
        sp_hed_plan_make(seeds[i], dihedral, hed_sigma, &plans[i]);
    }
    if ((e = cudaSetDevice(device)) != cudaSuccess ||
        (e = cudaMalloc((void **)&d_src, bytes)) != cudaSuccess ||
        (e = cudaMalloc((void **)&d_dst, bytes)) != cudaSuccess ||
        (e = cudaMalloc((void **)&d_plans, (size_t)count * sizeof(*plans))) != cudaSuccess) {
        st = failed(e, "allocating GPU memory for flips and HED jitter", err, err_len);
        goto done;
    }
    if ((e = cudaMemcpy(d_src, rgb, bytes, cudaMemcpyHostToDevice)) != cudaSuccess ||
        (e = cudaMemcpy(d_plans, plans, (size_t)count * sizeof(*plans),
                        cudaMemcpyHostToDevice)) != cudaSuccess) {
        st = failed(e, "uploading patches", err, err_len);
        goto done;
    }
    for (int64_t i = 0; i < count; i += MAX_GRID_Z) {
        int64_t k = count - i < MAX_GRID_Z ? count - i : MAX_GRID_Z;
        size_t at = (size_t)i * (size_t)(size * size) * 3;
        e = (cudaError_t)sp_cuda_launch_hed(d_src + at, d_dst + at, d_plans + i, k, size, 0);
        if (e != cudaSuccess) {
            st = failed(e, "launching the HED kernel", err, err_len);
            goto done;
        }
    }
    if ((e = cudaMemcpy(rgb, d_dst, bytes, cudaMemcpyDeviceToHost)) != cudaSuccess) {
        st = failed(e, "downloading patches", err, err_len);
    }
done:
    cudaFree(d_src);
    cudaFree(d_dst);
    cudaFree(d_plans);
    free(plans);
    return st;
}
