/* cuda_absent.c — the GPU API of a build made without the CUDA backend (no nvcc, or
 * SLIDEPIPE_CUDA=OFF): every call answers that there is no GPU, cleanly, so that programs
 * written for both paths run unchanged on the CPU (and the ops' GPU slots answer "unsupported").
 * Built instead of the other files here. */
#include <stdio.h>
#include <string.h>

#include "cuda/cuda_augment_color.h"
#include "cuda/cuda_augment.h"
#include "cuda/cuda_batch.h"
#include "cuda/cuda_host.h"
#include "cuda/cuda_ops.h"
#include "cuda/cuda_spectrum.h"
#include "cuda/cuda_stains.h"
#include "cuda/cuda_testing.h"
#include "cuda/cuda_tile_qc.h"
#include "ops/augment_geometry.h"
#include "slidepipe.h"

static const char WHY[] = "slidepipe was built without the CUDA backend (SLIDEPIPE_CUDA=OFF or "
                          "no nvcc at build time)";

static void put(char *dst, size_t len) {
    if (dst != NULL && len > 0) {
        snprintf(dst, len, "%s", WHY);
    }
}

int sp_cuda_device_count(char *why, size_t why_len) {
    put(why, why_len);
    return 0;
}

sp_status sp_cuda_device_info(int device, char *name, size_t name_len, int *cc_major, int *cc_minor,
                              uint64_t *memory_bytes) {
    return SP_E_UNSUPPORTED;
}

int sp_cuda_library_found(sp_cuda_library library, char *detail, size_t detail_len) {
    put(detail, detail_len);
    return 0;
}

sp_status sp_cuda_context_create(int device, sp_cuda_context **out, char *err, size_t err_len) {
    if (out != NULL) {
        *out = NULL;
    }
    put(err, err_len);
    return SP_E_UNSUPPORTED;
}

void sp_cuda_context_destroy(sp_cuda_context *ctx) {}

int sp_cuda_context_device(const sp_cuda_context *ctx) {
    return -1;
}

const char *sp_cuda_context_error(const sp_cuda_context *ctx) {
    return WHY;
}

int sp_cuda_default_device(void) {
    return -1;
}

sp_status sp_cuda_alloc(sp_cuda_context *ctx, size_t bytes, void **device_ptr) {
    if (device_ptr != NULL) {
        *device_ptr = NULL;
    }
    return SP_E_UNSUPPORTED;
}

void sp_cuda_free(sp_cuda_context *ctx, void *device_ptr) {}

sp_status sp_cuda_copy_to_host(sp_cuda_context *ctx, void *host, const void *device_ptr,
                               size_t bytes) {
    return SP_E_UNSUPPORTED;
}

sp_status sp_cuda_read_region(sp_cuda_context *ctx, sp_slide *slide, sp_pixel_format format,
                              void *dst_device, int64_t stride, int32_t level, int64_t x, int64_t y,
                              int64_t width, int64_t height) {
    return SP_E_UNSUPPORTED;
}

sp_status sp_cuda_read_regions(sp_cuda_context *ctx, sp_slide *slide, sp_pixel_format format,
                               sp_cuda_region *regions, size_t n) {
    for (size_t i = 0; regions != NULL && i < n; i++) {
        regions[i].status = SP_E_UNSUPPORTED;
    }
    return SP_E_UNSUPPORTED;
}

void sp_cuda_context_set_band_bytes(sp_cuda_context *ctx, size_t bytes) {}

int sp_cuda_cufile_state(char *why, size_t why_len) {
    if (why != NULL && why_len > 0) {
        snprintf(why, why_len, "built without the CUDA backend");
    }
    return 0;
}

sp_status sp_cuda_get_decode_stats(sp_cuda_decode_stats *out) {
    if (out == NULL || out->struct_size < sizeof *out) {
        return SP_E_INVALID_ARG;
    }
    memset(out, 0, sizeof *out);
    out->struct_size = sizeof *out;
    return SP_OK;
}

/* The ops' GPU functions and the engine's runner. */
sp_status sp_cuda_op_grey(const sp_op_params *params, const sp_op_block *block, void *stream) {
    return SP_E_UNSUPPORTED;
}

sp_status sp_cuda_op_od(const sp_op_params *params, const sp_op_block *block, void *stream) {
    return SP_E_UNSUPPORTED;
}

sp_status sp_cuda_op_sobel(const sp_op_params *params, const sp_op_block *block, void *stream) {
    return SP_E_UNSUPPORTED;
}

sp_status sp_cuda_op_gaussian(const sp_op_params *params, const sp_op_block *block, void *stream) {
    return SP_E_UNSUPPORTED;
}

sp_status sp_cuda_op_reinhard(const sp_op_params *params, const sp_op_block *block, void *stream) {
    return SP_E_UNSUPPORTED;
}

sp_status sp_cuda_op_macenko(const sp_op_params *params, const sp_op_block *block, void *stream) {
    return SP_E_UNSUPPORTED;
}

sp_status sp_cuda_reinhard_normalize(const sp_reinhard_stats *source,
                                     const sp_reinhard_stats *target, uint8_t *device_rgb,
                                     int64_t n) {
    return SP_E_UNSUPPORTED;
}

sp_status sp_cuda_stains_augment_patches(const sp_stains *stains, uint8_t *device_rgb,
                                         int64_t count, int64_t patch_pixels, const uint64_t *seeds,
                                         double sigma) {
    return SP_E_UNSUPPORTED;
}

sp_status sp_cuda_upload_sync(void *device, const void *host, size_t bytes) {
    return SP_E_UNSUPPORTED;
}

sp_status sp_cuda_op_runner_create(const sp_op *op, const sp_op_params *params, int64_t chunk,
                                   sp_cuda_op_runner **out, sp_err *err) {
    *out = NULL;
    return sp_err_set(err, SP_E_UNSUPPORTED, "%s", WHY);
}

sp_status sp_cuda_op_runner_run(sp_cuda_op_runner *runner, const sp_op_block *block, sp_err *err) {
    return sp_err_set(err, SP_E_UNSUPPORTED, "%s", WHY);
}

void sp_cuda_op_runner_destroy(sp_cuda_op_runner *runner) {}

sp_status sp_cuda_spectrum(const sp_cuda_spectrum_job *job, sp_spectrum_stats *out, sp_err *err) {
    return sp_err_set(err, SP_E_UNSUPPORTED, "--device cuda: %s", WHY);
}

sp_status sp_cuda_tile_qc(const uint8_t *rgb, int64_t size, size_t count, sp_tile_qc *out,
                          sp_err *err) {
    if (out != NULL && count > 0) {
        memset(out, 0, count * sizeof *out);
    }
    return sp_err_set(err, SP_E_UNSUPPORTED, "tile QC on the GPU: %s", WHY);
}

sp_status sp_cuda_host_alloc(size_t bytes, void **out) {
    *out = NULL;
    return SP_E_UNSUPPORTED;
}

void sp_cuda_host_free(void *ptr) {
}

int sp_cuda_device_numa_node(int device) {
    return -1;
}

sp_status sp_cuda_device_copy(int device, const void *host, size_t bytes, void **out) {
    *out = NULL;
    return SP_E_UNSUPPORTED;
}

void sp_cuda_device_free(int device, void *ptr) {
}

sp_status sp_cuda_augment_photometric(uint8_t *rgb, int64_t count, int64_t width, int64_t height,
                                      const uint64_t *seeds, const sp_photometric_params *p,
                                      sp_err *err) {
    return sp_err_set(err, SP_E_UNSUPPORTED, "photometric augmentation on the GPU: %s", WHY);
}

sp_status sp_cuda_augment_geometry(uint8_t *rgb, int64_t count, int64_t width, int64_t height,
                                   const uint64_t *seeds, const sp_geometry_params *p, char *err,
                                   size_t err_len) {
    if (count < 0 || (count > 0 && (rgb == NULL || seeds == NULL)) ||
        !sp_geom_params_ok(width, height, p)) {
        return SP_E_INVALID_ARG; /* refused as with the backend, before anything else */
    }
    put(err, err_len);
    return SP_E_UNSUPPORTED;
}

sp_status sp_cuda_augment_patches(uint8_t *rgb, int64_t count, int64_t size,
                                  const uint64_t *seeds, int dihedral, double hed_sigma,
                                  char *err, size_t err_len) {
    if (count < 0 || size < 1 || size > (1 << 16) || !(hed_sigma >= 0.0 && hed_sigma <= 1.0) ||
        (count > 0 && (rgb == NULL || seeds == NULL))) {
        return SP_E_INVALID_ARG;
    }
    put(err, err_len);
    return SP_E_UNSUPPORTED;
}

sp_status sp_cuda_batch_make(const sp_cuda_batch_job *job, void **out, char *err, size_t err_len) {
    *out = NULL;
    put(err, err_len);
    return SP_E_UNSUPPORTED;
}

uint64_t sp_cuda_batch_device_levels(sp_slide *slide) {
    return 0;
}
