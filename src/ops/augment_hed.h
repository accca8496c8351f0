/* augment_hed.h — what sp_augment_patch does to one patch, worked out from its seed before any
 * pixel is touched (augment.c), so that the CPU and the GPU kernel (augment_hed_kernels.cu) apply
 * the very same numbers: the HED jitter as 9 factor tables and 3 scales (channel c of a pixel
 * becomes scale[c] * factor[0][c][R] * factor[1][c][G] * factor[2][c][B], rounded), and the flip. */
#ifndef SP_OPS_AUGMENT_HED_H
#define SP_OPS_AUGMENT_HED_H

#include <stdint.h>

typedef struct sp_hed_plan {
    float factor[3][3][256];
    float scale[3];
    int32_t jitter; /* the tables apply */
    int32_t flip;   /* 0..7 (docs/train.md), or -1 for none */
} sp_hed_plan;

/* The plan of the patch of `seed` for `dihedral` (on or off) and `sigma` in [0, 1]. */
void sp_hed_plan_make(uint64_t seed, int dihedral, double sigma, sp_hed_plan *plan);

/* Where output pixel (y, x) of a size x size patch comes from under flip t (0..7): the source
 * pixel's (y, x). Transpose (t & 4), then reverse rows (t & 2), then reverse each row (t & 1),
 * undone from the outside in. */
#ifdef __CUDACC__
__host__ __device__
#endif
static inline void sp_hed_flip_source(int32_t t, int64_t size, int64_t *y, int64_t *x) {
    if (t & 1) {
        *x = size - 1 - *x;
    }
    if (t & 2) {
        *y = size - 1 - *y;
    }
    if (t & 4) {
        int64_t swap = *y;
        *y = *x;
        *x = swap;
    }
}

#endif
