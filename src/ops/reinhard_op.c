/* reinhard_op.c — the `reinhard` op: each pixel Reinhard-normalized (docs/stains.md) from the
 * slide's own colour statistics to the reference statistics, as uint8, three channels. A pixel
 * op: no halo. As with `macenko`, the slide's statistics are estimated once by the prepare hook
 * from the whole slide's low-resolution image, so every tile is mapped alike and a tile-wise run
 * equals a whole-level one bit for bit; a slide without tissue fails before anything is written.
 */
#include "ops/op.h"
#include "ops/reinhard.h"
#include "slide/overview.h"

static sp_status reinhard_prepare(sp_slide *slide, sp_op_params *p, sp_err *err) {
    sp_status st =
        sp_reinhard_estimate_slide(slide, SP_OVERVIEW_DEFAULT_SIDE, &p->colour_source, err);
    if (st != SP_OK) {
        return st;
    }
    sp_reinhard_reference(&p->colour_target);
    sp_reinhard_map map;
    return sp_reinhard_map_init(&p->colour_source, &p->colour_target, &map, err);
}

static int reinhard_halo(const sp_op_params *p) {
    (void)p;
    return 0;
}

static sp_status reinhard_cpu(const sp_op_params *p, const sp_op_block *b) {
    sp_reinhard_map map;
    sp_status st = sp_reinhard_map_init(&p->colour_source, &p->colour_target, &map, NULL);
    if (st != SP_OK) {
        return st;
    }
    for (int64_t y = 0; y < b->height; y++) {
        sp_reinhard_map_apply(&map, b->src + y * b->src_stride, b->width,
                              (uint8_t *)b->dst + y * b->dst_stride, 1, b->dst_plane);
    }
    return SP_OK;
}

const sp_op sp_op_reinhard = {
    .name = "reinhard",
    .parse = NULL,
    .prepare = reinhard_prepare,
    .halo = reinhard_halo,
    .input = SP_PIXEL_RGB8,
    .output = SP_ZARR_U8,
    .channels = 3,
    .scratch_floats = NULL,
    .cpu = reinhard_cpu,
};
