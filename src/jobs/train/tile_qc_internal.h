/* tile_qc_internal.h — the pixel classes and thresholds of the tile QC scores (docs/qc.md),
 * shared by the scorer (tile_qc_score.c), the tile reader (tile_qc.c) and the unit tests. */
#ifndef SP_JOBS_TRAIN_TILE_QC_INTERNAL_H
#define SP_JOBS_TRAIN_TILE_QC_INTERNAL_H

#include <stdint.h>

#include "slidepipe.h"

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

/* The 8-bit luma of the blur score and the fold rule: BT.601 weights in 8-bit fixed point. */
static inline uint8_t sp_qc_luma(uint8_t r, uint8_t g, uint8_t b) {
    return (uint8_t)((77 * r + 150 * g + 29 * b + 128) >> 8);
}

uint8_t sp_qc_classify(uint8_t r, uint8_t g, uint8_t b);

/* Score a size x size RGB8 tile; cls and luma are size * size bytes of scratch. */
void sp_qc_score(const uint8_t *rgb, int64_t stride, int64_t size, uint8_t *cls, uint8_t *luma,
                 sp_tile_qc *out);

#endif
