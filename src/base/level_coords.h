/* level_coords.h — the mapping between level-0 coordinates (what region reads take) and a
 * level's own pixel coordinates (what they read): level = floor(level0 / downsample). */
#ifndef SP_BASE_LEVEL_COORDS_H
#define SP_BASE_LEVEL_COORDS_H

#include <stdint.h>

/* The smallest level-0 coordinate c with floor(c / downsample) == level_coord, so that a read
 * split into bands (or tiles) at level coordinates addresses exactly the pixels of the whole
 * read, even with a fractional downsample. |level_coord| must be below 2^52. */
int64_t sp_level0_coord(int64_t level_coord, double downsample);

#endif
