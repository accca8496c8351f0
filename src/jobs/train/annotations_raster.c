/* annotations_raster.c — sp_annotations_rasterize: an annotation set painted onto a label map
 * of a window at some resolution. Output pixel (i, j) stands for its centre, level-0 point
 * (x0 + (i + 0.5) d, y0 + (j + 0.5) d), and takes the class of the last feature in file order
 * with a polygon containing that point, 0 where none does; "later wins" is what an annotator
 * who draws a region over another means, and it makes the result independent of area or class.
 * Inside is the even-odd rule over all rings of one polygon, so holes cut out; a feature's
 * polygons add up. Each polygon is filled by scanlines: its edges, sorted by their lower end,
 * enter an active list as the row centre reaches them and leave it when it passes their upper
 * end (an edge covers centre rows with y in [y_low, y_high)); the active edges' crossings of the
 * row are computed exactly at the centre's y and sorted, and the pixels whose centre x lies in
 * [x_2k, x_2k+1) are painted, the same as counting crossings strictly right of the centre.
 * Work is O(edges x rows) at most and only over the rows a polygon spans, plus the painting. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "jobs/train/annotations_internal.h"

typedef struct edge {
    double xa, ya, xb, yb; /* ya < yb */
} edge;

typedef struct scratch {
    edge *edges;
    uint32_t *active;
    double *xs;
} scratch;

static int by_low_end(const void *pa, const void *pb) {
    const edge *a = pa, *b = pb;
    return a->ya < b->ya ? -1 : a->ya > b->ya;
}

static int by_value(const void *pa, const void *pb) {
    double a = *(const double *)pa, b = *(const double *)pb;
    return a < b ? -1 : a > b;
}

static void sort_doubles(double *v, size_t n) {
    if (n > 16) {
        qsort(v, n, sizeof *v, by_value);
        return;
    }
    for (size_t i = 1; i < n; i++) {
        double t = v[i];
        size_t k = i;
        for (; k > 0 && v[k - 1] > t; k--) {
            v[k] = v[k - 1];
        }
        v[k] = t;
    }
}

/* The first index in [0, n] whose centre c(i) = o + (i + 0.5) d is >= x: a guess from the
 * division, then stepped so that the answer agrees with c(i) evaluated exactly as written. */
static int64_t first_at_or_after(double x, double o, double d, int64_t n) {
    double t = (x - o) / d - 0.5;
    int64_t i = t <= 0 ? 0 : t >= (double)n ? n : (int64_t)ceil(t);
    while (i > 0 && o + ((double)(i - 1) + 0.5) * d >= x) {
        i--;
    }
    while (i < n && o + ((double)i + 0.5) * d < x) {
        i++;
    }
    return i;
}

static void fill_polygon(const sp_ann_polygon *p, uint8_t cls, scratch *s, double d, double x0,
                         double y0, int64_t width, int64_t height, uint8_t *labels,
                         int64_t stride) {
    size_t ne = 0;
    for (uint32_t r = 0; r < p->n_rings; r++) {
        const sp_ann_ring *ring = &p->rings[r];
        for (uint32_t k = 0; k < ring->n; k++) {
            uint32_t k2 = k + 1 == ring->n ? 0 : k + 1;
            double xa = ring->xy[2 * k], ya = ring->xy[2 * k + 1];
            double xb = ring->xy[2 * k2], yb = ring->xy[2 * k2 + 1];
            if (ya == yb) {
                continue; /* horizontal: no row centre crosses it in [ya, yb) */
            }
            s->edges[ne++] = ya < yb ? (edge){xa, ya, xb, yb} : (edge){xb, yb, xa, ya};
        }
    }
    qsort(s->edges, ne, sizeof *s->edges, by_low_end);
    int64_t j0 = first_at_or_after(p->y_min, y0, d, height);
    int64_t j1 = first_at_or_after(p->y_max, y0, d, height);
    size_t next = 0, n_active = 0;
    for (int64_t j = j0; j < j1; j++) {
        double yc = y0 + ((double)j + 0.5) * d;
        while (next < ne && s->edges[next].ya <= yc) {
            s->active[n_active++] = (uint32_t)next++;
        }
        size_t nx = 0, keep = 0;
        for (size_t k = 0; k < n_active; k++) {
            const edge *e = &s->edges[s->active[k]];
            if (e->yb <= yc) {
                continue; /* passed for good: rows only go down */
            }
            s->active[keep++] = s->active[k];
            s->xs[nx++] = e->xa + (yc - e->ya) * (e->xb - e->xa) / (e->yb - e->ya);
        }
        n_active = keep;
        sort_doubles(s->xs, nx);
        uint8_t *row = labels + j * stride;
        for (size_t k = 0; k + 1 < nx; k += 2) {
            int64_t i0 = first_at_or_after(s->xs[k], x0, d, width);
            int64_t i1 = first_at_or_after(s->xs[k + 1], x0, d, width);
            if (i1 > i0) {
                memset(row + i0, cls, (size_t)(i1 - i0));
            }
        }
    }
}

sp_status sp_annotations_rasterize(const sp_annotations *ann, double downsample, double x0,
                                   double y0, int64_t width, int64_t height, uint8_t *labels,
                                   int64_t stride) {
    if (ann == NULL || !isfinite(downsample) || downsample <= 0 || !isfinite(x0) || !isfinite(y0) ||
        width < 0 || height < 0 || stride < width || (labels == NULL && width > 0 && height > 0)) {
        return SP_E_INVALID_ARG;
    }
    if (width == 0 || height == 0) {
        return SP_OK;
    }
    int64_t last;
    if (__builtin_mul_overflow(height - 1, stride, &last) ||
        __builtin_add_overflow(last, width, &last)) {
        return SP_E_INVALID_ARG;
    }
    for (int64_t j = 0; j < height; j++) {
        memset(labels + j * stride, 0, (size_t)width);
    }
    /* The window in level-0 units, to pass over polygons that cannot touch it. */
    double wx0 = x0, wy0 = y0;
    double wx1 = x0 + (double)width * downsample, wy1 = y0 + (double)height * downsample;
    uint64_t most = 0;
    for (size_t f = 0; f < ann->n_features; f++) {
        for (uint32_t k = 0; k < ann->features[f].n_polys; k++) {
            const sp_ann_polygon *p = &ann->features[f].polys[k];
            uint64_t n = 0;
            for (uint32_t r = 0; r < p->n_rings; r++) {
                n += p->rings[r].n;
            }
            most = n > most ? n : most;
        }
    }
    scratch s = {0};
    s.edges = malloc((size_t)most * sizeof *s.edges);
    s.active = malloc((size_t)most * sizeof *s.active);
    s.xs = malloc((size_t)most * sizeof *s.xs);
    sp_status st = SP_OK;
    if (most > 0 && (s.edges == NULL || s.active == NULL || s.xs == NULL)) {
        st = SP_E_NOMEM;
    }
    for (size_t f = 0; st == SP_OK && f < ann->n_features; f++) {
        const sp_ann_feature *fe = &ann->features[f];
        for (uint32_t k = 0; k < fe->n_polys; k++) {
            const sp_ann_polygon *p = &fe->polys[k];
            if (p->x_max < wx0 || p->x_min > wx1 || p->y_max < wy0 || p->y_min > wy1) {
                continue;
            }
            fill_polygon(p, (uint8_t)fe->cls, &s, downsample, x0, y0, width, height, labels,
                         stride);
        }
    }
    free(s.edges);
    free(s.active);
    free(s.xs);
    return st;
}
