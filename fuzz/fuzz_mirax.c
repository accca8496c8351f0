/* fuzz_mirax.c — libFuzzer target for the MIRAX readers (src/formats/mirax_index.c) and format
 * (src/formats/mirax.c). The input is three parts: Slidedat.ini up to the first NUL byte, then
 * Index.dat up to the marker "\0DATA\0", then one data file. The first two go straight to the
 * parsers from memory (the INI through libinih into the layout, the index through a memory
 * source); then the three are
 * written into a scratch folder (the data file as Data0000.dat and Data0001.dat) beside a
 * `.mrxs` and opened as a slide, and every level's first tiles, a region crossing tiles and the
 * associated images are read, so the placement of pieces and the position layer run too. Limits
 * are lowered so that hostile sizes hit them quickly. The seeds (fuzz/corpus/mirax) are small
 * slides written by tests/data/mirax_writer.py (one data file each), joined as above. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/mirax_index.h"
#include "fuzz_read_slide.h"
#include "io/paths.h"
#include "slide/slide.h"

static char scratch[64];

static const char *const SCRATCH_FILES[] = {"slide/Slidedat.ini", "slide/Index.dat",
                                            "slide/Data0000.dat", "slide/Data0001.dat",
                                            "slide.mrxs", "slide", ""};

/* Remove the scratch folder when the fuzzer exits. */
static void remove_scratch(void) {
    for (size_t i = 0; i < sizeof SCRATCH_FILES / sizeof SCRATCH_FILES[0]; i++) {
        char path[128];
        snprintf(path, sizeof path, "%s/%s", scratch, SCRATCH_FILES[i]);
        remove(path);
    }
}

static void parse_directly(const char *ini_text, const uint8_t *index, size_t index_len,
                           const sp_limits *limits) {
    sp_err err = {0};
    sp_mirax_ini ini;
    if (sp_mirax_ini_parse(ini_text, &ini, &err) != SP_OK) {
        return;
    }
    sp_mirax_layout layout;
    if (sp_mirax_layout_read(&ini, &layout, &err) == SP_OK) {
        sp_source *src = NULL;
        if (sp_source_open_memory(index, index_len, "Index.dat", &src, &err) == SP_OK) {
            sp_mirax_index idx;
            if (sp_mirax_index_read(src, "Index.dat", &layout, limits, &idx, &err) == SP_OK) {
                sp_mirax_index_free(&idx);
            }
            sp_source_close(src);
        }
    }
    sp_mirax_layout_free(&layout);
    sp_mirax_ini_free(&ini);
}

static int write_file(const char *name, const void *data, size_t len) {
    char path[128];
    snprintf(path, sizeof path, "%s/slide/%s", scratch, name);
    FILE *f = fopen(path, "wb");
    if (f == NULL) {
        return -1;
    }
    size_t n = len > 0 ? fwrite(data, 1, len, f) : 0;
    return fclose(f) == 0 && n == len ? 0 : -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sp_limits limits;
    fuzz_limits(&limits);
    const uint8_t *nul1 = memchr(data, 0, size);
    if (nul1 == NULL) {
        return 0;
    }
    const uint8_t *index = nul1 + 1;
    size_t rest = size - (size_t)(index - data);
    /* The index holds NUL bytes of its own: the data file starts after "\0DATA\0". */
    const uint8_t *marker = NULL;
    for (const uint8_t *p = index; p != NULL && (size_t)(p - index) + 6 <= rest;
         p = memchr(p + 1, 0, rest - (size_t)(p + 1 - index))) {
        if (memcmp(p, "\0DATA\0", 6) == 0) {
            marker = p;
            break;
        }
    }
    size_t index_len = marker != NULL ? (size_t)(marker - index) : rest;
    const uint8_t *dat = marker != NULL ? marker + 6 : index + rest;
    size_t dat_len = (size_t)(data + size - dat);
    parse_directly((const char *)data, index, index_len, &limits);

    if (scratch[0] == '\0') {
        snprintf(scratch, sizeof scratch, "/tmp/fuzz-mirax-%ld", (long)getpid());
        char dir[96];
        snprintf(dir, sizeof dir, "%s/slide", scratch);
        if (sp_path_make_dirs(dir, NULL) != SP_OK) {
            return 0;
        }
        atexit(remove_scratch);
    }
    char mrxs[96];
    snprintf(mrxs, sizeof mrxs, "%s/slide.mrxs", scratch);
    FILE *f = fopen(mrxs, "wb");
    if (f == NULL || fputs("mrxs", f) < 0 || fclose(f) != 0 ||
        write_file("Slidedat.ini", data, (size_t)(nul1 - data)) != 0 ||
        write_file("Index.dat", index, index_len) != 0 ||
        write_file("Data0000.dat", dat, dat_len) != 0 ||
        write_file("Data0001.dat", dat, dat_len) != 0) {
        return 0;
    }
    sp_source *src = NULL;
    sp_err err = {0};
    if (sp_source_open_file(mrxs, &src, &err) != SP_OK) {
        return 0;
    }
    sp_slide *slide = NULL;
    if (sp_slide_open_source(src, mrxs, &limits, &slide, &err) != SP_OK) {
        return 0;
    }
    fuzz_read_slide(slide); /* closes it */
    return 0;
}
