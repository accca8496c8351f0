/* tile_qc_score.c — the quality scores of one tile held in memory as RGB8, on the CPU: each
 * pixel's class by the colour rules of ops/tile_qc_math.h (background glass, pen ink by colour,
 * tissue, folded tissue), counted, and the Laplacian of the luma summed over the interior tissue
 * pixels (blur). The sums are integers and the scores come from them in one shared step
 * (sp_qc_finish), so the GPU kernel and python/tests/test_tile_qc.py's numpy evaluation give the
 * same bits. This is the reference.
 */
#include <string.h>

#include "jobs/train/tile_qc_internal.h"

void sp_qc_sums(const uint8_t *rgb, int64_t stride, int64_t size, uint8_t *cls, uint8_t *luma,
                int64_t sums[SP_QC_SUMS]) {
    memset(sums, 0, SP_QC_SUMS * sizeof *sums);
    for (int64_t y = 0; y < size; y++) {
        const uint8_t *p = rgb + y * stride;
        uint8_t *c = cls + y * size;
        uint8_t *l = luma + y * size;
        for (int64_t x = 0; x < size; x++, p += 3) {
            c[x] = (uint8_t)sp_qc_classify(p[0], p[1], p[2]);
            sums[c[x]]++;
            l[x] = (uint8_t)sp_qc_luma(p[0], p[1], p[2]);
        }
    }
    /* Interior pixels only (one in from each edge): the 3x3 kernel never leaves the tile. */
    for (int64_t y = 1; y + 1 < size; y++) {
        const uint8_t *l = luma + y * size;
        const uint8_t *c = cls + y * size;
        for (int64_t x = 1; x + 1 < size; x++) {
            if (!sp_qc_is_tissue(c[x])) {
                continue;
            }
            int64_t lap = (int64_t)l[x - size] + l[x + size] + l[x - 1] + l[x + 1] - 4 * l[x];
            sums[SP_QC_SUM_N]++;
            sums[SP_QC_SUM_S] += lap;
            sums[SP_QC_SUM_S2] += lap * lap;
        }
    }
}

void sp_qc_score(const uint8_t *rgb, int64_t stride, int64_t size, uint8_t *cls, uint8_t *luma,
                 sp_tile_qc *out) {
    int64_t sums[SP_QC_SUMS];
    sp_qc_sums(rgb, stride, size, cls, luma, sums);
    sp_qc_finish(sums, size, out);
}
