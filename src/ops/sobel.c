/* sobel.c — the `sobel` op: per channel, the gradient magnitude sqrt(gy² + gx²) where gy and gx
 * are the 3x3 Sobel derivatives along rows (axis 0) and columns (axis 1) exactly as
 * scipy.ndimage.sobel computes them (derivative [-1, 0, 1] along the axis, smoothing [1, 2, 1]
 * across it), as float32, three channels. Halo 1.
 *
 * The input is 8-bit, so gx and gy are integers of at most 1020 in magnitude and gx² + gy² is an
 * integer below 2^24: every step is exact in float32, and the result is the correctly rounded
 * float32 of the exact magnitude (scipy in float64, rounded, gives the same number). Each channel
 * is turned into a float plane, then each output row is made from three input rows in two
 * row-wise passes (smooth / difference down the columns, then across) that compilers vectorise.
 */
#include <math.h>

#include "ops/op.h"

static int sobel_halo(const sp_op_params *p) {
    (void)p;
    return 1;
}

/* The channel plane ((w + 2) x (h + 2)) and two rows of w + 2. */
static size_t sobel_scratch(const sp_op_params *p, int64_t w, int64_t h) {
    (void)p;
    return (size_t)((w + 2) * (h + 2) + 2 * (w + 2));
}

static void sobel_row(const float *restrict a, const float *restrict b, const float *restrict c,
                      float *restrict s, float *restrict d, float *restrict out, int64_t w) {
    for (int64_t x = 0; x < w + 2; x++) {
        s[x] = a[x] + 2.0f * b[x] + c[x];
        d[x] = c[x] - a[x];
    }
    for (int64_t x = 0; x < w; x++) {
        float gx = s[x + 2] - s[x];
        float gy = d[x] + 2.0f * d[x + 1] + d[x + 2];
        out[x] = sqrtf(gx * gx + gy * gy);
    }
}

static sp_status sobel_cpu(const sp_op_params *p, const sp_op_block *b) {
    (void)p;
    int64_t pw = b->width + 2, ph = b->height + 2;
    float *plane = b->scratch, *s = plane + pw * ph, *d = s + pw;
    for (int c = 0; c < 3; c++) {
        sp_op_rgb_channel_to_float(b->src - b->src_stride - 3, b->src_stride, c, pw, ph, plane);
        float *out = (float *)b->dst + c * b->dst_plane;
        for (int64_t y = 0; y < b->height; y++) {
            const float *r = plane + y * pw;
            sobel_row(r, r + pw, r + 2 * pw, s, d, out + y * b->dst_stride, b->width);
        }
    }
    return SP_OK;
}

const sp_op sp_op_sobel = {
    .name = "sobel",
    .parse = NULL,
    .halo = sobel_halo,
    .input = SP_PIXEL_RGB8,
    .output = SP_ZARR_F32,
    .channels = 3,
    .scratch_floats = sobel_scratch,
    .cpu = sobel_cpu,
    .cuda = NULL,
};
