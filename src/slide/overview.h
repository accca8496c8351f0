/* overview.h — the low-resolution image of a whole slide that the tissue mask and the stain
 * estimate are computed from (docs/tissue.md, "The image"). */
#ifndef SP_SLIDE_OVERVIEW_H
#define SP_SLIDE_OVERVIEW_H

#include <stdint.h>

#include "base/err.h"
#include "slidepipe.h"

/* The longer side when the caller passes 0, and the largest allowed. */
#define SP_OVERVIEW_DEFAULT_SIDE 2048
#define SP_OVERVIEW_MAX_SIDE 16384

typedef struct sp_overview {
    int64_t width, height;
    double downsample; /* level-0 pixels per image pixel, >= 1 */
    uint8_t *rgb;      /* width * height RGB8 pixels, malloc'd: the caller frees it */
} sp_overview;

/* Read the slide's image whose longer side is `max_side` (0: the default): downsample
 * d = max(1, longer level-0 side / max_side), width ceil(W0 / d) and height ceil(H0 / d), each
 * within [1, max_side], read with sp_slide_read_region_scaled as RGB8. `what` names the caller
 * in messages ("tissue mask"). SP_E_INVALID_ARG for max_side outside 0..16384; a failed read
 * returns its status with the slide's message. On failure *out is zeroed. */
sp_status sp_overview_read(sp_slide *slide, int64_t max_side, const char *what, sp_overview *out,
                           sp_err *err);

#endif
