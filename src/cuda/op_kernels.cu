/* op_kernels.cu — the engine's operations as CUDA kernels, one thread per output element, with
 * the same arithmetic in the same order as the CPU reference (src/ops/), so a GPU result equals
 * the CPU's bit for bit: grey in integers; od through the same 256-entry table; sobel in
 * float32 on integer values (exact) with IEEE sqrt; gaussian as the same paired sums, columns then
 * rows. This file is compiled with --fmad=false so that no multiply-add is fused where the CPU
 * rounds twice.
 *
 * Blocks follow the engine's convention: `src` is the RGB8 input pixel of the block's first
 * output, with `halo` valid pixels on every side reachable through negative offsets; outputs are
 * planar, `dst_stride` elements between rows and `dst_plane` between channels. The launchers are
 * C functions that return a cudaError_t as int (0 = success). */
#include <cuda_runtime.h>
#include <stdint.h>

namespace {

constexpr int THREADS_X = 32, THREADS_Y = 8;

dim3 grid_for(int64_t w, int64_t h, int planes) {
    return dim3((unsigned)((w + THREADS_X - 1) / THREADS_X),
                (unsigned)((h + THREADS_Y - 1) / THREADS_Y), (unsigned)planes);
}

__global__ void grey_kernel(const uint8_t *__restrict__ src, int64_t src_stride, int64_t w,
                            int64_t h, uint8_t *__restrict__ dst, int64_t dst_stride) {
    int64_t x = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    int64_t y = blockIdx.y * (int64_t)blockDim.y + threadIdx.y;
    if (x >= w || y >= h) {
        return;
    }
    const uint8_t *s = src + y * src_stride + 3 * x;
    uint32_t v = 299u * s[0] + 587u * s[1] + 114u * s[2] + 500u;
    dst[y * dst_stride + x] = (uint8_t)(v / 1000u);
}

__global__ void od_kernel(const uint8_t *__restrict__ src, int64_t src_stride, int64_t w,
                          int64_t h, const float *__restrict__ table, float *__restrict__ dst,
                          int64_t dst_stride, int64_t dst_plane) {
    int64_t x = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    int64_t y = blockIdx.y * (int64_t)blockDim.y + threadIdx.y;
    int c = blockIdx.z;
    if (x >= w || y >= h) {
        return;
    }
    dst[c * dst_plane + y * dst_stride + x] = table[src[y * src_stride + 3 * x + c]];
}

__global__ void sobel_kernel(const uint8_t *__restrict__ src, int64_t src_stride, int64_t w,
                             int64_t h, float *__restrict__ dst, int64_t dst_stride,
                             int64_t dst_plane) {
    int64_t x = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    int64_t y = blockIdx.y * (int64_t)blockDim.y + threadIdx.y;
    int c = blockIdx.z;
    if (x >= w || y >= h) {
        return;
    }
    /* p(dy, dx): the channel's value at (y + dy, x + dx), dy and dx in -1..1 */
    const uint8_t *centre = src + y * src_stride + 3 * x + c;
#define P(dy, dx) ((float)centre[(dy) * src_stride + 3 * (dx)])
    /* the CPU's order: s = a + 2b + c down the columns, gx = s(x+1) - s(x-1);
     * d = c - a down the columns, gy = d(x-1) + 2 d(x) + d(x+1) */
    float s_left = P(-1, -1) + 2.0f * P(0, -1) + P(1, -1);
    float s_right = P(-1, 1) + 2.0f * P(0, 1) + P(1, 1);
    float d_left = P(1, -1) - P(-1, -1), d_mid = P(1, 0) - P(-1, 0), d_right = P(1, 1) - P(-1, 1);
#undef P
    float gx = s_right - s_left;
    float gy = d_left + 2.0f * d_mid + d_right;
    dst[c * dst_plane + y * dst_stride + x] = sqrtf(gx * gx + gy * gy);
}

/* Column pass for one channel (src already offset to it): cols[y][x'] for x' in 0..pw-1
 * (pw = w + 2r, starting r pixels left of the block), from the uint8 input r rows above and
 * below. */
__global__ void gaussian_columns(const uint8_t *__restrict__ src, int64_t src_stride, int64_t pw,
                                 int64_t h, int r, const float *__restrict__ weights,
                                 float *__restrict__ cols) {
    int64_t x = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    int64_t y = blockIdx.y * (int64_t)blockDim.y + threadIdx.y;
    if (x >= pw || y >= h) {
        return;
    }
    const uint8_t *centre = src + y * src_stride + 3 * (x - r);
    float out = weights[0] * (float)centre[0];
    for (int k = 1; k <= r; k++) {
        out += weights[k] * ((float)centre[-k * src_stride] + (float)centre[k * src_stride]);
    }
    cols[y * pw + x] = out;
}

/* Row pass for one channel: its output plane from the column-filtered rows. */
__global__ void gaussian_rows(const float *__restrict__ cols, int64_t pw, int64_t w, int64_t h,
                              int r, const float *__restrict__ weights, float *__restrict__ dst,
                              int64_t dst_stride) {
    int64_t x = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    int64_t y = blockIdx.y * (int64_t)blockDim.y + threadIdx.y;
    if (x >= w || y >= h) {
        return;
    }
    const float *row = cols + y * pw + r + x;
    float out = weights[0] * row[0];
    for (int k = 1; k <= r; k++) {
        out += weights[k] * (row[-k] + row[k]);
    }
    dst[y * dst_stride + x] = out;
}

} // namespace

extern "C" {

int sp_cuda_launch_grey(const uint8_t *src, int64_t src_stride, int64_t w, int64_t h,
                        uint8_t *dst, int64_t dst_stride, cudaStream_t stream) {
    grey_kernel<<<grid_for(w, h, 1), dim3(THREADS_X, THREADS_Y), 0, stream>>>(
        src, src_stride, w, h, dst, dst_stride);
    return (int)cudaGetLastError();
}

int sp_cuda_launch_od(const uint8_t *src, int64_t src_stride, int64_t w, int64_t h,
                      const float *table, float *dst, int64_t dst_stride, int64_t dst_plane,
                      cudaStream_t stream) {
    od_kernel<<<grid_for(w, h, 3), dim3(THREADS_X, THREADS_Y), 0, stream>>>(
        src, src_stride, w, h, table, dst, dst_stride, dst_plane);
    return (int)cudaGetLastError();
}

int sp_cuda_launch_sobel(const uint8_t *src, int64_t src_stride, int64_t w, int64_t h,
                         float *dst, int64_t dst_stride, int64_t dst_plane, cudaStream_t stream) {
    sobel_kernel<<<grid_for(w, h, 3), dim3(THREADS_X, THREADS_Y), 0, stream>>>(
        src, src_stride, w, h, dst, dst_stride, dst_plane);
    return (int)cudaGetLastError();
}

/* One channel: `src` points at that channel's byte of the block's first pixel; `cols` holds
 * (w + 2r) * h device floats, `weights` r + 1. */
int sp_cuda_launch_gaussian_channel(const uint8_t *src, int64_t src_stride, int64_t w, int64_t h,
                                    int r, const float *weights, float *cols, float *dst,
                                    int64_t dst_stride, cudaStream_t stream) {
    int64_t pw = w + 2 * (int64_t)r;
    gaussian_columns<<<grid_for(pw, h, 1), dim3(THREADS_X, THREADS_Y), 0, stream>>>(
        src, src_stride, pw, h, r, weights, cols);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        return (int)e;
    }
    gaussian_rows<<<grid_for(w, h, 1), dim3(THREADS_X, THREADS_Y), 0, stream>>>(
        cols, pw, w, h, r, weights, dst, dst_stride);
    return (int)cudaGetLastError();
}

} // extern "C"
