/* augment_color_rows.h — the colour jitter's per-pixel steps over a run of pixels on the CPU:
 * the bytes of sp_aug_hue and sp_aug_jitter_step (augment_color_math.h) on every pixel, eight
 * pixels at a time where the CPU has AVX2 (augment_color_rows.c). */
#ifndef SP_OPS_AUGMENT_COLOR_ROWS_H
#define SP_OPS_AUGMENT_COLOR_ROWS_H

#include <stdint.h>

/* Shift the hue of `npixels` RGB8 pixels at `rgb` by `shift` (turns, in [-0.5, 0.5]), in place. */
void sp_hue_pixels(uint8_t *rgb, int64_t npixels, float shift);

/* The saturation step: each channel blended with the pixel's grey (ratio and rest as
 * sp_jitter_ratio gives them), in place. */
void sp_saturation_pixels(uint8_t *rgb, int64_t npixels, float ratio, float rest);

#endif
