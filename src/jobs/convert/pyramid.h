/* pyramid.h — the pixel kernel of the OME-Zarr converter: the 2x2 reducer that makes each
 * pyramid level from the one above, and the split of interleaved RGB into planes.
 *
 * A level k+1 pixel is the mean of the 2x2 block of level k pixels above it, per channel, rounded
 * half up: (a + b + c + d + 2) >> 2. The last row and column of an odd-sized level have no partner
 * and are dropped, so level k+1 is floor(W / 2) x floor(H / 2). Integer arithmetic only, so every
 * machine, thread count and code path (scalar or SIMD) produces the same bytes.
 */
#ifndef SP_JOBS_CONVERT_PYRAMID_H
#define SP_JOBS_CONVERT_PYRAMID_H

#include <stdint.h>

/* Reduce two consecutive rows of one channel (`top` and `bottom`, each at least 2 * out_width
 * bytes) into `out` (out_width bytes). */
void sp_pyramid_reduce_plane(const uint8_t *top, const uint8_t *bottom, uint8_t *out,
                             int64_t out_width);

/* Reduce two consecutive rows of interleaved 3-channel pixels (`top` and `bottom`, each at least
 * 2 * out_width pixels) into `out` (out_width pixels). */
void sp_pyramid_reduce_rgb(const uint8_t *top, const uint8_t *bottom, uint8_t *out,
                           int64_t out_width);

#endif
