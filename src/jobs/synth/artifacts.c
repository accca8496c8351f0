/* artifacts.c — the QC test artefacts of the synthetic slide (sp_synth_artifacts,
 * sp_synth_paint_artifacts): where they go and how they are painted, so tile QC has ground
 * truth (docs/qc.md). Positions are fixed fractions of the slide size, the same for every seed,
 * chosen inside the region where the model's tissue blobs are centred (0.18 .. 0.82 of the
 * size); the tests score only the tiles that hold tissue. Painting is per pixel of level 0
 * (inks, fold) or per rendered tile (blur), before the JPEG encoding and the pyramid.
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "jobs/synth/artifacts.h"
#include "jobs/synth/he_texture.h"

/* Ink colours: a pixel under ink becomes pixel * ink / 255 (inks are filters, not paint). */
static const uint8_t INK[3][3] = {{20, 90, 220}, {30, 170, 40}, {35, 35, 40}};
#define BLUR_RADIUS 4  /* two passes of a (2r + 1)-wide box, across then down */
#define FOLD_POWER 2.5 /* optical density x 2.5: value v becomes 255 (v / 255)^2.5 */

static int64_t snap(int64_t v, int64_t step) {
    return v / step * step;
}

sp_status sp_synth_artifacts(int64_t size, sp_synth_artifact *out) {
    if (out == NULL || size < 1024) {
        return SP_E_INVALID_ARG;
    }
    /* Pen strokes: three horizontal bands 3% of the size high; blur and fold: squares on the
     * tile grid (SP_HE_MAX_TILE) so the blurred tiles are whole. */
    const int64_t band = size * 3 / 100, T = SP_HE_MAX_TILE;
    out[0] =
        (sp_synth_artifact){SP_ARTIFACT_PEN_BLUE, size / 5, size * 27 / 100, size * 3 / 10, band};
    out[1] =
        (sp_synth_artifact){SP_ARTIFACT_PEN_GREEN, size / 2, size * 30 / 100, size * 3 / 10, band};
    out[2] = (sp_synth_artifact){SP_ARTIFACT_PEN_BLACK, size * 3 / 10, size * 70 / 100,
                                 size * 2 / 5, band};
    int64_t bx = snap(size * 55 / 100, T), by = snap(size * 45 / 100, T);
    int64_t bs = snap(size / 5, T) > T ? snap(size / 5, T) : T;
    out[3] = (sp_synth_artifact){SP_ARTIFACT_BLUR, bx, by, bs, bs};
    int64_t fx = snap(size * 25 / 100, T), fy = snap(size * 40 / 100, T);
    out[4] = (sp_synth_artifact){SP_ARTIFACT_FOLD, fx, fy, bs, bs};
    return SP_OK;
}

/* The part of artefact `a` inside the tile, in tile coordinates; false when none. */
static bool clip(const sp_synth_artifact *a, int64_t x0, int64_t y0, int w, int h, int *cx0,
                 int *cy0, int *cx1, int *cy1) {
    int64_t lx = a->x - x0, ly = a->y - y0, hx = lx + a->width, hy = ly + a->height;
    lx = lx < 0 ? 0 : lx;
    ly = ly < 0 ? 0 : ly;
    hx = hx > w ? w : hx;
    hy = hy > h ? h : hy;
    if (lx >= hx || ly >= hy) {
        return false;
    }
    *cx0 = (int)lx, *cy0 = (int)ly, *cx1 = (int)hx, *cy1 = (int)hy;
    return true;
}

/* One box pass across (or down) over [x0, x1) x
 * [y0, y1), samples clamped to that rectangle. */
static void box_pass(const uint8_t *src, uint8_t *dst, size_t stride, int x0, int y0, int x1,
                     int y1, bool across) {
    for (int y = y0; y < y1; y++) {
        for (int x = x0; x < x1; x++) {
            for (int k = 0; k < 3; k++) {
                int sum = 0;
                for (int d = -BLUR_RADIUS; d <= BLUR_RADIUS; d++) {
                    int sx = across ? x + d : x, sy = across ? y : y + d;
                    sx = sx < x0 ? x0 : sx >= x1 ? x1 - 1 : sx;
                    sy = sy < y0 ? y0 : sy >= y1 ? y1 - 1 : sy;
                    sum += src[(size_t)sy * stride + (size_t)sx * 3 + k];
                }
                const int taps = 2 * BLUR_RADIUS + 1;
                dst[(size_t)y * stride + (size_t)x * 3 + k] = (uint8_t)((sum + taps / 2) / taps);
            }
        }
    }
}

void sp_synth_paint_artifacts(const sp_synth_artifact *a, int64_t x0, int64_t y0, int width,
                              int height, uint8_t *rgb, size_t stride, uint8_t *tmp) {
    int cx0, cy0, cx1, cy1;
    for (int i = 0; i < SP_SYNTH_ARTIFACT_COUNT; i++) {
        if (!clip(&a[i], x0, y0, width, height, &cx0, &cy0, &cx1, &cy1)) {
            continue;
        }
        if (a[i].kind == SP_ARTIFACT_BLUR) {
            for (int pass = 0; pass < 2; pass++) {
                box_pass(rgb, tmp, stride, cx0, cy0, cx1, cy1, true);
                box_pass(tmp, rgb, stride, cx0, cy0, cx1, cy1, false);
            }
            continue;
        }
        uint8_t lut[256];
        const uint8_t *ink = NULL;
        if (a[i].kind == SP_ARTIFACT_FOLD) {
            for (int v = 0; v < 256; v++) {
                lut[v] = (uint8_t)lround(255.0 * pow(v / 255.0, FOLD_POWER));
            }
        } else {
            ink = INK[a[i].kind];
        }
        for (int y = cy0; y < cy1; y++) {
            uint8_t *p = rgb + (size_t)y * stride + (size_t)cx0 * 3;
            for (int x = cx0; x < cx1; x++, p += 3) {
                for (int k = 0; k < 3; k++) {
                    p[k] = ink ? (uint8_t)((p[k] * ink[k] + 127) / 255) : lut[p[k]];
                }
            }
        }
    }
}
