/* fuzz_vendor_xml.c — libFuzzer target for the vendors' XML metadata (Philips, Leica, Ventana:
 * src/formats/vendor_xml.c and each format's walk of its document). Mutating a whole TIFF seldom
 * reaches the XML intact, so the input is the XML itself: its first byte picks the vendor, the
 * rest is the text, and the target builds a small valid TIFF in memory in that vendor's framing
 * (where the XML goes, the Software tag, Ventana's fixed iScan packet, a two-level tiled pyramid of uncompressed 16 x 16 tiles
 * and a stripped associated image), opens it as a slide and reads it like the other targets.
 * The slide-level target fuzz_tiff covers the TIFF bytes themselves. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_read_slide.h"
#include "slide/slide.h"

enum { TILE = 16, MAX_DIRS = 4, MAX_TAGS = 18 };

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
    uint32_t value;      /* inline value, or */
    const void *data;    /* out-of-line bytes (count * type size), written before the IFD */
    size_t data_len;
} ftag;

/* A classic little-endian TIFF of `n` directories; every tile of a directory shares one block
 * of grey pixels. Returns 0 on success. */
static int build_tiff(const fdir *dirs, int n, fbuf *b) {
    static uint8_t pixels[TILE * TILE * 3];
    memset(pixels, 200, sizeof pixels);
    uint8_t header[8] = {'I', 'I', 42, 0, 0, 0, 0, 0};
    if (put(b, header, sizeof header) != 0) {
        return -1;
    }
    size_t next_at = 4; /* where the previous IFD's next-offset goes */
    for (int d = 0; d < n; d++) {
        const fdir *f = &dirs[d];
        uint32_t pix_at = (uint32_t)b->n;
        if (put(b, pixels, sizeof pixels) != 0) {
            return -1;
        }
        uint32_t across = f->tiled ? (f->width + TILE - 1) / TILE : 1;
        uint32_t down = f->tiled ? (f->height + TILE - 1) / TILE : 1;
        uint32_t chunks = across * down;
        uint32_t bytes = f->tiled ? TILE * TILE * 3 : f->width * f->height * 3;
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
        tags[nt++] = (ftag){259, 3, 1, 1, NULL, 0};
        tags[nt++] = (ftag){262, 3, 1, 2, NULL, 0};
        if (f->description != NULL) {
            tags[nt++] = (ftag){270, 2, (uint32_t)f->description_len + 1, 0, f->description,
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
            tags[nt++] = (ftag){305, 2, (uint32_t)strlen(f->software) + 1, 0, f->software,
                                strlen(f->software) + 1};
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
        dirs[n++] = (fdir){64, 48, 0, 1, "level=0 mag=40 quality=90", 25, NULL, 700, xml,
                           xml_len};
        dirs[n++] = (fdir){32, 24, 0, 1, "level=1 mag=20 quality=90", 25, NULL, 0, NULL, 0};
        break;
    }
    fbuf b = {0};
    if (build_tiff(dirs, n, &b) == 0) {
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
