/* j2k_planes.h — the kernel that turns a JPEG 2000 tile's decoded component planes (nvJPEG2000's
 * planar 8-bit output, each component at its own resolution) into a part of a caller's RGB8 or
 * RGBA8 region on the device. Plain C, shared by j2k_planes.cu and cuda_nvjpeg2k.c. The launcher
 * enqueues on `stream` and returns a cudaError_t as int (0 = success). */
#ifndef SP_CUDA_J2K_PLANES_H
#define SP_CUDA_J2K_PLANES_H

#include <stdint.h>

typedef struct sp_j2k_planes {
    const uint8_t *plane[3];    /* device planes of components 0, 1, 2 */
    int64_t pitch[3];           /* bytes between rows of each plane */
    int width[3], height[3];    /* samples of each component */
    int shift_x[3], shift_y[3]; /* log2 of each component's subsampling: 0, 1 or 2 */
    int ycbcr; /* convert Y, Cb, Cr to RGB (JFIF); else the components are R, G, B */
} sp_j2k_planes;

#ifdef __cplusplus
extern "C" {
#endif

/* Write the part (sx, sy, w, h) of the tile into dst (rows of dst_stride bytes, bpp 3 or 4;
 * alpha 255), each pixel as j2k_planes_math.h computes it (what src/codecs/jpeg2000.c computes
 * from the same planes). */
int sp_cuda_launch_j2k_planes(const sp_j2k_planes *planes, int sx, int sy, int w, int h,
                              uint8_t *dst, int64_t dst_stride, int bpp, void *stream);

#ifdef __cplusplus
}
#endif

#endif
