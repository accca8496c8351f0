/* cuda_stains.h — the GPU versions of Reinhard normalization and stain augmentation
 * (stain_kernels.cu), host entries below the public API: the `reinhard` op's kernel is
 * registered by name in op_kernel_table.c (declared in cuda_ops.h); the two calls here take
 * device pixels and are what tests/unit/test_cuda_stains.c holds against the CPU reference.
 * Without the CUDA backend (cuda_absent.c) they answer SP_E_UNSUPPORTED. */
#ifndef SP_CUDA_CUDA_STAINS_H
#define SP_CUDA_CUDA_STAINS_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "ops/reinhard.h"
#include "slidepipe.h"

/* Reinhard-normalize `n` interleaved RGB8 pixels in device memory in place, from `source` to
 * `target`; synchronous. SP_E_INVALID_ARG for invalid statistics, SP_E_IO when a launch fails. */
sp_status sp_cuda_reinhard_normalize(const sp_reinhard_stats *source,
                                     const sp_reinhard_stats *target, uint8_t *device_rgb,
                                     int64_t n);

/* sp_stains_augment_patches on device memory: `count` patches of `patch_pixels` interleaved
 * RGB8 pixels, patch i with host seeds[i]; synchronous. Errors as the CPU call, SP_E_NOMEM and
 * SP_E_IO for the device. */
sp_status sp_cuda_stains_augment_patches(const sp_stains *stains, uint8_t *device_rgb,
                                         int64_t count, int64_t patch_pixels, const uint64_t *seeds,
                                         double sigma);

/* Normalize `count` patches of `patch_pixels` interleaved RGB8 pixels in device memory from src
 * into dst (distinct): patch i from the stains (Macenko) or statistics (Reinhard) of slide
 * slide_of[i] (< n_slides) to the target, as sp_stains_normalize and sp_reinhard_normalize do;
 * synchronous. SP_E_INVALID_ARG for bad arguments or stains, SP_E_NOMEM or SP_E_IO for the
 * device. */
sp_status sp_cuda_macenko_patches(const uint8_t *src, uint8_t *dst, int64_t count,
                                  int64_t patch_pixels, const int32_t *slide_of,
                                  const sp_stains *stains, int32_t n_slides,
                                  const sp_stains *target);
sp_status sp_cuda_reinhard_patches(const uint8_t *src, uint8_t *dst, int64_t count,
                                   int64_t patch_pixels, const int32_t *slide_of,
                                   const sp_reinhard_stats *stats, const sp_reinhard_stats *target);

/* Copy `bytes` from the host to device memory, synchronously (for the tests); SP_E_IO on
 * failure. */
sp_status sp_cuda_upload_sync(void *device, const void *host, size_t bytes);

#endif
