/* fuzz_tiff.c — libFuzzer target for the TIFF container, the TIFF-based formats and tile
 * decoding: the input is opened as a slide from memory, then every level's first and last
 * tiles, a region crossing tile borders, and every small associated image are read. Limits are
 * lowered so that hostile sizes hit them quickly instead of allocating gigabytes. */
#include <stdint.h>
#include <stdlib.h>

#include "core/slide_internal.h"
#include "fuzz_read_slide.h"

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
    fuzz_read_slide(slide);
    return 0;
}
