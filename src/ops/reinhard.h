/* reinhard.h — the parts of Reinhard colour transfer (reinhard.c) that the `reinhard` op, the
 * CUDA backend and the unit tests use below the public API: the colour conversions, the
 * statistics of a pixel array and the per-pixel map. docs/stains.md defines every step.
 */
#ifndef SP_OPS_REINHARD_H
#define SP_OPS_REINHARD_H

#include <stdint.h>

#include "base/err.h"
#include "slidepipe.h"

/* A pixel counts as tissue for the statistics when some channel is at most this (optical
 * density >= 0.15 in at least one channel, the stain estimate's beta). */
#define SP_REINHARD_TISSUE_MAX 219
/* Fewer tissue pixels than this: no estimate from a slide. */
#define SP_REINHARD_MIN_PIXELS 1000

/* sRGB (8 bit) to CIELAB (D65; L in [0, 100]) in double, and back to 8 bit (clipped to [0, 1],
 * then floor(255 v + 0.5)). */
void sp_reinhard_rgb_to_lab(const uint8_t rgb[3], double lab[3]);
void sp_reinhard_lab_to_rgb(const double lab[3], uint8_t rgb[3]);

/* The inverse of the sRGB-to-XYZ matrix, as the CPU map uses it (the CUDA kernel takes it from
 * here so both backends use the same numbers). */
void sp_reinhard_xyz_to_rgb(double inv[3][3]);

/* The per-channel map in LAB: lab' = (lab - source_mean) / source_std * target_std +
 * target_mean, evaluated in that order. */
typedef struct sp_reinhard_map {
    double source_mean[3], source_std[3], target_mean[3], target_std[3];
} sp_reinhard_map;

/* SP_E_INVALID_ARG with a message for NULL or invalid statistics (either set). */
sp_status sp_reinhard_map_init(const sp_reinhard_stats *source, const sp_reinhard_stats *target,
                               sp_reinhard_map *map, sp_err *err);

/* Map `n` interleaved RGB8 pixels; output channel k of pixel i goes to
 * out[i * pixel_step + k * channel_step] (as sp_stains_map_apply). */
void sp_reinhard_map_apply(const sp_reinhard_map *map, const uint8_t *rgb, int64_t n, uint8_t *out,
                           int64_t pixel_step, int64_t channel_step);

/* As sp_reinhard_estimate, with the internal error record. */
sp_status sp_reinhard_estimate_slide(sp_slide *slide, int64_t max_side, sp_reinhard_stats *out,
                                     sp_err *err);

/* SP_OK when every number of `s` is valid (docs/stains.md), else SP_E_INVALID_ARG with a
 * message naming `which`. */
sp_status sp_reinhard_check(const sp_reinhard_stats *s, const char *which, sp_err *err);

#endif
