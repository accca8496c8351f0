/* od.c — the `od` op: optical density per channel, -ln(max(I, 1) / 255), as float32, three
 * channels. Background white (255) is 0; black is clamped to I = 1 (ln 255 = 5.54) so the value
 * stays finite. A pixel op: no halo. The 256 possible values are computed once, in double
 * precision and rounded to float, so the result is the correctly rounded float of the formula.
 */
#include <math.h>
#include <pthread.h>

#include "ops/op.h"

static float od_table[256];
static pthread_once_t od_once = PTHREAD_ONCE_INIT;

static void od_init(void) {
    for (int i = 0; i < 256; i++) {
        od_table[i] = (float)-log((i < 1 ? 1.0 : (double)i) / 255.0);
    }
}

const float *sp_op_od_table(void) {
    pthread_once(&od_once, od_init);
    return od_table;
}

static int od_halo(const sp_op_params *p) {
    (void)p;
    return 0;
}

static sp_status od_cpu(const sp_op_params *p, const sp_op_block *b) {
    (void)p;
    pthread_once(&od_once, od_init);
    for (int c = 0; c < 3; c++) {
        for (int64_t y = 0; y < b->height; y++) {
            const uint8_t *restrict s = b->src + y * b->src_stride + c;
            float *restrict o = (float *)b->dst + c * b->dst_plane + y * b->dst_stride;
            for (int64_t x = 0; x < b->width; x++) {
                o[x] = od_table[s[3 * x]];
            }
        }
    }
    return SP_OK;
}

const sp_op sp_op_od = {
    .name = "od",
    .parse = NULL,
    .halo = od_halo,
    .input = SP_PIXEL_RGB8,
    .output = SP_ZARR_F32,
    .channels = 3,
    .scratch_floats = NULL,
    .cpu = od_cpu,
};
