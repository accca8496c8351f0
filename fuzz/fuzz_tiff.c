/* fuzz_tiff.c — libFuzzer target for the TIFF container, the TIFF-based formats and tile
 * decoding: the input is opened as a slide from memory, then every level's first and last
 * tiles, a region crossing tile borders, and every small associated image are read; before that
 * the raw tiles the GPU path would take (JPEG streams, stored rows) of the first and last tiles;
 * an OME-TIFF with several planes is opened and read once more at its last plane.
 * Limits are lowered so that hostile sizes hit them quickly instead of allocating gigabytes. */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_read_slide.h"
#include "slide/slide.h"

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
    fuzz_raw_tiles(slide);
    /* An OME-TIFF with several planes: its last plane is opened and read too. */
    int64_t plane[3];
    bool planes = false;
    for (int i = 0; i < 3; i++) {
        plane[i] = sp_slide_plane_count(slide, (sp_plane_axis)i) - 1;
        planes = planes || plane[i] > 0;
    }
    fuzz_read_slide(slide); /* closes the slide */
    if (planes && sp_source_open_memory(data, size, "fuzz", &src, &err) == SP_OK &&
        sp_slide_open_source_at(src, "fuzz", &limits, plane, &slide, &err) == SP_OK) {
        fuzz_read_slide(slide);
    }
    return 0;
}
