/* j2k_planes.cu — decoded JPEG 2000 component planes to RGB8/RGBA8 pixels on the GPU (see
 * j2k_planes.h), one thread per output pixel; the arithmetic is j2k_planes_math.h's, shared with
 * the unit test that checks it against the CPU decoder. */
#include <cuda_runtime.h>
#include <stdint.h>

#include "cuda/j2k_planes.h"
#include "cuda/j2k_planes_math.h"

namespace {

constexpr int THREADS_X = 32, THREADS_Y = 8;

__global__ void j2k_kernel(sp_j2k_planes p, int sx, int sy, int w, int h, uint8_t *__restrict__ dst,
                           int64_t dst_stride, int bpp) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) {
        return;
    }
    uint8_t rgb[3];
    sp_j2k_pixel(&p, sx + x, sy + y, rgb);
    uint8_t *o = dst + (int64_t)y * dst_stride + (int64_t)x * bpp;
    o[0] = rgb[0];
    o[1] = rgb[1];
    o[2] = rgb[2];
    if (bpp == 4) {
        o[3] = 255;
    }
}

} // namespace

extern "C" {

int sp_cuda_launch_j2k_planes(const sp_j2k_planes *planes, int sx, int sy, int w, int h,
                              uint8_t *dst, int64_t dst_stride, int bpp, void *stream) {
    if (w <= 0 || h <= 0) {
        return (int)cudaSuccess;
    }
    dim3 block(THREADS_X, THREADS_Y);
    dim3 grid((unsigned)((w + THREADS_X - 1) / THREADS_X),
              (unsigned)((h + THREADS_Y - 1) / THREADS_Y));
    j2k_kernel<<<grid, block, 0, (cudaStream_t)stream>>>(*planes, sx, sy, w, h, dst, dst_stride,
                                                         bpp);
    return (int)cudaGetLastError();
}

} // extern "C"
