/* jpeg_planes.h — the kernels that turn a JPEG's decoded component planes (nvJPEG's
 * NVJPEG_OUTPUT_YUV: the components as stored, chroma at its own resolution) into a part of a
 * caller's RGB8 or RGBA8 region on the device, and fill a region with one pixel. Plain C, shared
 * by jpeg_planes.cu and cuda_nvjpeg.c. The launchers enqueue on `stream` and return a cudaError_t
 * as int (0 = success). */
#ifndef SP_CUDA_JPEG_PLANES_H
#define SP_CUDA_JPEG_PLANES_H

#include <stdint.h>

typedef struct sp_jpeg_planes {
    const uint8_t *plane[3];         /* device planes of components 0, 1, 2 */
    int64_t pitch[3];                /* bytes between rows of each plane */
    int width, height;               /* the image (component 0) */
    int chroma_width, chroma_height; /* components 1 and 2 */
    int h_factor, v_factor; /* 1 or 2: chroma subsampling across and down (1x1, 2x1, 2x2) */
    int ycbcr;              /* convert Y, Cb, Cr to RGB (JFIF); else the components are R, G, B */
} sp_jpeg_planes;

#ifdef __cplusplus
extern "C" {
#endif

/* Write the part (sx, sy, w, h) of the image into dst (rows of dst_stride bytes, bpp 3 or 4;
 * alpha 255), each pixel as jpeg_planes_math.h computes it (libjpeg-turbo's upsampling and
 * colour conversion of the same planes). */
int sp_cuda_launch_jpeg_planes(const sp_jpeg_planes *planes, int sx, int sy, int w, int h,
                               uint8_t *dst, int64_t dst_stride, int bpp, void *stream);

/* Fill w x h pixels of bpp (3 or 4) bytes at dst with `pixel`. */
int sp_cuda_launch_fill_pixels(uint8_t *dst, int64_t dst_stride, int64_t w, int64_t h, int bpp,
                               const uint8_t pixel[4], void *stream);

#ifdef __cplusplus
}
#endif

#endif
