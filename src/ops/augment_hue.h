/* augment_hue.h — the colour jitter's hue step over a run of pixels on the CPU: the bytes of
 * sp_aug_hue (augment_color_math.h) on every pixel, eight pixels at a time where the CPU has
 * AVX2 (augment_hue.c). */
#ifndef SP_OPS_AUGMENT_HUE_H
#define SP_OPS_AUGMENT_HUE_H

#include <stdint.h>

/* Shift the hue of `npixels` RGB8 pixels at `rgb` by `shift` (turns, in [-0.5, 0.5]), in place. */
void sp_hue_pixels(uint8_t *rgb, int64_t npixels, float shift);

#endif
