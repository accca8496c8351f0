/* tile_qc_score.c — sp_tile_qc_pixels: the quality scores of one tile held in memory as RGB8,
 * by per-pixel colour rules (background glass, pen ink by colour, tissue, folded tissue) and
 * the variance of the Laplacian of the luma over the tissue (blur). Every rule is on integers,
 * and the blur sums are integers converted once, so docs/qc.md can state the scores exactly and
 * python/tests/test_tile_qc.py recomputes them with numpy to the last bit.
 */
#include <stdbool.h>
#include <string.h>

#include "jobs/train/tile_qc_internal.h"

uint8_t sp_qc_classify(uint8_t r, uint8_t g, uint8_t b) {
    int mx = r > g ? r : g, mn = r < g ? r : g;
    mx = b > mx ? b : mx;
    mn = b < mn ? b : mn;
    int chroma = mx - mn;
    if (mn >= SP_QC_GLASS_MIN && chroma <= SP_QC_GLASS_CHROMA) {
        return SP_QC_BACKGROUND;
    }
    /* Ink before tissue: inks are coloured, so they would pass as tissue. */
    if (mx <= SP_QC_BLACK_MAX && chroma <= SP_QC_BLACK_CHROMA) {
        return SP_QC_PEN_BLACK;
    }
    /* Haematoxylin and eosin both absorb green more than red, so stained tissue has G < R
     * (hue past 240 degrees, purple to pink); blue and green inks have G >= R. */
    if (b >= g + SP_QC_BLUE_MARGIN && g >= r) {
        return SP_QC_PEN_BLUE;
    }
    if (g >= r + SP_QC_GREEN_MARGIN && g >= b + SP_QC_GREEN_MARGIN) {
        return SP_QC_PEN_GREEN;
    }
    if (chroma <= SP_QC_TISSUE_CHROMA) {
        return SP_QC_OTHER;
    }
    /* A fold doubles the optical density: darker (by luma, so that folded pink stroma, whose
     * red stays high, counts) and at least half saturated. */
    if (sp_qc_luma(r, g, b) <= SP_QC_FOLD_LUMA && 2 * chroma >= mx) {
        return SP_QC_FOLD;
    }
    return SP_QC_TISSUE;
}

static bool is_tissue(uint8_t c) {
    return c == SP_QC_TISSUE || c == SP_QC_FOLD || c == SP_QC_PEN_BLUE || c == SP_QC_PEN_GREEN ||
           c == SP_QC_PEN_BLACK;
}

void sp_qc_score(const uint8_t *rgb, int64_t stride, int64_t size, uint8_t *cls, uint8_t *luma,
                 sp_tile_qc *out) {
    uint64_t counts[SP_QC_CLASSES];
    memset(counts, 0, sizeof counts);
    for (int64_t y = 0; y < size; y++) {
        const uint8_t *p = rgb + y * stride;
        uint8_t *c = cls + y * size;
        uint8_t *l = luma + y * size;
        for (int64_t x = 0; x < size; x++, p += 3) {
            c[x] = sp_qc_classify(p[0], p[1], p[2]);
            counts[c[x]]++;
            l[x] = sp_qc_luma(p[0], p[1], p[2]);
        }
    }
    /* Laplacian sums: |lap| <= 1020, so sum and sum of squares of up to 2^26 pixels stay far
     * below 2^53 and convert to double exactly. */
    int64_t n = 0, s = 0, s2 = 0;
    for (int64_t y = 1; y + 1 < size; y++) {
        const uint8_t *l = luma + y * size;
        const uint8_t *c = cls + y * size;
        for (int64_t x = 1; x + 1 < size; x++) {
            if (!is_tissue(c[x])) {
                continue;
            }
            int64_t lap = (int64_t)l[x - size] + l[x + size] + l[x - 1] + l[x + 1] - 4 * l[x];
            n++;
            s += lap;
            s2 += lap * lap;
        }
    }
    double all = (double)size * (double)size;
    uint64_t tissue = counts[SP_QC_TISSUE] + counts[SP_QC_FOLD] + counts[SP_QC_PEN_BLUE] +
                      counts[SP_QC_PEN_GREEN] + counts[SP_QC_PEN_BLACK];
    out->blur = n ? ((double)s2 - (double)s * (double)s / (double)n) / (double)n : 0.0;
    out->pen_blue = (double)counts[SP_QC_PEN_BLUE] / all;
    out->pen_green = (double)counts[SP_QC_PEN_GREEN] / all;
    out->pen_black = (double)counts[SP_QC_PEN_BLACK] / all;
    out->pen = (double)(counts[SP_QC_PEN_BLUE] + counts[SP_QC_PEN_GREEN] +
                        counts[SP_QC_PEN_BLACK]) /
               all;
    out->fold = tissue ? (double)counts[SP_QC_FOLD] / (double)tissue : 0.0;
    out->background = (double)counts[SP_QC_BACKGROUND] / all;
}
