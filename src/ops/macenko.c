/* macenko.c — the `macenko` op: each pixel stain-normalized from the slide's own H&E stains to
 * the reference stains (Macenko's method, docs/stains.md), as uint8, three channels. A pixel op:
 * no halo. The slide's stains are estimated once before the run by the prepare hook, from the
 * whole slide's low-resolution image (not from the level or the tile), so every tile is mapped
 * by the same stains and a tile-wise run equals a whole-level one bit for bit. A slide with too
 * few stained pixels fails in prepare, before anything is written. The CUDA kernel
 * (src/cuda/cuda_stains.c, stain_kernels.cu) maps with the same table.
 */
#include <stdlib.h>

#include "ops/op.h"
#include "ops/stains.h"
#include "slide/overview.h"

static sp_status macenko_prepare(sp_slide *slide, sp_op_params *p, sp_err *err) {
    sp_status st = sp_stains_estimate_slide(slide, SP_OVERVIEW_DEFAULT_SIDE, &p->source, err);
    if (st != SP_OK) {
        return st;
    }
    sp_stains_reference(&p->target);
    /* Check now that the pair maps, so the workers' map_init cannot fail. */
    sp_stains_map map;
    return sp_stains_map_init(&p->source, &p->target, &map, err);
}

static int macenko_halo(const sp_op_params *p) {
    (void)p;
    return 0;
}

static sp_status macenko_cpu(const sp_op_params *p, const sp_op_block *b) {
    sp_stains_map map;
    sp_status st = sp_stains_map_init(&p->source, &p->target, &map, NULL);
    if (st != SP_OK) {
        return st;
    }
    for (int64_t y = 0; y < b->height; y++) {
        sp_stains_map_apply(&map, b->src + y * b->src_stride, b->width,
                            (uint8_t *)b->dst + y * b->dst_stride, 1, b->dst_plane);
    }
    return SP_OK;
}

const sp_op sp_op_macenko = {
    .name = "macenko",
    .parse = NULL,
    .prepare = macenko_prepare,
    .halo = macenko_halo,
    .input = SP_PIXEL_RGB8,
    .output = SP_ZARR_U8,
    .channels = 3,
    .scratch_floats = NULL,
    .cpu = macenko_cpu,
};
