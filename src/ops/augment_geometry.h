/* augment_geometry.h — the geometric augmentation's plan and its per-pixel arithmetic, shared
 * word for word by the CPU reference (augment_geometry.c) and the CUDA kernel
 * (src/cuda/augment_geometry_kernels.cu), so the two differ only where a compiler could reorder
 * what IEEE arithmetic forbids it to (both are built without fused multiply-adds).
 *
 * A plan holds what a patch's seed drew, turned into the composed map of
 * docs/augment-geometry.md: output pixel (x, y) -> the crop box (torchvision's resize
 * convention, half-pixel centres, clamped to the box) -> the inverse affine map about the patch
 * centre -> plus the elastic displacement of (x, y) -> a source point, sampled bilinearly with
 * reflect-101 or a constant outside. */
#ifndef SP_OPS_AUGMENT_GEOMETRY_H
#define SP_OPS_AUGMENT_GEOMETRY_H

#include <math.h>
#include <stdint.h>

#include "slidepipe.h"

#ifdef __CUDACC__
#define SP_GEOM_HD __host__ __device__
#else
#define SP_GEOM_HD
#endif

typedef struct sp_geom_plan {
    int64_t w, h;
    double inv[4];           /* the inverse of the affine map's linear part, row-major */
    double cx, cy;           /* the patch centre, ((w - 1) / 2, (h - 1) / 2) */
    double tx, ty;           /* the translation in pixels */
    int crop;                /* 0: the crop step is the identity */
    double crop_sx, crop_sy; /* box size / output size */
    int64_t crop_top, crop_left, crop_height, crop_width;
    int border; /* sp_geometry_border */
    uint8_t fill[3];
} sp_geom_plan;

/* Make the plan of a patch and, when disp is not NULL and elastic is on, its displacement in
 * pixels (2 planes of w * h doubles, x then y). The parameters must have passed
 * sp_geom_params_ok. Returns 1 when the plan has a displacement field, 0 otherwise. */
int sp_geom_plan_make(int64_t w, int64_t h, uint64_t seed, const sp_geometry_params *p,
                      sp_geom_plan *plan, sp_geometry_drawn *drawn);

/* Whether the parameters are valid for a w x h patch. */
int sp_geom_params_ok(int64_t w, int64_t h, const sp_geometry_params *p);

/* The elastic field (elastic_field.c): fill noise (2 w h doubles, in [-1, 1)) from the stream
 * positioned after the scalar draws, and turn it into the displacement in pixels in place,
 * using `scratch` (SP_GEOM_SMOOTH_SCRATCH(w, h) doubles). */
#define SP_GEOM_SMOOTH_SCRATCH(w, h) ((size_t)(w) * (size_t)(h) + (size_t)(w) + 1024)
void sp_geom_elastic_noise(int64_t w, int64_t h, uint64_t seed, double *noise);
void sp_geom_elastic_smooth(int64_t w, int64_t h, const sp_geometry_params *p, double *field,
                            double *scratch);

/* The number of scalar draws per patch before the elastic noise. */
enum { SP_GEOM_SCALAR_DRAWS = 8 + 4 * 10 };

SP_GEOM_HD static inline double sp_geom_reflect101(double t, int64_t n) {
    if (n == 1) {
        return 0.0;
    }
    double last = (double)(n - 1), period = 2.0 * last;
    if (t >= 0.0 && t <= last) {
        return t; /* inside: what fmod(fabs(t), period) gives, without the division */
    }
    t = fmod(fabs(t), period);
    return t > last ? period - t : t;
}

/* The source point of output pixel (x, y); disp is NULL or the displacement planes. */
SP_GEOM_HD static inline void sp_geom_source(const sp_geom_plan *p, const double *disp, int64_t x,
                                             int64_t y, double *sx, double *sy) {
    double u = (double)x, v = (double)y;
    if (p->crop) {
        u = ((double)x + 0.5) * p->crop_sx - 0.5;
        v = ((double)y + 0.5) * p->crop_sy - 0.5;
        double umax = (double)(p->crop_width - 1), vmax = (double)(p->crop_height - 1);
        u = (u < 0.0 ? 0.0 : (u > umax ? umax : u)) + (double)p->crop_left;
        v = (v < 0.0 ? 0.0 : (v > vmax ? vmax : v)) + (double)p->crop_top;
    }
    double a = u - p->cx - p->tx, b = v - p->cy - p->ty;
    double su = p->inv[0] * a + p->inv[1] * b + p->cx;
    double sv = p->inv[2] * a + p->inv[3] * b + p->cy;
    if (disp != NULL) {
        int64_t i = y * p->w + x;
        su += disp[i];
        sv += disp[p->w * p->h + i];
    }
    *sx = su;
    *sy = sv;
}

/* The pixel at (x, y), or NULL outside the patch (where the fill stands in). */
SP_GEOM_HD static inline const uint8_t *sp_geom_at(const uint8_t *src, const sp_geom_plan *p,
                                                   int64_t x, int64_t y) {
    if (x < 0 || y < 0 || x >= p->w || y >= p->h) {
        return 0;
    }
    return src + (y * p->w + x) * 3;
}

/* Output pixel (x, y) of the patch `src` into out (3 bytes). */
SP_GEOM_HD static inline void sp_geom_pixel(const uint8_t *src, const sp_geom_plan *p,
                                            const double *disp, int64_t x, int64_t y,
                                            uint8_t *out) {
    double sx, sy;
    sp_geom_source(p, disp, x, y, &sx, &sy);
    if (p->border == SP_BORDER_REFLECT) {
        sx = sp_geom_reflect101(sx, p->w);
        sy = sp_geom_reflect101(sy, p->h);
    } else {
        /* beyond one pixel outside every corner is fill; keeps floor() in int64 range (and NaN
         * out: a NaN compares false and becomes -2) */
        sx = sx >= -2.0 ? (sx <= (double)p->w + 1.0 ? sx : (double)p->w + 1.0) : -2.0;
        sy = sy >= -2.0 ? (sy <= (double)p->h + 1.0 ? sy : (double)p->h + 1.0) : -2.0;
    }
    double fx0 = floor(sx), fy0 = floor(sy);
    double fx = sx - fx0, fy = sy - fy0;
    int64_t x0 = (int64_t)fx0, y0 = (int64_t)fy0, x1 = x0 + 1, y1 = y0 + 1;
    if (p->border == SP_BORDER_REFLECT) {
        /* reflected points lie in [0, n - 1]; at n - 1 the weight of the next pixel is 0 */
        x1 = x1 < p->w ? x1 : p->w - 1;
        y1 = y1 < p->h ? y1 : p->h - 1;
    }
    const uint8_t *c00 = sp_geom_at(src, p, x0, y0), *c10 = sp_geom_at(src, p, x1, y0);
    const uint8_t *c01 = sp_geom_at(src, p, x0, y1), *c11 = sp_geom_at(src, p, x1, y1);
    for (int c = 0; c < 3; c++) {
        double f = (double)p->fill[c];
        double v00 = c00 ? (double)c00[c] : f, v10 = c10 ? (double)c10[c] : f;
        double v01 = c01 ? (double)c01[c] : f, v11 = c11 ? (double)c11[c] : f;
        double top = (1.0 - fx) * v00 + fx * v10;
        double bottom = (1.0 - fx) * v01 + fx * v11;
        double v = (1.0 - fy) * top + fy * bottom;
        v = v < 0.0 ? 0.0 : (v > 255.0 ? 255.0 : v);
        out[c] = (uint8_t)(v + 0.5);
    }
}

#endif
