/* jpeg_planes_math.h — one output pixel from a JPEG's decoded component planes, as libjpeg-turbo
 * computes it with its default settings: chroma upsampled by the "fancy" triangle filter and
 * YCbCr converted with the fixed-point JFIF equations. Shared word for word by the GPU kernel
 * (jpeg_planes.cu) and the unit test that checks it against libjpeg on the CPU
 * (tests/unit/test_jpeg_planes.c), so the GPU path's only difference from the CPU path is the
 * decoder's inverse DCT.
 *
 * The filter (libjpeg's documentation of its h2v1 and h2v2 fancy upsampling): an output sample
 * lies 1/4 of an input sample from its nearer input and 3/4 from the farther one, so it is
 * (3 * nearer + farther) / 4, with rounding biases alternating between the two outputs of an
 * input (1 and 2 for h2v1; h2v2 first forms vertical sums 3 * nearer row + farther row, then
 * (3 * nearer sum + farther sum + 8 or 7) / 16); beyond the plane's edges the edge sample is used.
 * Colour, in 16.16 fixed point with Cb' = Cb - 128, Cr' = Cr - 128: R = Y + round(1.402 Cr'),
 * B = Y + round(1.772 Cb'), G = Y + floor(-0.34414 Cb' - 0.71414 Cr' + 1/2), clamped to 0..255. */
#ifndef SP_CUDA_JPEG_PLANES_MATH_H
#define SP_CUDA_JPEG_PLANES_MATH_H

#include <stdint.h>

#include "cuda/jpeg_planes.h"

#ifdef __CUDACC__
#define SP_JPEG_HD __host__ __device__
#else
#define SP_JPEG_HD
#endif

/* libjpeg's FIX(x): x in 16.16 fixed point, rounded */
#define SP_JPEG_FIX(x) ((int32_t)((x)*65536.0 + 0.5))

SP_JPEG_HD static inline int sp_jpeg_clamp_index(int i, int n) {
    return i < 0 ? 0 : i >= n ? n - 1 : i;
}

SP_JPEG_HD static inline uint8_t sp_jpeg_clamp8(int v) {
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* Component c (1 or 2) at image pixel (x, y). */
SP_JPEG_HD static inline int sp_jpeg_chroma_at(const sp_jpeg_planes *p, int c, int x, int y) {
    const uint8_t *pl = p->plane[c];
    int64_t pitch = p->pitch[c];
    if (p->h_factor == 1 && p->v_factor == 1) {
        return pl[(int64_t)y * pitch + x];
    }
    int i = x >> 1;
    int left = (x & 1) == 0; /* an even output sample: its farther input is to the left */
    int far = sp_jpeg_clamp_index(left ? i - 1 : i + 1, p->chroma_width);
    if (p->v_factor == 1) { /* h2v1 */
        const uint8_t *row = pl + (int64_t)y * pitch;
        return (3 * row[i] + row[far] + (left ? 1 : 2)) >> 2;
    }
    /* h2v2: even output rows pair with the input row above, odd ones with the row below */
    int r = y >> 1;
    int rn = sp_jpeg_clamp_index((y & 1) == 0 ? r - 1 : r + 1, p->chroma_height);
    const uint8_t *row = pl + (int64_t)r * pitch, *other = pl + (int64_t)rn * pitch;
    int near_sum = 3 * row[i] + other[i];
    int far_sum = 3 * row[far] + other[far];
    return (3 * near_sum + far_sum + (left ? 8 : 7)) >> 4;
}

/* The RGB pixel at image pixel (x, y). */
SP_JPEG_HD static inline void sp_jpeg_pixel(const sp_jpeg_planes *p, int x, int y, uint8_t rgb[3]) {
    int c0 = p->plane[0][(int64_t)y * p->pitch[0] + x];
    int c1 = sp_jpeg_chroma_at(p, 1, x, y), c2 = sp_jpeg_chroma_at(p, 2, x, y);
    if (!p->ycbcr) {
        rgb[0] = (uint8_t)c0;
        rgb[1] = (uint8_t)c1;
        rgb[2] = (uint8_t)c2;
        return;
    }
    const int32_t half = 1 << 15;
    int32_t cb = c1 - 128, cr = c2 - 128;
    int32_t r_add = (SP_JPEG_FIX(1.40200) * cr + half) >> 16;
    int32_t b_add = (SP_JPEG_FIX(1.77200) * cb + half) >> 16;
    int32_t g_add = (-SP_JPEG_FIX(0.34414) * cb + half - SP_JPEG_FIX(0.71414) * cr) >> 16;
    rgb[0] = sp_jpeg_clamp8(c0 + r_add);
    rgb[1] = sp_jpeg_clamp8(c0 + g_add);
    rgb[2] = sp_jpeg_clamp8(c0 + b_add);
}

#endif
