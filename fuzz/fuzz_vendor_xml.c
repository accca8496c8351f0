/* fuzz_vendor_xml.c — libFuzzer target for the vendors' XML metadata (Philips, Leica, Ventana:
 * src/formats/vendor_xml.c and each format's walk of its document). Mutating a whole TIFF seldom
 * reaches the XML intact, so the input is the XML itself: its first byte picks the vendor, the
 * rest is the text, and the target builds a small valid TIFF in memory in that vendor's framing
 * (where the XML goes, the Software tag, Ventana's fixed iScan packet, a tiled pyramid of 16 x 16
 * tiles, JPEG for inputs of odd length and uncompressed otherwise, and a stripped associated
 * image), opens it as a slide and reads it like the other targets.
 * The slide-level target fuzz_tiff covers the TIFF bytes themselves. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_read_slide.h"
#include "slide/slide.h"

enum { TILE = 16, MAX_DIRS = 4, MAX_TAGS = 18 };

/* A 16 x 16 baseline JPEG (RGB components): the tiles of inputs of odd length, so that the
 * formats' partial-decode paths run too; even lengths get uncompressed tiles. */
static const uint8_t tile_jpeg[] = {
    0xff, 0xd8, 0xff, 0xee, 0x00, 0x0e, 0x41, 0x64, 0x6f, 0x62, 0x65, 0x00, 0x64, 0x00, 0x00, 0x00,
    0x00, 0x00, 0xff, 0xdb, 0x00, 0x43, 0x00, 0x08, 0x06, 0x06, 0x07, 0x06, 0x05, 0x08, 0x07, 0x07,
    0x07, 0x09, 0x09, 0x08, 0x0a, 0x0c, 0x14, 0x0d, 0x0c, 0x0b, 0x0b, 0x0c, 0x19, 0x12, 0x13, 0x0f,
    0x14, 0x1d, 0x1a, 0x1f, 0x1e, 0x1d, 0x1a, 0x1c, 0x1c, 0x20, 0x24, 0x2e, 0x27, 0x20, 0x22, 0x2c,
    0x23, 0x1c, 0x1c, 0x28, 0x37, 0x29, 0x2c, 0x30, 0x31, 0x34, 0x34, 0x34, 0x1f, 0x27, 0x39, 0x3d,
    0x38, 0x32, 0x3c, 0x2e, 0x33, 0x34, 0x32, 0xff, 0xc0, 0x00, 0x11, 0x08, 0x00, 0x10, 0x00, 0x10,
    0x03, 0x52, 0x11, 0x00, 0x47, 0x11, 0x00, 0x42, 0x11, 0x00, 0xff, 0xc4, 0x00, 0x1f, 0x00, 0x00,
    0x01, 0x05, 0x01, 0x01, 0x01, 0x01, 0x01, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0xff, 0xc4, 0x00, 0xb5, 0x10,
    0x00, 0x02, 0x01, 0x03, 0x03, 0x02, 0x04, 0x03, 0x05, 0x05, 0x04, 0x04, 0x00, 0x00, 0x01, 0x7d,
    0x01, 0x02, 0x03, 0x00, 0x04, 0x11, 0x05, 0x12, 0x21, 0x31, 0x41, 0x06, 0x13, 0x51, 0x61, 0x07,
    0x22, 0x71, 0x14, 0x32, 0x81, 0x91, 0xa1, 0x08, 0x23, 0x42, 0xb1, 0xc1, 0x15, 0x52, 0xd1, 0xf0,
    0x24, 0x33, 0x62, 0x72, 0x82, 0x09, 0x0a, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x25, 0x26, 0x27, 0x28,
    0x29, 0x2a, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39, 0x3a, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48, 0x49,
    0x4a, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58, 0x59, 0x5a, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69,
    0x6a, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78, 0x79, 0x7a, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89,
    0x8a, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0x99, 0x9a, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7,
    0xa8, 0xa9, 0xaa, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7, 0xb8, 0xb9, 0xba, 0xc2, 0xc3, 0xc4, 0xc5,
    0xc6, 0xc7, 0xc8, 0xc9, 0xca, 0xd2, 0xd3, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8, 0xd9, 0xda, 0xe1, 0xe2,
    0xe3, 0xe4, 0xe5, 0xe6, 0xe7, 0xe8, 0xe9, 0xea, 0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8,
    0xf9, 0xfa, 0xff, 0xda, 0x00, 0x0c, 0x03, 0x52, 0x00, 0x47, 0x00, 0x42, 0x00, 0x00, 0x3f, 0x00,
    0xeb, 0x6e, 0xd5, 0xa2, 0x9e, 0xdc, 0xdc, 0xc3, 0x2b, 0xdc, 0x22, 0xa0, 0x40, 0xa4, 0x6d, 0x60,
    0x0f, 0x70, 0x3f, 0x8b, 0x27, 0x80, 0x3b, 0x81, 0x8f, 0x4a, 0xeb, 0x63, 0x8e, 0x51, 0x2d, 0xba,
    0x89, 0x50, 0xc6, 0xf2, 0x86, 0xc1, 0x91, 0x70, 0x33, 0x96, 0x38, 0x1e, 0xa0, 0x90, 0x41, 0x00,
    0x74, 0xe4, 0x7a, 0xf5, 0x91, 0xcd, 0x1a, 0x98, 0xc2, 0xc2, 0xb1, 0x96, 0x8d, 0x9a, 0x39, 0x58,
    0xf0, 0xc4, 0x8c, 0x8d, 0xc4, 0xe0, 0x9f, 0xba, 0x7f, 0xc3, 0x9e, 0x69, 0xc8, 0xcc, 0x67, 0x70,
    0x0c, 0x72, 0x33, 0x3e, 0x4a, 0xb6, 0x77, 0xf3, 0xc2, 0xff, 0x00, 0xb2, 0xc5, 0x7b, 0x72, 0x72,
    0x73, 0x8e, 0xf4, 0x4b, 0x66, 0x23, 0x85, 0x0a, 0xda, 0xc7, 0x8f, 0x33, 0x6c, 0x45, 0xc6, 0xe2,
    0x57, 0x00, 0x02, 0x41, 0xfe, 0x23, 0x82, 0x70, 0x78, 0xe4, 0xe7, 0x24, 0x1a, 0x97, 0xcd, 0x78,
    0x01, 0x28, 0x62, 0x79, 0x37, 0xec, 0x28, 0x9d, 0x22, 0x20, 0xf6, 0x27, 0x07, 0x05, 0xb1, 0x8e,
    0xdf, 0xce, 0xa4, 0x89, 0xe2, 0xf2, 0xd7, 0x73, 0x10, 0xcc, 0x79, 0x94, 0x83, 0xb4, 0x3a, 0xee,
    0x00, 0x1e, 0x38, 0xea, 0x3e, 0x65, 0xf6, 0xe0, 0x54, 0x0c, 0x22, 0xb5, 0xb9, 0x8e, 0x02, 0xad,
    0x2e, 0xd8, 0xdf, 0x69, 0x2d, 0xb8, 0xf5, 0xc7, 0x1d, 0x83, 0x0d, 0xb8, 0x3e, 0xa0, 0x75, 0x07,
    0x02, 0xab, 0xce, 0x97, 0x3b, 0x25, 0xd8, 0xdf, 0xbf, 0x76, 0x72, 0x15, 0x02, 0x12, 0xb9, 0x04,
    0xf5, 0x1e, 0xc4, 0x75, 0x07, 0xae, 0x72, 0x38, 0xa7, 0xc4, 0xe6, 0xd6, 0xea, 0x48, 0x10, 0xca,
    0xfb, 0x57, 0x68, 0x89, 0x9d, 0x18, 0xf5, 0x03, 0x9c, 0x13, 0xce, 0x42, 0xf5, 0xc7, 0x61, 0x8a,
    0x9a, 0x17, 0x31, 0x05, 0x98, 0x47, 0x28, 0xf2, 0xf3, 0x3f, 0x22, 0x37, 0xf9, 0x19, 0x40, 0x2c,
    0x58, 0x7c, 0xd9, 0xfe, 0x2e, 0x7a, 0xe0, 0x67, 0xb9, 0xa8, 0xa2, 0xb7, 0x67, 0x4d, 0xae, 0xd2,
    0x88, 0xa4, 0xc1, 0x1e, 0x5a, 0x63, 0x79, 0xcf, 0xf0, 0x1c, 0x1f, 0xbb, 0xc7, 0xaf, 0x4e, 0x3e,
    0xf7, 0x1f, 0xff, 0xd9};

typedef struct fdir {
    uint32_t width, height, subfile;
    int tiled;
    const char *description; /* NULL for none */
    size_t description_len;
    const char *software;
    uint16_t xml_tag; /* 0, or a tag (Ventana's XMP, 700) holding the XML as BYTE */
    const char *xml;
    size_t xml_len;
} fdir;

typedef struct fbuf {
    uint8_t *p;
    size_t n, cap;
} fbuf;

static int put(fbuf *b, const void *data, size_t len) {
    if (b->n + len > b->cap) {
        size_t cap = (b->n + len) * 2;
        uint8_t *grown = realloc(b->p, cap);
        if (grown == NULL) {
            return -1;
        }
        b->p = grown;
        b->cap = cap;
    }
    memcpy(b->p + b->n, data, len);
    b->n += len;
    return 0;
}

static void put_at(fbuf *b, size_t at, uint32_t v, int bytes) {
    for (int i = 0; i < bytes; i++) {
        b->p[at + (size_t)i] = (uint8_t)(v >> (8 * i));
    }
}

typedef struct ftag {
    uint16_t tag, type;
    uint32_t count;
    uint32_t value;   /* inline value, or */
    const void *data; /* out-of-line bytes (count * type size), written before the IFD */
    size_t data_len;
} ftag;

/* A classic little-endian TIFF of `n` directories; every tile of a directory shares one block
 * of grey pixels. Returns 0 on success. */
static int build_tiff(const fdir *dirs, int n, bool jpeg, fbuf *b) {
    static uint8_t pixels[TILE * TILE * 3];
    memset(pixels, 200, sizeof pixels);
    uint8_t header[8] = {'I', 'I', 42, 0, 0, 0, 0, 0};
    if (put(b, header, sizeof header) != 0) {
        return -1;
    }
    size_t next_at = 4; /* where the previous IFD's next-offset goes */
    for (int d = 0; d < n; d++) {
        const fdir *f = &dirs[d];
        bool compressed = jpeg && f->tiled;
        uint32_t pix_at = (uint32_t)b->n;
        if ((compressed ? put(b, tile_jpeg, sizeof tile_jpeg) : put(b, pixels, sizeof pixels)) !=
            0) {
            return -1;
        }
        uint32_t across = f->tiled ? (f->width + TILE - 1) / TILE : 1;
        uint32_t down = f->tiled ? (f->height + TILE - 1) / TILE : 1;
        uint32_t chunks = across * down;
        uint32_t bytes = compressed ? (uint32_t)sizeof tile_jpeg
                         : f->tiled ? TILE * TILE * 3
                                    : f->width * f->height * 3;
        if (!f->tiled && bytes > sizeof pixels) {
            return -1;
        }
        uint32_t *offsets = malloc(chunks * 4), *counts = malloc(chunks * 4);
        if (offsets == NULL || counts == NULL) {
            free(offsets);
            free(counts);
            return -1;
        }
        for (uint32_t i = 0; i < chunks; i++) {
            offsets[i] = pix_at;
            counts[i] = bytes;
        }
        ftag tags[MAX_TAGS];
        int nt = 0;
        tags[nt++] = (ftag){254, 4, 1, f->subfile, NULL, 0};
        tags[nt++] = (ftag){256, 4, 1, f->width, NULL, 0};
        tags[nt++] = (ftag){257, 4, 1, f->height, NULL, 0};
        tags[nt++] = (ftag){258, 3, 1, 8, NULL, 0};
        tags[nt++] = (ftag){259, 3, 1, compressed ? 7 : 1, NULL, 0};
        tags[nt++] = (ftag){262, 3, 1, 2, NULL, 0};
        if (f->description != NULL) {
            tags[nt++] = (ftag){270,
                                2,
                                (uint32_t)f->description_len + 1,
                                0,
                                f->description,
                                f->description_len + 1};
        }
        if (!f->tiled) {
            tags[nt++] = (ftag){273, 4, chunks, 0, offsets, chunks * 4};
        }
        tags[nt++] = (ftag){277, 3, 1, 3, NULL, 0};
        if (!f->tiled) {
            tags[nt++] = (ftag){278, 4, 1, f->height, NULL, 0};
            tags[nt++] = (ftag){279, 4, chunks, 0, counts, chunks * 4};
        }
        tags[nt++] = (ftag){284, 3, 1, 1, NULL, 0};
        if (f->software != NULL) {
            tags[nt++] = (ftag){305, 2,           (uint32_t)strlen(f->software) + 1,
                                0,   f->software, strlen(f->software) + 1};
        }
        if (f->tiled) {
            tags[nt++] = (ftag){322, 4, 1, TILE, NULL, 0};
            tags[nt++] = (ftag){323, 4, 1, TILE, NULL, 0};
            tags[nt++] = (ftag){324, 4, chunks, 0, offsets, chunks * 4};
            tags[nt++] = (ftag){325, 4, chunks, 0, counts, chunks * 4};
        }
        if (f->xml_tag != 0) {
            tags[nt++] = (ftag){f->xml_tag, 1, (uint32_t)f->xml_len, 0, f->xml, f->xml_len};
        }
        /* Out-of-line values (tags in ascending order already; a one-element count stays inline
         * when it fits in four bytes). */
        int failed = 0;
        for (int t = 0; t < nt && !failed; t++) {
            if (tags[t].data != NULL && tags[t].data_len > 4) {
                if (b->n & 1) {
                    failed |= put(b, "", 1);
                }
                tags[t].value = (uint32_t)b->n;
                failed |= put(b, tags[t].data, tags[t].data_len);
            } else if (tags[t].data != NULL) {
                uint32_t v = 0;
                memcpy(&v, tags[t].data, tags[t].data_len);
                tags[t].value = v;
            }
        }
        free(offsets);
        free(counts);
        if (failed || ((b->n & 1) && put(b, "", 1) != 0)) {
            return -1;
        }
        put_at(b, next_at, (uint32_t)b->n, 4);
        uint8_t count[2] = {(uint8_t)nt, 0};
        if (put(b, count, 2) != 0) {
            return -1;
        }
        for (int t = 0; t < nt; t++) {
            uint8_t e[12];
            size_t at = b->n;
            if (put(b, e, sizeof e) != 0) {
                return -1;
            }
            put_at(b, at, tags[t].tag, 2);
            put_at(b, at + 2, tags[t].type, 2);
            put_at(b, at + 4, tags[t].count, 4);
            put_at(b, at + 8, tags[t].value, 4);
        }
        next_at = b->n;
        uint8_t zero[4] = {0};
        if (put(b, zero, 4) != 0) {
            return -1;
        }
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > (1 << 20)) {
        return 0;
    }
    char *xml = malloc(size);
    if (xml == NULL) {
        return 0;
    }
    memcpy(xml, data + 1, size - 1);
    xml[size - 1] = '\0';
    size_t xml_len = strlen(xml);
    static const char iscan[] = "<iScan Magnification=\"40\" ScanRes=\"0.25\" Z-layers=\"1\"/>";
    fdir dirs[MAX_DIRS];
    int n = 0;
    switch (data[0]) {
    case 'P': /* Philips: the XML in the first ImageDescription, Software "Philips" */
        dirs[n++] = (fdir){64, 48, 0, 1, xml, xml_len, "Philips DP v1.0", 0, NULL, 0};
        dirs[n++] = (fdir){32, 32, 1, 1, NULL, 0, NULL, 0, NULL, 0};
        dirs[n++] = (fdir){16, 8, 0, 0, "Label", 5, NULL, 0, NULL, 0};
        break;
    case 'L': /* Leica SCN: the XML in the first ImageDescription */
        dirs[n++] = (fdir){64, 48, 0, 1, xml, xml_len, NULL, 0, NULL, 0};
        dirs[n++] = (fdir){32, 24, 0, 1, NULL, 0, NULL, 0, NULL, 0};
        dirs[n++] = (fdir){16, 8, 0, 1, NULL, 0, NULL, 0, NULL, 0};
        break;
    default: /* Ventana: the input is level 0's EncodeInfo XMP; the macro carries a fixed iScan */
        dirs[n++] = (fdir){16, 8, 0, 0, "Label Image", 11, NULL, 700, iscan, strlen(iscan)};
        dirs[n++] = (fdir){64, 48, 0, 1, "level=0 mag=40 quality=90", 25, NULL, 700, xml, xml_len};
        dirs[n++] = (fdir){32, 24, 0, 1, "level=1 mag=20 quality=90", 25, NULL, 0, NULL, 0};
        break;
    }
    fbuf b = {0};
    if (build_tiff(dirs, n, (size & 1) != 0, &b) == 0) {
        sp_limits limits;
        fuzz_limits(&limits);
        sp_source *src = NULL;
        sp_err err = {0};
        sp_slide *slide = NULL;
        if (sp_source_open_memory(b.p, b.n, "fuzz", &src, &err) == SP_OK &&
            sp_slide_open_source(src, "fuzz", &limits, &slide, &err) == SP_OK) {
            fuzz_read_slide(slide); /* closes the slide */
        }
    }
    free(b.p);
    free(xml);
    return 0;
}
