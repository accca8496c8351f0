/* cuda_host.c — page-locked host memory through the CUDA runtime, so that a batch's copy to
 * the GPU is a DMA that overlaps with compute (cudaMemcpyAsync from pageable memory is staged
 * and synchronous). Asked for only when a device is present: without one the runtime would
 * fail anyway, and the loader falls back to ordinary memory. Also which NUMA node a device
 * sits on, for placing the threads that fill such memory, and copies of finished batches to
 * device memory. */
#include <cuda_runtime_api.h>

#include "cuda/cuda_host.h"
#include "io/numa.h"

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

int sp_cuda_device_numa_node(int device) {
    char bus_id[32];
    if (cudaDeviceGetPCIBusId(bus_id, (int)sizeof bus_id, device) != cudaSuccess) {
        return -1;
    }
    return sp_numa_pci_node(bus_id);
}

sp_status sp_cuda_device_copy(int device, const void *host, size_t bytes, void **out) {
    *out = NULL;
    if (cudaSetDevice(device) != cudaSuccess) {
        return SP_E_UNSUPPORTED;
    }
    void *p = NULL;
    if (cudaMalloc(&p, bytes > 0 ? bytes : 1) != cudaSuccess) {
        return SP_E_NOMEM;
    }
    if (cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
        cudaFree(p);
        return SP_E_IO;
    }
    *out = p;
    return SP_OK;
}

void sp_cuda_device_free(int device, void *ptr) {
    if (ptr != NULL && cudaSetDevice(device) == cudaSuccess) {
        cudaFree(ptr);
    }
}
