/* cuda_batch.c — a loader batch finished on the GPU (cuda_batch.h). The patches read on the CPU
 * go up once into one of two device buffers, and those of JPEG levels nvJPEG takes are read into
 * it on the device; each step reads one and writes the other (or works in place where
 * its kernel does), calling the device entries the single steps' files provide, so that every
 * pixel is computed by the kernel already held against its CPU reference; the format kernel
 * (batch_format_kernels.cu) writes the batch last, and a patch whose read failed is zeroed. */
#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "cuda/cuda_augment.h"
#include "cuda/cuda_augment_color.h"
#include "cuda/cuda_batch.h"
#include "cuda/cuda_internal.h"
#include "cuda/cuda_stains.h"

/* The launcher in batch_format_kernels.cu (it returns a cudaError_t). */
int sp_cuda_launch_batch_format(const uint8_t *rgb, void *out, const void *table, int bytes,
                                int64_t count, int64_t pixels, int nchw, cudaStream_t stream);

/* What a batch holds on the device while it is made, and its per-patch host arrays. */
typedef struct making {
    uint8_t *buf[2]; /* the patches, RGB8: cur is the one holding them now */
    int cur;
    void *table; /* the format's table on the device */
    uint64_t *seeds;
    int32_t *slide_of;
} making;

static sp_status say(sp_status st, char *err, size_t err_len, const char *fmt, const char *what) {
    if (err != NULL && err_len > 0) {
        snprintf(err, err_len, fmt, what);
    }
    return st;
}

static sp_status cuda_failed(cudaError_t e, const char *what, char *err, size_t err_len) {
    if (err != NULL && err_len > 0) {
        snprintf(err, err_len, "GPU batch: %s: %s", what, cudaGetErrorString(e));
    }
    return e == cudaErrorMemoryAllocation ? SP_E_NOMEM : SP_E_IO;
}

static bool job_ok(const sp_cuda_batch_job *j) {
    bool per_slide_stains = j->normalize == SP_NORMALIZE_MACENKO || j->stain_sigma > 0;
    return j->count >= 1 && j->size >= 1 && j->size <= 65536 && j->host_rgb != NULL &&
           j->read != NULL && j->requests != NULL && j->n_slides >= 1 &&
           (j->bytes == 1 || j->bytes == 2 || j->bytes == 4) && (j->bytes == 1 || j->table) &&
           (j->on_device == NULL || (j->ctx != NULL && j->slides != NULL)) &&
           (!per_slide_stains || j->stains != NULL) &&
           (j->normalize != SP_NORMALIZE_MACENKO || j->target != NULL) &&
           (j->normalize != SP_NORMALIZE_REINHARD ||
            (j->reinhard != NULL && j->reinhard_target != NULL));
}

/* The format's table on the device: the caller's, or the identity for bytes. */
static cudaError_t upload_table(const sp_cuda_batch_job *j, making *m) {
    uint8_t identity[3 * 256];
    for (int i = 0; i < 3 * 256; i++) {
        identity[i] = (uint8_t)(i % 256);
    }
    const void *table = j->table != NULL ? j->table : identity;
    size_t bytes = (size_t)3 * 256 * (size_t)j->bytes;
    cudaError_t e = cudaMalloc(&m->table, bytes);
    return e != cudaSuccess ? e : cudaMemcpy(m->table, table, bytes, cudaMemcpyHostToDevice);
}

/* The buffer holding the patches, and the other one, which a step writes; `swap` makes the
 * other one current once a step has written it. */
static uint8_t *now(const making *m) {
    return m->buf[m->cur];
}

static uint8_t *next(const making *m) {
    return m->buf[1 - m->cur];
}

static sp_status swap(making *m, sp_status st) {
    m->cur = 1 - m->cur;
    return st;
}

/* Upload the patches read on the CPU into now(m), consecutive ones in one copy; the others are
 * read on the device. */
static cudaError_t upload_cpu_reads(const sp_cuda_batch_job *j, const making *m) {
    size_t patch = (size_t)(j->size * j->size * 3);
    cudaError_t e = cudaSuccess;
    for (int64_t i = 0; e == cudaSuccess && i < j->count;) {
        int64_t end = i;
        while (end < j->count && (j->on_device == NULL || !j->on_device[end])) {
            end++;
        }
        if (end > i) {
            e = cudaMemcpy(now(m) + (size_t)i * patch, j->host_rgb + (size_t)i * patch,
                           (size_t)(end - i) * patch, cudaMemcpyHostToDevice);
        }
        i = end + 1; /* past the patch read on the device */
    }
    return e;
}

/* Stain augmentation in place: one call for all when the stains are the target's, else one per
 * patch with its slide's stains. */
static sp_status stain_augment(const sp_cuda_batch_job *j, const making *m, int64_t pixels) {
    uint8_t *rgb = now(m);
    if (j->normalize == SP_NORMALIZE_MACENKO) {
        return sp_cuda_stains_augment_patches(j->target, rgb, j->count, pixels, m->seeds,
                                              j->stain_sigma);
    }
    sp_status st = SP_OK;
    for (int64_t i = 0; st == SP_OK && i < j->count; i++) {
        st = sp_cuda_stains_augment_patches(&j->stains[m->slide_of[i]], rgb + i * pixels * 3, 1,
                                            pixels, &m->seeds[i], j->stain_sigma);
    }
    return st;
}

/* Read the patches marked on_device into now(m), one sp_cuda_read_regions call per slide; each
 * one's status into j->read. SP_OK, or the failure of the device itself. */
static sp_status read_on_device(const sp_cuda_batch_job *j, const making *m, char *err,
                                size_t err_len) {
    int64_t pixels = j->size * j->size;
    sp_cuda_region *regions = malloc((size_t)j->count * sizeof *regions);
    int64_t *patch = malloc((size_t)j->count * sizeof *patch);
    if (regions == NULL || patch == NULL) {
        free(regions);
        free(patch);
        return say(SP_E_NOMEM, err, err_len, "GPU batch: %s", "out of memory");
    }
    for (int32_t s = 0; s < j->n_slides; s++) {
        size_t n = 0;
        for (int64_t i = 0; i < j->count; i++) {
            const sp_patch_request *r = &j->requests[i];
            if (j->on_device[i] && r->slide == s) {
                regions[n] = (sp_cuda_region){.level = r->level,
                                              .x = r->x,
                                              .y = r->y,
                                              .width = j->size,
                                              .height = j->size,
                                              .dst_device = now(m) + i * pixels * 3,
                                              .stride = j->size * 3};
                patch[n++] = i;
            }
        }
        if (n > 0) {
            sp_cuda_read_regions(j->ctx, j->slides[s], SP_PIXEL_RGB8, regions, n);
            for (size_t k = 0; k < n; k++) {
                j->read[patch[k]] = regions[k].status;
            }
        }
    }
    free(regions);
    free(patch);
    /* the reads ran on the context's stream; the steps run on the default one */
    cudaError_t e = cudaStreamSynchronize(j->ctx->stream);
    return e == cudaSuccess ? SP_OK : cuda_failed(e, "reading patches", err, err_len);
}

uint64_t sp_cuda_batch_device_levels(sp_slide *slide) {
    uint64_t levels = 0;
    for (int32_t l = 0; slide != NULL && l < slide->n_levels && l < 64; l++) {
        sp_raw_level raw;
        if (sp_cuda_nvjpeg_takes(slide, l, &raw)) {
            levels |= (uint64_t)1 << l;
        }
    }
    return levels;
}

/* The steps after the read, on now(m), in the loader's order. */
static sp_status run_steps(const sp_cuda_batch_job *j, making *m, char *err, size_t err_len) {
    int64_t n = j->count, size = j->size, pixels = size * size;
    sp_status st = SP_OK;
    if (j->normalize == SP_NORMALIZE_MACENKO) {
        st = swap(m, sp_cuda_macenko_patches(now(m), next(m), n, pixels, m->slide_of, j->stains,
                                             j->n_slides, j->target));
    } else if (j->normalize == SP_NORMALIZE_REINHARD) {
        st = swap(m, sp_cuda_reinhard_patches(now(m), next(m), n, pixels, m->slide_of, j->reinhard,
                                              j->reinhard_target));
    }
    if (st != SP_OK) {
        return say(st, err, err_len, "GPU batch: %s failed", "stain normalization");
    }
    if (j->geometry != NULL) {
        st = swap(m, sp_cuda_augment_geometry_device(now(m), next(m), n, size, size, m->seeds,
                                                     j->geometry, err, err_len));
    }
    if (st == SP_OK && (j->dihedral || j->hed_sigma > 0)) {
        st = swap(m, sp_cuda_augment_patches_device(now(m), next(m), n, size, m->seeds, j->dihedral,
                                                    j->hed_sigma, err, err_len));
    }
    if (st != SP_OK) {
        return st;
    }
    if (j->stain_sigma > 0 && (st = stain_augment(j, m, pixels)) != SP_OK) {
        return say(st, err, err_len, "GPU batch: %s failed", "stain augmentation");
    }
    if (j->photometric != NULL) {
        sp_err e = {0};
        st =
            sp_cuda_augment_photometric_device(now(m), n, size, size, m->seeds, j->photometric, &e);
        if (st != SP_OK) {
            sp_err_copy_out(&e, err, err_len);
        }
    }
    return st;
}

sp_status sp_cuda_batch_make(const sp_cuda_batch_job *j, void **out, char *err, size_t err_len) {
    *out = NULL;
    if (j == NULL || !job_ok(j)) {
        return say(SP_E_INVALID_ARG, err, err_len, "GPU batch: %s", "bad arguments");
    }
    cudaError_t e = cudaSetDevice(j->device);
    if (e != cudaSuccess) {
        return say(SP_E_UNSUPPORTED, err, err_len, "GPU batch: no CUDA device (%s)",
                   cudaGetErrorString(e));
    }
    int64_t pixels = j->size * j->size;
    size_t rgb_bytes = (size_t)(j->count * pixels * 3), out_bytes = rgb_bytes * (size_t)j->bytes;
    making m = {.cur = 0};
    m.seeds = malloc((size_t)j->count * sizeof *m.seeds);
    m.slide_of = malloc((size_t)j->count * sizeof *m.slide_of);
    sp_status st = SP_OK;
    if (m.seeds == NULL || m.slide_of == NULL) {
        st = say(SP_E_NOMEM, err, err_len, "GPU batch: %s", "out of memory");
        goto done;
    }
    for (int64_t i = 0; i < j->count; i++) {
        m.seeds[i] = j->requests[i].seed;
        m.slide_of[i] = j->requests[i].slide;
        if (m.slide_of[i] < 0 || m.slide_of[i] >= j->n_slides) {
            st = say(SP_E_INVALID_ARG, err, err_len, "GPU batch: %s", "a request's slide");
            goto done;
        }
    }
    if ((e = cudaMalloc((void **)&m.buf[0], rgb_bytes)) != cudaSuccess ||
        (e = cudaMalloc((void **)&m.buf[1], rgb_bytes)) != cudaSuccess ||
        (e = cudaMalloc(out, out_bytes)) != cudaSuccess ||
        (e = upload_table(j, &m)) != cudaSuccess || (e = upload_cpu_reads(j, &m)) != cudaSuccess) {
        st = cuda_failed(e, "allocating and uploading", err, err_len);
        goto done;
    }
    if (j->on_device != NULL && (st = read_on_device(j, &m, err, err_len)) != SP_OK) {
        goto done;
    }
    if ((st = run_steps(j, &m, err, err_len)) != SP_OK) {
        goto done;
    }
    e = (cudaError_t)sp_cuda_launch_batch_format(now(&m), *out, m.table, j->bytes, j->count, pixels,
                                                 j->nchw, 0);
    size_t patch_bytes = (size_t)pixels * 3 * (size_t)j->bytes;
    for (int64_t i = 0; e == cudaSuccess && i < j->count; i++) {
        if (j->read[i] != SP_OK) {
            e = cudaMemsetAsync((uint8_t *)*out + (size_t)i * patch_bytes, 0, patch_bytes, 0);
        }
    }
    if (e == cudaSuccess) {
        e = cudaStreamSynchronize(0);
    }
    if (e != cudaSuccess) {
        st = cuda_failed(e, "writing the batch", err, err_len);
    }
done:
    if (st != SP_OK) {
        cudaFree(*out);
        *out = NULL;
    }
    cudaFree(m.buf[0]);
    cudaFree(m.buf[1]);
    cudaFree(m.table);
    free(m.seeds);
    free(m.slide_of);
    return st;
}
