/* cuda_tile_qc.h — the tile QC scores of tiles already in host memory, on the GPU
 * (tile_qc_kernels.cu, host side in cuda_tile_qc.c). Plain C, declared in every build; without
 * the CUDA backend it answers SP_E_UNSUPPORTED. The scores equal the CPU's
 * (sp_tile_qc_pixels) bit for bit. */
#ifndef SP_CUDA_CUDA_TILE_QC_H
#define SP_CUDA_CUDA_TILE_QC_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "slidepipe.h"

/* Score `count` tiles of size x size RGB8 pixels packed back to back in `rgb` (count * size *
 * size * 3 bytes) on the current device into out[0 .. count). SP_E_INVALID_ARG for a size
 * outside [1, SP_TILE_QC_MAX_SIZE] or NULL pointers with count > 0, SP_E_NOMEM when device
 * memory runs out, SP_E_IO for another CUDA error, SP_E_UNSUPPORTED without the backend;
 * `out` is zeroed on failure. */
sp_status sp_cuda_tile_qc(const uint8_t *rgb, int64_t size, size_t count, sp_tile_qc *out,
                          sp_err *err);

#endif
