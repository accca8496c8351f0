/* cuda_spectrum.c — the spectral statistics on the GPU (see cuda_spectrum.h). The level is read
 * strip by strip on the CPU (the strip's pieces over the thread pool, sp_read_regions) into one
 * of two pinned buffers, while the GPU works on the previous strip: upload, grey and offset
 * removal per patch, one batched cuFFT real-to-complex transform of the strip's patches, then
 * dB values, histogram and per-patch sums (spectrum_kernels.cu). The histogram stays on the
 * device until the end; the per-patch sums come back once and are added on the host in raster
 * order, so the result does not depend on scheduling. cuFFT is loaded at run time. */
#include <cufft.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/level_coords.h"
#include "cuda/cuda_internal.h"
#include "cuda/cuda_spectrum.h"

/* Launchers in spectrum_kernels.cu (they return a cudaError_t). */
int sp_cuda_launch_grey_patches(const uint8_t *rgb, int64_t stride, int patch, int across,
                                int count, float *grey, double *totals, cudaStream_t stream);
int sp_cuda_launch_spectrum_stats(const void *freq, int patch, int count, const double *totals,
                                  unsigned long long *hist, double *sums, cudaStream_t stream);

#define SLOTS (SP_SPECTRUM_BINS + 2)
/* The most bytes one pinned strip may take; taller strips are cut to fit. */
#define STRIP_BYTES_MAX ((int64_t)256 << 20)

typedef cufftResult (*plan_many_fn)(cufftHandle *, int, int *, int *, int, int, int *, int, int,
                                    cufftType, int);
typedef cufftResult (*set_stream_fn)(cufftHandle, cudaStream_t);
typedef cufftResult (*exec_r2c_fn)(cufftHandle, cufftReal *, cufftComplex *);
typedef cufftResult (*destroy_fn)(cufftHandle);

typedef struct gpu_state {
    sp_cuda_context *ctx;
    uint8_t *pinned[2];
    cudaEvent_t uploaded[2];
    uint8_t *d_rgb;
    float *d_grey;
    cufftComplex *d_freq;
    double *d_totals, *d_sums;
    unsigned long long *d_hist;
    cufftHandle plan;
    bool planned;
    destroy_fn destroy;
} gpu_state;

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static sp_status cuda_error(sp_err *err, cudaError_t e, const char *what) {
    return sp_err_set(err, e == cudaErrorMemoryAllocation ? SP_E_NOMEM : SP_E_IO, "%s: %s", what,
                      cudaGetErrorString(e));
}

static void release(gpu_state *g) {
    if (g->ctx == NULL) {
        return;
    }
    cudaSetDevice(sp_cuda_context_device(g->ctx));
    cudaStreamSynchronize(g->ctx->stream);
    if (g->planned) {
        g->destroy(g->plan);
    }
    for (int i = 0; i < 2; i++) {
        cudaFreeHost(g->pinned[i]);
        if (g->uploaded[i] != NULL) {
            cudaEventDestroy(g->uploaded[i]);
        }
    }
    cudaFree(g->d_rgb);
    cudaFree(g->d_grey);
    cudaFree(g->d_freq);
    cudaFree(g->d_totals);
    cudaFree(g->d_sums);
    cudaFree(g->d_hist);
    sp_cuda_context_destroy(g->ctx);
}

/* Read strip rows [y0, y0 + rows) of the full-patch area into `dst` (rows of width x 3 bytes),
 * its pieces over the thread pool. */
static sp_status read_strip(const sp_cuda_spectrum_job *job, int64_t y0, int64_t rows, uint8_t *dst,
                            sp_err *err) {
    int64_t n = (job->width + job->piece_cols - 1) / job->piece_cols;
    sp_region_request *reqs = calloc((size_t)n, sizeof *reqs);
    if (reqs == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory");
    }
    int64_t stride = job->width * 3;
    for (int64_t i = 0; i < n; i++) {
        int64_t x = i * job->piece_cols;
        reqs[i] = (sp_region_request){
            .slide = job->slide,
            .level = job->level,
            .x = sp_level0_coord(x, job->downsample),
            .y = sp_level0_coord(y0, job->downsample),
            .width = job->width - x < job->piece_cols ? job->width - x : job->piece_cols,
            .height = rows,
            .format = SP_PIXEL_RGB8,
            .dst = dst + x * 3,
            .stride = stride,
        };
    }
    sp_status st = sp_read_regions(reqs, (size_t)n, job->threads, NULL);
    free(reqs);
    if (st != SP_OK) {
        const char *msg = sp_slide_error(job->slide);
        return sp_err_set(err, st, "reading level %d rows %lld..%lld: %s", (int)job->level,
                          (long long)y0, (long long)(y0 + rows), msg ? msg : sp_status_str(st));
    }
    return SP_OK;
}

sp_status sp_cuda_spectrum(const sp_cuda_spectrum_job *job, sp_spectrum_stats *out, sp_err *err) {
    gpu_state g = {0};
    char msg[300];
    void *plan_many = NULL, *set_stream = NULL, *exec = NULL;
    if (!sp_cuda_library_found(SP_CUDA_LIB_CUFFT, msg, sizeof msg) ||
        (plan_many = sp_cuda_library_symbol(SP_CUDA_LIB_CUFFT, "cufftPlanMany")) == NULL ||
        (set_stream = sp_cuda_library_symbol(SP_CUDA_LIB_CUFFT, "cufftSetStream")) == NULL ||
        (exec = sp_cuda_library_symbol(SP_CUDA_LIB_CUFFT, "cufftExecR2C")) == NULL ||
        (*(void **)&g.destroy = sp_cuda_library_symbol(SP_CUDA_LIB_CUFFT, "cufftDestroy")) ==
            NULL) {
        return sp_err_set(err, SP_E_UNSUPPORTED, "--device cuda needs cuFFT: %s", msg);
    }
    sp_status st = sp_cuda_context_create(-1, &g.ctx, msg, sizeof msg);
    if (st != SP_OK) {
        return sp_err_set(err, st, "%s", msg);
    }
    cudaStream_t stream = g.ctx->stream;
    int p = job->patch, half = p / 2 + 1;
    int across = (int)(job->width / p);
    int64_t row_bytes = job->width * 3;
    int64_t strip_rows = job->strip_rows;
    while (strip_rows > p && strip_rows * row_bytes > STRIP_BYTES_MAX) {
        strip_rows -= p;
    }
    int per_strip = (int)(strip_rows / p) * across;
    int64_t total_patches = (job->height / p) * across;
    size_t strip_bytes = (size_t)(strip_rows * row_bytes);
    cudaError_t e = cudaSuccess;
    const char *what = "allocating GPU memory";
    for (int i = 0; i < 2 && e == cudaSuccess; i++) {
        e = cudaHostAlloc((void **)&g.pinned[i], strip_bytes, cudaHostAllocDefault);
        if (e == cudaSuccess) {
            e = cudaEventCreateWithFlags(&g.uploaded[i], cudaEventDisableTiming);
        }
    }
    if (e == cudaSuccess) {
        e = cudaMalloc((void **)&g.d_rgb, strip_bytes);
    }
    if (e == cudaSuccess) {
        e = cudaMalloc((void **)&g.d_grey,
                       (size_t)per_strip * (size_t)p * (size_t)p * sizeof(float));
    }
    if (e == cudaSuccess) {
        e = cudaMalloc((void **)&g.d_freq,
                       (size_t)per_strip * (size_t)p * (size_t)half * sizeof(cufftComplex));
    }
    if (e == cudaSuccess) {
        e = cudaMalloc((void **)&g.d_totals, (size_t)per_strip * sizeof(double));
    }
    if (e == cudaSuccess) {
        e = cudaMalloc((void **)&g.d_sums, (size_t)total_patches * 2 * sizeof(double));
    }
    if (e == cudaSuccess) {
        e = cudaMalloc((void **)&g.d_hist, SLOTS * sizeof(unsigned long long));
    }
    if (e == cudaSuccess) {
        e = cudaMemsetAsync(g.d_hist, 0, SLOTS * sizeof(unsigned long long), stream);
    }
    if (e != cudaSuccess) {
        st = cuda_error(err, e, what);
        goto done;
    }
    int n[2] = {p, p};
    if (((plan_many_fn)plan_many)(&g.plan, 2, n, NULL, 1, p * p, NULL, 1, p * half, CUFFT_R2C,
                                  per_strip) != CUFFT_SUCCESS) {
        st = sp_err_set(err, SP_E_IO, "cuFFT could not plan %d transforms of %dx%d", per_strip, p,
                        p);
        goto done;
    }
    g.planned = true;
    ((set_stream_fn)set_stream)(g.plan, stream);

    double read_seconds = 0, t_start = now_seconds();
    int64_t strips = (job->height + strip_rows - 1) / strip_rows;
    for (int64_t s = 0; s < strips && st == SP_OK; s++) {
        int b = (int)(s % 2);
        int64_t y0 = s * strip_rows;
        int64_t rows = job->height - y0 < strip_rows ? job->height - y0 : strip_rows;
        int count = (int)(rows / p) * across;
        e = cudaEventSynchronize(g.uploaded[b]); /* this buffer's last upload is done */
        if (e != cudaSuccess) {
            st = cuda_error(err, e, "waiting for the GPU");
            break;
        }
        double t0 = now_seconds();
        st = read_strip(job, y0, rows, g.pinned[b], err);
        read_seconds += now_seconds() - t0;
        if (st != SP_OK) {
            break;
        }
        e = cudaMemcpyAsync(g.d_rgb, g.pinned[b], (size_t)(rows * row_bytes),
                            cudaMemcpyHostToDevice, stream);
        if (e == cudaSuccess) {
            e = cudaEventRecord(g.uploaded[b], stream);
        }
        if (e == cudaSuccess) {
            e = (cudaError_t)sp_cuda_launch_grey_patches(g.d_rgb, row_bytes, p, across, count,
                                                         g.d_grey, g.d_totals, stream);
        }
        if (e == cudaSuccess && ((exec_r2c_fn)exec)(g.plan, g.d_grey, g.d_freq) != CUFFT_SUCCESS) {
            st = sp_err_set(err, SP_E_IO, "cuFFT failed on strip %lld", (long long)s);
            break;
        }
        if (e == cudaSuccess) {
            e = (cudaError_t)sp_cuda_launch_spectrum_stats(
                g.d_freq, p, count, g.d_totals, g.d_hist, g.d_sums + 2 * (y0 / p) * across, stream);
        }
        if (e != cudaSuccess) {
            st = cuda_error(err, e, "running the spectrum kernels");
        }
        if (job->progress != NULL) {
            job->progress(job->progress_user, s + 1, strips);
        }
    }
    double *sums = NULL;
    unsigned long long hist[SLOTS];
    if (st == SP_OK) {
        sums = malloc((size_t)total_patches * 2 * sizeof(double));
        if (sums == NULL) {
            st = sp_err_set(err, SP_E_NOMEM, "out of memory");
        }
    }
    if (st == SP_OK) {
        e = cudaMemcpyAsync(sums, g.d_sums, (size_t)total_patches * 2 * sizeof(double),
                            cudaMemcpyDeviceToHost, stream);
        if (e == cudaSuccess) {
            e = cudaMemcpyAsync(hist, g.d_hist, sizeof hist, cudaMemcpyDeviceToHost, stream);
        }
        if (e == cudaSuccess) {
            e = cudaStreamSynchronize(stream);
        }
        if (e != cudaSuccess) {
            st = cuda_error(err, e, "collecting the GPU's results");
        }
    }
    if (st == SP_OK) {
        out->patches = total_patches;
        out->values = total_patches * p * p;
        out->below = (int64_t)hist[0];
        out->above = (int64_t)hist[SLOTS - 1];
        for (int i = 0; i < SP_SPECTRUM_BINS; i++) {
            out->histogram[i] = (int64_t)hist[i + 1];
        }
        for (int64_t i = 0; i < total_patches; i++) {
            out->sum += sums[2 * i];
            out->sum_squares += sums[2 * i + 1];
        }
        out->read_seconds = read_seconds;
        out->compute_seconds = now_seconds() - t_start - read_seconds;
    }
    free(sums);
done:
    release(&g);
    return st;
}
