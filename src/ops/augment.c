/* augment.c — seeded augmentation of RGB8 training patches: the 8 flips and quarter turns of a
 * square, and a jitter of the haematoxylin, eosin and DAB channels (HED jitter, as Tellez et al.
 * 2018 describe it), each drawn from the patch's own seed.
 *
 * Every random number comes from a splitmix64 sequence started at the patch's seed, always drawn
 * in the same order whatever is switched on, so turning flips on or off does not change a patch's
 * colour jitter and a batch augmented on any number of threads is the same. docs/train.md defines
 * the arithmetic; tests/cli/test_train.py checks it against numpy in double precision.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/simd_x86.h"
#include "ops/augment_hed.h"
#include "ops/op.h"
#include "ops/patch_batch.h"
#include "slidepipe.h"

/* Stain optical-density vectors over R, G, B (Ruifrok and Johnston 2001, as scikit-image's
 * rgb2hed uses them): rows haematoxylin, eosin, DAB. */
static const double HED_FROM_STAINS[3][3] = {
    {0.65, 0.70, 0.29},
    {0.07, 0.99, 0.11},
    {0.27, 0.57, 0.78},
};

/* Draws per patch: one for the flip, then alpha and beta for H, E and D. */
enum { DRAW_DIHEDRAL, DRAW_ALPHA, DRAW_BETA = DRAW_ALPHA + 3, DRAWS = DRAW_BETA + 3 };

static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void invert3(const double m[3][3], double inv[3][3]) {
    double det = m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) -
                 m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0]) +
                 m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0]);
    for (int r = 0; r < 3; r++) {
        for (int c = 0; c < 3; c++) {
            /* The cofactor of (c, r), transposed into (r, c). */
            int r1 = (c + 1) % 3, r2 = (c + 2) % 3, c1 = (r + 1) % 3, c2 = (r + 2) % 3;
            inv[r][c] = (m[r1][c1] * m[r2][c2] - m[r1][c2] * m[r2][c1]) / det;
        }
    }
}

/* The jitter as one affine map of optical densities: od' = od * a + b, where
 * a = inverse(M) * diag(alpha) * M and b = beta * M for the stain matrix M. */
static void jitter_map(const double u[DRAWS], double sigma, float a[3][3], float b[3]) {
    double inv[3][3];
    invert3(HED_FROM_STAINS, inv);
    double alpha[3], beta[3];
    for (int k = 0; k < 3; k++) {
        alpha[k] = 1.0 + sigma * (2.0 * u[DRAW_ALPHA + k] - 1.0);
        beta[k] = sigma * (2.0 * u[DRAW_BETA + k] - 1.0);
    }
    for (int j = 0; j < 3; j++) {
        for (int c = 0; c < 3; c++) {
            double s = 0.0;
            for (int k = 0; k < 3; k++) {
                s += inv[j][k] * alpha[k] * HED_FROM_STAINS[k][c];
            }
            a[j][c] = (float)s;
        }
    }
    for (int c = 0; c < 3; c++) {
        double s = 0.0;
        for (int k = 0; k < 3; k++) {
            s += beta[k] * HED_FROM_STAINS[k][c];
        }
        b[c] = (float)s;
    }
}

/* The jitter by the plan's tables (augment_hed.h): channel c becomes
 * 255 exp(-(sum_k od_k a[k][c] + b[c])), written as 255 exp(-b[c]) times one factor per source
 * channel k, each a function of that channel's 8-bit value alone; so 2304 exponentials a patch
 * make the tables, and a pixel is 9 products instead of 3 exponentials.
 *
 * With SSE2 the three output channels are the lanes of one vector: the tables are laid out again
 * as lanes[k][v] = {factor[k][0][v], factor[k][1][v], factor[k][2][v], 0}, so a pixel is three
 * vector loads and three vector products, each lane the same IEEE products in the same order as
 * the scalar loop, so the bytes are the same (tests/unit/test_colour_lanes.c checks every
 * colour). */
typedef struct jitter {
    const sp_hed_plan *plan;
#ifdef SP_HAVE_X86
    __attribute__((aligned(16))) float lanes[3][256][4];
#endif
} jitter;

static void jitter_init(jitter *j, const sp_hed_plan *plan) {
    j->plan = plan;
#ifdef SP_HAVE_X86
    for (int k = 0; k < 3; k++) {
        for (int v = 0; v < 256; v++) {
            for (int c = 0; c < 3; c++) {
                j->lanes[k][v][c] = plan->factor[k][c][v];
            }
            j->lanes[k][v][3] = 0.0f;
        }
    }
#endif
}

/* n pixels read from src, `step` bytes apart, jittered into dst, consecutive; src may be dst
 * with step 3 (each pixel is read before it is written). */
static void jitter_run(const jitter *j, const uint8_t *src, int64_t step, uint8_t *dst, int64_t n) {
    const sp_hed_plan *plan = j->plan;
#ifdef SP_HAVE_X86
    const __m128 scale = _mm_setr_ps(plan->scale[0], plan->scale[1], plan->scale[2], 0.0f);
    const __m128 top = _mm_set1_ps(255.0f), half = _mm_set1_ps(0.5f);
    for (int64_t p = 0; p < n; p++, src += step, dst += 3) {
        __m128 v = _mm_mul_ps(scale, _mm_loadu_ps(j->lanes[0][src[0]]));
        v = _mm_mul_ps(v, _mm_loadu_ps(j->lanes[1][src[1]]));
        v = _mm_mul_ps(v, _mm_loadu_ps(j->lanes[2][src[2]]));
        /* (v > 255 ? 255 : v) + 0.5, truncated: min_ps(255, v) is 255 < v ? 255 : v */
        uint32_t b = sp_x86_bytes4(_mm_cvttps_epi32(_mm_add_ps(_mm_min_ps(top, v), half)));
        dst[0] = (uint8_t)b;
        dst[1] = (uint8_t)(b >> 8);
        dst[2] = (uint8_t)(b >> 16);
    }
#else
    for (int64_t p = 0; p < n; p++, src += step, dst += 3) {
        uint8_t i0 = src[0], i1 = src[1], i2 = src[2];
        for (int c = 0; c < 3; c++) {
            float v = plan->scale[c] * plan->factor[0][c][i0] * plan->factor[1][c][i1] *
                      plan->factor[2][c][i2];
            dst[c] = (uint8_t)((v > 255.0f ? 255.0f : v) + 0.5f);
        }
    }
#endif
}

static void swap_pixels(uint8_t *p, uint8_t *q) {
    uint8_t t[3];
    memcpy(t, p, 3);
    memcpy(p, q, 3);
    memcpy(q, t, 3);
}

/* In place, in numpy's terms on an (size, size, 3) array: transpose when bit 2 of t is set, then
 * reverse the rows (bit 1), then reverse each row (bit 0). */
static void dihedral(uint8_t *rgb, int64_t size, unsigned t) {
    int64_t row = size * 3;
    if (t & 4) {
        for (int64_t y = 0; y < size; y++) {
            for (int64_t x = y + 1; x < size; x++) {
                swap_pixels(rgb + y * row + 3 * x, rgb + x * row + 3 * y);
            }
        }
    }
    if (t & 2) {
        for (int64_t y = 0; y < size / 2; y++) {
            for (int64_t x = 0; x < size; x++) {
                swap_pixels(rgb + y * row + 3 * x, rgb + (size - 1 - y) * row + 3 * x);
            }
        }
    }
    if (t & 1) {
        for (int64_t y = 0; y < size; y++) {
            for (int64_t x = 0; x < size / 2; x++) {
                swap_pixels(rgb + y * row + 3 * x, rgb + y * row + 3 * (size - 1 - x));
            }
        }
    }
}

static bool arguments_ok(const uint8_t *rgb, int64_t size, double hed_sigma) {
    return rgb != NULL && size >= 1 && size <= (INT64_C(1) << 28) && hed_sigma >= 0.0 &&
           hed_sigma <= 1.0;
}

void sp_hed_plan_make(uint64_t seed, int dihedral, double sigma, sp_hed_plan *plan) {
    uint64_t state = seed;
    double u[DRAWS];
    for (int i = 0; i < DRAWS; i++) {
        u[i] = (double)(splitmix64(&state) >> 11) * 0x1p-53;
    }
    plan->jitter = sigma > 0.0;
    plan->flip = dihedral ? (int32_t)(u[DRAW_DIHEDRAL] * 8.0) : -1;
    if (!plan->jitter) {
        return;
    }
    float a[3][3], b[3];
    jitter_map(u, sigma, a, b);
    const float *od = sp_op_od_table(); /* the od op's -ln table */
    for (int c = 0; c < 3; c++) {
        plan->scale[c] = 255.0f * expf(-b[c]);
        for (int k = 0; k < 3; k++) {
            for (int v = 0; v < 256; v++) {
                plan->factor[k][c][v] = expf(-od[v] * a[k][c]);
            }
        }
    }
}

/* Flip t (1..7) and, with j, the jitter in one pass: output row y is read from the input along a
 * straight line (sp_hed_flip_source: a row or a column, either way), into `out`. The jitter
 * does not depend on where a pixel is, so this is the jitter then the flip. */
static void flip_into(const uint8_t *rgb, int64_t size, int32_t t, const jitter *j, uint8_t *out) {
    for (int64_t y = 0; y < size; y++) {
        int64_t y0 = y, x0 = 0, y1 = y, x1 = size > 1 ? 1 : 0;
        sp_hed_flip_source(t, size, &y0, &x0);
        sp_hed_flip_source(t, size, &y1, &x1);
        const uint8_t *src = rgb + (y0 * size + x0) * 3;
        int64_t step = ((y1 - y0) * size + (x1 - x0)) * 3;
        uint8_t *dst = out + y * size * 3;
        if (j != NULL) {
            jitter_run(j, src, step, dst, size);
            continue;
        }
        for (int64_t x = 0; x < size; x++, src += step, dst += 3) {
            memcpy(dst, src, 3);
        }
    }
}

static void augment_one(uint8_t *rgb, int64_t size, uint64_t seed, int flips, double sigma) {
    sp_hed_plan plan;
    sp_hed_plan_make(seed, flips, sigma, &plan);
    jitter j;
    if (plan.jitter) {
        jitter_init(&j, &plan);
    }
    uint8_t *out = plan.flip > 0 ? malloc((size_t)(size * size * 3)) : NULL;
    if (out != NULL) {
        flip_into(rgb, size, plan.flip, plan.jitter ? &j : NULL, out);
        memcpy(rgb, out, (size_t)(size * size * 3));
        free(out);
        return;
    }
    /* no flip, or no memory for the one-pass flip: in place */
    if (plan.jitter) {
        jitter_run(&j, rgb, 3, rgb, size * size);
    }
    if (plan.flip > 0) {
        dihedral(rgb, size, (unsigned)plan.flip);
    }
}

sp_status sp_augment_patch(uint8_t *rgb, int64_t size, uint64_t seed, int dihedral_on,
                           double hed_sigma) {
    if (!arguments_ok(rgb, size, hed_sigma)) {
        return SP_E_INVALID_ARG;
    }
    augment_one(rgb, size, seed, dihedral_on, hed_sigma);
    return SP_OK;
}

/* A patch of a batch: its size and what to do travel in ctx. */
typedef struct shape {
    int64_t size;
    int dihedral;
    double sigma;
} shape;

static sp_status augment_patch(const void *ctx, uint8_t *patch, uint64_t seed) {
    const shape *k = ctx;
    augment_one(patch, k->size, seed, k->dihedral, k->sigma);
    return SP_OK;
}

sp_status sp_augment_patches(uint8_t *rgb, int64_t count, int64_t size, const uint64_t *seeds,
                             int dihedral_on, double hed_sigma, int threads) {
    if (count < 0 || (count > 0 && (seeds == NULL || !arguments_ok(rgb, size, hed_sigma)))) {
        return SP_E_INVALID_ARG;
    }
    shape k = {size, dihedral_on, hed_sigma};
    return sp_patch_batch(rgb, count, (size_t)(size * size * 3), seeds, augment_patch, &k,
                          threads);
}
