/* spectrum_grey.c — the `spectrum-grey` op: each RGB8 pixel's grey value as float32, computed
 * exactly as the spectral statistics' reference does (numpy's float32 matrix product:
 * (0.299 R + 0.587 G) + 0.114 B, each product rounded to float, no fused multiply-add; ops build
 * with -ffp-contract=off). The spectrum job streams a level through it on the tile engine and
 * hands its output to sp_spectrum_patch_grey, which therefore sees the same floats that
 * sp_spectrum_patch computes from RGB8. A pixel op: no halo, no scratch.
 */
#include "ops/spectrum_grey.h"

static int spectrum_grey_halo(const sp_op_params *p) {
    (void)p;
    return 0;
}

/* One row; the compiler vectorises it (an AVX2 copy beside the baseline one). */
SP_OPS_SIMD
static void grey_row(const uint8_t *restrict s, float *restrict o, int64_t width) {
    for (int64_t x = 0; x < width; x++) {
        o[x] = ((float)s[3 * x] * 0.299f + (float)s[3 * x + 1] * 0.587f) +
               (float)s[3 * x + 2] * 0.114f;
    }
}

static sp_status spectrum_grey_cpu(const sp_op_params *p, const sp_op_block *b) {
    (void)p;
    for (int64_t y = 0; y < b->height; y++) {
        grey_row(b->src + y * b->src_stride, (float *)b->dst + y * b->dst_stride, b->width);
    }
    return SP_OK;
}

const sp_op sp_op_spectrum_grey = {
    .name = "spectrum-grey",
    .parse = NULL,
    .prepare = NULL,
    .halo = spectrum_grey_halo,
    .input = SP_PIXEL_RGB8,
    .output = SP_ZARR_F32,
    .channels = 1,
    .scratch_floats = NULL,
    .cpu = spectrum_grey_cpu,
};
