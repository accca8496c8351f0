/* cuda_host.h — page-locked host memory for batches that a training loop copies to the GPU
 * (cuda_host.c; cuda_absent.c in a build without CUDA). */
#ifndef SP_CUDA_CUDA_HOST_H
#define SP_CUDA_CUDA_HOST_H

#include <stddef.h>

#include "slidepipe.h"

/* `bytes` of page-locked host memory, usable by every device. SP_E_UNSUPPORTED when there is no
 * CUDA device (or no CUDA backend), SP_E_NOMEM when the runtime refuses; *out is NULL then. */
sp_status sp_cuda_host_alloc(size_t bytes, void **out);

/* Free memory from sp_cuda_host_alloc; NULL is accepted. */
void sp_cuda_host_free(void *ptr);

/* A copy of `bytes` of host memory in new memory of CUDA device `device`; SP_OK, or
 * SP_E_UNSUPPORTED / SP_E_NOMEM / SP_E_IO with *out NULL. */
sp_status sp_cuda_device_copy(int device, const void *host, size_t bytes, void **out);

/* Free memory from sp_cuda_device_copy; NULL is accepted. */
void sp_cuda_device_free(int device, void *ptr);

#endif
