/* fuzz_dicom.c — libFuzzer target for the DICOM Part 10 reader and the "dicom" format: the input
 * is parsed and frame-indexed directly (whatever its SOP class), then opened as a slide from
 * memory (one instance, read alone: the source's name is not a file on disk, so no folder is
 * searched), and every level's first tiles, a region crossing tile borders, the far corner and
 * every small associated image are read; a file with several focal planes or optical paths is
 * opened and read once more at its last plane. Limits are lowered so that hostile sizes hit
 * them quickly instead of allocating gigabytes. */
#include <stdint.h>
#include <stdlib.h>

#include "dicom/dicom.h"
#include "fuzz_read_slide.h"
#include "slide/slide.h"

static const char NAME[] = "(fuzz-input)/instance.dcm";

static void parse_directly(const uint8_t *data, size_t size, const sp_limits *limits) {
    sp_source *src = NULL;
    sp_err err = {0};
    if (sp_source_open_memory(data, size, NAME, &src, &err) != SP_OK) {
        return;
    }
    sp_dicom_options o;
    sp_dicom_options_default(&o);
    o.max_elements = 1 << 16;
    o.max_frames = 1 << 16;
    sp_dicom *d = NULL;
    if (sp_dicom_open(src, limits, &o, &d, &err) == SP_OK &&
        sp_dicom_index_frames(d, &err) == SP_OK) {
        for (uint64_t i = 0; i < d->n_frames && i < 4; i++) {
            uint8_t *frame = NULL;
            size_t len = 0;
            if (sp_dicom_read_frame(d, i, &frame, &len, &err) == SP_OK) {
                free(frame);
            }
        }
        char buf[64];
        int64_t v;
        double x;
        sp_dicom_string(d, SP_DICOM_IMAGE_TYPE, 2, buf, sizeof buf);
        sp_dicom_int(d, SP_DICOM_ROWS, &v);
        sp_dicom_double(d, SP_DICOM_PIXEL_SPACING, 1, &x);
        free(sp_dicom_string_dup(d, SP_DICOM_MANUFACTURER));
    }
    sp_dicom_close(d);
    sp_source_close(src);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sp_limits limits;
    fuzz_limits(&limits);
    parse_directly(data, size, &limits);

    sp_source *src = NULL;
    sp_err err = {0};
    if (sp_source_open_memory(data, size, NAME, &src, &err) != SP_OK) {
        return 0;
    }
    sp_slide *slide = NULL;
    if (sp_slide_open_source(src, NAME, &limits, &slide, &err) != SP_OK) {
        return 0;
    }
    /* A file with several focal planes or optical paths: its last plane is read too. */
    int64_t plane[3] = {sp_slide_plane_count(slide, SP_PLANE_Z) - 1,
                        sp_slide_plane_count(slide, SP_PLANE_C) - 1, 0};
    fuzz_read_slide(slide);
    if ((plane[0] > 0 || plane[1] > 0) &&
        sp_source_open_memory(data, size, NAME, &src, &err) == SP_OK &&
        sp_slide_open_source_at(src, NAME, &limits, plane, &slide, &err) == SP_OK) {
        fuzz_read_slide(slide);
    }
    return 0;
}
