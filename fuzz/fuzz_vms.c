/* fuzz_vms.c — libFuzzer target for the Hamamatsu VMS and VMU readers (src/formats/
 * hamamatsu_keys.c, hamamatsu_vms.c, hamamatsu_vmu.c) and the restart-interval tiling they share
 * with NDPI (src/formats/jpeg_restart.c). The input is a key file, then up to three files, each
 * after the marker "\0FILE\0". The key file goes straight to the INI reader from memory; then
 * all are written into a scratch folder (the key file as slide.vms, the others as 1, 2 and 3,
 * the names the seeds' key files give their images, map and macro) and the key file is opened
 * as a slide (VMS or VMU by its first [section]), and every level's first tiles, a region
 * crossing tiles and the macro are read. Limits are lowered so that hostile sizes hit them
 * quickly. The seeds are written by tests/data/vms_writer.py --seeds (scripts/fuzz-smoke). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/ini_file.h"
#include "fuzz_read_slide.h"
#include "io/paths.h"
#include "slide/slide.h"

static char scratch[64];

static const char *const SCRATCH_FILES[] = {"slide.vms", "1", "2", "3", ""};

/* Remove the scratch folder when the fuzzer exits. */
static void remove_scratch(void) {
    for (size_t i = 0; i < sizeof SCRATCH_FILES / sizeof SCRATCH_FILES[0]; i++) {
        char path[128];
        snprintf(path, sizeof path, "%s/%s", scratch, SCRATCH_FILES[i]);
        remove(path);
    }
}

static int write_file(const char *name, const void *data, size_t len) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s", scratch, name);
    FILE *f = fopen(path, "wb");
    if (f == NULL) {
        return -1;
    }
    size_t n = len > 0 ? fwrite(data, 1, len, f) : 0;
    return fclose(f) == 0 && n == len ? 0 : -1;
}

/* The next part of the input: up to the marker (or the end); *rest moves past the marker. */
static size_t next_part(const uint8_t **rest, const uint8_t *end, const uint8_t **part) {
    static const uint8_t MARKER[] = {0, 'F', 'I', 'L', 'E', 0};
    *part = *rest;
    for (const uint8_t *p = *rest; p + sizeof MARKER <= end; p++) {
        if (memcmp(p, MARKER, sizeof MARKER) == 0) {
            *rest = p + sizeof MARKER;
            return (size_t)(p - *part);
        }
    }
    *rest = end;
    return (size_t)(end - *part);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *rest = data, *end = data + size, *parts[4];
    size_t lens[4];
    for (int i = 0; i < 4; i++) {
        lens[i] = next_part(&rest, end, &parts[i]);
    }
    char *text = malloc(lens[0] + 1);
    if (text == NULL) {
        return 0;
    }
    memcpy(text, parts[0], lens[0]);
    text[lens[0]] = '\0';
    sp_ini ini;
    sp_err err = {0};
    if (sp_ini_parse(text, "slide.vms", &ini, &err) == SP_OK) {
        sp_ini_free(&ini);
    }
    free(text);

    if (scratch[0] == '\0') {
        snprintf(scratch, sizeof scratch, "/tmp/fuzz-vms-%ld", (long)getpid());
        if (sp_path_make_dirs(scratch, NULL) != SP_OK) {
            return 0;
        }
        atexit(remove_scratch);
    }
    if (write_file("slide.vms", parts[0], lens[0]) != 0 ||
        write_file("1", parts[1], lens[1]) != 0 || write_file("2", parts[2], lens[2]) != 0 ||
        write_file("3", parts[3], lens[3]) != 0) {
        return 0;
    }
    char path[96];
    snprintf(path, sizeof path, "%s/slide.vms", scratch);
    sp_limits limits;
    fuzz_limits(&limits);
    sp_source *src = NULL;
    sp_slide *slide = NULL;
    sp_err open_err = {0};
    if (sp_source_open_file(path, &src, &open_err) != SP_OK ||
        sp_slide_open_source(src, path, &limits, &slide, &open_err) != SP_OK) {
        return 0;
    }
    fuzz_read_slide(slide); /* closes it */
    return 0;
}
