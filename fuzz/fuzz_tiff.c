/* fuzz_tiff.c — libFuzzer target for the TIFF container, the TIFF-based formats and tile
 * decoding: the input is opened as a slide from memory, then every level's first and last
 * tiles, a region crossing tile borders, and every small associated image are read; before that
 * the complete JPEG streams the GPU path would decode are built for the first and last tiles.
 * Limits are lowered so that hostile sizes hit them quickly instead of allocating gigabytes. */
#include <stdint.h>
#include <stdlib.h>

#include "formats/tiff_jpeg_tiles.h"
#include "fuzz_read_slide.h"
#include "slide/slide.h"

/* The GPU path's complete JPEG streams (tables spliced into tiles) of each qualifying level's
 * first and last tiles: built on the CPU from hostile bytes whatever the build. */
static void fuzz_jpeg_streams(sp_slide *slide) {
    for (int32_t level = 0; level < sp_slide_level_count(slide); level++) {
        sp_tiff_jpeg_level jl;
        if (!sp_tiff_jpeg_level_of(slide, level, &jl)) {
            continue;
        }
        uint64_t across = jl.dir->chunks_across, down = jl.dir->chunks_down;
        int64_t cols[2] = {0, across > 0 ? (int64_t)across - 1 : 0};
        int64_t rows[2] = {0, down > 0 ? (int64_t)down - 1 : 0};
        for (int i = 0; i < 2; i++) {
            uint8_t *stream = NULL;
            size_t len = 0;
            sp_err err = {0};
            sp_tiff_jpeg_tile_stream(&jl, cols[i], rows[i], &stream, &len, &err);
            free(stream);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sp_limits limits;
    fuzz_limits(&limits);
    sp_source *src = NULL;
    sp_err err = {0};
    if (sp_source_open_memory(data, size, "fuzz", &src, &err) != SP_OK) {
        return 0;
    }
    sp_slide *slide = NULL;
    if (sp_slide_open_source(src, "fuzz", &limits, &slide, &err) != SP_OK) {
        return 0;
    }
    fuzz_jpeg_streams(slide);
    fuzz_read_slide(slide); /* closes the slide */
    return 0;
}
