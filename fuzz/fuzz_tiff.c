/* fuzz_tiff.c — libFuzzer target for the TIFF container, the TIFF-based formats and tile
 * decoding: the input is opened as a slide from memory, then every level's first and last
 * tiles, a region crossing tile borders, and every small associated image are read. Limits are
 * lowered so that hostile sizes hit them quickly instead of allocating gigabytes. */
#include <stdint.h>
#include <stdlib.h>

#include "core/slide_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sp_limits limits;
    sp_limits_default(&limits);
    limits.value[SP_LIMIT_MAX_ALLOC] = 64 << 20;
    limits.value[SP_LIMIT_MAX_TILE_PIXELS] = 1 << 20;
    limits.value[SP_LIMIT_MAX_METADATA] = 1 << 20;
    limits.value[SP_LIMIT_MAX_DIRECTORIES] = 64;
    sp_source *src = NULL;
    sp_err err = {0};
    if (sp_source_open_memory(data, size, "fuzz", &src, &err) != SP_OK) {
        return 0;
    }
    sp_slide *slide = NULL;
    if (sp_slide_open_source(src, "fuzz", &limits, &slide, &err) != SP_OK) {
        return 0;
    }
    enum { W = 96, H = 80 };
    static uint8_t buf[W * H * 4];
    for (int32_t level = 0; level < sp_slide_level_count(slide); level++) {
        int64_t lw, lh, tw, th;
        double ds;
        sp_slide_level_dimensions(slide, level, &lw, &lh);
        sp_slide_level_tile_size(slide, level, &tw, &th);
        sp_slide_level_downsample(slide, level, &ds);
        sp_slide_read_region(slide, SP_PIXEL_RGBA8, buf, W * 4, level, 0, 0, W, H);
        sp_slide_read_region(slide, SP_PIXEL_RGB8, buf, W * 3, level,
                             (int64_t)((double)(tw - W / 2) * ds), (int64_t)((double)(th - H / 2) * ds), W, H);
        sp_slide_read_region(slide, SP_PIXEL_RGBA8, buf, W * 4, level,
                             (int64_t)((double)(lw - W / 2) * ds), (int64_t)((double)(lh - H / 2) * ds), W, H);
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
    return 0;
}
