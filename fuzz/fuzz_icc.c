/* fuzz_icc.c — libFuzzer target for the embedded ICC profile path (src/slide/icc.c and the
 * LittleCMS parse behind it): the input is taken as a profile, placed as tag 34675 in a small
 * strip TIFF built in memory (16 x 8 RGB pixels, uncompressed; tests/unit/icc_tiff.h), which is
 * opened as a slide; the profile is read back, conversion to sRGB is turned on (a profile
 * LittleCMS refuses must give a clean error), and regions are read in RGBA and RGB, in and across
 * the image's edge, so a transform built from hostile bytes runs too. The seeds (fuzz/corpus/icc)
 * are profiles written by tests/data/icc_profiles.py. (The TIFF and DICOM targets reach the same
 * code with their files' own profiles: fuzz_read_slide turns conversion on too.) */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../tests/unit/icc_tiff.h"
#include "fuzz_read_slide.h"
#include "slide/slide.h"

enum { W = 16, H = 8 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1u << 20)) {
        return 0;
    }
    uint8_t pixels[W * H * 3];
    for (uint32_t i = 0; i < W * H * 3; i++) {
        pixels[i] = (uint8_t)(i * 37u);
    }
    size_t total = 0;
    uint8_t *tiff = icc_tiff_make(pixels, W, H, data, size, &total);
    if (tiff == NULL) {
        return 0;
    }
    sp_slide *slide = fuzz_open_memory(tiff, total, "fuzz-icc.tif");
    if (slide != NULL) {
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
