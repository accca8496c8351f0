/* fuzz_czi.c — libFuzzer target for the Zeiss CZI reader (src/formats/zeiss_czi_dir.c, the
 * segments; src/formats/zeiss_czi.c, levels and pixels): the input is opened as a slide from
 * memory, then every level's first tiles, a region across tile borders, the far edge and the
 * small associated images (JPEG or embedded CZI) are read; a slide with several planes is opened
 * and read once more at its last plane. The seeds are not committed: scripts/fuzz-smoke writes
 * them with tests/data/czi_writer.py (--seeds) into its scratch corpus. JPEG XR streams are
 * decoded in a child process (src/codecs/jpegxr.c): jxrlib crashing there on a mutated stream
 * is expected and silent (the child dies by its signal); a crash of this process is a finding. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_read_slide.h"
#include "slide/slide.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sp_limits limits;
    fuzz_limits(&limits);
    sp_source *src = NULL;
    sp_err err = {0};
    if (sp_source_open_memory(data, size, "fuzz.czi", &src, &err) != SP_OK) {
        return 0;
    }
    sp_slide *slide = NULL;
    if (sp_slide_open_source(src, "fuzz.czi", &limits, &slide, &err) != SP_OK) {
        return 0;
    }
    int64_t plane[3];
    bool planes = false;
    for (int i = 0; i < 3; i++) {
        plane[i] = sp_slide_plane_count(slide, (sp_plane_axis)i) - 1;
        planes = planes || plane[i] > 0;
    }
    fuzz_read_slide(slide); /* closes it */
    if (planes && sp_source_open_memory(data, size, "fuzz.czi", &src, &err) == SP_OK &&
        sp_slide_open_source_at(src, "fuzz.czi", &limits, plane, &slide, &err) == SP_OK) {
        fuzz_read_slide(slide);
    }
    return 0;
}
