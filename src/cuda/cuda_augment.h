/* cuda_augment.h — the geometric augmentation (src/ops/augment_geometry.c), and the flips and HED
 * jitter (src/ops/augment.c), on the GPU: the same
 * composed map and bilinear sample per output pixel, from the same header, so the result equals
 * the CPU's byte for byte. Plain C, declared in every build: without the CUDA backend it answers
 * SP_E_UNSUPPORTED (cuda_absent.c). */
#ifndef SP_CUDA_CUDA_AUGMENT_H
#define SP_CUDA_CUDA_AUGMENT_H

#include <stddef.h>
#include <stdint.h>

#include "slidepipe.h"

/* sp_augment_geometry_batch on the GPU (sp_cuda_default_device): `rgb` is host memory, `count`
 * patches one after another, augmented in place; synchronous. The plans and any elastic
 * displacement are made on the CPU (the elastic field is computed there and uploaded) and the
 * kernel does the map and the sampling. SP_E_INVALID_ARG as the CPU call, SP_E_UNSUPPORTED with
 * no device (or no CUDA backend), SP_E_NOMEM or SP_E_IO (the reason in `err`, when not NULL)
 * when memory or a CUDA call fails; the patches are then untouched. */
sp_status sp_cuda_augment_geometry(uint8_t *rgb, int64_t count, int64_t width, int64_t height,
                                   const uint64_t *seeds, const sp_geometry_params *p, char *err,
                                   size_t err_len);

/* sp_augment_patches (flips, quarter turns, HED jitter) on the GPU, likewise: host memory in
 * place, synchronous; the plans (exponentials included) are made on the CPU, so the bytes equal
 * the CPU's. Errors as sp_cuda_augment_geometry. */
sp_status sp_cuda_augment_patches(uint8_t *rgb, int64_t count, int64_t size,
                                  const uint64_t *seeds, int dihedral, double hed_sigma,
                                  char *err, size_t err_len);

/* The same two on patches already in device memory (the current device's), from `src` into
 * `dst` (distinct, each `count` patches); synchronous. The plans are made on the CPU as above.
 * Errors as the host entries; `dst` is undefined after one. Only in the CUDA build. */
sp_status sp_cuda_augment_geometry_device(const uint8_t *src, uint8_t *dst, int64_t count,
                                          int64_t width, int64_t height, const uint64_t *seeds,
                                          const sp_geometry_params *p, char *err, size_t err_len);
sp_status sp_cuda_augment_patches_device(const uint8_t *src, uint8_t *dst, int64_t count,
                                         int64_t size, const uint64_t *seeds, int dihedral,
                                         double hed_sigma, char *err, size_t err_len);

#endif
