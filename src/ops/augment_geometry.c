/* augment_geometry.c — seeded geometric augmentation of RGB8 patches in one resampling: a random
 * resized crop, a random affine map and an elastic deformation composed into one map from each
 * output pixel to a source point, sampled once, bilinearly (docs/augment-geometry.md).
 *
 * The numbers come from splitmix64 started at seed ^ SP_GEOMETRY_STREAM (a stream of its own, so
 * the flips and HED jitter of augment.c, which start at the seed itself, are not disturbed), all
 * SP_GEOM_SCALAR_DRAWS of them drawn whatever is switched on, then the elastic noise; a patch's
 * geometry therefore depends on its seed and the parameters only, not on threads or batching.
 * The per-pixel arithmetic lives in augment_geometry.h, shared with the CUDA kernel. */
#include "ops/augment_geometry.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/patch_batch.h"
#include "slidepipe.h"

#define SP_GEOM_MAX_SIDE (INT64_C(1) << 20)

/* The order of the scalar draws; the crop's 10 attempts take 4 each after these. */
enum {
    DRAW_ROTATION,
    DRAW_SCALE,
    DRAW_SCALE_X,
    DRAW_SCALE_Y,
    DRAW_SHEAR_X,
    DRAW_SHEAR_Y,
    DRAW_TRANSLATE_X,
    DRAW_TRANSLATE_Y,
    DRAW_CROP, /* attempt k: area, log-ratio, top, left at DRAW_CROP + 4 k + 0..3 */
};

static const double PI = 3.14159265358979323846;

static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double unit(uint64_t *state) {
    return (double)(splitmix64(state) >> 11) * 0x1p-53;
}

static double pick(const double range[2], double u) {
    return range[0] + (range[1] - range[0]) * u;
}

static int range_ok(const double r[2], double lo, double hi) {
    return isfinite(r[0]) && isfinite(r[1]) && r[0] <= r[1] && r[0] >= lo && r[1] <= hi;
}

int sp_geom_params_ok(int64_t w, int64_t h, const sp_geometry_params *p) {
    if (p == NULL || p->struct_size != sizeof(*p) || w < 1 || h < 1 || w > SP_GEOM_MAX_SIDE ||
        h > SP_GEOM_MAX_SIDE) {
        return 0;
    }
    int ok = range_ok(p->rotation, -1e6, 1e6) && range_ok(p->scale, 1e-6, 1e6) &&
             p->scale[0] > 0.0 && range_ok(p->scale_x, 1e-6, 1e6) &&
             range_ok(p->scale_y, 1e-6, 1e6) && range_ok(p->shear_x, -44.999999, 44.999999) &&
             range_ok(p->shear_y, -44.999999, 44.999999) && range_ok(p->translate_x, -1.0, 1.0) &&
             range_ok(p->translate_y, -1.0, 1.0) &&
             (p->border == SP_BORDER_REFLECT || p->border == SP_BORDER_CONSTANT);
    if (ok && p->crop) {
        ok = range_ok(p->crop_scale, 0.0, 1.0) && p->crop_scale[0] > 0.0 &&
             range_ok(p->crop_ratio, 1e-6, 1e6);
    }
    if (ok && p->elastic) {
        ok = isfinite(p->elastic_alpha[0]) && isfinite(p->elastic_alpha[1]) &&
             p->elastic_alpha[0] >= 0.0 && p->elastic_alpha[1] >= 0.0 &&
             isfinite(p->elastic_sigma) && p->elastic_sigma > 0.0 && p->elastic_sigma <= 1000.0 &&
             (p->elastic_kernel == 0 || (p->elastic_kernel >= 1 && p->elastic_kernel <= 1023 &&
                                         p->elastic_kernel % 2 == 1)) &&
             w * h <= (INT64_C(1) << 28);
    }
    return ok;
}

/* torchvision's RandomResizedCrop.get_params with our draws: 10 attempts, then the centre crop
 * that fits the ratio range. Python's round() rounds half to even, as rint does here. */
static void crop_box(int64_t w, int64_t h, const sp_geometry_params *p, const double *u,
                     sp_geometry_drawn *d) {
    double area = (double)w * (double)h;
    double lr0 = log(p->crop_ratio[0]), lr1 = log(p->crop_ratio[1]);
    for (int k = 0; k < 10; k++) {
        const double *a = u + DRAW_CROP + 4 * k;
        double target = area * pick(p->crop_scale, a[0]);
        double ratio = exp(lr0 + (lr1 - lr0) * a[1]);
        double cw = rint(sqrt(target * ratio)), ch = rint(sqrt(target / ratio));
        if (cw > 0.0 && cw <= (double)w && ch > 0.0 && ch <= (double)h) {
            d->crop_width = (int64_t)cw;
            d->crop_height = (int64_t)ch;
            d->crop_top = (int64_t)floor(a[2] * (double)(h - d->crop_height + 1));
            d->crop_left = (int64_t)floor(a[3] * (double)(w - d->crop_width + 1));
            return;
        }
    }
    double in_ratio = (double)w / (double)h;
    int64_t cw = w, ch = h;
    if (in_ratio < p->crop_ratio[0]) {
        ch = (int64_t)rint((double)cw / p->crop_ratio[0]);
    } else if (in_ratio > p->crop_ratio[1]) {
        cw = (int64_t)rint((double)ch * p->crop_ratio[1]);
    }
    ch = ch < 1 ? 1 : ch;
    cw = cw < 1 ? 1 : cw;
    d->crop_width = cw;
    d->crop_height = ch;
    d->crop_top = (h - ch) / 2;
    d->crop_left = (w - cw) / 2;
}

int sp_geom_plan_make(int64_t w, int64_t h, uint64_t seed, const sp_geometry_params *p,
                      sp_geom_plan *plan, sp_geometry_drawn *drawn) {
    uint64_t state = seed ^ SP_GEOMETRY_STREAM;
    double u[SP_GEOM_SCALAR_DRAWS];
    for (int i = 0; i < SP_GEOM_SCALAR_DRAWS; i++) {
        u[i] = unit(&state);
    }
    sp_geometry_drawn d = {.struct_size = sizeof(d)};
    d.rotation = pick(p->rotation, u[DRAW_ROTATION]);
    d.scale = pick(p->scale, u[DRAW_SCALE]);
    d.scale_x = pick(p->scale_x, u[DRAW_SCALE_X]);
    d.scale_y = pick(p->scale_y, u[DRAW_SCALE_Y]);
    d.shear_x = pick(p->shear_x, u[DRAW_SHEAR_X]);
    d.shear_y = pick(p->shear_y, u[DRAW_SHEAR_Y]);
    d.translate_x = pick(p->translate_x, u[DRAW_TRANSLATE_X]) * (double)w;
    d.translate_y = pick(p->translate_y, u[DRAW_TRANSLATE_Y]) * (double)h;
    d.crop_top = d.crop_left = 0;
    d.crop_width = w;
    d.crop_height = h;
    if (p->crop) {
        crop_box(w, h, p, u, &d);
    }

    /* Forward linear part L = R(rotation) * Shear * diag(scale * scale_x, scale * scale_y),
     * R = [cos sin; -sin cos] (counter-clockwise as displayed, y down), Shear = [1 tan(shx);
     * tan(shy) 1]. The angles are exact multiples of 90 degrees where they can be, so that a
     * quarter turn is an exact permutation. */
    double th = d.rotation * PI / 180.0, c = cos(th), s = sin(th);
    double q = d.rotation / 90.0;
    if (q == floor(q) && fabs(q) < 1e9) {
        static const double COS[4] = {1, 0, -1, 0}, SIN[4] = {0, 1, 0, -1};
        int k = (int)(((long long)q % 4 + 4) % 4);
        c = COS[k];
        s = SIN[k];
    }
    double hx = tan(d.shear_x * PI / 180.0), hy = tan(d.shear_y * PI / 180.0);
    double kx = d.scale * d.scale_x, ky = d.scale * d.scale_y;
    double sh[4] = {kx, hx * ky, hy * kx, ky}; /* Shear * diag(kx, ky) */
    double l[4] = {c * sh[0] + s * sh[2], c * sh[1] + s * sh[3], -s * sh[0] + c * sh[2],
                   -s * sh[1] + c * sh[3]};
    double det = l[0] * l[3] - l[1] * l[2];
    double cx = (double)(w - 1) / 2.0, cy = (double)(h - 1) / 2.0;
    /* x' = L (x - centre) + centre + t */
    d.matrix[0] = l[0];
    d.matrix[1] = l[1];
    d.matrix[2] = cx + d.translate_x - (l[0] * cx + l[1] * cy);
    d.matrix[3] = l[2];
    d.matrix[4] = l[3];
    d.matrix[5] = cy + d.translate_y - (l[2] * cx + l[3] * cy);

    if (plan != NULL) {
        memset(plan, 0, sizeof(*plan));
        plan->w = w;
        plan->h = h;
        plan->inv[0] = l[3] / det;
        plan->inv[1] = -l[1] / det;
        plan->inv[2] = -l[2] / det;
        plan->inv[3] = l[0] / det;
        plan->cx = cx;
        plan->cy = cy;
        plan->tx = d.translate_x;
        plan->ty = d.translate_y;
        plan->crop = p->crop != 0;
        plan->crop_sx = (double)d.crop_width / (double)w;
        plan->crop_sy = (double)d.crop_height / (double)h;
        plan->crop_top = d.crop_top;
        plan->crop_left = d.crop_left;
        plan->crop_height = d.crop_height;
        plan->crop_width = d.crop_width;
        plan->border = p->border;
        memcpy(plan->fill, p->fill, 3);
    }
    if (drawn != NULL) {
        size_t n = drawn->struct_size < sizeof(d) ? drawn->struct_size : sizeof(d);
        memcpy(drawn, &d, n);
        drawn->struct_size = n;
    }
    return p->elastic != 0;
}

void sp_geometry_params_default(sp_geometry_params *p) {
    if (p == NULL) {
        return;
    }
    memset(p, 0, sizeof(*p));
    p->struct_size = sizeof(*p);
    p->scale[0] = p->scale[1] = 1.0;
    p->scale_x[0] = p->scale_x[1] = 1.0;
    p->scale_y[0] = p->scale_y[1] = 1.0;
    p->crop_scale[0] = 0.08;
    p->crop_scale[1] = 1.0;
    p->crop_ratio[0] = 3.0 / 4.0;
    p->crop_ratio[1] = 4.0 / 3.0;
    p->elastic_sigma = 32.0; /* Kornia's RandomElasticTransform defaults */
    p->elastic_kernel = 63;
    p->elastic_alpha[0] = p->elastic_alpha[1] = 1.0;
    p->border = SP_BORDER_REFLECT;
}

sp_status sp_geometry_draw(int64_t width, int64_t height, uint64_t seed,
                           const sp_geometry_params *p, sp_geometry_drawn *out) {
    if (out == NULL || out->struct_size == 0 || !sp_geom_params_ok(width, height, p)) {
        return SP_E_INVALID_ARG;
    }
    sp_geom_plan_make(width, height, seed, p, NULL, out);
    return SP_OK;
}

sp_status sp_geometry_elastic_noise(int64_t width, int64_t height, uint64_t seed,
                                    const sp_geometry_params *p, double *noise) {
    if (noise == NULL || !sp_geom_params_ok(width, height, p) ||
        width * height > (INT64_C(1) << 28)) {
        return SP_E_INVALID_ARG;
    }
    sp_geom_elastic_noise(width, height, seed, noise);
    return SP_OK;
}

/* One patch: copy it to scratch, make the displacement if any, write every output pixel. */
static sp_status augment_one(uint8_t *rgb, int64_t w, int64_t h, uint64_t seed,
                             const sp_geometry_params *p) {
    sp_geom_plan plan;
    int elastic = sp_geom_plan_make(w, h, seed, p, &plan, NULL);
    size_t n = (size_t)(w * h);
    uint8_t *src = malloc(n * 3);
    double *disp = elastic ? malloc((2 * n + SP_GEOM_SMOOTH_SCRATCH(w, h)) * sizeof(double)) : NULL;
    if (src == NULL || (elastic && disp == NULL)) {
        free(src);
        free(disp);
        return SP_E_NOMEM;
    }
    memcpy(src, rgb, n * 3);
    if (elastic) {
        sp_geom_elastic_noise(w, h, seed, disp);
        sp_geom_elastic_smooth(w, h, p, disp, disp + 2 * n);
    }
    for (int64_t y = 0; y < h; y++) {
        for (int64_t x = 0; x < w; x++) {
            sp_geom_pixel(src, &plan, disp, x, y, rgb + (y * w + x) * 3);
        }
    }
    free(src);
    free(disp);
    return SP_OK;
}

sp_status sp_augment_geometry(uint8_t *rgb, int64_t width, int64_t height, uint64_t seed,
                              const sp_geometry_params *p) {
    if (rgb == NULL || !sp_geom_params_ok(width, height, p)) {
        return SP_E_INVALID_ARG;
    }
    return augment_one(rgb, width, height, seed, p);
}

/* A patch of a batch: its size and the parameters travel in ctx. */
typedef struct shape {
    int64_t w, h;
    const sp_geometry_params *p;
} shape;

static sp_status augment_patch(const void *ctx, uint8_t *patch, uint64_t seed) {
    const shape *k = ctx;
    return augment_one(patch, k->w, k->h, seed, k->p);
}

sp_status sp_augment_geometry_batch(uint8_t *rgb, int64_t count, int64_t width, int64_t height,
                                    const uint64_t *seeds, const sp_geometry_params *p,
                                    int threads) {
    if (count < 0 || (count > 0 && (rgb == NULL || seeds == NULL)) ||
        !sp_geom_params_ok(width, height, p)) {
        return SP_E_INVALID_ARG;
    }
    shape k = {width, height, p};
    return sp_patch_batch(rgb, count, (size_t)(width * height * 3), seeds, augment_patch, &k,
                          threads);
}
