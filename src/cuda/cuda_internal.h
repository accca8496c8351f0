/* cuda_internal.h — what the CUDA backend's files share: the context (device, stream, pinned
 * staging) and its error helper. Only built when the CUDA backend is (SLIDEPIPE_CUDA). */
#ifndef SP_CUDA_CUDA_INTERNAL_H
#define SP_CUDA_CUDA_INTERNAL_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "slidepipe.h"

/* Bytes of each of the two pinned staging buffers: large enough that a band's upload runs at
 * the link's speed, small enough that a context stays cheap. */
#define SP_CUDA_STAGING_BYTES ((size_t)32 << 20)

struct sp_cuda_context {
    int device;
    cudaStream_t stream;
    uint8_t *staging[2];     /* pinned host memory, SP_CUDA_STAGING_BYTES each, made on first use */
    cudaEvent_t uploaded[2]; /* recorded after the upload out of staging[i] */
    size_t band_bytes;       /* bytes of a band (<= SP_CUDA_STAGING_BYTES; tests lower it) */
    char message[256];
};

/* Allocate the context's pinned staging buffers if they are not yet there (only region reads
 * need them, so contexts used for kernels alone never pin host memory). */
sp_status sp_cuda_staging(sp_cuda_context *ctx);

/* A function of a run-time GPU library (sp_cuda_library_found must have found it), or NULL. */
void *sp_cuda_library_symbol(sp_cuda_library library, const char *name);

/* Record "what: CUDA's reason" on the context and return SP_E_IO (or SP_E_NOMEM for
 * allocation failures). */
sp_status sp_cuda_fail(sp_cuda_context *ctx, cudaError_t e, const char *what);

#endif
