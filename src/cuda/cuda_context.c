/* cuda_context.c — finding CUDA devices and owning a context on one: its stream, its two pinned
 * staging buffers with their events, device allocations and copies back to the host. A machine
 * without a driver or a device is an ordinary answer here (a count of 0 with the reason), never
 * an error that reaches the CPU path. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_cufile.h"
#include "cuda/cuda_internal.h"
#include "cuda/cuda_testing.h"

sp_status sp_cuda_staging(sp_cuda_context *ctx) {
    for (int i = 0; i < 2; i++) {
        if (ctx->staging[i] == NULL) {
            cudaError_t e = cudaHostAlloc((void **)&ctx->staging[i], SP_CUDA_STAGING_BYTES,
                                          cudaHostAllocDefault);
            if (e != cudaSuccess) {
                ctx->staging[i] = NULL;
                return sp_cuda_fail(ctx, e, "cannot allocate pinned staging memory");
            }
        }
    }
    return SP_OK;
}

sp_status sp_cuda_fail(sp_cuda_context *ctx, cudaError_t e, const char *what) {
    if (ctx != NULL) {
        snprintf(ctx->message, sizeof ctx->message, "%s: %s", what, cudaGetErrorString(e));
    }
    return e == cudaErrorMemoryAllocation ? SP_E_NOMEM : SP_E_IO;
}

static void put(char *dst, size_t len, const char *text) {
    if (dst != NULL && len > 0) {
        snprintf(dst, len, "%s", text);
    }
}

int sp_cuda_device_count(char *why, size_t why_len) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n <= 0) {
        char text[200];
        snprintf(text, sizeof text, "no usable CUDA device: %s",
                 e != cudaSuccess ? cudaGetErrorString(e) : "the driver reports none");
        put(why, why_len, text);
        (void)cudaGetLastError(); /* the runtime keeps the last error; start clean */
        return 0;
    }
    put(why, why_len, "");
    return n;
}

sp_status sp_cuda_device_info(int device, char *name, size_t name_len, int *cc_major, int *cc_minor,
                              uint64_t *memory_bytes) {
    if (device < 0 || device >= sp_cuda_device_count(NULL, 0)) {
        return SP_E_INVALID_ARG;
    }
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
        return SP_E_IO;
    }
    put(name, name_len, prop.name);
    if (cc_major != NULL) {
        *cc_major = prop.major;
    }
    if (cc_minor != NULL) {
        *cc_minor = prop.minor;
    }
    if (memory_bytes != NULL) {
        *memory_bytes = prop.totalGlobalMem;
    }
    return SP_OK;
}

/* The first of these variables that is set names this process's rank on its node. */
static const char *const LOCAL_RANK_VARS[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                                              "SLURM_LOCALID", "LOCAL_RANK"};

static int env_int(const char *name, int fallback) {
    const char *v = getenv(name);
    if (v == NULL || *v == '\0') {
        return fallback;
    }
    char *end;
    long x = strtol(v, &end, 10);
    return (*end == '\0' && x >= 0 && x < 1 << 20) ? (int)x : fallback;
}

int sp_cuda_default_device(void) {
    int n = sp_cuda_device_count(NULL, 0);
    if (n == 0) {
        return -1;
    }
    int chosen = env_int("SLIDEPIPE_CUDA_DEVICE", -1);
    if (chosen >= 0) {
        return chosen < n ? chosen : -1;
    }
    for (size_t i = 0; i < sizeof LOCAL_RANK_VARS / sizeof LOCAL_RANK_VARS[0]; i++) {
        int rank = env_int(LOCAL_RANK_VARS[i], -1);
        if (rank >= 0) {
            return rank % n;
        }
    }
    return 0;
}

void sp_cuda_context_destroy(sp_cuda_context *ctx) {
    if (ctx == NULL) {
        return;
    }
    cudaSetDevice(ctx->device);
    if (ctx->stream != NULL) {
        cudaStreamSynchronize(ctx->stream);
    }
    sp_cuda_nvjpeg_destroy(ctx);
    sp_cuda_cufile_destroy(ctx);
    sp_cuda_nvjpeg2k_destroy(ctx);
    if (ctx->stream != NULL) {
        cudaStreamDestroy(ctx->stream);
    }
    for (int i = 0; i < 2; i++) {
        if (ctx->uploaded[i] != NULL) {
            cudaEventDestroy(ctx->uploaded[i]);
        }
        cudaFreeHost(ctx->staging[i]);
    }
    free(ctx);
}

sp_status sp_cuda_context_create(int device, sp_cuda_context **out, char *err, size_t err_len) {
    if (out == NULL) {
        return SP_E_INVALID_ARG;
    }
    *out = NULL;
    char why[200];
    int n = sp_cuda_device_count(why, sizeof why);
    if (n == 0) {
        put(err, err_len, why);
        return SP_E_UNSUPPORTED;
    }
    if (device < 0) {
        device = sp_cuda_default_device();
    }
    if (device < 0 || device >= n) {
        snprintf(why, sizeof why, "CUDA device %d does not exist (%d found)", device, n);
        put(err, err_len, why);
        return SP_E_INVALID_ARG;
    }
    sp_cuda_context *ctx = calloc(1, sizeof *ctx);
    if (ctx == NULL) {
        put(err, err_len, "out of memory");
        return SP_E_NOMEM;
    }
    ctx->device = device;
    ctx->band_bytes = SP_CUDA_STAGING_BYTES;
    cudaError_t e = cudaSetDevice(device);
    const char *what = "cannot select the CUDA device";
    if (e == cudaSuccess) {
        what = "cannot create a CUDA stream";
        e = cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking);
    }
    for (int i = 0; i < 2 && e == cudaSuccess; i++) {
        what = "cannot create a CUDA event";
        e = cudaEventCreateWithFlags(&ctx->uploaded[i], cudaEventDisableTiming);
    }
    if (e != cudaSuccess) {
        sp_status st = sp_cuda_fail(ctx, e, what);
        put(err, err_len, ctx->message);
        sp_cuda_context_destroy(ctx);
        return st;
    }
    *out = ctx;
    return SP_OK;
}

void sp_cuda_context_set_band_bytes(sp_cuda_context *ctx, size_t bytes) {
    if (ctx != NULL && bytes > 0 && bytes <= SP_CUDA_STAGING_BYTES) {
        ctx->band_bytes = bytes;
    }
}

int sp_cuda_context_device(const sp_cuda_context *ctx) {
    return ctx != NULL ? ctx->device : -1;
}

const char *sp_cuda_context_error(const sp_cuda_context *ctx) {
    return ctx != NULL ? ctx->message : "no context";
}

sp_status sp_cuda_alloc(sp_cuda_context *ctx, size_t bytes, void **device_ptr) {
    if (device_ptr != NULL) {
        *device_ptr = NULL;
    }
    if (ctx == NULL || device_ptr == NULL) {
        return SP_E_INVALID_ARG;
    }
    cudaError_t e = cudaSetDevice(ctx->device);
    if (e == cudaSuccess) {
        e = cudaMalloc(device_ptr, bytes > 0 ? bytes : 1);
    }
    return e == cudaSuccess ? SP_OK : sp_cuda_fail(ctx, e, "cannot allocate device memory");
}

void sp_cuda_free(sp_cuda_context *ctx, void *device_ptr) {
    if (ctx != NULL && device_ptr != NULL) {
        cudaSetDevice(ctx->device);
        cudaFree(device_ptr);
    }
}

sp_status sp_cuda_copy_to_host(sp_cuda_context *ctx, void *host, const void *device_ptr,
                               size_t bytes) {
    if (ctx == NULL || (bytes > 0 && (host == NULL || device_ptr == NULL))) {
        return SP_E_INVALID_ARG;
    }
    cudaError_t e = cudaSetDevice(ctx->device);
    if (e == cudaSuccess) {
        e = cudaMemcpy(host, device_ptr, bytes, cudaMemcpyDeviceToHost);
    }
    return e == cudaSuccess ? SP_OK : sp_cuda_fail(ctx, e, "cannot copy from the device");
}
