/* tile_qc.c — sp_tile_qc_compute and sp_tile_qc_pixels: quality scores (blur, pen ink, folds,
 * background) for the tiles of a training tile list, so a sampler can drop unusable ones.
 * Each tile is one work item on the thread pool: read at its own level with
 * sp_slide_read_region, scored by tile_qc_score.c, its scratch freed before the next, so
 * memory is O(threads x tile). Each item writes only its own output and status, and the error
 * reported is that of the lowest failing index, so neither the scores nor the error depend on
 * the thread count or the order the items ran in.
 */
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/thread_pool.h"
#include "jobs/train/tile_qc_internal.h"

typedef struct qc_job {
    sp_slide *slide;
    int32_t level;
    int64_t size;
    const sp_tile *tiles;
    sp_tile_qc *out;
    sp_status *status;
} qc_job;

static void qc_one(void *user, size_t i) {
    qc_job *j = user;
    size_t side = (size_t)j->size, px = side * side;
    uint8_t *buf = malloc(px * 5); /* RGB, then the classes, then the luma */
    if (buf == NULL) {
        j->status[i] = SP_E_NOMEM;
        return;
    }
    sp_status st = sp_slide_read_region(j->slide, SP_PIXEL_RGB8, buf, j->size * 3, j->level,
                                        j->tiles[i].x, j->tiles[i].y, j->size, j->size);
    if (st == SP_OK) {
        sp_qc_score(buf, j->size * 3, j->size, buf + 3 * px, buf + 4 * px, &j->out[i]);
    }
    j->status[i] = st;
    free(buf);
}

sp_status sp_tile_qc_compute(sp_slide *slide, int32_t level, int64_t size, const sp_tile *tiles,
                             size_t n, int threads, sp_tile_qc *out, char *err, size_t err_len) {
    sp_err e = {0};
    sp_status st = SP_OK;
    int64_t lw, lh;
    if (out != NULL && n > 0) {
        memset(out, 0, n * sizeof *out);
    }
    if (slide == NULL || (n > 0 && (tiles == NULL || out == NULL))) {
        st = sp_err_set(&e, SP_E_INVALID_ARG, "tile QC: NULL %s",
                        slide == NULL   ? "slide"
                        : tiles == NULL ? "tiles"
                                        : "out");
    } else if (size < 1 || size > SP_TILE_QC_MAX_SIZE) {
        st = sp_err_set(&e, SP_E_INVALID_ARG, "tile QC: tile size %lld is not in [1, %d]",
                        (long long)size, SP_TILE_QC_MAX_SIZE);
    } else if (sp_slide_level_dimensions(slide, level, &lw, &lh) != SP_OK) {
        st = sp_err_set(&e, SP_E_INVALID_ARG, "tile QC: level %d does not exist", (int)level);
    } else if (n > SIZE_MAX / sizeof(sp_status)) {
        st = sp_err_set(&e, SP_E_NOMEM, "tile QC: too many tiles");
    }
    sp_status *status = NULL;
    if (st == SP_OK && n > 0) {
        status = calloc(n, sizeof *status);
        if (status == NULL) {
            st = sp_err_set(&e, SP_E_NOMEM, "tile QC: out of memory for %zu tiles", n);
        }
    }
    if (st == SP_OK && n > 0) {
        qc_job job = {slide, level, size, tiles, out, status};
        sp_pool_run(n, threads, qc_one, &job);
        for (size_t i = 0; i < n; i++) {
            if (status[i] != SP_OK) {
                st = sp_err_set(&e, status[i], "tile QC: tile %zu at (%lld, %lld): %s", i,
                                (long long)tiles[i].x, (long long)tiles[i].y,
                                sp_status_str(status[i]));
                memset(out, 0, n * sizeof *out);
                break;
            }
        }
    }
    free(status);
    sp_err_report(st, &e, err, err_len);
    return st;
}

sp_status sp_tile_qc_pixels(const uint8_t *rgb, int64_t stride, int64_t size, sp_tile_qc *out) {
    if (out != NULL) {
        memset(out, 0, sizeof *out);
    }
    if (rgb == NULL || out == NULL || size < 1 || size > SP_TILE_QC_MAX_SIZE || stride < 3 * size) {
        return SP_E_INVALID_ARG;
    }
    size_t px = (size_t)size * (size_t)size;
    uint8_t *scratch = malloc(2 * px);
    if (scratch == NULL) {
        return SP_E_NOMEM;
    }
    sp_qc_score(rgb, stride, size, scratch, scratch + px, out);
    free(scratch);
    return SP_OK;
}
