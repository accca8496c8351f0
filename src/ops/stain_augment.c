/* stain_augment.c — stain augmentation in a slide's own Macenko stain space (Tellez et al. 2018
 * style, docs/stains.md): each pixel's haematoxylin and eosin concentrations under the slide's
 * stains are scaled and shifted by amounts drawn from the patch's seed, and the change is added
 * to the pixel's optical density, so what the two stains do not explain (and the background's
 * white) is kept. Unlike the HED jitter of augment.c, which uses fixed textbook stain vectors,
 * this moves colours along the stains the slide really has.
 *
 * The draws come from splitmix64 on a stream of their own (state = seed ^ STREAM), always in the
 * order alpha_h, alpha_e, beta_h, beta_e; the per-pixel arithmetic is double precision on the
 * pixel alone, so the bytes do not depend on the thread or the order of patches.
 */
#include <math.h>
#include <stdint.h>

#include "ops/patch_batch.h"
#include "ops/stain_augment.h"

/* "stainaug" in ASCII: keeps these draws apart from augment.c's stream of the same seed. */
#define STREAM 0x737461696e617567ull

static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void sp_stain_augment_draw(uint64_t seed, double sigma, double alpha[2], double beta[2]) {
    uint64_t state = seed ^ STREAM;
    double u[4];
    for (int i = 0; i < 4; i++) {
        u[i] = (double)(splitmix64(&state) >> 11) * 0x1p-53; /* [0, 1) */
    }
    alpha[0] = 1.0 - sigma + 2.0 * sigma * u[0];
    alpha[1] = 1.0 - sigma + 2.0 * sigma * u[1];
    beta[0] = -sigma + 2.0 * sigma * u[2];
    beta[1] = -sigma + 2.0 * sigma * u[3];
}

static double dot3(const double a[3], const double b[3]) {
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

sp_status sp_stain_augment_init(const sp_stains *s, sp_stain_augment_map *map) {
    if (s == NULL || map == NULL) {
        return SP_E_INVALID_ARG;
    }
    for (int k = 0; k < 3; k++) {
        if (!isfinite(s->h[k]) || !isfinite(s->e[k])) {
            return SP_E_INVALID_ARG;
        }
    }
    double hh = dot3(s->h, s->h), ee = dot3(s->e, s->e), he = dot3(s->h, s->e);
    double det = hh * ee - he * he;
    if (!(hh > 0) || !(ee > 0) || !(det > 1e-12 * hh * ee) || !isfinite(det)) {
        return SP_E_INVALID_ARG;
    }
    for (int k = 0; k < 3; k++) {
        map->h[k] = s->h[k];
        map->e[k] = s->e[k];
        map->p[0][k] = (ee * s->h[k] - he * s->e[k]) / det;
        map->p[1][k] = (hh * s->e[k] - he * s->h[k]) / det;
    }
    for (int v = 0; v < 256; v++) {
        map->od[v] = -log((v < 1 ? 1.0 : (double)v) / 255.0);
    }
    return SP_OK;
}

void sp_stain_augment_apply(const sp_stain_augment_map *map, const double alpha[2],
                            const double beta[2], uint8_t *rgb, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        uint8_t *px = rgb + 3 * i;
        double od[3] = {map->od[px[0]], map->od[px[1]], map->od[px[2]]};
        double ch = dot3(map->p[0], od), ce = dot3(map->p[1], od);
        double dh = ch * (alpha[0] - 1.0) + beta[0], de = ce * (alpha[1] - 1.0) + beta[1];
        for (int k = 0; k < 3; k++) {
            double x = (double)px[k] * exp(-(map->h[k] * dh + map->e[k] * de));
            px[k] = x < 255.0 ? (uint8_t)floor(x + 0.5) : 255; /* x >= 0 */
        }
    }
}

sp_status sp_stains_augment(const sp_stains *slide_stains, uint8_t *rgb, int64_t npixels,
                            uint64_t seed, double sigma) {
    if (rgb == NULL || npixels < 0 || !(sigma >= 0 && sigma <= 1)) {
        return SP_E_INVALID_ARG;
    }
    sp_stain_augment_map map;
    sp_status st = sp_stain_augment_init(slide_stains, &map);
    if (st != SP_OK) {
        return st;
    }
    double alpha[2], beta[2];
    sp_stain_augment_draw(seed, sigma, alpha, beta);
    sp_stain_augment_apply(&map, alpha, beta, rgb, npixels);
    return SP_OK;
}

/* A patch of a batch: the stains' map, the patch size and sigma travel in ctx. */
typedef struct shape {
    const sp_stain_augment_map *map;
    int64_t patch_pixels;
    double sigma;
} shape;

static sp_status augment_patch(const void *ctx, uint8_t *patch, uint64_t seed) {
    const shape *k = ctx;
    double alpha[2], beta[2];
    sp_stain_augment_draw(seed, k->sigma, alpha, beta);
    sp_stain_augment_apply(k->map, alpha, beta, patch, k->patch_pixels);
    return SP_OK;
}

sp_status sp_stains_augment_patches(const sp_stains *slide_stains, uint8_t *rgb, int64_t count,
                                    int64_t patch_pixels, const uint64_t *seeds, double sigma,
                                    int threads) {
    if (count < 0 || patch_pixels < 0 || !(sigma >= 0 && sigma <= 1) ||
        (count > 0 && patch_pixels > 0 && (rgb == NULL || seeds == NULL))) {
        return SP_E_INVALID_ARG;
    }
    sp_stain_augment_map map;
    sp_status st = sp_stain_augment_init(slide_stains, &map);
    if (st != SP_OK || count == 0 || patch_pixels == 0) {
        return st;
    }
    shape k = {&map, patch_pixels, sigma};
    return sp_patch_batch(rgb, count, (size_t)patch_pixels * 3, seeds, augment_patch, &k,
                          threads);
}
