/* tissue.c — sp_tissue_mask_compute: which parts of a slide show tissue, for choosing the tiles
 * a training loader reads (tissue_tiles.c). The whole slide is read once at low resolution
 * (longer side max_side) through sp_slide_read_region_scaled; a pixel's score is its chroma,
 * max(R, G, B) - min(R, G, B), because glass, background and most scanner artefacts are grey
 * while stained tissue is coloured; the threshold is Otsu's on the chroma histogram, never below
 * SP_TISSUE_MIN_CHROMA, so a slide of bare glass gives an empty mask instead of its noise split
 * in two; a 3x3 opening then closing removes specks and fills pinholes. docs/tissue.md gives the
 * exact definitions (the Python tests recompute them with numpy and scipy bit for bit).
 */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "jobs/train/tissue_internal.h"
#include "slide/overview.h"

int sp_tissue_otsu(const uint64_t hist[256]) {
    uint64_t total = 0;
    double sum = 0;
    for (int c = 0; c < 256; c++) {
        total += hist[c];
        sum += (double)c * (double)hist[c];
    }
    if (total == 0) {
        return 0;
    }
    /* Counts and sums are integers below 2^53, so they are exact in double and the result
     * depends only on the histogram (tests/cli/test_tissue.py evaluates the same expression). */
    double n = (double)total;
    uint64_t n0 = 0;
    double s0 = 0;
    double best = 0;
    int best_t = 0;
    for (int t = 0; t < 255; t++) {
        n0 += hist[t];
        s0 += (double)t * (double)hist[t];
        uint64_t n1 = total - n0;
        if (n0 == 0 || n1 == 0) {
            continue; /* a class with no pixels scores 0, which never beats best >= 0 */
        }
        double w0 = (double)n0 / n, w1 = (double)n1 / n;
        double mu0 = s0 / (double)n0, mu1 = (sum - s0) / (double)n1;
        double d = mu0 - mu1;
        double v = w0 * w1 * (d * d);
        if (v > best) {
            best = v;
            best_t = t;
        }
    }
    return best_t;
}

/* One 3x3 erosion (min) or dilation (max) of src into dst, outside pixels 0; the square is
 * separable, so a pass along rows into tmp, then one down columns. */
static void morph(const uint8_t *src, uint8_t *tmp, uint8_t *dst, int64_t w, int64_t h,
                  bool erode) {
    for (int64_t y = 0; y < h; y++) {
        const uint8_t *s = src + y * w;
        uint8_t *t = tmp + y * w;
        for (int64_t x = 0; x < w; x++) {
            uint8_t l = x > 0 ? s[x - 1] : 0, r = x + 1 < w ? s[x + 1] : 0;
            t[x] = erode ? (uint8_t)(l & s[x] & r) : (uint8_t)(l | s[x] | r);
        }
    }
    for (int64_t y = 0; y < h; y++) {
        const uint8_t *up = y > 0 ? tmp + (y - 1) * w : NULL;
        const uint8_t *mid = tmp + y * w;
        const uint8_t *down = y + 1 < h ? tmp + (y + 1) * w : NULL;
        uint8_t *d = dst + y * w;
        for (int64_t x = 0; x < w; x++) {
            uint8_t u = up ? up[x] : 0, b = down ? down[x] : 0;
            d[x] = erode ? (uint8_t)(u & mid[x] & b) : (uint8_t)(u | mid[x] | b);
        }
    }
}

sp_status sp_tissue_clean(uint8_t *mask, int64_t width, int64_t height) {
    size_t n = (size_t)width * (size_t)height;
    uint8_t *tmp = malloc(n ? n : 1);
    uint8_t *other = malloc(n ? n : 1);
    if (tmp == NULL || other == NULL) {
        free(tmp);
        free(other);
        return SP_E_NOMEM;
    }
    morph(mask, tmp, other, width, height, true);  /* opening: erode, */
    morph(other, tmp, mask, width, height, false); /* then dilate; */
    morph(mask, tmp, other, width, height, false); /* closing: dilate, */
    morph(other, tmp, mask, width, height, true);  /* then erode */
    free(tmp);
    free(other);
    return SP_OK;
}

static sp_status compute(sp_slide *slide, int64_t max_side, sp_tissue_mask *out, sp_err *err) {
    sp_overview img;
    sp_status st = sp_overview_read(slide, max_side, "tissue mask", &img, err);
    if (st != SP_OK) {
        return st;
    }
    int64_t w = img.width, h = img.height;
    size_t n = (size_t)w * (size_t)h;
    uint8_t *rgb = img.rgb;
    uint8_t *pix = malloc(n);
    if (pix == NULL) {
        free(rgb);
        return sp_err_set(err, SP_E_NOMEM, "tissue mask: out of memory for a %lldx%lld mask",
                          (long long)w, (long long)h);
    }
    uint64_t hist[256] = {0};
    for (size_t i = 0; i < n; i++) {
        const uint8_t *p = rgb + i * 3;
        uint8_t hi = p[0] > p[1] ? p[0] : p[1], lo = p[0] < p[1] ? p[0] : p[1];
        hi = p[2] > hi ? p[2] : hi;
        lo = p[2] < lo ? p[2] : lo;
        pix[i] = (uint8_t)(hi - lo);
        hist[pix[i]]++;
    }
    free(rgb);
    int t = sp_tissue_otsu(hist);
    int threshold = t > SP_TISSUE_MIN_CHROMA ? t : SP_TISSUE_MIN_CHROMA;
    for (size_t i = 0; i < n; i++) {
        pix[i] = pix[i] > threshold;
    }
    if (sp_tissue_clean(pix, w, h) != SP_OK) {
        free(pix);
        return sp_err_set(err, SP_E_NOMEM, "tissue mask: out of memory for the clean-up");
    }
    uint64_t tissue = 0;
    for (size_t i = 0; i < n; i++) {
        tissue += pix[i];
    }
    *out = (sp_tissue_mask){
        .width = w,
        .height = h,
        .downsample = img.downsample,
        .threshold = threshold,
        .tissue_fraction = (double)tissue / (double)n,
        .pixels = pix,
    };
    return SP_OK;
}

sp_status sp_tissue_mask_compute(sp_slide *slide, int64_t max_side, sp_tissue_mask *out, char *err,
                                 size_t err_len) {
    sp_err e = {0};
    sp_status st;
    if (out == NULL || slide == NULL) {
        st = sp_err_set(&e, SP_E_INVALID_ARG, "tissue mask: NULL %s", slide ? "out" : "slide");
    } else {
        memset(out, 0, sizeof *out);
        st = compute(slide, max_side, out, &e);
    }
    sp_err_report(st, &e, err, err_len);
    return st;
}

void sp_tissue_mask_free(sp_tissue_mask *mask) {
    if (mask != NULL) {
        free(mask->pixels);
        memset(mask, 0, sizeof *mask);
    }
}
