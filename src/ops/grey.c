/* grey.c — the `grey` op: BT.601 luma of each RGB8 pixel, as uint8, one channel.
 *
 * Y = (299 R + 587 G + 114 B + 500) / 1000 in integers (the BT.601 weights 0.299, 0.587, 0.114,
 * rounded half up), so every machine and backend gives the same bytes. A pixel op: no halo.
 */
#include "ops/op.h"

static int grey_halo(const sp_op_params *p) {
    (void)p;
    return 0;
}

static sp_status grey_cpu(const sp_op_params *p, const sp_op_block *b) {
    (void)p;
    for (int64_t y = 0; y < b->height; y++) {
        const uint8_t *restrict s = b->src + y * b->src_stride;
        uint8_t *restrict o = (uint8_t *)b->dst + y * b->dst_stride;
        for (int64_t x = 0; x < b->width; x++) {
            uint32_t v = 299u * s[3 * x] + 587u * s[3 * x + 1] + 114u * s[3 * x + 2] + 500u;
            o[x] = (uint8_t)(v / 1000u);
        }
    }
    return SP_OK;
}

const sp_op sp_op_grey = {
    .name = "grey",
    .parse = NULL,
    .halo = grey_halo,
    .input = SP_PIXEL_RGB8,
    .output = SP_ZARR_U8,
    .channels = 1,
    .scratch_floats = NULL,
    .cpu = grey_cpu,
};
