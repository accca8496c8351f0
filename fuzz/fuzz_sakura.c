/* fuzz_sakura.c — libFuzzer target for the Sakura SVSlide reader (src/formats/sakura_svslide.c):
 * the input is an SQLite database, opened as a slide from memory (SQLite reads it through the
 * reader's VFS over the byte source, so no file is written), then every level's first tiles, a
 * region across tile borders and one across the far edge, and the small associated images are
 * read. Limits are lowered so that hostile sizes hit them quickly. The seeds (fuzz/corpus/sakura)
 * are tiny slides written by `tests/data/sakura_writer.py TESTDATA fuzz/corpus/sakura` (512-byte
 * pages, 16- and 32-pixel tiles), which OpenSlide 4 reads as Sakura. */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_read_slide.h"
#include "slide/slide.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sp_limits limits;
    fuzz_limits(&limits);
    sp_source *src = NULL;
    sp_err err = {0};
    if (sp_source_open_memory(data, size, "fuzz.svslide", &src, &err) != SP_OK) {
        return 0;
    }
    sp_slide *slide = NULL;
    if (sp_slide_open_source(src, "fuzz.svslide", &limits, &slide, &err) != SP_OK) {
        return 0;
    }
    fuzz_read_slide(slide); /* closes the slide */
    return 0;
}
