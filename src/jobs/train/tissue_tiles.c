/* tissue_tiles.c — sp_tissue_tiles: the tiles of a regular grid over one level that hold enough
 * tissue under a mask (tissue.c), the list a training loader draws its patches from. A tile's
 * fraction is measured on the mask pixels whose centres fall inside the tile's level-0 rectangle
 * (docs/tissue.md); those pixels always form a rectangle of the mask, so a summed-area table of
 * the mask answers each tile with four lookups, and which mask columns (rows) a grid column
 * (row) covers is worked out once per column (row), not per tile. A grid of millions of tiles
 * thus costs milliseconds.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/level_coords.h"
#include "jobs/train/tissue_internal.h"

/* Which mask pixels along one axis a run of grid positions covers. */
typedef struct axis_span {
    int64_t origin;     /* level-0 coordinate of the tile's first pixel */
    int64_t lo, hi;     /* mask pixels [lo, hi) have their centres inside the tile */
    int64_t containing; /* the mask pixel holding the tile's centre (when lo == hi) */
} axis_span;

static double centre(int64_t i, double dm) {
    return ((double)i + 0.5) * dm;
}

/* The first mask pixel in [0, n] whose centre is at or after v (n when none). */
static int64_t first_centre_from(double v, double dm, int64_t n) {
    double guess = ceil(v / dm - 0.5);
    int64_t i = guess < 0 ? 0 : guess > (double)n ? n : (int64_t)guess;
    while (i > 0 && centre(i - 1, dm) >= v) {
        i--;
    }
    while (i < n && centre(i, dm) < v) {
        i++;
    }
    return i;
}

/* The grid positions along one axis of a level of `extent` pixels, or NULL when out of memory;
 * *count is 0 (and the result non-NULL) when the tile does not fit. */
static axis_span *axis_spans(int64_t extent, int64_t size, int64_t stride, double level_ds,
                             double dm, int64_t mask_extent, int64_t *count) {
    int64_t n = extent >= size ? (extent - size) / stride + 1 : 0;
    axis_span *s = malloc((size_t)(n ? n : 1) * sizeof *s);
    if (s == NULL) {
        return NULL;
    }
    double span = (double)size * level_ds;
    for (int64_t k = 0; k < n; k++) {
        int64_t x0 = sp_level0_coord(k * stride, level_ds);
        s[k].origin = x0;
        s[k].lo = first_centre_from((double)x0, dm, mask_extent);
        s[k].hi = first_centre_from((double)x0 + span, dm, mask_extent);
        double c = floor(((double)x0 + span / 2.0) / dm);
        s[k].containing = c < 0 ? 0 : c >= (double)mask_extent ? mask_extent - 1 : (int64_t)c;
    }
    *count = n;
    return s;
}

sp_status sp_tissue_grid(const sp_tissue_mask *mask, double level_ds, int64_t level_w,
                         int64_t level_h, int64_t size, int64_t stride, double min_tissue,
                         sp_tile **tiles, size_t *count) {
    *tiles = NULL;
    *count = 0;
    int64_t mw = mask->width, mh = mask->height;
    double dm = mask->downsample;
    int64_t nx = 0, ny = 0;
    axis_span *xs = axis_spans(level_w, size, stride, level_ds, dm, mw, &nx);
    axis_span *ys = axis_spans(level_h, size, stride, level_ds, dm, mh, &ny);
    /* Summed-area table: sat[j][i] = tissue pixels in rows < j, columns < i. A mask has at most
     * 2^28 pixels, so 32 bits hold every sum (and unsigned wrap-around cancels in differences). */
    size_t sat_w = (size_t)mw + 1;
    uint32_t *sat = calloc(sat_w * ((size_t)mh + 1), sizeof *sat);
    sp_tile *list = NULL;
    size_t n = 0, cap = 0;
    sp_status st = SP_OK;
    if (xs == NULL || ys == NULL || sat == NULL) {
        st = SP_E_NOMEM;
        goto done;
    }
    for (int64_t j = 0; j < mh; j++) {
        uint32_t row = 0;
        const uint8_t *m = mask->pixels + j * mw;
        uint32_t *above = sat + (size_t)j * sat_w, *here = above + sat_w;
        for (int64_t i = 0; i < mw; i++) {
            row += m[i] != 0;
            here[i + 1] = above[i + 1] + row;
        }
    }
    for (int64_t ty = 0; ty < ny; ty++) {
        const axis_span *y = &ys[ty];
        for (int64_t tx = 0; tx < nx; tx++) {
            const axis_span *x = &xs[tx];
            double fraction;
            if (x->lo < x->hi && y->lo < y->hi) {
                const uint32_t *top = sat + (size_t)y->lo * sat_w;
                const uint32_t *bottom = sat + (size_t)y->hi * sat_w;
                uint32_t in = bottom[x->hi] - bottom[x->lo] - top[x->hi] + top[x->lo];
                fraction = (double)in / ((double)(x->hi - x->lo) * (double)(y->hi - y->lo));
            } else {
                fraction = mask->pixels[y->containing * mw + x->containing] ? 1.0 : 0.0;
            }
            if (!(fraction >= min_tissue)) {
                continue;
            }
            if (n == cap) {
                size_t grown = cap ? cap * 2 : 1024;
                sp_tile *more =
                    grown < SIZE_MAX / sizeof *more ? realloc(list, grown * sizeof *more) : NULL;
                if (more == NULL) {
                    st = SP_E_NOMEM;
                    goto done;
                }
                list = more;
                cap = grown;
            }
            list[n++] = (sp_tile){.x = x->origin, .y = y->origin, .tissue = fraction};
        }
    }
done:
    free(xs);
    free(ys);
    free(sat);
    if (st != SP_OK || n == 0) {
        free(list);
        return st;
    }
    *tiles = list;
    *count = n;
    return SP_OK;
}

sp_status sp_tissue_tiles(const sp_slide *slide, const sp_tissue_mask *mask, int32_t level,
                          int64_t size, int64_t stride, double min_tissue, sp_tile **tiles,
                          size_t *count) {
    if (tiles != NULL) {
        *tiles = NULL;
    }
    if (count != NULL) {
        *count = 0;
    }
    int64_t lw, lh;
    double ds;
    if (slide == NULL || mask == NULL || tiles == NULL || count == NULL || size < 1 || stride < 0 ||
        !(min_tissue >= 0 && min_tissue <= 1) || mask->pixels == NULL || mask->width < 1 ||
        mask->height < 1 || !(mask->downsample >= 1) ||
        (uint64_t)mask->width * (uint64_t)mask->height > (UINT64_C(1) << 31) ||
        sp_slide_level_dimensions(slide, level, &lw, &lh) != SP_OK ||
        sp_slide_level_downsample(slide, level, &ds) != SP_OK) {
        return SP_E_INVALID_ARG;
    }
    return sp_tissue_grid(mask, ds, lw, lh, size, stride ? stride : size, min_tissue, tiles, count);
}

void sp_tiles_free(sp_tile *tiles) {
    free(tiles);
}
