/* fill.h — filling a rectangle of a caller's buffer with one pixel value, fast: the region
 * painter writes "empty" (transparent, or the background colour) only where no tile paints,
 * instead of clearing the whole request first and painting over it. */
#ifndef SP_CORE_FILL_H
#define SP_CORE_FILL_H

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

#endif
