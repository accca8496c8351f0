/* tile_qc_math.h — the per-pixel rules of the tile QC scores and the step from a tile's integer
 * sums to its scores, shared word for word by the CPU scorer (src/jobs/train/tile_qc_score.c)
 * and the GPU kernel (src/cuda/tile_qc_kernels.cu), so both give the same bits: every rule is on
 * integers, the sums are integers (their order cannot matter), and the only floating-point step
 * is sp_qc_finish, which both run on the host. docs/qc.md states the rules. */
#ifndef SP_OPS_TILE_QC_MATH_H
#define SP_OPS_TILE_QC_MATH_H

#include <stdint.h>

#include "slidepipe.h"

#ifdef __CUDACC__
#define SP_QC_HD __host__ __device__
#else
#define SP_QC_HD
#endif

/* A pixel's class; the rules are tried in this order (docs/qc.md). */
enum {
    SP_QC_BACKGROUND = 0, /* min >= GLASS_MIN and chroma <= GLASS_CHROMA */
    SP_QC_PEN_BLACK = 1,  /* max <= BLACK_MAX and chroma <= BLACK_CHROMA */
    SP_QC_PEN_BLUE = 2,   /* B >= G + BLUE_MARGIN and G >= R */
    SP_QC_PEN_GREEN = 3,  /* G >= R + GREEN_MARGIN and G >= B + GREEN_MARGIN */
    SP_QC_OTHER = 4,      /* chroma <= TISSUE_CHROMA: grey, neither glass nor tissue */
    SP_QC_FOLD = 5,       /* tissue with luma <= FOLD_LUMA and 2 chroma >= max */
    SP_QC_TISSUE = 6,     /* the rest */
    SP_QC_CLASSES = 7
};

#define SP_QC_GLASS_MIN 200
#define SP_QC_GLASS_CHROMA 24
#define SP_QC_BLACK_MAX 80
#define SP_QC_BLACK_CHROMA 40
#define SP_QC_BLUE_MARGIN 30
#define SP_QC_GREEN_MARGIN 20
#define SP_QC_TISSUE_CHROMA 8 /* SP_TISSUE_MIN_CHROMA, the tissue mask's floor */
#define SP_QC_FOLD_LUMA 140

/* A tile's integer sums: the pixel count of each class, then the number of interior tissue
 * pixels, the sum and the sum of squares of their Laplacians. */
enum { SP_QC_SUM_N = SP_QC_CLASSES, SP_QC_SUM_S, SP_QC_SUM_S2, SP_QC_SUMS };

/* The 8-bit luma of the blur score and the fold rule: BT.601 weights in 8-bit fixed point. */
SP_QC_HD static inline int sp_qc_luma(int r, int g, int b) {
    return (77 * r + 150 * g + 29 * b + 128) >> 8;
}

SP_QC_HD static inline int sp_qc_classify(int r, int g, int b) {
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

/* Tissue for the blur and fold scores: stained tissue, folds and ink. */
SP_QC_HD static inline int sp_qc_is_tissue(int c) {
    return c == SP_QC_TISSUE || c == SP_QC_FOLD || c == SP_QC_PEN_BLUE || c == SP_QC_PEN_GREEN ||
           c == SP_QC_PEN_BLACK;
}

/* The scores of a size x size tile from its sums. |Laplacian| <= 1020, so the sums of up to
 * 2^26 pixels stay far below 2^53 and convert to double exactly. */
static inline void sp_qc_finish(const int64_t sums[SP_QC_SUMS], int64_t size, sp_tile_qc *out) {
    double all = (double)size * (double)size;
    int64_t tissue = sums[SP_QC_TISSUE] + sums[SP_QC_FOLD] + sums[SP_QC_PEN_BLUE] +
                     sums[SP_QC_PEN_GREEN] + sums[SP_QC_PEN_BLACK];
    double n = (double)sums[SP_QC_SUM_N], s = (double)sums[SP_QC_SUM_S];
    out->blur = n > 0 ? ((double)sums[SP_QC_SUM_S2] - s * s / n) / n : 0.0;
    out->pen_blue = (double)sums[SP_QC_PEN_BLUE] / all;
    out->pen_green = (double)sums[SP_QC_PEN_GREEN] / all;
    out->pen_black = (double)sums[SP_QC_PEN_BLACK] / all;
    out->pen = (double)(sums[SP_QC_PEN_BLUE] + sums[SP_QC_PEN_GREEN] + sums[SP_QC_PEN_BLACK]) / all;
    out->fold = tissue > 0 ? (double)sums[SP_QC_FOLD] / (double)tissue : 0.0;
    out->background = (double)sums[SP_QC_BACKGROUND] / all;
}

#endif
