/* pixel_hash.h — the pixel hash's definition (docs/pixel-hash.md) for the layers that compute it
 * while they write pixels: a hasher that takes any rectangles of a pyramid's RGB8 levels, in any
 * order and from any thread, hashes each fixed 256 x 256 block as soon as all of its pixels have
 * arrived, and folds the block digests in the fixed order when every block is in. sp_pixel_hash
 * (slidepipe.h) reads a slide through the same hasher; convert and process feed it the arrays
 * they write, so a store's recorded hash and one computed from its pixels agree by construction.
 */
#ifndef SP_SLIDE_PIXEL_HASH_H
#define SP_SLIDE_PIXEL_HASH_H

#include <stdint.h>

#include "base/err.h"
#include "slidepipe.h"

/* The side of the fixed block grid, from (0, 0) of every level. */
#define SP_PIXEL_HASH_BLOCK 256

typedef struct sp_pixel_hasher sp_pixel_hasher;

/* A hasher for `levels` levels of the given sizes (each side >= 1). */
sp_status sp_pixel_hasher_create(int32_t levels, const int64_t *widths, const int64_t *heights,
                                 sp_pixel_hasher **out, sp_err *err);

/* Give w x h pixels of `level` whose top-left is (x, y) in that level's pixels (the rectangle
 * must lie inside the level): sample c (R, G, B) of pixel (i, j) of the rectangle is
 * src[c][j * stride + i * step] — interleaved RGB is src = {p, p + 1, p + 2} with step 3, planes
 * have step 1, a grey plane is the same pointer three times. Each pixel must be given exactly
 * once. Thread-safe; a block is hashed by the thread that completes it, and a block that one call
 * covers whole is hashed straight from `src`, without a copy. SP_E_NOMEM, or SP_E_INVALID_ARG for
 * a rectangle outside the level. */
sp_status sp_pixel_hasher_put(sp_pixel_hasher *h, int32_t level, int64_t x, int64_t y, int64_t w,
                              int64_t rows, const uint8_t *const src[3], int64_t step,
                              int64_t stride, sp_err *err);

/* The pixel hash as 64 lowercase hex digits and a NUL (hex: 65 bytes) once every pixel of every
 * level has been given; SP_E_INVALID_ARG when a block is still incomplete. */
sp_status sp_pixel_hasher_finish(sp_pixel_hasher *h, char *hex, sp_err *err);

/* Free a hasher (NULL is accepted), with any partly filled blocks. */
void sp_pixel_hasher_free(sp_pixel_hasher *h);

#endif
