/* icc_tiff.h — a tiny little-endian strip TIFF built in memory (8-bit RGB, uncompressed, one
 * strip) carrying an ICC profile as tag 34675, for the ICC unit test (tests/unit/test_icc.c) and
 * the ICC fuzz target (fuzz/fuzz_icc.c). Header only: both include it. */
#ifndef SLIDEPIPE_TESTS_ICC_TIFF_H
#define SLIDEPIPE_TESTS_ICC_TIFF_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static inline void icc_tiff_put16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static inline void icc_tiff_put32(uint8_t *p, uint32_t v) {
    icc_tiff_put16(p, (uint16_t)v);
    icc_tiff_put16(p + 2, (uint16_t)(v >> 16));
}

static inline uint8_t *icc_tiff_entry(uint8_t *p, uint16_t tag, uint16_t type, uint32_t count,
                                      uint32_t value) {
    icc_tiff_put16(p, tag);
    icc_tiff_put16(p + 2, type);
    icc_tiff_put32(p + 4, count);
    icc_tiff_put32(p + 8, value);
    return p + 12;
}

/* The w x h RGB `pixels` as a TIFF with `profile` (len bytes; len <= 4 sits in the entry itself,
 * as TIFF stores short values) as tag 34675, or without the tag when profile is NULL. Returns a
 * malloc'd file of *total bytes, NULL when out of memory. */
static inline uint8_t *icc_tiff_make(const uint8_t *pixels, uint32_t w, uint32_t h,
                                     const uint8_t *profile, size_t len, size_t *total) {
    const uint32_t tags = profile != NULL ? 10 : 9;
    const uint32_t ifd = 8, bps = ifd + 2 + 12 * tags + 4, data = bps + 6;
    const uint32_t icc = data + w * h * 3;
    *total = icc + (profile != NULL && len > 4 ? len : 0);
    uint8_t *t = calloc(1, *total);
    if (t == NULL) {
        return NULL;
    }
    memcpy(t, "II*\0", 4);
    icc_tiff_put32(t + 4, ifd);
    icc_tiff_put16(t + ifd, (uint16_t)tags);
    uint8_t *p = t + ifd + 2;
    p = icc_tiff_entry(p, 256, 4, 1, w);
    p = icc_tiff_entry(p, 257, 4, 1, h);
    p = icc_tiff_entry(p, 258, 3, 3, bps);
    p = icc_tiff_entry(p, 259, 3, 1, 1);
    p = icc_tiff_entry(p, 262, 3, 1, 2);
    p = icc_tiff_entry(p, 273, 4, 1, data);
    p = icc_tiff_entry(p, 277, 3, 1, 3);
    p = icc_tiff_entry(p, 278, 4, 1, h);
    p = icc_tiff_entry(p, 279, 4, 1, w * h * 3);
    if (profile != NULL) {
        p = icc_tiff_entry(p, 34675, 7, (uint32_t)len, len <= 4 ? 0 : icc);
        if (len <= 4) {
            memcpy(p - 4, profile, len);
        } else {
            memcpy(t + icc, profile, len);
        }
    }
    icc_tiff_put32(p, 0);
    for (int i = 0; i < 3; i++) {
        icc_tiff_put16(t + bps + 2 * i, 8);
    }
    memcpy(t + data, pixels, (size_t)w * h * 3);
    return t;
}

#endif
