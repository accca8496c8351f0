/* level_coords.c — from a level coordinate back to the level-0 coordinate that region reads
 * take (see level_coords.h). The product is only a first guess: with a fractional downsample,
 * floating-point rounding can put it one off, so it is corrected against the very expression the
 * region reader uses. */
#include <math.h>

#include "base/level_coords.h"

int64_t sp_level0_coord(int64_t level_coord, double downsample) {
    double target = (double)level_coord;
    int64_t c = (int64_t)ceil(target * downsample);
    while (floor((double)c / downsample) >= target) {
        c--;
    }
    while (floor((double)c / downsample) < target) {
        c++;
    }
    return c;
}
