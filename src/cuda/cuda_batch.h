/* cuda_batch.h — a loader batch finished on the GPU: the patches, read on the CPU, go up as RGB8
 * once, and every step after the read (stain normalization, the geometric augmentation, flips and
 * HED jitter, stain augmentation, the photometric augmentation, and the write into the model's
 * dtype and layout) runs on the device, each step by the kernel that mirrors its CPU reference,
 * in the loader's order (sp_loader_config in slidepipe.h). Plain C, declared in every build:
 * without the CUDA backend it answers SP_E_UNSUPPORTED (cuda_absent.c). */
#ifndef SP_CUDA_CUDA_BATCH_H
#define SP_CUDA_CUDA_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "slidepipe.h"

/* One batch: `count` patches of size x size, patch i made for requests[i] (its slide and seed).
 * Patches with on_device[i] (on_device may be NULL: none) are read here into device memory
 * with `ctx` (sp_cuda_read_regions: their JPEG tiles decoded by nvJPEG, one call per slide);
 * the others were read on the CPU into host_rgb, interleaved RGB8 (page-locked is faster), at
 * i * size * size * 3. read[i] is patch i's read status, set here for the patches read here; a
 * failed patch is zeroed in the output, as on the CPU. The steps are the loader's: `normalize`
 * with stains[slide] -> *target (Macenko) or reinhard[slide] -> *reinhard_target (Reinhard),
 * geometry (NULL: none), dihedral and hed_sigma, stain_sigma (in *target once Macenko-normalized,
 * else in stains[slide]), photometric (NULL: none). The output's value of channel c and 8-bit
 * value v is table[c * 256 + v], each of `bytes` (1, 2 or 4; NULL with 1 for the byte itself),
 * in NCHW order when nchw, else NHWC. */
typedef struct sp_cuda_batch_job {
    int device;
    int64_t count, size;
    const uint8_t *host_rgb;
    sp_status *read;
    const sp_patch_request *requests;
    const bool *on_device;
    sp_cuda_context *ctx;
    sp_slide *const *slides;
    int32_t n_slides;
    sp_normalizer normalize;
    const sp_stains *stains;
    const sp_stains *target;
    const sp_reinhard_stats *reinhard;
    const sp_reinhard_stats *reinhard_target;
    const sp_geometry_params *geometry;
    int dihedral;
    double hed_sigma;
    double stain_sigma;
    const sp_photometric_params *photometric;
    const void *table;
    int bytes;
    int nchw;
} sp_cuda_batch_job;

/* Make the batch in memory of job->device, allocated here: *out (free it with
 * sp_cuda_device_free), count * size * size * 3 * bytes bytes; synchronous. SP_OK, or
 * SP_E_INVALID_ARG, SP_E_UNSUPPORTED (no device, or no CUDA backend), SP_E_NOMEM or SP_E_IO with
 * the reason in err; *out is NULL then. */
sp_status sp_cuda_batch_make(const sp_cuda_batch_job *job, void **out, char *err, size_t err_len);

/* The levels of `slide` (bit L for level L < 64) whose patches sp_cuda_batch_make reads on the
 * device (their tiles are JPEG that nvJPEG decodes, and SLIDEPIPE_NVJPEG is not 0); 0 without the
 * CUDA backend. */
uint64_t sp_cuda_batch_device_levels(sp_slide *slide);

#endif
