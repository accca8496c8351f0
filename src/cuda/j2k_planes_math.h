/* j2k_planes_math.h — one output pixel from a JPEG 2000 tile's decoded component planes, as the
 * CPU decoder (src/codecs/jpeg2000.c) computes it from OpenJPEG's: each component's sample is
 * the one whose subsampled position holds the pixel (x >> shift, no interpolation), clamped to
 * the plane; Aperio's YCbCr (33003) is converted with the JFIF equations, R = Y + round(1.402 Cr'),
 * B = Y + round(1.772 Cb'), G = Y + ((round(65536 (1/2 - 0.34414 Cb')) + round(-65536 * 0.71414
 * Cr')) >> 16), with Cb' = Cb - 128 and Cr' = Cr - 128, rounding half away from zero as lround
 * does; clamped to 0..255. Shared word for word by the GPU kernel (j2k_planes.cu) and the unit
 * test that checks it against the CPU decoder (tests/unit/test_j2k_planes.c), so the GPU path's
 * only difference from the CPU path is the decoder's inverse wavelet transform. */
#ifndef SP_CUDA_J2K_PLANES_MATH_H
#define SP_CUDA_J2K_PLANES_MATH_H

#include <math.h>
#include <stdint.h>

#include "cuda/j2k_planes.h"

#ifdef __CUDACC__
#define SP_J2K_HD __host__ __device__
#else
#define SP_J2K_HD
#endif

SP_J2K_HD static inline uint8_t sp_j2k_clamp8(int v) {
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* Component c's sample for tile pixel (x, y). */
SP_J2K_HD static inline int sp_j2k_sample(const sp_j2k_planes *p, int c, int x, int y) {
    int cx = x >> p->shift_x[c], cy = y >> p->shift_y[c];
    cx = cx < p->width[c] ? cx : p->width[c] - 1;
    cy = cy < p->height[c] ? cy : p->height[c] - 1;
    return p->plane[c][(int64_t)cy * p->pitch[c] + cx];
}

SP_J2K_HD static inline void sp_j2k_pixel(const sp_j2k_planes *p, int x, int y, uint8_t rgb[3]) {
    int c0 = sp_j2k_sample(p, 0, x, y), c1 = sp_j2k_sample(p, 1, x, y),
        c2 = sp_j2k_sample(p, 2, x, y);
    if (!p->ycbcr) {
        rgb[0] = (uint8_t)c0;
        rgb[1] = (uint8_t)c1;
        rgb[2] = (uint8_t)c2;
        return;
    }
    int cb = c1 - 128, cr = c2 - 128;
    int g = (int)(lround(65536 * (0.5 - 0.34414 * cb)) + lround(65536 * -0.71414 * cr));
    rgb[0] = sp_j2k_clamp8(c0 + (int)lround(1.402 * cr));
    rgb[1] = sp_j2k_clamp8(c0 + (g >> 16));
    rgb[2] = sp_j2k_clamp8(c0 + (int)lround(1.772 * cb));
}

#endif
