/* cuda_host.c — page-locked host memory through the CUDA runtime, so that a batch's copy to
 * the GPU is a DMA that overlaps with compute (cudaMemcpyAsync from pageable memory is staged
 * and synchronous). Asked for only when a device is present: without one the runtime would
 * fail anyway, and the loader falls back to ordinary memory. */
#include <cuda_runtime_api.h>

#include "cuda/cuda_host.h"

sp_status sp_cuda_host_alloc(size_t bytes, void **out) {
    *out = NULL;
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < 1) {
        return SP_E_UNSUPPORTED;
    }
    void *p = NULL;
    if (cudaHostAlloc(&p, bytes > 0 ? bytes : 1, cudaHostAllocPortable) != cudaSuccess) {
        return SP_E_NOMEM;
    }
    *out = p;
    return SP_OK;
}

void sp_cuda_host_free(void *ptr) {
    if (ptr != NULL) {
        cudaFreeHost(ptr);
    }
}
