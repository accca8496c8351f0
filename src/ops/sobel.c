/* sobel.c — the `sobel` op: per channel, the gradient magnitude sqrt(gy² + gx²) where gy and gx
 * are the 3x3 Sobel derivatives along rows (axis 0) and columns (axis 1) exactly as
 * scipy.ndimage.sobel computes them (derivative [-1, 0, 1] along the axis, smoothing [1, 2, 1]
 * across it), as float32, three channels. Halo 1.
 *
 * The input is 8-bit, so gx and gy are integers of at most 1020 in magnitude and gx² + gy² is an
 * integer below 2^24: every step is exact in float32, and the result is the correctly rounded
 * float32 of the exact magnitude (scipy in float64, rounded, gives the same number). The block is
 * split into three uint8 planes once, then each output row is made from three input rows in two
 * row-wise passes (smooth / difference down the columns in int16, then across) that compilers
 * vectorise.
 */
#include <math.h>

#include "ops/op.h"

static int sobel_halo(const sp_op_params *p) {
    (void)p;
    return 1;
}

/* Three uint8 channel planes of (w + 2) x (h + 2), and two int16 rows of w + 2, in floats. */
static size_t sobel_scratch(const sp_op_params *p, int64_t w, int64_t h) {
    (void)p;
    size_t bytes = (size_t)(3 * (w + 2) * (h + 2) + 2 * 2 * (w + 2));
    return (bytes + sizeof(float) - 1) / sizeof(float) + 1;
}

/* One output row from three input rows of one channel. The smoothing and the differences are
 * exact in int16 (|s| <= 1020, |gx| <= 1020, |gy| <= 1020), which the compiler runs eight
 * pixels at a time; only the magnitude goes through float. */
SP_OPS_SIMD static void sobel_row(const uint8_t *restrict a, const uint8_t *restrict b,
                      const uint8_t *restrict c, int16_t *restrict s, int16_t *restrict d,
                      float *restrict out, int64_t w) {
    for (int64_t x = 0; x < w + 2; x++) {
        s[x] = (int16_t)(a[x] + 2 * b[x] + c[x]);
        d[x] = (int16_t)(c[x] - a[x]);
    }
    for (int64_t x = 0; x < w; x++) {
        float gx = (float)(int16_t)(s[x + 2] - s[x]);
        float gy = (float)(int16_t)(d[x] + 2 * d[x + 1] + d[x + 2]);
        out[x] = sqrtf(gx * gx + gy * gy);
    }
}

/* One interleaved RGB row into three planes. */
SP_OPS_SIMD static void split_row(const uint8_t *restrict in, uint8_t *restrict r0,
                                  uint8_t *restrict g0, uint8_t *restrict b0, int64_t n) {
    for (int64_t x = 0; x < n; x++) {
        r0[x] = in[3 * x];
        g0[x] = in[3 * x + 1];
        b0[x] = in[3 * x + 2];
    }
}

static sp_status sobel_cpu(const sp_op_params *p, const sp_op_block *b) {
    (void)p;
    int64_t pw = b->width + 2, ph = b->height + 2;
    uint8_t *planes = (uint8_t *)b->scratch;
    int16_t *s = (int16_t *)(void *)(planes + 3 * pw * ph + (3 * pw * ph) % 2), *d = s + pw;
    uint8_t *r = planes, *g = r + pw * ph, *bl = g + pw * ph;
    const uint8_t *src = b->src - b->src_stride - 3;
    for (int64_t y = 0; y < ph; y++) {
        split_row(src + y * b->src_stride, r + y * pw, g + y * pw, bl + y * pw, pw);
    }
    for (int c = 0; c < 3; c++) {
        const uint8_t *plane = planes + c * pw * ph;
        float *out = (float *)b->dst + c * b->dst_plane;
        for (int64_t y = 0; y < b->height; y++) {
            const uint8_t *row = plane + y * pw;
            sobel_row(row, row + pw, row + 2 * pw, s, d, out + y * b->dst_stride, b->width);
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
};
