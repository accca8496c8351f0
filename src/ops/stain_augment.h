/* stain_augment.h — the steps of sp_stains_augment (stain_augment.c) that the CUDA backend and
 * the tests use: the draws of one seed and the per-pixel map (docs/stains.md). */
#ifndef SP_OPS_STAIN_AUGMENT_H
#define SP_OPS_STAIN_AUGMENT_H

#include <stdint.h>

#include "slidepipe.h"

typedef struct sp_stain_augment_map {
    double h[3], e[3]; /* the slide's stains */
    double p[2][3];    /* the pseudo-inverse of [h e]: concentrations = p . od */
    double od[256];    /* -ln(max(v, 1) / 255) */
} sp_stain_augment_map;

/* alpha (h, e) in [1 - sigma, 1 + sigma] and beta (h, e) in [-sigma, sigma] of one seed. */
void sp_stain_augment_draw(uint64_t seed, double sigma, double alpha[2], double beta[2]);

/* SP_E_INVALID_ARG for NULL, non-finite, zero or parallel stains. */
sp_status sp_stain_augment_init(const sp_stains *stains, sp_stain_augment_map *map);

/* `n` interleaved RGB8 pixels in place. */
void sp_stain_augment_apply(const sp_stain_augment_map *map, const double alpha[2],
                            const double beta[2], uint8_t *rgb, int64_t n);

#endif
