/* fuzz_icc.c — libFuzzer target for the embedded ICC profile path (src/slide/icc.c and the
 * LittleCMS parse behind it): the input is taken as a profile, placed as tag 34675 in a small
 * strip TIFF built in memory (16 x 8 RGB pixels, uncompressed), which is opened as a slide; the
 * profile is read back, conversion to sRGB is turned on (a profile LittleCMS refuses must give a
 * clean error), and regions are read in RGBA and RGB, in and across the image's edge, so a
 * transform built from hostile bytes runs too. The seeds (fuzz/corpus/icc) are profiles written
 * by tests/data/icc_profiles.py. (The TIFF and DICOM targets reach the same code with their
 * files' own profiles: fuzz_read_slide turns conversion on too.) */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_read_slide.h"
#include "slide/slide.h"

enum { W = 16, H = 8, N_TAGS = 10 };

static void put16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v) {
    put16(p, (uint16_t)v);
    put16(p + 2, (uint16_t)(v >> 16));
}

static uint8_t *entry(uint8_t *p, uint16_t tag, uint16_t type, uint32_t count, uint32_t value) {
    put16(p, tag);
    put16(p + 2, type);
    put32(p + 4, count);
    if (type == 3 && count == 1) {
        put32(p + 8, 0);
        put16(p + 8, (uint16_t)value);
    } else {
        put32(p + 8, value);
    }
    return p + 12;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1u << 20)) {
        return 0;
    }
    /* header | IFD | bits-per-sample | pixels | profile */
    const uint32_t ifd = 8, ifd_len = 2 + 12 * N_TAGS + 4, bps = ifd + ifd_len;
    const uint32_t pixels = bps + 6, profile = pixels + W * H * 3;
    size_t total = profile + size;
    uint8_t *tiff = calloc(1, total);
    if (tiff == NULL) {
        return 0;
    }
    memcpy(tiff, "II*\0", 4);
    put32(tiff + 4, ifd);
    put16(tiff + ifd, N_TAGS);
    uint8_t *p = tiff + ifd + 2;
    p = entry(p, 256, 3, 1, W);
    p = entry(p, 257, 3, 1, H);
    p = entry(p, 258, 3, 3, bps);
    p = entry(p, 259, 3, 1, 1);
    p = entry(p, 262, 3, 1, 2);
    p = entry(p, 273, 4, 1, pixels);
    p = entry(p, 277, 3, 1, 3);
    p = entry(p, 278, 3, 1, H);
    p = entry(p, 279, 4, 1, W * H * 3);
    p = entry(p, 34675, 7, (uint32_t)size, size <= 4 ? 0 : profile);
    if (size <= 4) {
        memcpy(p - 4, data, size); /* a value of 4 bytes or fewer sits in the entry itself */
    }
    put32(p, 0);
    for (int i = 0; i < 3; i++) {
        put16(tiff + bps + 2 * i, 8);
    }
    for (uint32_t i = 0; i < W * H * 3; i++) {
        tiff[pixels + i] = (uint8_t)(i * 37u);
    }
    if (size > 0) {
        memcpy(tiff + profile, data, size);
    }
    sp_limits limits;
    fuzz_limits(&limits);
    sp_source *src = NULL;
    sp_err err = {0};
    sp_slide *slide = NULL;
    if (sp_source_open_memory(tiff, total, "fuzz-icc.tif", &src, &err) == SP_OK &&
        sp_slide_open_source(src, "fuzz-icc.tif", &limits, &slide, &err) == SP_OK) {
        const uint8_t *icc;
        size_t len;
        if (sp_slide_icc_profile(slide, &icc, &len) == SP_OK &&
            (len != size || memcmp(icc, data, size) != 0)) {
            abort(); /* the profile must come back as stored */
        }
        fuzz_read_slide(slide); /* turns conversion on, reads, closes */
    }
    free(tiff);
    return 0;
}
