/* serve_overlays.c — the analysis overlays of the viewer, computed with the library's own
 * training functions on a slide's first request and kept: the tissue mask
 * (sp_tissue_mask_compute, as an RGBA PNG: tissue opaque green, background transparent) and the
 * tile grid (sp_tissue_tiles over a level whose tiles are about 256 pixels, at most about 2000
 * tiles; the tiles with tissue also get their QC scores from sp_tile_qc_compute), as JSON. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

#define MASK_SIDE 1024
#define GRID_MAX_TILES 2000
#define QC_MIN_TISSUE 0.1

static int mask_png(serve_slide *s, const sp_tissue_mask *m, char *msg, size_t len) {
    uint8_t *rgba = calloc((size_t)(m->width * m->height), 4);
    if (rgba == NULL) {
        snprintf(msg, len, "out of memory for the tissue mask");
        return 500;
    }
    for (int64_t i = 0; i < m->width * m->height; i++) {
        if (m->pixels[i]) {
            rgba[i * 4 + 1] = 200, rgba[i * 4 + 3] = 255;
        }
    }
    bool ok = serve_encode(SERVE_PNG, rgba, m->width, m->height, m->width * 4, 4, &s->mask_png,
                           &s->mask_png_len);
    free(rgba);
    if (!ok) {
        snprintf(msg, len, "out of memory encoding the tissue mask");
        return 500;
    }
    s->mask_downsample = m->downsample;
    s->mask_width = m->width, s->mask_height = m->height;
    return 0;
}

static int grid_json(serve_slide *s, const sp_tissue_mask *m, char *msg, size_t len) {
    /* Grid side in level-0 pixels: 256 doubled until the grid has few enough tiles. */
    int64_t side = 256;
    while ((s->width / side) * (s->height / side) > GRID_MAX_TILES) {
        side *= 2;
    }
    int32_t level = sp_slide_best_level_for_downsample(s->slide, (double)side / 256.0);
    double ds = 1;
    sp_slide_level_downsample(s->slide, level < 0 ? 0 : level, &ds);
    level = level < 0 ? 0 : level;
    int64_t size = (int64_t)llround((double)side / ds);
    size = size < 1 ? 1 : size > SP_TILE_QC_MAX_SIZE ? SP_TILE_QC_MAX_SIZE : size;
    sp_tile *tiles = NULL;
    size_t n = 0;
    if (sp_tissue_tiles(s->slide, m, level, size, 0, 0.0, &tiles, &n) != SP_OK) {
        snprintf(msg, len, "the tile grid could not be made");
        return 500;
    }
    sp_tile *qc_tiles = malloc((n + 1) * sizeof *qc_tiles);
    sp_tile_qc *qc = calloc(n + 1, sizeof *qc);
    size_t n_qc = 0;
    for (size_t i = 0; qc_tiles != NULL && i < n; i++) {
        if (tiles[i].tissue >= QC_MIN_TISSUE) {
            qc_tiles[n_qc++] = tiles[i];
        }
    }
    char err[256] = "";
    if (qc_tiles == NULL || qc == NULL ||
        sp_tile_qc_compute(s->slide, level, size, qc_tiles, n_qc, 0, qc, err, sizeof err) !=
            SP_OK) {
        snprintf(msg, len, "tile QC failed: %s", err[0] ? err : "out of memory");
        free(qc_tiles), free(qc), sp_tiles_free(tiles);
        return 500;
    }
    size_t cap = 256 + n * 160, used = 0;
    char *out = malloc(cap);
    if (out != NULL) {
        used += (size_t)snprintf(out, cap,
                                 "{\"mask\":{\"width\":%lld,\"height\":%lld,\"downsample\":%.17g},"
                                 "\"level\":%d,\"downsample\":%.17g,\"size\":%.17g,\"fields\":"
                                 "[\"x\",\"y\",\"tissue\",\"blur\",\"pen\",\"fold\","
                                 "\"background\"],\"tiles\":[",
                                 (long long)m->width, (long long)m->height, m->downsample, level,
                                 ds, (double)size * ds);
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            const sp_tile_qc *q = NULL;
            if (k < n_qc && qc_tiles[k].x == tiles[i].x && qc_tiles[k].y == tiles[i].y) {
                q = &qc[k++];
            }
            if (q != NULL) {
                used += (size_t)snprintf(out + used, cap - used,
                                         "%s[%lld,%lld,%.4f,%.4f,%.4f,%.4f,%.4f]", i ? "," : "",
                                         (long long)tiles[i].x, (long long)tiles[i].y,
                                         tiles[i].tissue, q->blur, q->pen, q->fold, q->background);
            } else {
                used +=
                    (size_t)snprintf(out + used, cap - used, "%s[%lld,%lld,%.4f]", i ? "," : "",
                                     (long long)tiles[i].x, (long long)tiles[i].y, tiles[i].tissue);
            }
        }
        snprintf(out + used, cap - used, "]}");
    }
    free(qc_tiles), free(qc), sp_tiles_free(tiles);
    if (out == NULL) {
        snprintf(msg, len, "out of memory for the tile grid");
        return 500;
    }
    s->grid_json = out;
    return 0;
}

int serve_overlays_get(serve_slide *s, char *msg, size_t msg_len) {
    pthread_mutex_lock(&s->lock);
    int status = 0;
    if (!s->overlays_done) {
        sp_tissue_mask m;
        char err[512] = "";
        if (sp_tissue_mask_compute(s->slide, MASK_SIDE, &m, err, sizeof err) != SP_OK) {
            snprintf(msg, msg_len, "the tissue mask could not be computed: %s", err);
            s->overlay_error = strdup(msg);
            status = 500;
        } else {
            status = mask_png(s, &m, msg, msg_len);
            if (status == 0) {
                status = grid_json(s, &m, msg, msg_len);
            }
            if (status != 0) {
                s->overlay_error = strdup(msg);
            }
            sp_tissue_mask_free(&m);
        }
        s->overlays_done = true;
    } else if (s->overlay_error != NULL) {
        snprintf(msg, msg_len, "%s", s->overlay_error);
        status = 500;
    }
    pthread_mutex_unlock(&s->lock);
    return status;
}
