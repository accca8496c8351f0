/* zarr_planes.h — interleaving the colour planes of a decoded Zarr chunk into pixel rows.
 *
 * Zarr chunks of an image are usually planar (c, y, x): a row of each channel lies apart from the
 * others. Reads want interleaved pixels: RGBA for tiles, RGB straight into a caller's rows. These
 * interleave n pixels of three or four planes, sixteen at a time with SIMD where the CPU has it;
 * the bytes are those of the plain loops.
 */
#ifndef SP_FORMATS_ZARR_PLANES_H
#define SP_FORMATS_ZARR_PLANES_H

#include <stdint.h>

/* n pixels of planes r, g, b and a (NULL: opaque, alpha 255) as RGBA at `out`. */
void sp_planes_to_rgba(const uint8_t *r, const uint8_t *g, const uint8_t *b, const uint8_t *a,
                       uint8_t *out, int64_t n);

/* n pixels of planes r, g and b as RGB at `out`. */
void sp_planes_to_rgb(const uint8_t *r, const uint8_t *g, const uint8_t *b, uint8_t *out,
                      int64_t n);

#endif
