/* cuda_cufile.h — uncompressed tile rows read from the file straight into device memory with
 * cuFile, GPUDirect Storage (cuda_cufile.c), for cuda_raw_tiles.c; used when SLIDEPIPE_CUFILE=1.
 * Only built with the CUDA backend. */
#ifndef SP_CUDA_CUDA_CUFILE_H
#define SP_CUDA_CUDA_CUFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cuda/cuda_internal.h"

/* Whether SLIDEPIPE_CUFILE=1 asks for cuFile reads. */
bool sp_cuda_cufile_wanted(void);

/* Device buffer `which` (0 or 1, SP_CUDA_STAGING_BYTES) of the context's cuFile state, with the
 * file behind `slide_fd` (the slide's local file) registered for reads; NULL when cuFile or the
 * file cannot be used (the caller reads another way; sp_cuda_cufile_state says why). */
uint8_t *sp_cuda_cufile_buffer(sp_cuda_context *ctx, int slide_fd, int which);

/* Read `len` bytes at file `offset` of the registered file into buffer `which` at byte `at`;
 * blocks until they are there. SP_OK, or SP_E_UNSUPPORTED with the reason noted. */
sp_status sp_cuda_cufile_read(sp_cuda_context *ctx, int which, size_t at, uint64_t offset,
                              size_t len);

/* Deregister the file and free the buffers, if any (the context's device must be current). */
void sp_cuda_cufile_destroy(sp_cuda_context *ctx);

#endif
