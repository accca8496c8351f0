/* cuda_augment_color.h — the photometric augmentation (colour jitter, Gaussian blur, Gaussian
 * noise; sp_augment_photometric) of a batch of RGB8 patches on the GPU, with the same draws and
 * the same per-pixel arithmetic as the CPU reference (src/ops/augment_color*.c), so that the
 * bytes agree. Plain C, declared in every build; without the CUDA backend it answers
 * SP_E_UNSUPPORTED. */
#ifndef SP_CUDA_CUDA_AUGMENT_COLOR_H
#define SP_CUDA_CUDA_AUGMENT_COLOR_H

#ifdef __cplusplus
extern "C" { /* included by augment_color_kernels.cu: err.h has no guard of its own */
#endif

#include "base/err.h"
#include "slidepipe.h"

/* sp_augment_photometric_batch on the default device (sp_cuda_default_device): `rgb` is host
 * memory, uploaded, augmented and downloaded in place; synchronous. SP_E_INVALID_ARG as the CPU
 * entry, SP_E_UNSUPPORTED without a device, SP_E_NOMEM or SP_E_IO (with the CUDA error in `err`)
 * when the GPU fails; the host patches are unchanged on any error. */
sp_status sp_cuda_augment_photometric(uint8_t *rgb, int64_t count, int64_t width, int64_t height,
                                      const uint64_t *seeds, const sp_photometric_params *p,
                                      sp_err *err);

/* The same on patches already in device memory (the current device's), in place; synchronous.
 * The patches are undefined after a GPU error. Only in the CUDA build. */
sp_status sp_cuda_augment_photometric_device(uint8_t *device_rgb, int64_t count, int64_t width,
                                             int64_t height, const uint64_t *seeds,
                                             const sp_photometric_params *p, sp_err *err);

#ifdef __cplusplus
}
#endif

#endif
