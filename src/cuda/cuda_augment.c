/* cuda_augment.c — the host side of the geometric augmentation, and of the flips and HED jitter,
 * on the GPU (cuda_augment.h): each patch's plan is made on the CPU with the reference's own
 * functions (for the geometry, its elastic displacement too: the Gaussian smoothing of the field
 * is not redone on the GPU, the field is uploaded; for the HED jitter, its factor tables,
 * exponentials included), the plans go up, and augment_geometry_kernels.cu or
 * augment_hed_kernels.cu applies them to patches in device memory. The host-memory entries
 * upload the patches around that and download the result. */
#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_augment.h"
#include "ops/augment_geometry.h"
#include "ops/augment_hed.h"

/* The launcher in augment_geometry_kernels.cu (it returns a cudaError_t). */
int sp_cuda_launch_geometry(const uint8_t *src, uint8_t *dst, const sp_geom_plan *plans,
                            const double *disp, int64_t count, int64_t w, int64_t h,
                            cudaStream_t stream);

/* The launcher in augment_hed_kernels.cu (it returns a cudaError_t). */
int sp_cuda_launch_hed(const uint8_t *src, uint8_t *dst, const sp_hed_plan *plans, int64_t count,
                       int64_t size, cudaStream_t stream);

enum { MAX_GRID_Z = 65535 };

/* The device to run on, or -1 with "no CUDA device" in err. */
static int device_or_say(char *err, size_t err_len) {
    int device = sp_cuda_default_device();
    if (device < 0 && err != NULL && err_len > 0) {
        snprintf(err, err_len, "no CUDA device");
    }
    return device;
}

static sp_status failed(cudaError_t e, const char *what, char *err, size_t err_len) {
    if (err != NULL && err_len > 0) {
        snprintf(err, err_len, "%s: %s", what, cudaGetErrorString(e));
    }
    return e == cudaErrorMemoryAllocation ? SP_E_NOMEM : SP_E_IO;
}

static bool geometry_args_ok(const void *rgb, int64_t count, int64_t w, int64_t h,
                             const uint64_t *seeds, const sp_geometry_params *p) {
    return count >= 0 && (count == 0 || (rgb != NULL && seeds != NULL)) &&
           sp_geom_params_ok(w, h, p);
}

static bool hed_args_ok(const void *rgb, int64_t count, int64_t size, const uint64_t *seeds,
                        double hed_sigma) {
    return count >= 0 && size >= 1 && size <= (1 << 16) && hed_sigma >= 0.0 && hed_sigma <= 1.0 &&
           (count == 0 || (rgb != NULL && seeds != NULL));
}

sp_status sp_cuda_augment_geometry_device(const uint8_t *src, uint8_t *dst, int64_t count,
                                          int64_t w, int64_t h, const uint64_t *seeds,
                                          const sp_geometry_params *p, char *err, size_t err_len) {
    if (!geometry_args_ok(src, count, w, h, seeds, p) || (count > 0 && dst == NULL)) {
        return SP_E_INVALID_ARG;
    }
    if (count == 0) {
        return SP_OK;
    }
    size_t n = (size_t)(w * h);
    size_t disp_doubles = p->elastic ? (size_t)count * 2 * n : 0;
    sp_geom_plan *plans = malloc((size_t)count * sizeof(*plans));
    double *disp = disp_doubles ? malloc(disp_doubles * sizeof(double)) : NULL;
    double *scratch = p->elastic ? malloc(SP_GEOM_SMOOTH_SCRATCH(w, h) * sizeof(double)) : NULL;
    sp_geom_plan *d_plans = NULL;
    double *d_disp = NULL;
    sp_status st = SP_OK;
    cudaError_t e = cudaSuccess;
    if (plans == NULL || (p->elastic && (disp == NULL || scratch == NULL))) {
        st = SP_E_NOMEM;
        goto done;
    }
    for (int64_t i = 0; i < count; i++) {
        if (sp_geom_plan_make(w, h, seeds[i], p, &plans[i], NULL)) {
            double *field = disp + (size_t)i * 2 * n;
            sp_geom_elastic_noise(w, h, seeds[i], field);
            sp_geom_elastic_smooth(w, h, p, field, scratch);
        }
    }
    if ((e = cudaMalloc((void **)&d_plans, (size_t)count * sizeof(*plans))) != cudaSuccess ||
        (disp != NULL &&
         (e = cudaMalloc((void **)&d_disp, disp_doubles * sizeof(double))) != cudaSuccess)) {
        st = failed(e, "allocating GPU memory for the geometric augmentation", err, err_len);
        goto done;
    }
    if ((e = cudaMemcpy(d_plans, plans, (size_t)count * sizeof(*plans), cudaMemcpyHostToDevice)) !=
            cudaSuccess ||
        (disp != NULL && (e = cudaMemcpy(d_disp, disp, disp_doubles * sizeof(double),
                                         cudaMemcpyHostToDevice)) != cudaSuccess)) {
        st = failed(e, "uploading the geometric plans", err, err_len);
        goto done;
    }
    for (int64_t i = 0; i < count; i += MAX_GRID_Z) {
        int64_t k = count - i < MAX_GRID_Z ? count - i : MAX_GRID_Z;
        e = (cudaError_t)sp_cuda_launch_geometry(
            src + (size_t)i * n * 3, dst + (size_t)i * n * 3, d_plans + i,
            d_disp != NULL ? d_disp + (size_t)i * 2 * n : NULL, k, w, h, 0);
        if (e != cudaSuccess) {
            st = failed(e, "launching the geometry kernel", err, err_len);
            goto done;
        }
    }
    if ((e = cudaStreamSynchronize(0)) != cudaSuccess) {
        st = failed(e, "running the geometry kernel", err, err_len);
    }
done:
    cudaFree(d_plans);
    cudaFree(d_disp);
    free(plans);
    free(disp);
    free(scratch);
    return st;
}

sp_status sp_cuda_augment_patches_device(const uint8_t *src, uint8_t *dst, int64_t count,
                                         int64_t size, const uint64_t *seeds, int dihedral,
                                         double hed_sigma, char *err, size_t err_len) {
    if (!hed_args_ok(src, count, size, seeds, hed_sigma) || (count > 0 && dst == NULL)) {
        return SP_E_INVALID_ARG;
    }
    if (count == 0) {
        return SP_OK;
    }
    sp_hed_plan *plans = malloc((size_t)count * sizeof(*plans));
    sp_hed_plan *d_plans = NULL;
    sp_status st = SP_OK;
    cudaError_t e = cudaSuccess;
    if (plans == NULL) {
        return SP_E_NOMEM;
    }
    for (int64_t i = 0; i < count; i++) {
        sp_hed_plan_make(seeds[i], dihedral, hed_sigma, &plans[i]);
    }
    if ((e = cudaMalloc((void **)&d_plans, (size_t)count * sizeof(*plans))) != cudaSuccess ||
        (e = cudaMemcpy(d_plans, plans, (size_t)count * sizeof(*plans), cudaMemcpyHostToDevice)) !=
            cudaSuccess) {
        st = failed(e, "uploading the flip and HED plans", err, err_len);
        goto done;
    }
    for (int64_t i = 0; i < count; i += MAX_GRID_Z) {
        int64_t k = count - i < MAX_GRID_Z ? count - i : MAX_GRID_Z;
        size_t at = (size_t)i * (size_t)(size * size) * 3;
        e = (cudaError_t)sp_cuda_launch_hed(src + at, dst + at, d_plans + i, k, size, 0);
        if (e != cudaSuccess) {
            st = failed(e, "launching the HED kernel", err, err_len);
            goto done;
        }
    }
    if ((e = cudaStreamSynchronize(0)) != cudaSuccess) {
        st = failed(e, "running the HED kernel", err, err_len);
    }
done:
    cudaFree(d_plans);
    free(plans);
    return st;
}

/* What the host-memory entries run between the upload and the download. */
typedef struct device_step {
    int64_t width, height;
    const uint64_t *seeds;
    const sp_geometry_params *geometry; /* the geometry, or else the flips and HED jitter */
    int dihedral;
    double hed_sigma;
} device_step;

/* Upload `count` patches, run the step from one device copy into another, download the result
 * into rgb. rgb is untouched on any error. */
static sp_status on_device(uint8_t *rgb, int64_t count, const device_step *s, char *err,
                           size_t err_len) {
    int device = device_or_say(err, err_len);
    if (device < 0) {
        return SP_E_UNSUPPORTED;
    }
    size_t bytes = (size_t)count * (size_t)(s->width * s->height) * 3;
    uint8_t *d_src = NULL, *d_dst = NULL;
    cudaError_t e = cudaSuccess;
    sp_status st = SP_OK;
    if ((e = cudaSetDevice(device)) != cudaSuccess ||
        (e = cudaMalloc((void **)&d_src, bytes)) != cudaSuccess ||
        (e = cudaMalloc((void **)&d_dst, bytes)) != cudaSuccess) {
        st = failed(e, "allocating GPU memory for the patches", err, err_len);
    } else if ((e = cudaMemcpy(d_src, rgb, bytes, cudaMemcpyHostToDevice)) != cudaSuccess) {
        st = failed(e, "uploading patches", err, err_len);
    } else {
        st = s->geometry != NULL
                 ? sp_cuda_augment_geometry_device(d_src, d_dst, count, s->width, s->height,
                                                   s->seeds, s->geometry, err, err_len)
                 : sp_cuda_augment_patches_device(d_src, d_dst, count, s->width, s->seeds,
                                                  s->dihedral, s->hed_sigma, err, err_len);
        if (st == SP_OK &&
            (e = cudaMemcpy(rgb, d_dst, bytes, cudaMemcpyDeviceToHost)) != cudaSuccess) {
            st = failed(e, "downloading patches", err, err_len);
        }
    }
    cudaFree(d_src);
    cudaFree(d_dst);
    return st;
}

sp_status sp_cuda_augment_geometry(uint8_t *rgb, int64_t count, int64_t w, int64_t h,
                                   const uint64_t *seeds, const sp_geometry_params *p, char *err,
                                   size_t err_len) {
    if (!geometry_args_ok(rgb, count, w, h, seeds, p)) {
        return SP_E_INVALID_ARG;
    }
    device_step s = {.width = w, .height = h, .seeds = seeds, .geometry = p};
    return count == 0 ? SP_OK : on_device(rgb, count, &s, err, err_len);
}

sp_status sp_cuda_augment_patches(uint8_t *rgb, int64_t count, int64_t size, const uint64_t *seeds,
                                  int dihedral, double hed_sigma, char *err, size_t err_len) {
    if (!hed_args_ok(rgb, count, size, seeds, hed_sigma)) {
        return SP_E_INVALID_ARG;
    }
    device_step s = {.width = size,
                     .height = size,
                     .seeds = seeds,
                     .dihedral = dihedral,
                     .hed_sigma = hed_sigma};
    return count == 0 ? SP_OK : on_device(rgb, count, &s, err, err_len);
}
