/* tissue_internal.h — the slide-free steps of the tissue mask and the tile selection
 * (docs/tissue.md), exposed so that tests/unit/test_tissue.c can check each on hand-made data. */
#ifndef SP_JOBS_TRAIN_TISSUE_INTERNAL_H
#define SP_JOBS_TRAIN_TISSUE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "slidepipe.h"

/* The least threshold: chroma at or below it is never tissue, whatever Otsu picks. */
#define SP_TISSUE_MIN_CHROMA 8


/* Otsu's threshold of a 256-bin histogram: the t in 0..254 maximising w0 * w1 * (mu0 - mu1)^2
 * with class 0 = bins <= t; the smallest such t; 0 for an empty or one-valued histogram. */
int sp_tissue_otsu(const uint64_t hist[256]);

/* closing(opening(mask)) with a 3x3 square, pixels outside the image counting as 0 (scipy's
 * binary_opening then binary_closing with border_value 0), in place on 0/1 pixels.
 * SP_E_NOMEM when the scratch buffers cannot be allocated (mask unchanged). */
sp_status sp_tissue_clean(uint8_t *mask, int64_t width, int64_t height);

/* The tiles of the grid over a level of level_w x level_h pixels with downsample level_ds,
 * selected by `mask` (sp_tissue_tiles without the slide; arguments already checked). */
sp_status sp_tissue_grid(const sp_tissue_mask *mask, double level_ds, int64_t level_w,
                         int64_t level_h, int64_t size, int64_t stride, double min_tissue,
                         sp_tile **tiles, size_t *count);

#endif
