/* he_texture.c — the procedural H&E picture (see he_texture.h).
 *
 * The slide is built from stain amounts, not colours: every pixel gets a haematoxylin and an
 * eosin concentration, and the colour follows from Beer-Lambert absorption with the
 * Ruifrok-Johnston stain vectors, so mixtures, pale edges and dense nuclei all land on the
 * colours a real stain makes. Where the stains go comes from seeded noise:
 * - tissue: a few large elliptical seeds roughened by multi-octave gradient noise whose scale
 *   follows the slide size, thresholded at the quantile that gives the wanted coverage;
 * - stroma: pink collagen bundles parted by thin pale clefts, the zero lines of value noise
 *   stretched along one direction and bent by a warp field;
 * - cellular regions: pale, granular cytoplasm crowded with nuclei, gathered in nests;
 * - nuclei: ellipses on a jittered grid (one candidate per cell), dense where the cellularity
 *   field is high, elongated along the fibres in stroma; plus small dark lymphocytes in patches;
 * - lumens: holes in the tissue where another noise field peaks.
 * All randomness is an integer hash of a lattice point and a layer seed, so the picture is a
 * function of position and the file is the same on every run of the same build. (Floating point
 * is involved, so builds for other compilers or CPUs may differ in rare last bits.)
 */
#include "jobs/synth/he_texture.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define HE_STEP 8 /* spacing of the coarse lattice the slow fields are sampled on */
#define HE_GRID (SP_HE_MAX_TILE / HE_STEP + 1)
#define HE_LUT_SCALE 512.0f /* optical-density steps per unit in the exp(-OD) table */
#define HE_LUT_SIZE 4096
#define HE_MAX_BLOBS 6
#define HE_QUANTILE_GRID 128 /* samples per side when choosing the tissue threshold */

/* The look, in one place. Lengths are level-0 pixels (0.25 um). */
#define HE_EDGE_WIDTH 2.5f     /* anti-aliased width of the tissue border */
#define HE_EDGE_RAGGED 6.0f    /* how far fine noise pushes the border in or out */
#define HE_NUC_CELL 22         /* jittered-grid cell holding at most one nucleus */
#define HE_NUC_MAX_RADIUS 12.0 /* largest nucleus semi-axis */
#define HE_LYM_CELL 15         /* grid cell of the lymphocyte layer */
#define HE_LYM_MAX_RADIUS 6.5
#define HE_BACKGROUND 242.5f /* mean glass brightness */

/* Fields sampled on the coarse lattice of a tile. */
enum { F_TISSUE, F_CELL, F_EMOD, F_WARP_X, F_WARP_Y, F_HOLE, F_ILLUM, F_COUNT };

/* Independent noise layers, one seed each. */
enum {
    S_TISSUE,
    S_CELL,
    S_INFL,
    S_EMOD,
    S_WARP_X,
    S_WARP_Y,
    S_HOLE,
    S_ILLUM,
    S_FIB1,
    S_FIB2,
    S_EDGE,
    S_NUC,
    S_LYM,
    S_CHROM,
    S_CYTO,
    S_GRAIN,
    S_NEST,
    S_COUNT
};

typedef struct he_blob {
    double cx, cy;       /* centre, in units of the slide size */
    double cos_a, sin_a; /* orientation */
    double inv_rx, inv_ry;
} he_blob;

struct sp_he_model {
    int64_t size;
    uint32_t seed[S_COUNT];
    he_blob blobs[HE_MAX_BLOBS];
    int nblobs;
    double tissue_threshold;
    double fib_cos, fib_sin;  /* the fibres' mean direction */
    float h[3], e[3];         /* unit stain vectors (optical density per unit concentration) */
    float light[HE_LUT_SIZE]; /* exp(-OD) */
};

struct sp_he_scratch {
    float grid[F_COUNT][HE_GRID * HE_GRID];
    float inv_grad[(HE_GRID - 1) * (HE_GRID - 1)]; /* pixels per unit of the tissue field */
    float row[F_COUNT][HE_GRID];
    float nuc_h[SP_HE_MAX_TILE * SP_HE_MAX_TILE];   /* haematoxylin of nuclei */
    float nuc_cov[SP_HE_MAX_TILE * SP_HE_MAX_TILE]; /* how much of the pixel is nucleus */
};

/* ---- Hashing and noise ------------------------------------------------------------------- */

static uint64_t he_splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}

static double he_unit64(uint64_t *state) {
    return (double)(he_splitmix64(state) >> 11) * (1.0 / 9007199254740992.0);
}

/* A well-mixed 32-bit hash of a lattice point (the "lowbias32" finaliser). */
static inline uint32_t he_hash(uint32_t seed, int32_t x, int32_t y) {
    uint32_t h = seed ^ ((uint32_t)x * 0x8DA6B343u) ^ ((uint32_t)y * 0xD8163841u);
    h ^= h >> 16;
    h *= 0x7FEB352Du;
    h ^= h >> 15;
    h *= 0x846CA68Bu;
    h ^= h >> 16;
    return h;
}

static inline float he_u01(uint32_t h) {
    return (float)(h >> 8) * (1.0f / 16777216.0f);
}

static inline float he_snorm(uint32_t h) {
    return (float)(h >> 8) * (2.0f / 16777216.0f) - 1.0f;
}

static inline float he_lerp(float a, float b, float t) {
    return a + (b - a) * t;
}

static inline float he_clamp01(float v) {
    return v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v;
}

static inline float he_smoothstep(float lo, float hi, float v) {
    float t = he_clamp01((v - lo) / (hi - lo));
    return t * t * (3.0f - 2.0f * t);
}

/* floor() without the libm call: pixel coordinates stay far inside int32 range. */
static inline int32_t he_floor(double v) {
    int32_t i = (int32_t)v;
    return (double)i > v ? i - 1 : i;
}

static inline int64_t he_floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/* Value noise in [-1, 1] with a cubic fade: cheap enough for every pixel. */
static float he_vnoise(uint32_t seed, double x, double y) {
    int32_t ix = he_floor(x), iy = he_floor(y);
    float tx = (float)(x - ix), ty = (float)(y - iy);
    tx = tx * tx * (3.0f - 2.0f * tx);
    ty = ty * ty * (3.0f - 2.0f * ty);
    float a = he_snorm(he_hash(seed, ix, iy));
    float b = he_snorm(he_hash(seed, ix + 1, iy));
    float c = he_snorm(he_hash(seed, ix, iy + 1));
    float d = he_snorm(he_hash(seed, ix + 1, iy + 1));
    return he_lerp(he_lerp(a, b, tx), he_lerp(c, d, tx), ty);
}

/* Gradient noise, roughly in [-1, 1]: smoother and less grid-like than value noise, used for
 * the shapes the eye follows (tissue outlines, regions). */
static float he_gnoise(uint32_t seed, double x, double y) {
    static const float dirs[8][2] = {
        {1.0f, 0.0f},       {-1.0f, 0.0f},       {0.0f, 1.0f},        {0.0f, -1.0f},
        {0.7071f, 0.7071f}, {-0.7071f, 0.7071f}, {0.7071f, -0.7071f}, {-0.7071f, -0.7071f},
    };
    int32_t ix = he_floor(x), iy = he_floor(y);
    float tx = (float)(x - ix), ty = (float)(y - iy);
    float v[4];
    for (int k = 0; k < 4; k++) {
        int dx = k & 1, dy = k >> 1;
        const float *g = dirs[he_hash(seed, ix + dx, iy + dy) >> 29];
        v[k] = g[0] * (tx - (float)dx) + g[1] * (ty - (float)dy);
    }
    float ux = tx * tx * tx * (tx * (tx * 6.0f - 15.0f) + 10.0f);
    float uy = ty * ty * ty * (ty * (ty * 6.0f - 15.0f) + 10.0f);
    return 1.4f * he_lerp(he_lerp(v[0], v[1], ux), he_lerp(v[2], v[3], ux), uy);
}

/* Fractal gradient noise over wavelengths from `wl_max` down to `wl_min` pixels (at least one
 * octave), each octave `gain` times the one before; normalised to roughly [-1, 1]. */
static float he_fbm(uint32_t seed, double x, double y, double wl_max, double wl_min, float gain) {
    float sum = 0.0f, amp = 1.0f, norm = 0.0f;
    double wl = wl_max;
    for (int k = 0; k < 24; k++) {
        /* Each octave gets its own seed and offset so lattice lines do not line up. */
        uint32_t s = seed ^ (uint32_t)(k * 0x9E3779B9u);
        sum += amp * he_gnoise(s, x / wl + 0.37 * k, y / wl - 0.61 * k);
        norm += amp;
        amp *= gain;
        wl *= 0.5;
        if (wl < wl_min) {
            break;
        }
    }
    return sum / norm * 1.6f;
}

/* ---- Slow fields --------------------------------------------------------------------------- */

/* The tissue field before thresholding: high inside the seeds, rough at every scale down to a
 * few dozen pixels whatever the slide size, pushed down near the slide's edges. */
static double he_tissue_raw(const sp_he_model *m, double x, double y) {
    double s = (double)m->size;
    double u = x / s, v = y / s;
    double b = -1.0;
    for (int i = 0; i < m->nblobs; i++) {
        const he_blob *bl = &m->blobs[i];
        double dx = u - bl->cx, dy = v - bl->cy;
        double p = (dx * bl->cos_a + dy * bl->sin_a) * bl->inv_rx;
        double q = (-dx * bl->sin_a + dy * bl->cos_a) * bl->inv_ry;
        double t = 1.0 - sqrt(p * p + q * q);
        b = t > b ? t : b;
    }
    double n = he_fbm(m->seed[S_TISSUE], x, y, s / 3.0, 40.0, 0.58f);
    double margin = fmin(fmin(u, 1.0 - u), fmin(v, 1.0 - v));
    double pen = margin < 0.15 ? 0.8 * (0.15 - margin) / 0.15 : 0.0;
    pen *= pen * 1.5;
    return b + 0.7 * n - pen;
}

/* Cellularity in [0, 1]: 0 is fibrous stroma, 1 densely cellular tissue. Its largest scale
 * grows with the slide so that a thumbnail shows regions too. */
static float he_cellularity(const sp_he_model *m, double x, double y) {
    double wl = (double)m->size / 3.0;
    wl = wl < 600.0 ? 600.0 : wl > 12000.0 ? 12000.0 : wl;
    float c = he_smoothstep(-0.2f, 0.3f, he_fbm(m->seed[S_CELL], x, y, wl, 300.0, 0.6f));
    if (c <= 0.0f) {
        return 0.0f;
    }
    /* Cells gather in nests and cords parted by thin strands of stroma. */
    float nest = he_smoothstep(-0.15f, 0.2f, he_fbm(m->seed[S_NEST], x, y, 280.0, 70.0, 0.5f));
    return c * (0.2f + 0.8f * nest);
}

/* Patches of lymphocytes, in [0, 1], mostly 0. */
static float he_inflammation(const sp_he_model *m, double x, double y) {
    float n = he_fbm(m->seed[S_INFL], x, y, 1400.0, 300.0, 0.55f);
    return he_smoothstep(0.45f, 0.8f, n);
}

static void he_warp(const sp_he_model *m, double x, double y, float *wx, float *wy) {
    *wx = 260.0f * he_fbm(m->seed[S_WARP_X], x, y, 1600.0, 100.0, 0.45f);
    *wy = 260.0f * he_fbm(m->seed[S_WARP_Y], x, y, 1600.0, 100.0, 0.45f);
}

/* The fibres' local direction: along the lines where the warped across-fibre coordinate is
 * constant, estimated from the warp by finite differences. */
static float he_fibre_angle(const sp_he_model *m, double x, double y) {
    const double d = 4.0;
    float ax, ay, bx, by, cx, cy, dx, dy;
    he_warp(m, x - d, y, &ax, &ay);
    he_warp(m, x + d, y, &bx, &by);
    he_warp(m, x, y - d, &cx, &cy);
    he_warp(m, x, y + d, &dx, &dy);
    double fc = m->fib_cos, fs = m->fib_sin;
    /* gradient of v = -fs * (x + wx) + fc * (y + wy) */
    double gx = -fs * (1.0 + (bx - ax) / (2 * d)) + fc * ((by - ay) / (2 * d));
    double gy = -fs * ((dx - cx) / (2 * d)) + fc * (1.0 + (dy - cy) / (2 * d));
    return (float)atan2(gx, -gy);
}

static void he_fill_grid(const sp_he_model *m, sp_he_scratch *s, int64_t x0, int64_t y0) {
    double s_size = (double)m->size;
    for (int j = 0; j < HE_GRID; j++) {
        for (int i = 0; i < HE_GRID; i++) {
            double x = (double)(x0 + i * HE_STEP), y = (double)(y0 + j * HE_STEP);
            int k = j * HE_GRID + i;
            s->grid[F_TISSUE][k] = (float)(he_tissue_raw(m, x, y) - m->tissue_threshold);
            s->grid[F_CELL][k] = he_cellularity(m, x, y);
            s->grid[F_EMOD][k] = 1.0f + 0.2f * he_fbm(m->seed[S_EMOD], x, y, 900.0, 120.0, 0.5f);
            he_warp(m, x, y, &s->grid[F_WARP_X][k], &s->grid[F_WARP_Y][k]);
            s->grid[F_HOLE][k] = he_fbm(m->seed[S_HOLE], x, y, 500.0, 60.0, 0.5f);
            double wl = s_size / 2.0 < 512.0 ? 512.0 : s_size / 2.0;
            s->grid[F_ILLUM][k] =
                HE_BACKGROUND + 1.6f * he_fbm(m->seed[S_ILLUM], x, y, wl, wl / 4.0, 0.5f);
        }
    }
    const float *f = s->grid[F_TISSUE];
    for (int j = 0; j + 1 < HE_GRID; j++) {
        for (int i = 0; i + 1 < HE_GRID; i++) {
            int k = j * HE_GRID + i;
            float f00 = f[k], f10 = f[k + 1], f01 = f[k + HE_GRID], f11 = f[k + HE_GRID + 1];
            float gx = ((f10 - f00) + (f11 - f01)) * (0.5f / HE_STEP);
            float gy = ((f01 - f00) + (f11 - f10)) * (0.5f / HE_STEP);
            float g = sqrtf(gx * gx + gy * gy);
            s->inv_grad[j * (HE_GRID - 1) + i] = 1.0f / (g > 1e-7f ? g : 1e-7f);
        }
    }
}

/* ---- Nuclei -------------------------------------------------------------------------------- */

typedef struct he_nucleus {
    double cx, cy;
    float a, b; /* semi-axes, a along `angle` */
    float angle;
    float dens; /* haematoxylin at the rim */
    float rim;  /* how much paler the centre is (vesicular chromatin), 0..1 */
} he_nucleus;

/* Draw one nucleus into the tile's buffers, keeping the darker value where nuclei overlap (max
 * is order-independent, so the result does not depend on the order cells are visited in). */
static void he_stamp(sp_he_scratch *s, int64_t x0, int64_t y0, int w, int h, const he_nucleus *n) {
    double ext = n->a + 1.5;
    int64_t px0 = (int64_t)floor(n->cx - ext) - x0, px1 = (int64_t)ceil(n->cx + ext) - x0;
    int64_t py0 = (int64_t)floor(n->cy - ext) - y0, py1 = (int64_t)ceil(n->cy + ext) - y0;
    px0 = px0 < 0 ? 0 : px0;
    py0 = py0 < 0 ? 0 : py0;
    px1 = px1 > w - 1 ? w - 1 : px1;
    py1 = py1 > h - 1 ? h - 1 : py1;
    float ca = cosf(n->angle), sa = sinf(n->angle);
    float ia = 1.0f / n->a, ib = 1.0f / n->b, aa = 0.5f * n->b;
    for (int64_t py = py0; py <= py1; py++) {
        float dy = (float)((double)(y0 + py) - n->cy);
        float *dst_h = s->nuc_h + py * SP_HE_MAX_TILE;
        float *dst_c = s->nuc_cov + py * SP_HE_MAX_TILE;
        for (int64_t px = px0; px <= px1; px++) {
            float dx = (float)((double)(x0 + px) - n->cx);
            float p = (dx * ca + dy * sa) * ia;
            float q = (-dx * sa + dy * ca) * ib;
            float r2 = p * p + q * q;
            /* (1 - r2) * b / 2 is about the distance inside the edge in pixels: a 1-pixel ramp */
            float cov = (1.0f - r2) * aa + 0.5f;
            if (cov <= 0.0f) {
                continue;
            }
            cov = cov > 1.0f ? 1.0f : cov;
            float r2c = r2 > 1.0f ? 1.0f : r2;
            float v = cov * n->dens * (1.0f - n->rim + n->rim * r2c);
            dst_h[px] = v > dst_h[px] ? v : dst_h[px];
            dst_c[px] = cov > dst_c[px] ? cov : dst_c[px];
        }
    }
}

static void he_stamp_nuclei(const sp_he_model *m, sp_he_scratch *s, int64_t x0, int64_t y0, int w,
                            int h) {
    memset(s->nuc_h, 0, sizeof s->nuc_h);
    memset(s->nuc_cov, 0, sizeof s->nuc_cov);

    /* Tissue nuclei: one candidate per cell, kept with a probability that follows cellularity. */
    int64_t r = (int64_t)HE_NUC_MAX_RADIUS + 2, cell = HE_NUC_CELL;
    int64_t i0 = he_floor_div(x0 - r, cell), i1 = he_floor_div(x0 + w - 1 + r, cell);
    int64_t j0 = he_floor_div(y0 - r, cell), j1 = he_floor_div(y0 + h - 1 + r, cell);
    uint32_t sd = m->seed[S_NUC];
    for (int64_t j = j0; j <= j1; j++) {
        for (int64_t i = i0; i <= i1; i++) {
            int32_t ci = (int32_t)i, cj = (int32_t)j;
            uint32_t h0 = he_hash(sd, ci, cj), h1 = he_hash(sd + 1, ci, cj);
            uint32_t h2 = he_hash(sd + 2, ci, cj), h3 = he_hash(sd + 3, ci, cj);
            he_nucleus n;
            n.cx = (double)(i * cell) + (double)cell * he_u01(h0);
            n.cy = (double)(j * cell) + (double)cell * he_u01(h1);
            float c = he_cellularity(m, n.cx, n.cy);
            float keep = 0.07f + 0.83f * c * c * (3.0f - 2.0f * c);
            if (he_u01(h2) >= keep) {
                continue;
            }
            float r0 = (float)(h3 & 255) / 255.0f, r1 = (float)((h3 >> 8) & 255) / 255.0f;
            float r2 = (float)((h3 >> 16) & 255) / 255.0f, r3 = (float)(h3 >> 24) / 255.0f;
            bool stromal = r3 >= c; /* in stroma, a fibroblast lying along the fibres */
            n.a = stromal ? 8.0f + 4.0f * r0 : 6.5f + 5.5f * r0;
            n.b = n.a * (stromal ? 0.28f + 0.2f * r1 : 0.62f + 0.33f * r1);
            n.angle =
                stromal ? he_fibre_angle(m, n.cx, n.cy) + 0.5f * (r2 - 0.5f) : 6.2831853f * r2;
            n.dens = 1.0f + 0.6f * r1 * r3 + (stromal ? 0.2f : 0.0f);
            n.rim = stromal ? 0.05f : 0.45f * r2;
            he_stamp(s, x0, y0, w, h, &n);
        }
    }

    /* Lymphocytes: small, round, very dark, only where the inflammation field is up. */
    r = (int64_t)HE_LYM_MAX_RADIUS + 2;
    cell = HE_LYM_CELL;
    i0 = he_floor_div(x0 - r, cell);
    i1 = he_floor_div(x0 + w - 1 + r, cell);
    j0 = he_floor_div(y0 - r, cell);
    j1 = he_floor_div(y0 + h - 1 + r, cell);
    sd = m->seed[S_LYM];
    for (int64_t j = j0; j <= j1; j++) {
        for (int64_t i = i0; i <= i1; i++) {
            int32_t ci = (int32_t)i, cj = (int32_t)j;
            uint32_t h0 = he_hash(sd, ci, cj), h1 = he_hash(sd + 1, ci, cj);
            uint32_t h2 = he_hash(sd + 2, ci, cj), h3 = he_hash(sd + 3, ci, cj);
            he_nucleus n;
            n.cx = (double)(i * cell) + (double)cell * he_u01(h0);
            n.cy = (double)(j * cell) + (double)cell * he_u01(h1);
            float keep = 0.85f * he_inflammation(m, n.cx, n.cy);
            if (he_u01(h2) >= keep) {
                continue;
            }
            float r0 = (float)(h3 & 255) / 255.0f, r1 = (float)((h3 >> 8) & 255) / 255.0f;
            n.a = 4.8f + 1.7f * r0;
            n.b = n.a * (0.82f + 0.18f * r1);
            n.angle = 6.2831853f * (float)((h3 >> 16) & 255) / 255.0f;
            n.dens = 1.45f + 0.4f * (float)(h3 >> 24) / 255.0f;
            n.rim = 0.05f;
            he_stamp(s, x0, y0, w, h, &n);
        }
    }
}

/* ---- Pixels -------------------------------------------------------------------------------- */

static inline uint8_t he_to_u8(float v) {
    v += 0.5f;
    return v <= 0.0f ? 0 : v >= 255.0f ? 255 : (uint8_t)v;
}

static inline float he_light(const sp_he_model *m, float od) {
    int k = (int)(od * HE_LUT_SCALE + 0.5f);
    return m->light[k < 0 ? 0 : k >= HE_LUT_SIZE ? HE_LUT_SIZE - 1 : k];
}

void sp_he_render(const sp_he_model *m, sp_he_scratch *s, int64_t x0, int64_t y0, int w, int h,
                  uint8_t *rgb, size_t stride) {
    he_fill_grid(m, s, x0, y0);

    /* Most tiles of a slide are bare glass: skip the tissue work when no pixel can be tissue.
     * Within a lattice cell the field is at most its largest corner, and a pixel is background
     * when it lies further than the edge ramp plus the ragged displacement outside. */
    const float far_out = -(HE_EDGE_RAGGED + HE_EDGE_WIDTH + 1.0f);
    bool any_tissue = false;
    for (int j = 0; j + 1 < HE_GRID && !any_tissue; j++) {
        for (int i = 0; i + 1 < HE_GRID; i++) {
            const float *f = s->grid[F_TISSUE] + j * HE_GRID + i;
            float mx = fmaxf(fmaxf(f[0], f[1]), fmaxf(f[HE_GRID], f[HE_GRID + 1]));
            if (mx * s->inv_grad[j * (HE_GRID - 1) + i] > far_out) {
                any_tissue = true;
                break;
            }
        }
    }
    if (any_tissue) {
        he_stamp_nuclei(m, s, x0, y0, w, h);
    }

    const float hr = m->h[0], hg = m->h[1], hb = m->h[2];
    const float er = m->e[0], eg = m->e[1], eb = m->e[2];
    for (int py = 0; py < h; py++) {
        int gy = py / HE_STEP;
        float ty = (float)(py % HE_STEP) * (1.0f / HE_STEP);
        int ncols = (w - 1) / HE_STEP + 2;
        for (int f = 0; f < F_COUNT; f++) {
            const float *g0 = s->grid[f] + gy * HE_GRID, *g1 = g0 + HE_GRID;
            for (int i = 0; i < ncols; i++) {
                s->row[f][i] = he_lerp(g0[i], g1[i], ty);
            }
        }
        const float *inv_grad = s->inv_grad + gy * (HE_GRID - 1);
        uint8_t *out = rgb + (size_t)py * stride;
        int64_t Y = y0 + py;
        for (int px = 0; px < w; px++, out += 3) {
            int gx = px / HE_STEP;
            float tx = (float)(px % HE_STEP) * (1.0f / HE_STEP);
            int64_t X = x0 + px;
            uint32_t grain = he_hash(m->seed[S_GRAIN], (int32_t)X, (int32_t)Y);
            float bg = he_lerp(s->row[F_ILLUM][gx], s->row[F_ILLUM][gx + 1], tx);
            /* Faint sensor noise: mostly luminance, a little per channel. */
            float lum = (float)((grain & 15) + ((grain >> 4) & 15)) * (1.6f / 15.0f) - 1.6f;
            float nr = lum + (float)((grain >> 8) & 3) * 0.33f - 0.5f;
            float ng = lum + (float)((grain >> 10) & 3) * 0.33f - 0.5f;
            float nb = lum + (float)((grain >> 12) & 3) * 0.33f - 0.5f;

            float tm = 0.0f;
            if (any_tissue) {
                /* Signed distance to the tissue border in pixels, roughened at the cell scale. */
                float d =
                    he_lerp(s->row[F_TISSUE][gx], s->row[F_TISSUE][gx + 1], tx) * inv_grad[gx];
                if (d > far_out && d < -far_out) {
                    d += HE_EDGE_RAGGED * he_vnoise(m->seed[S_EDGE], (double)X * (1.0 / 9.0),
                                                    (double)Y * (1.0 / 9.0));
                }
                tm = he_clamp01(0.5f + d / HE_EDGE_WIDTH);
                if (tm > 0.0f) {
                    float hole = he_lerp(s->row[F_HOLE][gx], s->row[F_HOLE][gx + 1], tx);
                    tm *= 1.0f - he_smoothstep(0.53f, 0.545f, hole);
                }
            }
            if (tm <= 0.0f) {
                out[0] = he_to_u8(bg + nr);
                out[1] = he_to_u8(bg + ng);
                out[2] = he_to_u8(bg + nb);
                continue;
            }

            float c = he_lerp(s->row[F_CELL][gx], s->row[F_CELL][gx + 1], tx);
            float emod = he_lerp(s->row[F_EMOD][gx], s->row[F_EMOD][gx + 1], tx);
            float ce_stroma = 0.0f, ce_cyto = 0.0f;
            if (c < 0.999f) {
                double qx = (double)X + he_lerp(s->row[F_WARP_X][gx], s->row[F_WARP_X][gx + 1], tx);
                double qy = (double)Y + he_lerp(s->row[F_WARP_Y][gx], s->row[F_WARP_Y][gx + 1], tx);
                double u = qx * m->fib_cos + qy * m->fib_sin;
                double v = -qx * m->fib_sin + qy * m->fib_cos;
                /* Collagen: pink bundles parted by thin pale clefts, the clefts being the
                 * zero lines of stretched noise, which run long, wavy and unbroken. */
                float fa = he_vnoise(m->seed[S_FIB1], u * (1.0 / 60.0), v * (1.0 / 9.0));
                float fb = he_vnoise(m->seed[S_FIB2], u * (1.0 / 22.0), v * (1.0 / 3.5));
                float bundle = he_smoothstep(0.02f, 0.16f, fabsf(fa + 0.15f * fb));
                ce_stroma = 0.12f + 0.38f * bundle * (0.85f + 0.25f * fb);
            }
            if (c > 0.001f) {
                ce_cyto =
                    0.30f + 0.09f * he_vnoise(m->seed[S_CYTO], (double)X * 0.2, (double)Y * 0.2);
            }
            float ce = emod * he_lerp(ce_stroma, ce_cyto, c);
            float ch = 0.05f + 0.1f * c;

            size_t k = (size_t)py * SP_HE_MAX_TILE + (size_t)px;
            float nh = s->nuc_h[k];
            if (nh > 0.0f) {
                float chrom = 0.8f + 0.3f * he_vnoise(m->seed[S_CHROM], (double)X * (1.0 / 2.3),
                                                      (double)Y * (1.0 / 2.3));
                ch += nh * chrom;
                ce *= 1.0f - 0.5f * s->nuc_cov[k];
            }
            float jitter = tm * (0.96f + (float)(grain >> 24) * (0.08f / 255.0f));
            ch *= jitter;
            ce *= jitter;
            out[0] = he_to_u8(bg * he_light(m, ch * hr + ce * er) + nr);
            out[1] = he_to_u8(bg * he_light(m, ch * hg + ce * eg) + ng);
            out[2] = he_to_u8(bg * he_light(m, ch * hb + ce * eb) + nb);
        }
    }
}

/* ---- Model --------------------------------------------------------------------------------- */

static int he_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

sp_status sp_he_model_create(int64_t size, uint64_t seed, sp_he_model **out, sp_err *err) {
    *out = NULL;
    sp_he_model *m = calloc(1, sizeof *m);
    double *samples = malloc(sizeof(double) * HE_QUANTILE_GRID * HE_QUANTILE_GRID);
    if (m == NULL || samples == NULL) {
        free(m);
        free(samples);
        return sp_err_set(err, SP_E_NOMEM, "out of memory building the slide model");
    }
    m->size = size;
    uint64_t state = seed;
    for (int i = 0; i < S_COUNT; i++) {
        m->seed[i] = (uint32_t)(he_splitmix64(&state) >> 32);
    }
    m->nblobs = 3 + (int)(he_splitmix64(&state) % 4);
    for (int i = 0; i < m->nblobs; i++) {
        he_blob *b = &m->blobs[i];
        b->cx = 0.18 + 0.64 * he_unit64(&state);
        b->cy = 0.18 + 0.64 * he_unit64(&state);
        double rx = 0.09 + 0.11 * he_unit64(&state);
        double ry = rx * (0.45 + 0.55 * he_unit64(&state));
        double a = 6.283185307179586 * he_unit64(&state);
        b->cos_a = cos(a);
        b->sin_a = sin(a);
        b->inv_rx = 1.0 / rx;
        b->inv_ry = 1.0 / ry;
    }
    double fa = 3.141592653589793 * he_unit64(&state);
    m->fib_cos = cos(fa);
    m->fib_sin = sin(fa);
    double coverage = 0.36 + 0.12 * he_unit64(&state);

    /* Pick the threshold from the field's own distribution so every seed gets a similar amount
     * of tissue; the finer octaves the samples miss average out. */
    int n = HE_QUANTILE_GRID;
    for (int j = 0; j < n; j++) {
        for (int i = 0; i < n; i++) {
            double x = ((double)i + 0.5) * (double)size / n,
                   y = ((double)j + 0.5) * (double)size / n;
            samples[j * n + i] = he_tissue_raw(m, x, y);
        }
    }
    qsort(samples, (size_t)(n * n), sizeof *samples, he_cmp_double);
    m->tissue_threshold = samples[(int)((1.0 - coverage) * (n * n - 1))];
    free(samples);

    /* Ruifrok & Johnston's haematoxylin and eosin optical-density vectors, made unit length. */
    static const double hv[3] = {0.650, 0.704, 0.286}, ev[3] = {0.072, 0.990, 0.105};
    double hn = sqrt(hv[0] * hv[0] + hv[1] * hv[1] + hv[2] * hv[2]);
    double en = sqrt(ev[0] * ev[0] + ev[1] * ev[1] + ev[2] * ev[2]);
    for (int c = 0; c < 3; c++) {
        m->h[c] = (float)(hv[c] / hn);
        m->e[c] = (float)(ev[c] / en);
    }
    for (int k = 0; k < HE_LUT_SIZE; k++) {
        m->light[k] = (float)exp(-(double)k / HE_LUT_SCALE);
    }
    *out = m;
    return SP_OK;
}

void sp_he_model_destroy(sp_he_model *model) {
    free(model);
}

sp_status sp_he_scratch_create(sp_he_scratch **out, sp_err *err) {
    *out = calloc(1, sizeof **out);
    if (*out == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory for rendering scratch");
    }
    return SP_OK;
}

void sp_he_scratch_destroy(sp_he_scratch *scratch) {
    free(scratch);
}
