/* stains_internal.h — the parts of Macenko stain estimation and normalization (stains.c) that the
 * `macenko` op and the unit tests use below the public API: the estimate from a pixel array, the
 * percentile rule, and the per-pixel stain map that normalization applies. docs/stains.md
 * defines every step.
 */
#ifndef SP_OPS_STAINS_H
#define SP_OPS_STAINS_H

#include <stdbool.h>
#include <stdint.h>

#include "base/err.h"
#include "slidepipe.h"

/* Keep pixels whose optical density is at least this in every channel. */
#define SP_STAINS_BETA 0.15
/* Fewer stained pixels than this: no estimate. */
#define SP_STAINS_MIN_PIXELS 1000

/* Estimate the stains from `npixels` interleaved RGB8 pixels (steps 2-7 of docs/stains.md).
 * out->pixels receives the number of stained pixels used. SP_E_UNSUPPORTED with a message when
 * too few pixels are stained or the result is degenerate; SP_E_NOMEM. On failure *out is
 * zeroed. */
sp_status sp_stains_estimate_rgb(const uint8_t *rgb, int64_t npixels, sp_stains *out, sp_err *err);

/* As sp_stains_estimate, with the internal error record. */
sp_status sp_stains_estimate_slide(sp_slide *slide, int64_t max_side, sp_stains *out, sp_err *err);

/* The p-th percentile (0 <= p <= 100) of n >= 1 values by numpy.percentile's default rule:
 * position p/100 * (n - 1) in the sorted values, linear interpolation between its neighbours
 * (numpy's _lerp). Reorders `values`. */
double sp_stains_percentile(double *values, int64_t n, double p);

/* What normalizing from one set of stains to another does to a pixel: out channel k is
 * 255 exp(-sum_j w[k][j] od_j), a 3x3 matrix applied to the optical densities. With reasonable
 * stains the exponential is split into per-channel factors looked up in `factor` (exp of a sum
 * = product of exps), so a pixel costs nine loads and multiplies and no exp. */
typedef struct sp_stains_map {
    double w[3][3];
    bool tabled;              /* factor[] is valid (else exp per pixel) */
    double factor[3][3][256]; /* exp(-w[k][j] * od(v)) */
    /* factor again with the output channel innermost, lanes[j][v] = {factor[0..2][j][v], 0}, so
     * that the three channels of a pixel are the lanes of one vector (when tabled) */
    __attribute__((aligned(32))) double lanes[3][256][4];
} sp_stains_map;

/* Build the map from `source` to `target`; SP_E_INVALID_ARG with a message for NULL, non-finite
 * or non-positive concentrations, non-finite, zero or parallel stain vectors. */
sp_status sp_stains_map_init(const sp_stains *source, const sp_stains *target, sp_stains_map *map,
                             sp_err *err);

/* The optical density of each byte value v: -ln(max(v, 1) / 255), as the maps use it. */
void sp_stains_od_table(double od[256]);

/* Map `n` interleaved RGB8 pixels; output channel k of pixel i goes to
 * out[i * pixel_step + k * channel_step] (pixel_step 3, channel_step 1: interleaved, in place
 * allowed; pixel_step 1, channel_step = plane: planar). */
void sp_stains_map_apply(const sp_stains_map *map, const uint8_t *rgb, int64_t n, uint8_t *out,
                         int64_t pixel_step, int64_t channel_step);

#endif
