/* jpeg_planes.cu — decoded JPEG component planes to RGB8/RGBA8 pixels on the GPU (see
 * jpeg_planes.h), one thread per output pixel; the arithmetic is jpeg_planes_math.h's, shared with
 * the unit test that checks it against libjpeg-turbo on the CPU. */
#include <cuda_runtime.h>
#include <stdint.h>

#include "cuda/jpeg_planes.h"
#include "cuda/jpeg_planes_math.h"

namespace {

constexpr int THREADS_X = 32, THREADS_Y = 8;

__global__ void planes_kernel(sp_jpeg_planes p, int sx, int sy, int w, int h,
                              uint8_t *__restrict__ dst, int64_t dst_stride, int bpp) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) {
        return;
    }
    uint8_t rgb[3];
    sp_jpeg_pixel(&p, sx + x, sy + y, rgb);
    uint8_t *o = dst + (int64_t)y * dst_stride + (int64_t)x * bpp;
    o[0] = rgb[0];
    o[1] = rgb[1];
    o[2] = rgb[2];
    if (bpp == 4) {
        o[3] = 255;
    }
}

__global__ void fill_kernel(uint8_t *__restrict__ dst, int64_t dst_stride, int64_t w, int64_t h,
                            int bpp, uchar4 px) {
    int64_t x = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    int64_t y = blockIdx.y * (int64_t)blockDim.y + threadIdx.y;
    if (x >= w || y >= h) {
        return;
    }
    uint8_t *o = dst + y * dst_stride + x * bpp;
    o[0] = px.x;
    o[1] = px.y;
    o[2] = px.z;
    if (bpp == 4) {
        o[3] = px.w;
    }
}

} // namespace

extern "C" {

int sp_cuda_launch_jpeg_planes(const sp_jpeg_planes *planes, int sx, int sy, int w, int h,
                               uint8_t *dst, int64_t dst_stride, int bpp, void *stream) {
    if (w <= 0 || h <= 0) {
        return (int)cudaSuccess;
    }
    dim3 block(THREADS_X, THREADS_Y);
    dim3 grid((unsigned)((w + THREADS_X - 1) / THREADS_X),
              (unsigned)((h + THREADS_Y - 1) / THREADS_Y));
    planes_kernel<<<grid, block, 0, (cudaStream_t)stream>>>(*planes, sx, sy, w, h, dst,
                                                             dst_stride, bpp);
    return (int)cudaGetLastError();
}

int sp_cuda_launch_fill_pixels(uint8_t *dst, int64_t dst_stride, int64_t w, int64_t h, int bpp,
                               const uint8_t pixel[4], void *stream) {
    if (w <= 0 || h <= 0) {
        return (int)cudaSuccess;
    }
    dim3 block(THREADS_X, THREADS_Y);
    dim3 grid((unsigned)((w + THREADS_X - 1) / THREADS_X),
              (unsigned)((h + THREADS_Y - 1) / THREADS_Y));
    fill_kernel<<<grid, block, 0, (cudaStream_t)stream>>>(
        dst, dst_stride, w, h, bpp, make_uchar4(pixel[0], pixel[1], pixel[2], pixel[3]));
    return (int)cudaGetLastError();
}

} // extern "C"
