/* fill.h — filling a rectangle of a caller's buffer with one pixel value, fast: the region
 * painter writes "empty" (transparent, or the background colour) only where no tile paints,
 * instead of clearing the whole request first and painting over it. */
#ifndef SP_BASE_FILL_H
#define SP_BASE_FILL_H

#include <stdint.h>
#include <string.h>

/* Fill w x h pixels of bpp (3 or 4) bytes at dst (rows of `stride` bytes) with px[0..bpp). The
 * first row is built by doubling copies, the others are copies of it. */
static inline void sp_fill_pixels(uint8_t *dst, int64_t stride, int64_t w, int64_t h, int bpp,
                                  const uint8_t px[4]) {
    if (w <= 0 || h <= 0) {
        return;
    }
    size_t row = (size_t)(w * bpp);
    if (px[0] == px[1] && px[1] == px[2] && (bpp == 3 || px[2] == px[3])) {
        for (int64_t y = 0; y < h; y++) {
            memset(dst + y * stride, px[0], row);
        }
        return;
    }
    memcpy(dst, px, (size_t)bpp);
    for (size_t done = (size_t)bpp; done < row;) {
        size_t n = done < row - done ? done : row - done;
        memcpy(dst + done, dst, n);
        done += n;
    }
    for (int64_t y = 1; y < h; y++) {
        memcpy(dst + y * stride, dst, row);
    }
}

/* Fill the part of the area (x, y, w, h) at dst that lies outside a decoded image [0, vw) x
 * [0, vh) (area and image in the same coordinates) with px: what a partial tile decode leaves
 * where the tile has no pixels. */
static inline void sp_fill_uncovered(uint8_t *dst, int64_t stride, uint64_t x, uint64_t y,
                                     uint64_t w, uint64_t h, uint64_t vw, uint64_t vh, int bpp,
                                     const uint8_t px[4]) {
    uint64_t rows_in = vh > y ? (vh - y < h ? vh - y : h) : 0;
    uint64_t cols_in = vw > x ? (vw - x < w ? vw - x : w) : 0;
    sp_fill_pixels(dst + cols_in * (uint64_t)bpp, stride, (int64_t)(w - cols_in),
                   (int64_t)rows_in, bpp, px);
    sp_fill_pixels(dst + rows_in * (uint64_t)stride, stride, (int64_t)w, (int64_t)(h - rows_in),
                   bpp, px);
}

#endif
