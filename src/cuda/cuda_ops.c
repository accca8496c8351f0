/* cuda_ops.c — the engine's operations on the GPU (see cuda_ops.h): the op functions turn a
 * device block into kernel launches (op_kernels.cu), with the od table and the gaussian weights
 * taken from the CPU ops so both backends use the same numbers; the runner moves one tile's input
 * up and its output planes down around them. */
#include <stdlib.h>

#include "cuda/cuda_internal.h"
#include "cuda/cuda_ops.h"

/* The launchers in op_kernels.cu (they return a cudaError_t). */
int sp_cuda_launch_grey(const uint8_t *src, int64_t src_stride, int64_t w, int64_t h, uint8_t *dst,
                        int64_t dst_stride, cudaStream_t stream);
int sp_cuda_launch_od(const uint8_t *src, int64_t src_stride, int64_t w, int64_t h,
                      const float *table, float *dst, int64_t dst_stride, int64_t dst_plane,
                      cudaStream_t stream);
int sp_cuda_launch_sobel(const uint8_t *src, int64_t src_stride, int64_t w, int64_t h, float *dst,
                         int64_t dst_stride, int64_t dst_plane, cudaStream_t stream);
int sp_cuda_launch_gaussian_channel(const uint8_t *src, int64_t src_stride, int64_t w, int64_t h,
                                    int r, const float *weights, float *cols, float *dst,
                                    int64_t dst_stride, cudaStream_t stream);

static sp_status launched(int e) {
    return e == 0 ? SP_OK : SP_E_IO;
}

sp_status sp_cuda_op_grey(const sp_op_params *params, const sp_op_block *b, void *stream) {
    return launched(sp_cuda_launch_grey(b->src, b->src_stride, b->width, b->height, b->dst,
                                        b->dst_stride, (cudaStream_t)stream));
}

/* The od table goes into the block's scratch: 256 floats, copied from the CPU op's table. */
sp_status sp_cuda_op_od(const sp_op_params *params, const sp_op_block *b, void *stream) {
    cudaError_t e = cudaMemcpyAsync(b->scratch, sp_op_od_table(), 256 * sizeof(float),
                                    cudaMemcpyHostToDevice, (cudaStream_t)stream);
    if (e != cudaSuccess) {
        return SP_E_IO;
    }
    return launched(sp_cuda_launch_od(b->src, b->src_stride, b->width, b->height, b->scratch,
                                      b->dst, b->dst_stride, b->dst_plane, (cudaStream_t)stream));
}

sp_status sp_cuda_op_sobel(const sp_op_params *params, const sp_op_block *b, void *stream) {
    return launched(sp_cuda_launch_sobel(b->src, b->src_stride, b->width, b->height, b->dst,
                                         b->dst_stride, b->dst_plane, (cudaStream_t)stream));
}

/* Scratch: the weights (radius + 1 floats), then one channel's column-filtered rows
 * ((width + 2 radius) x height floats), well inside what the CPU op asks for. */
sp_status sp_cuda_op_gaussian(const sp_op_params *params, const sp_op_block *b, void *stream) {
    int r = sp_op_gaussian_radius(params->sigma);
    float *weights = malloc(((size_t)r + 1) * sizeof(float));
    if (weights == NULL) {
        return SP_E_NOMEM;
    }
    sp_op_gaussian_weights(params->sigma, r, weights);
    /* synchronous with respect to the host buffer, so it can be freed at once */
    cudaError_t e =
        cudaMemcpy(b->scratch, weights, ((size_t)r + 1) * sizeof(float), cudaMemcpyHostToDevice);
    free(weights);
    for (int c = 0; c < 3 && e == cudaSuccess; c++) {
        e = (cudaError_t)sp_cuda_launch_gaussian_channel(
            b->src + c, b->src_stride, b->width, b->height, r, b->scratch, b->scratch + r + 1,
            (float *)b->dst + c * b->dst_plane, b->dst_stride, (cudaStream_t)stream);
    }
    return e == cudaSuccess ? SP_OK : SP_E_IO;
}

struct sp_cuda_op_runner {
    sp_cuda_context *ctx;
    const sp_op *op;
    sp_cuda_op_fn kernel;
    sp_op_params params;
    int64_t chunk;
    int halo;
    size_t elem;
    int64_t src_pitch; /* bytes of a device input row: (chunk + 2 halo) x 3 */
    uint8_t *d_src;
    void *d_dst;
    float *d_scratch;
    size_t dst_bytes;
};

void sp_cuda_op_runner_destroy(sp_cuda_op_runner *r) {
    if (r == NULL) {
        return;
    }
    if (r->ctx != NULL) {
        sp_cuda_free(r->ctx, r->d_src);
        sp_cuda_free(r->ctx, r->d_dst);
        sp_cuda_free(r->ctx, r->d_scratch);
        sp_cuda_context_destroy(r->ctx);
    }
    free(r);
}

sp_status sp_cuda_op_runner_create(const sp_op *op, const sp_op_params *params, int64_t chunk,
                                   sp_cuda_op_runner **out, sp_err *err) {
    *out = NULL;
    sp_cuda_op_fn kernel = sp_cuda_op_kernel(op->name);
    if (kernel == NULL) {
        return sp_err_set(err, SP_E_UNSUPPORTED, "op %s has no CUDA implementation", op->name);
    }
    sp_cuda_op_runner *r = calloc(1, sizeof *r);
    if (r == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory");
    }
    r->op = op;
    r->kernel = kernel;
    r->params = *params;
    r->chunk = chunk;
    r->halo = op->halo(params);
    r->elem = op->output == SP_ZARR_F32 ? sizeof(float) : 1;
    r->src_pitch = (chunk + 2 * r->halo) * 3;
    r->dst_bytes = (size_t)op->channels * (size_t)(chunk * chunk) * r->elem;
    size_t nscratch = op->scratch_floats ? op->scratch_floats(params, chunk, chunk) : 0;
    if (nscratch < 256) {
        nscratch = 256; /* the od table */
    }
    char msg[300];
    sp_status st = sp_cuda_context_create(-1, &r->ctx, msg, sizeof msg);
    if (st != SP_OK) {
        sp_cuda_op_runner_destroy(r);
        return sp_err_set(err, st, "%s", msg);
    }
    st = sp_cuda_alloc(r->ctx, (size_t)(r->src_pitch * (chunk + 2 * r->halo)), (void **)&r->d_src);
    if (st == SP_OK) {
        st = sp_cuda_alloc(r->ctx, r->dst_bytes, &r->d_dst);
    }
    if (st == SP_OK) {
        st = sp_cuda_alloc(r->ctx, nscratch * sizeof(float), (void **)&r->d_scratch);
    }
    if (st != SP_OK) {
        sp_err_set(err, st, "%s", sp_cuda_context_error(r->ctx));
        sp_cuda_op_runner_destroy(r);
        return st;
    }
    *out = r;
    return SP_OK;
}

sp_status sp_cuda_op_runner_run(sp_cuda_op_runner *r, const sp_op_block *b, sp_err *err) {
    cudaStream_t stream = r->ctx->stream;
    int64_t halo = r->halo;
    const uint8_t *host_src = b->src - halo * b->src_stride - 3 * halo;
    size_t row_bytes = (size_t)((b->width + 2 * halo) * 3);
    cudaError_t e = cudaSetDevice(r->ctx->device);
    if (e == cudaSuccess) {
        e = cudaMemcpy2DAsync(r->d_src, (size_t)r->src_pitch, host_src, (size_t)b->src_stride,
                              row_bytes, (size_t)(b->height + 2 * halo), cudaMemcpyHostToDevice,
                              stream);
    }
    if (e == cudaSuccess && (b->width < r->chunk || b->height < r->chunk)) {
        e = cudaMemsetAsync(r->d_dst, 0, r->dst_bytes, stream);
    }
    if (e != cudaSuccess) {
        return sp_err_set(err, SP_E_IO, "uploading a tile to the GPU: %s", cudaGetErrorString(e));
    }
    sp_op_block d = *b;
    d.src = r->d_src + halo * r->src_pitch + 3 * halo;
    d.src_stride = r->src_pitch;
    d.dst = r->d_dst;
    d.scratch = r->d_scratch;
    sp_status st = r->kernel(&r->params, &d, stream);
    if (st != SP_OK) {
        return sp_err_set(err, st, "op %s on the GPU: %s", r->op->name,
                          cudaGetErrorString(cudaGetLastError()));
    }
    e = cudaMemcpyAsync(b->dst, r->d_dst, r->dst_bytes, cudaMemcpyDeviceToHost, stream);
    if (e == cudaSuccess) {
        e = cudaStreamSynchronize(stream);
    }
    if (e != cudaSuccess) {
        return sp_err_set(err, SP_E_IO, "running op %s on the GPU: %s", r->op->name,
                          cudaGetErrorString(e));
    }
    return SP_OK;
}
