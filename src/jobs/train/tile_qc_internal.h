/* tile_qc_internal.h — the CPU scorer of the tile QC scores (tile_qc_score.c), used by the tile
 * reader (tile_qc.c) and the unit tests; the rules themselves are in ops/tile_qc_math.h, shared
 * with the GPU kernel. */
#ifndef SP_JOBS_TRAIN_TILE_QC_INTERNAL_H
#define SP_JOBS_TRAIN_TILE_QC_INTERNAL_H

#include <stdint.h>

#include "ops/tile_qc_math.h"
#include "slidepipe.h"

/* The integer sums of a size x size RGB8 tile (rows `stride` bytes apart); cls and luma are
 * size * size bytes of scratch. */
void sp_qc_sums(const uint8_t *rgb, int64_t stride, int64_t size, uint8_t *cls, uint8_t *luma,
                int64_t sums[SP_QC_SUMS]);

/* Score a size x size RGB8 tile: sp_qc_sums, then sp_qc_finish. */
void sp_qc_score(const uint8_t *rgb, int64_t stride, int64_t size, uint8_t *cls, uint8_t *luma,
                 sp_tile_qc *out);

#endif
