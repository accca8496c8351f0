/* he_texture.h — the picture of the synthetic slide: a pure function from a level-0 pixel
 * position to an RGB colour that looks like an H&E-stained tissue section on glass.
 *
 * A model is fixed by (size, seed) and never changes after creation, so several threads may
 * render from one model, each with its own scratch. Rendering works a tile at a time only for
 * speed (slow fields are computed on a coarse lattice and interpolated, nuclei are stamped);
 * every pixel's colour depends on its position alone, never on which tile it was rendered in.
 */
#ifndef SP_JOBS_SYNTH_HE_TEXTURE_H
#define SP_JOBS_SYNTH_HE_TEXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

/* The largest width and height sp_he_render draws in one call. */
#define SP_HE_MAX_TILE 256

typedef struct sp_he_model sp_he_model;
typedef struct sp_he_scratch sp_he_scratch;

/* Build the model of a size x size slide: where the tissue lies and the slide-wide constants. */
sp_status sp_he_model_create(int64_t size, uint64_t seed, sp_he_model **out, sp_err *err);
void sp_he_model_destroy(sp_he_model *model);

/* Working memory for one rendering thread (about 0.7 MB). */
sp_status sp_he_scratch_create(sp_he_scratch **out, sp_err *err);
void sp_he_scratch_destroy(sp_he_scratch *scratch);

/* Draw level-0 pixels [x0, x0 + width) x [y0, y0 + height) as RGB8 into `rgb`, rows `stride`
 * bytes apart. x0 and y0 must be multiples of 8 and width, height at most SP_HE_MAX_TILE. */
void sp_he_render(const sp_he_model *model, sp_he_scratch *scratch, int64_t x0, int64_t y0,
                  int width, int height, uint8_t *rgb, size_t stride);

#endif
