/* fuzz_read_slide.h — what the slide-level fuzz targets do once a fuzzed input has opened as a
 * slide: read the first tiles, a region across tile borders and one across the far edge on every
 * level (RGBA and RGB), converted to sRGB where the slide embeds an ICC profile, and every small
 * associated image, then close it (fuzz_read_slide); the TIFF and NDPI targets first read the
 * GPU path's raw tiles (fuzz_raw_tiles). Targets that build a file in memory open it with
 * fuzz_open_memory. Header-only because each fuzz_*.c builds into its own
 * executable. */
#ifndef SP_FUZZ_READ_SLIDE_H
#define SP_FUZZ_READ_SLIDE_H

#include <stdint.h>
#include <stdlib.h>

#include "base/limits.h"
#include "slide/slide.h"
#include "slidepipe.h"

/* Limits lowered so that hostile sizes hit them quickly instead of allocating gigabytes. */
static void fuzz_limits(sp_limits *limits) {
    sp_limits_default(limits);
    limits->value[SP_LIMIT_MAX_ALLOC] = 64 << 20;
    limits->value[SP_LIMIT_MAX_TILE_PIXELS] = 1 << 20;
    limits->value[SP_LIMIT_MAX_METADATA] = 1 << 20;
    limits->value[SP_LIMIT_MAX_DIRECTORIES] = 64;
}

/* The slide held in the n bytes at p (named `name` in messages) under fuzz_limits, or NULL when
 * it does not open. */
static inline sp_slide *fuzz_open_memory(const uint8_t *p, size_t n, const char *name) {
    sp_limits limits;
    fuzz_limits(&limits);
    sp_source *src = NULL;
    sp_err err = {0};
    sp_slide *slide = NULL;
    if (sp_source_open_memory(p, n, name, &src, &err) != SP_OK ||
        sp_slide_open_source(src, name, &limits, &slide, &err) != SP_OK) {
        return NULL;
    }
    return slide;
}

static void fuzz_read_slide(sp_slide *slide) {
    enum { W = 96, H = 80 };
    static uint8_t buf[W * H * 4];
    /* A slide's embedded ICC profile is parsed and its transform run on every read below (a
     * profile LittleCMS refuses leaves the reads as stored). */
    sp_slide_set_icc_transform(slide, 1, NULL, 0);
    for (int32_t level = 0; level < sp_slide_level_count(slide); level++) {
        int64_t lw, lh, tw, th;
        double ds;
        sp_slide_level_dimensions(slide, level, &lw, &lh);
        sp_slide_level_tile_size(slide, level, &tw, &th);
        sp_slide_level_downsample(slide, level, &ds);
        sp_slide_read_region(slide, SP_PIXEL_RGBA8, buf, W * 4, level, 0, 0, W, H);
        sp_slide_read_region(slide, SP_PIXEL_RGB8, buf, W * 3, level,
                             (int64_t)((double)(tw - W / 2) * ds),
                             (int64_t)((double)(th - H / 2) * ds), W, H);
        sp_slide_read_region(slide, SP_PIXEL_RGBA8, buf, W * 4, level,
                             (int64_t)((double)(lw - W / 2) * ds),
                             (int64_t)((double)(lh - H / 2) * ds), W, H);
    }
    for (int32_t i = 0; i < sp_slide_associated_count(slide); i++) {
        const char *name = sp_slide_associated_name(slide, i);
        int64_t w, h;
        if (sp_slide_associated_dimensions(slide, name, &w, &h) == SP_OK && w * h <= (1 << 20)) {
            uint8_t *img = malloc((size_t)(w * h * 4));
            if (img != NULL) {
                sp_slide_read_associated(slide, name, SP_PIXEL_RGBA8, img, w * 4);
                free(img);
            }
        }
    }
    sp_slide_close(slide);
}

/* The GPU path's raw tiles (slide/raw_tiles.c) of each qualifying level's first and last tiles:
 * complete JPEG streams (tables spliced into tiles) or stored rows, built on the CPU from hostile
 * bytes whatever the build. Inline, so that the targets that do not call it build without an
 * unused-function warning. */
static inline void fuzz_raw_tiles(sp_slide *slide) {
    static uint8_t row[3 * 4096];
    for (int32_t level = 0; level < sp_slide_level_count(slide); level++) {
        sp_raw_level raw;
        if (!sp_slide_raw_level(slide, level, &raw)) {
            continue;
        }
        const sp_level *l = &slide->levels[level];
        int64_t across = (l->width + raw.tile_width - 1) / raw.tile_width;
        int64_t down = (l->height + raw.tile_height - 1) / raw.tile_height;
        int64_t cols[2] = {0, across > 0 ? across - 1 : 0};
        int64_t rows[2] = {0, down > 0 ? down - 1 : 0};
        for (int i = 0; i < 2; i++) {
            uint8_t *stream = NULL;
            size_t len = 0;
            sp_err err = {0};
            if (raw.kind == SP_RAW_JPEG) {
                sp_slide_read_raw_tile(slide, level, cols[i], rows[i], &stream, &len, &err);
                free(stream);
            } else if (raw.tile_width <= 4096) {
                sp_slide_read_raw_rows(slide, level, cols[i], rows[i], 0, 1, row, &err);
            }
        }
    }
}

#endif
