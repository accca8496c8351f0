/* augment_color.c — the photometric augmentation of RGB8 patches: its parameter check, the
 * draws a patch's seed makes, the colour jitter (torchvision's ColorJitter on a uint8 tensor,
 * step by step), and the entry points that run jitter, blur (augment_blur.c) and noise
 * (augment_noise.c) on one patch or a batch.
 *
 * Ten uniform numbers are drawn per patch from splitmix64 started at seed ^ "photomet", always
 * all ten in the same order whatever is switched on, so switching a stage on or off never moves
 * another stage's numbers, and a batch gives the same bytes on any number of threads or split
 * any way. docs/augment-color.md defines the arithmetic; python/tests/test_augment_color.py
 * compares it with torchvision.
 */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ops/patch_batch.h"
#include "ops/augment_color.h"
#include "ops/augment_color_math.h"
#include "ops/augment_color_rows.h"

/* The draws, in this order. */
enum {
    U_JITTER,     /* jitter applied when u < jitter_p */
    U_ORDER,      /* the permutation: floor(24 u), decoded as a Lehmer code */
    U_BRIGHTNESS, /* the four factors, each lo + (hi - lo) u */
    U_CONTRAST,
    U_SATURATION,
    U_HUE,
    U_BLUR,       /* blur applied when u < blur_p */
    U_BLUR_SIGMA, /* sigma = min + (max - min) u */
    U_NOISE,      /* noise applied when u < noise_p */
    U_NOISE_SIGMA,
    U_COUNT
};

static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static bool probability(double p) {
    return p >= 0.0 && p <= 1.0; /* false for NaN too */
}

static bool factor_range(double f) {
    return f >= 0.0 && f <= 1e6;
}

sp_status sp_photometric_check(const sp_photometric_params *p) {
    if (p == NULL || p->struct_size < sizeof(sp_photometric_params)) {
        return SP_E_INVALID_ARG;
    }
    bool ok = probability(p->jitter_p) && probability(p->blur_p) && probability(p->noise_p) &&
              factor_range(p->brightness) && factor_range(p->contrast) &&
              factor_range(p->saturation) && p->hue >= 0.0 && p->hue <= 0.5;
    ok = ok && p->noise_sigma_min >= 0.0 && p->noise_sigma_min <= p->noise_sigma_max &&
         p->noise_sigma_max <= 255.0;
    if (p->blur_p > 0.0) {
        ok = ok && p->blur_sigma_min > 0.0 && p->blur_sigma_min <= p->blur_sigma_max &&
             p->blur_sigma_max <= SP_BLUR_SIGMA_MAX;
    }
    ok = ok && p->blur_kernel_size >= 0 && p->blur_kernel_size <= SP_BLUR_KERNEL_MAX &&
         (p->blur_kernel_size == 0 || p->blur_kernel_size % 2 == 1);
    return ok ? SP_OK : SP_E_INVALID_ARG;
}

/* Permutation number k in [0, 24) as a Lehmer code: the first step is item k / 6 of
 * (0, 1, 2, 3), the second item (k % 6) / 2 of those left, the third item k % 2 of those left. */
static void permutation(unsigned k, int32_t order[4]) {
    int items[4] = {0, 1, 2, 3};
    unsigned radix[3] = {6, 2, 1};
    int left = 4;
    for (int i = 0; i < 3; i++) {
        unsigned pick = k / radix[i];
        k %= radix[i];
        order[i] = items[pick];
        memmove(items + pick, items + pick + 1, (size_t)(left - 1 - (int)pick) * sizeof(int));
        left--;
    }
    order[3] = items[0];
}

static double factor(double spread, double u) {
    double lo = spread < 1.0 ? 1.0 - spread : 0.0, hi = 1.0 + spread;
    return lo + (hi - lo) * u;
}

void sp_photometric_draws_of(uint64_t seed, const sp_photometric_params *p,
                             sp_photometric_draws *out) {
    uint64_t state = seed ^ SP_PHOTOMETRIC_STREAM;
    double u[U_COUNT];
    for (int i = 0; i < U_COUNT; i++) {
        u[i] = (double)(splitmix64(&state) >> 11) * 0x1p-53;
    }
    size_t size = out->struct_size;
    memset(out, 0, sizeof(*out));
    out->struct_size = size;
    out->brightness = out->contrast = out->saturation = 1.0;
    permutation((unsigned)(u[U_ORDER] * 24.0), out->order);
    out->jitter = u[U_JITTER] < p->jitter_p;
    if (out->jitter) {
        out->brightness = factor(p->brightness, u[U_BRIGHTNESS]);
        out->contrast = factor(p->contrast, u[U_CONTRAST]);
        out->saturation = factor(p->saturation, u[U_SATURATION]);
        out->hue = -p->hue + 2.0 * p->hue * u[U_HUE];
    }
    out->blur = u[U_BLUR] < p->blur_p;
    if (out->blur) {
        out->blur_sigma =
            p->blur_sigma_min + (p->blur_sigma_max - p->blur_sigma_min) * u[U_BLUR_SIGMA];
        out->blur_kernel = sp_blur_kernel_size(out->blur_sigma, p->blur_kernel_size);
    }
    out->noise = u[U_NOISE] < p->noise_p;
    if (out->noise) {
        out->noise_sigma =
            p->noise_sigma_min + (p->noise_sigma_max - p->noise_sigma_min) * u[U_NOISE_SIGMA];
    }
}

sp_status sp_photometric_draw(uint64_t seed, const sp_photometric_params *p,
                              sp_photometric_draws *out) {
    if (out == NULL || out->struct_size < sizeof(sp_photometric_draws) ||
        sp_photometric_check(p) != SP_OK) {
        return SP_E_INVALID_ARG;
    }
    sp_photometric_draws_of(seed, p, out);
    return SP_OK;
}

/* A step whose range is zero is left out, as ColorJitter leaves it out (for hue that matters:
 * the HSV round trip alone changes some pixels). */
static bool step_on(const sp_photometric_draws *d, int step) {
    switch (step) {
    case SP_JITTER_BRIGHTNESS: return d->brightness != 1.0;
    case SP_JITTER_CONTRAST: return d->contrast != 1.0;
    case SP_JITTER_SATURATION: return d->saturation != 1.0;
    default: return d->hue != 0.0;
    }
}

void sp_jitter_ratio(const sp_photometric_draws *d, int step, float *ratio, float *rest) {
    double f = step == SP_JITTER_BRIGHTNESS   ? d->brightness
               : step == SP_JITTER_CONTRAST   ? d->contrast
               : step == SP_JITTER_SATURATION ? d->saturation
                                              : d->hue;
    *ratio = (float)f;
    *rest = (float)(1.0 - f);
}

float sp_jitter_grey_mean(uint64_t grey_sum, int64_t npixels) {
    return (float)grey_sum / (float)npixels;
}

void sp_color_jitter(uint8_t *rgb, int64_t npixels, const sp_photometric_draws *d) {
    for (int s = 0; s < 4; s++) {
        int step = d->order[s];
        if (!step_on(d, step)) {
            continue;
        }
        float ratio, rest, mean = 0.0f;
        sp_jitter_ratio(d, step, &ratio, &rest);
        if (step == SP_JITTER_CONTRAST) {
            uint64_t sum = 0;
            for (int64_t i = 0; i < npixels; i++) {
                sum += sp_aug_grey(rgb + 3 * i);
            }
            mean = sp_jitter_grey_mean(sum, npixels);
        }
        if (step == SP_JITTER_HUE) {
            sp_hue_pixels(rgb, npixels, ratio);
        } else if (step == SP_JITTER_SATURATION) {
            sp_saturation_pixels(rgb, npixels, ratio, rest);
        } else {
            /* Brightness and contrast blend each byte with a constant: a table of the 256
             * results, made by the same function, gives the same bytes. */
            uint8_t table[256];
            for (int v = 0; v < 256; v++) {
                table[v] = sp_aug_blend((uint8_t)v, mean, ratio, rest);
            }
            for (int64_t i = 0; i < 3 * npixels; i++) {
                rgb[i] = table[rgb[i]];
            }
        }
    }
}

static bool size_ok(int64_t width, int64_t height) {
    return width >= 1 && height >= 1 && width <= SP_PHOTOMETRIC_SIDE_MAX &&
           height <= SP_PHOTOMETRIC_SIDE_MAX;
}

/* One patch; SP_E_NOMEM before anything is changed when the blur's scratch cannot be had. */
static sp_status augment_one(uint8_t *rgb, int64_t width, int64_t height, uint64_t seed,
                             const sp_photometric_params *p) {
    sp_photometric_draws d = {.struct_size = sizeof(d)};
    sp_photometric_draws_of(seed, p, &d);
    int64_t npixels = width * height;
    float *scratch = NULL, weights[SP_BLUR_KERNEL_MAX];
    if (d.blur) {
        scratch = malloc((size_t)npixels * 3 * sizeof(float));
        if (scratch == NULL) {
            return SP_E_NOMEM;
        }
        sp_blur_weights(d.blur_kernel, d.blur_sigma, weights);
    }
    if (d.jitter) {
        sp_color_jitter(rgb, npixels, &d);
    }
    if (d.blur) {
        sp_gaussian_blur(rgb, width, height, weights, d.blur_kernel, scratch);
    }
    if (d.noise && d.noise_sigma > 0.0) {
        sp_gaussian_noise(rgb, npixels, seed, d.noise_sigma);
    }
    free(scratch);
    return SP_OK;
}

sp_status sp_augment_photometric(uint8_t *rgb, int64_t width, int64_t height, uint64_t seed,
                                 const sp_photometric_params *p) {
    if (rgb == NULL || !size_ok(width, height) || sp_photometric_check(p) != SP_OK) {
        return SP_E_INVALID_ARG;
    }
    return augment_one(rgb, width, height, seed, p);
}

/* A patch of a batch: its size and the parameters travel in ctx. */
typedef struct shape {
    int64_t width, height;
    const sp_photometric_params *p;
} shape;

static sp_status augment_patch(const void *ctx, uint8_t *patch, uint64_t seed) {
    const shape *k = ctx;
    return augment_one(patch, k->width, k->height, seed, k->p);
}

sp_status sp_augment_photometric_batch(uint8_t *rgb, int64_t count, int64_t width, int64_t height,
                                       const uint64_t *seeds, const sp_photometric_params *p,
                                       int threads) {
    if (count < 0 || sp_photometric_check(p) != SP_OK) {
        return SP_E_INVALID_ARG;
    }
    if (count == 0) {
        return SP_OK;
    }
    if (rgb == NULL || seeds == NULL || !size_ok(width, height)) {
        return SP_E_INVALID_ARG;
    }
    shape k = {width, height, p};
    return sp_patch_batch(rgb, count, (size_t)(width * height * 3), seeds, augment_patch, &k,
                          threads);
}
