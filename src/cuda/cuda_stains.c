/* cuda_stains.c — host side of the stain kernels (stain_kernels.cu, cuda_stains.h): the
 * `reinhard` op's GPU function, which the engine finds by name, and the device-memory calls for
 * Reinhard normalization and stain augmentation. Everything the kernels need that is not pixel
 * arithmetic (the checked statistics, the inverse colour matrix, the stains' pseudo-inverse, the
 * od table, each patch's draws) comes from the CPU code, so both backends use the same numbers.
 */
#include <stdlib.h>

#include "cuda/cuda_internal.h"
#include "cuda/cuda_ops.h"
#include "cuda/cuda_stains.h"
#include "ops/stain_augment.h"
#include "ops/stains.h"

int sp_cuda_launch_reinhard(const uint8_t *src, int64_t src_stride, int64_t w, int64_t h,
                            uint8_t *dst, int64_t dst_stride, int64_t dst_step, int64_t dst_plane,
                            const double *means_stds, const double *inv, cudaStream_t stream);
int sp_cuda_launch_stain_augment(uint8_t *rgb, int64_t count, int64_t patch_pixels,
                                 const double *device_table, const double *hep,
                                 cudaStream_t stream);

int sp_cuda_launch_macenko(const uint8_t *src, int64_t src_stride, int64_t w, int64_t h,
                           uint8_t *dst, int64_t dst_stride, int64_t dst_plane,
                           const double *device_table, const double *wm, int tabled,
                           cudaStream_t stream);

/* The map's four triples and the inverse matrix, flat, as the launcher takes them. */
static void reinhard_numbers(const sp_reinhard_map *m, double ms[12], double inv[9]) {
    for (int k = 0; k < 3; k++) {
        ms[k] = m->source_mean[k];
        ms[3 + k] = m->source_std[k];
        ms[6 + k] = m->target_mean[k];
        ms[9 + k] = m->target_std[k];
    }
    double x[3][3];
    sp_reinhard_xyz_to_rgb(x);
    for (int i = 0; i < 9; i++) {
        inv[i] = x[i / 3][i % 3];
    }
}

sp_status sp_cuda_op_reinhard(const sp_op_params *params, const sp_op_block *b, void *stream) {
    sp_reinhard_map map;
    sp_status st = sp_reinhard_map_init(&params->colour_source, &params->colour_target, &map, NULL);
    if (st != SP_OK) {
        return st;
    }
    double ms[12], inv[9];
    reinhard_numbers(&map, ms, inv);
    int e = sp_cuda_launch_reinhard(b->src, b->src_stride, b->width, b->height, b->dst,
                                    b->dst_stride, 1, b->dst_plane, ms, inv, (cudaStream_t)stream);
    return e == 0 ? SP_OK : SP_E_IO;
}

/* What the Macenko kernel reads for a map: its factors, or (not tabled) the optical densities,
 * put into od; *bytes is the table's size. */
static const double *map_table(const sp_stains_map *map, double od[256], size_t *bytes) {
    sp_stains_od_table(od);
    *bytes = (map->tabled ? 9 * 256 : 256) * sizeof(double);
    return map->tabled ? &map->factor[0][0][0] : od;
}

/* The `macenko` op: the map made on the host (sp_stains_map_init, as the CPU op makes it); its
 * table (the 3 x 3 x 256 factors, or the 256 optical densities when the map is not tabled) goes to
 * the device in stream order, freed after the kernel in stream order. */
sp_status sp_cuda_op_macenko(const sp_op_params *params, const sp_op_block *b, void *stream) {
    sp_stains_map map;
    sp_status st = sp_stains_map_init(&params->source, &params->target, &map, NULL);
    if (st != SP_OK) {
        return st;
    }
    double od[256];
    size_t bytes;
    const double *table = map_table(&map, od, &bytes);
    double wm[9];
    for (int i = 0; i < 9; i++) {
        wm[i] = map.w[i / 3][i % 3];
    }
    cudaStream_t s = (cudaStream_t)stream;
    double *device = NULL;
    /* from pageable memory the copy has taken the table when it returns (CUDA's documented
     * staging), so the host table may go out of scope after */
    cudaError_t e = cudaMallocAsync((void **)&device, bytes, s);
    if (e == cudaSuccess) {
        e = cudaMemcpyAsync(device, table, bytes, cudaMemcpyHostToDevice, s);
        if (e == cudaSuccess) {
            e = (cudaError_t)sp_cuda_launch_macenko(b->src, b->src_stride, b->width, b->height,
                                                    b->dst, b->dst_stride, b->dst_plane, device,
                                                    wm, map.tabled, s);
        }
        cudaError_t f = cudaFreeAsync(device, s);
        e = e != cudaSuccess ? e : f;
    }
    return e == cudaSuccess ? SP_OK : SP_E_IO;
}

sp_status sp_cuda_reinhard_normalize(const sp_reinhard_stats *source,
                                     const sp_reinhard_stats *target, uint8_t *device_rgb,
                                     int64_t n) {
    sp_reinhard_map map;
    sp_status st = sp_reinhard_map_init(source, target, &map, NULL);
    if (st != SP_OK || n <= 0) {
        return n < 0 ? SP_E_INVALID_ARG : st;
    }
    double ms[12], inv[9];
    reinhard_numbers(&map, ms, inv);
    /* One row of n pixels, written back interleaved: step 3, plane 1. */
    int e = sp_cuda_launch_reinhard(device_rgb, n * 3, n, 1, device_rgb, 0, 3, 1, ms, inv, 0);
    if (e == 0) {
        e = (int)cudaStreamSynchronize(0);
    }
    return e == 0 ? SP_OK : SP_E_IO;
}

sp_status sp_cuda_stains_augment_patches(const sp_stains *stains, uint8_t *device_rgb,
                                         int64_t count, int64_t patch_pixels, const uint64_t *seeds,
                                         double sigma) {
    if (count < 0 || patch_pixels < 0 || !(sigma >= 0 && sigma <= 1) ||
        (count > 0 && seeds == NULL)) {
        return SP_E_INVALID_ARG;
    }
    sp_stain_augment_map map;
    sp_status st = sp_stain_augment_init(stains, &map);
    if (st != SP_OK || count == 0 || patch_pixels == 0) {
        return st;
    }
    size_t doubles = 256 + 4 * (size_t)count;
    double *table = malloc(doubles * sizeof *table), *device = NULL;
    if (table == NULL) {
        return SP_E_NOMEM;
    }
    for (int v = 0; v < 256; v++) {
        table[v] = map.od[v];
    }
    for (int64_t i = 0; i < count; i++) {
        double alpha[2], beta[2];
        sp_stain_augment_draw(seeds[i], sigma, alpha, beta);
        double *d = table + 256 + 4 * i;
        d[0] = alpha[0];
        d[1] = alpha[1];
        d[2] = beta[0];
        d[3] = beta[1];
    }
    double hep[12];
    for (int k = 0; k < 3; k++) {
        hep[k] = map.h[k];
        hep[3 + k] = map.e[k];
        hep[6 + k] = map.p[0][k];
        hep[9 + k] = map.p[1][k];
    }
    int e = (int)cudaMalloc((void **)&device, doubles * sizeof *table);
    if (e == 0) {
        e = (int)cudaMemcpy(device, table, doubles * sizeof *table, cudaMemcpyHostToDevice);
    }
    if (e == 0) {
        e = sp_cuda_launch_stain_augment(device_rgb, count, patch_pixels, device, hep, 0);
    }
    if (e == 0) {
        e = (int)cudaStreamSynchronize(0);
    }
    cudaFree(device);
    free(table);
    return e == 0 ? SP_OK : e == (int)cudaErrorMemoryAllocation ? SP_E_NOMEM : SP_E_IO;
}

/* Upload a Macenko map's table (factors, or the optical densities when not tabled); NULL on
 * failure. */
static double *upload_map(const sp_stains_map *map, int *e) {
    double od[256];
    size_t bytes;
    const double *table = map_table(map, od, &bytes);
    double *device = NULL;
    *e = (int)cudaMalloc((void **)&device, bytes);
    if (*e == 0) {
        *e = (int)cudaMemcpy(device, table, bytes, cudaMemcpyHostToDevice);
    }
    if (*e != 0) {
        cudaFree(device);
        return NULL;
    }
    return device;
}

sp_status sp_cuda_macenko_patches(const uint8_t *src, uint8_t *dst, int64_t count,
                                  int64_t patch_pixels, const int32_t *slide_of,
                                  const sp_stains *stains, int32_t n_slides,
                                  const sp_stains *target) {
    if (count < 0 || patch_pixels < 0 || (count > 0 && (slide_of == NULL || stains == NULL))) {
        return SP_E_INVALID_ARG;
    }
    int e = 0;
    sp_status st = SP_OK;
    /* one slide at a time: its map goes up once for all of its patches */
    for (int32_t s = 0; st == SP_OK && e == 0 && s < n_slides; s++) {
        int64_t first = 0;
        while (first < count && slide_of[first] != s) {
            first++;
        }
        if (first == count) {
            continue;
        }
        sp_stains_map map;
        st = sp_stains_map_init(&stains[s], target, &map, NULL);
        double *table = st == SP_OK ? upload_map(&map, &e) : NULL;
        double wm[9];
        for (int i = 0; i < 9; i++) {
            wm[i] = map.w[i / 3][i % 3];
        }
        for (int64_t i = first; table != NULL && e == 0 && i < count; i++) {
            if (slide_of[i] == s) {
                /* as patch_pixels rows of one pixel: interleaved out, src != dst */
                size_t at = (size_t)(i * patch_pixels * 3);
                e = sp_cuda_launch_macenko(src + at, 3, 1, patch_pixels, dst + at, 3, 1, table, wm,
                                           map.tabled, 0);
            }
        }
        if (e == 0 && table != NULL) {
            e = (int)cudaStreamSynchronize(0);
        }
        cudaFree(table);
    }
    if (st != SP_OK) {
        return st;
    }
    return e == 0 ? SP_OK : e == (int)cudaErrorMemoryAllocation ? SP_E_NOMEM : SP_E_IO;
}

sp_status sp_cuda_reinhard_patches(const uint8_t *src, uint8_t *dst, int64_t count,
                                   int64_t patch_pixels, const int32_t *slide_of,
                                   const sp_reinhard_stats *stats,
                                   const sp_reinhard_stats *target) {
    if (count < 0 || patch_pixels < 0 || (count > 0 && (slide_of == NULL || stats == NULL))) {
        return SP_E_INVALID_ARG;
    }
    int e = 0;
    for (int64_t i = 0; e == 0 && i < count; i++) {
        sp_reinhard_map map;
        sp_status st = sp_reinhard_map_init(&stats[slide_of[i]], target, &map, NULL);
        if (st != SP_OK) {
            return st;
        }
        double ms[12], inv[9];
        reinhard_numbers(&map, ms, inv);
        size_t at = (size_t)(i * patch_pixels * 3);
        /* one row of patch_pixels pixels, interleaved out: step 3, plane 1 */
        e = sp_cuda_launch_reinhard(src + at, patch_pixels * 3, patch_pixels, 1, dst + at, 0, 3, 1,
                                    ms, inv, 0);
    }
    if (e == 0) {
        e = (int)cudaStreamSynchronize(0);
    }
    return e == 0 ? SP_OK : SP_E_IO;
}

sp_status sp_cuda_upload_sync(void *device, const void *host, size_t bytes) {
    return cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice) == cudaSuccess ? SP_OK : SP_E_IO;
}
