/* test_codecs.c — unit tests of the tile codecs (src/codecs/).
 *
 * Each decoder is checked by round trips through a real encoder (libjpeg, libdeflate, zstd, and
 * for LZW a small TIFF-style encoder written here), against known answers, and against broken
 * input, which must give an error or short output and never a crash or a leak (run under ASan).
 * PNG goes round trips through libpng's writer; BMP is built here byte by byte, bottom-up and
 * top-down, and every kind the strict decoder refuses is tried.
 * When the shared test data is present, Aperio tiles and the LZW + predictor label are decoded
 * and compared with hashes of what OpenSlide 4.0.1 returns for the same pixels.
 */
#include "unit.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <libdeflate.h>
#include <png.h>
#include <zstd.h>

#include "codecs/codec.h"

/* ---- helpers ---------------------------------------------------------------------------- */

static uint64_t rng_state = 0x9E3779B97F4A7C15u;

static uint32_t rng(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 32);
}

static uint64_t fnv1a(const uint8_t *p, size_t n, uint64_t h) {
    for (size_t i = 0; i < n; i++) {
        h = (h ^ p[i]) * 0x100000001b3u;
    }
    return h;
}
#define FNV_INIT 0xcbf29ce484222325u

/* Test data of a few kinds: 0 random, 1 one repeated byte, 2 four symbols, 3 a short period. */
static uint8_t *make_data(size_t n, int kind) {
    uint8_t *p = malloc(n ? n : 1);
    for (size_t i = 0; i < n; i++) {
        switch (kind) {
        case 0:
            p[i] = (uint8_t)rng();
            break;
        case 1:
            p[i] = 'a';
            break;
        case 2:
            p[i] = (uint8_t)(rng() & 3);
            break;
        default:
            p[i] = (uint8_t)("abcabd"[i % 6] + (i / 1000) % 3);
            break;
        }
    }
    return p;
}

/* ---- a TIFF LZW encoder, test-only ------------------------------------------------------ */

typedef struct bitwriter {
    uint8_t *buf;
    size_t len, cap;
    uint32_t acc;
    unsigned nacc;
} bitwriter;

static void bw_put(bitwriter *w, unsigned code, unsigned width) {
    w->acc = (w->acc << width) | code;
    w->nacc += width;
    while (w->nacc >= 8) {
        if (w->len == w->cap) {
            w->cap = w->cap ? 2 * w->cap : 64;
            w->buf = realloc(w->buf, w->cap);
        }
        w->nacc -= 8;
        w->buf[w->len++] = (uint8_t)(w->acc >> w->nacc);
    }
}

static void bw_flush(bitwriter *w) {
    if (w->nacc > 0) {
        bw_put(w, 0, 8 - w->nacc);
    }
}

/* Encode as libtiff does: clear code first, codes widen when the encoder's next free code
 * reaches 512, 1024, 2048, and a clear code is written before code 4095 would be assigned.
 * With `no_clear` the table is instead left full, to test decoders that keep using it. */
static uint8_t *lzw_encode(const uint8_t *in, size_t n, bool no_clear, size_t *out_len) {
    uint16_t *child = calloc((size_t)4096 * 256, sizeof *child); /* 0 = no such string */
    bitwriter w = {0};
    unsigned width = 9, next = 258;
    bw_put(&w, 256, width);
    if (n > 0) {
        unsigned cur = in[0];
        for (size_t i = 1; i < n; i++) {
            unsigned c = in[i];
            if (child[cur * 256 + c] != 0) {
                cur = child[cur * 256 + c];
                continue;
            }
            bw_put(&w, cur, width);
            if (next < 4096) {
                child[cur * 256 + c] = (uint16_t)next++;
            }
            if (next == 4095 && !no_clear) {
                bw_put(&w, 256, width);
                memset(child, 0, (size_t)4096 * 256 * sizeof *child);
                width = 9;
                next = 258;
            } else if (next >= (1u << width) && width < 12) {
                width++;
            }
            cur = c;
        }
        bw_put(&w, cur, width);
        /* the decoder adds an entry on reading that last code and may widen; follow it */
        if (next < 4096) {
            next++;
            if (next >= (1u << width) && width < 12) {
                width++;
            }
        }
    }
    bw_put(&w, 257, width);
    bw_flush(&w);
    free(child);
    *out_len = w.len;
    return w.buf ? w.buf : calloc(1, 1);
}

/* ---- LZW -------------------------------------------------------------------------------- */

static void test_lzw_roundtrip(void) {
    static const size_t sizes[] = {0, 1, 2, 3, 7, 255, 256, 257, 1000, 4096, 5003, 65536, 300001};
    int bad = 0, checks = 0;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        for (int kind = 0; kind < 4; kind++) {
            for (int no_clear = 0; no_clear < 2; no_clear++) {
                size_t n = sizes[s], enc_len, written = 12345;
                uint8_t *data = make_data(n, kind);
                uint8_t *enc = lzw_encode(data, n, no_clear, &enc_len);
                uint8_t *out = malloc(n + 100);
                sp_err err = {0};
                /* exact, roomy and cut output buffers */
                sp_status st = sp_lzw_decode(enc, enc_len, out, n, &written, &err);
                checks++;
                if (st != SP_OK || written != n || (n && memcmp(out, data, n) != 0)) {
                    fprintf(stderr, "lzw n=%zu kind=%d no_clear=%d: st=%d written=%zu %s\n", n,
                            kind, no_clear, st, written, err.msg);
                    bad++;
                }
                st = sp_lzw_decode(enc, enc_len, out, n + 100, &written, &err);
                checks++;
                bad += st != SP_OK || written != n || (n && memcmp(out, data, n) != 0);
                size_t half = n / 2;
                memset(out, 0xEE, n + 100);
                st = sp_lzw_decode(enc, enc_len, out, half, &written, &err);
                checks++;
                bad += st != SP_OK || written != half || (half && memcmp(out, data, half) != 0) ||
                       out[half] != 0xEE;
                free(out);
                free(enc);
                free(data);
            }
        }
    }
    CHECK_EQ_INT(bad, 0);
    CHECK(checks > 300);
}

/* The encoder and decoder above agree with each other; this pins the bit layout itself. */
static void test_lzw_known(void) {
    /* "ABABABA": clear, 'A', 'B', 258 ("AB"), 260 ("ABA", the KwKwK case), EOI; 9 bits each */
    bitwriter w = {0};
    const unsigned codes[] = {256, 'A', 'B', 258, 260, 257};
    for (size_t i = 0; i < 6; i++) {
        bw_put(&w, codes[i], 9);
    }
    bw_flush(&w);
    CHECK_EQ_INT(w.buf[0], 0x80); /* a TIFF 6 stream starts with a clear code */
    uint8_t out[16];
    size_t written = 0;
    sp_err err = {0};
    CHECK_EQ_INT(sp_lzw_decode(w.buf, w.len, out, sizeof out, &written, &err), SP_OK);
    CHECK_EQ_INT(written, 7);
    CHECK(memcmp(out, "ABABABA", 7) == 0);

    /* stream without EOI: ends with the input */
    CHECK_EQ_INT(sp_lzw_decode(w.buf, w.len - 2, out, sizeof out, &written, &err), SP_OK);
    CHECK_EQ_INT(written, 4);
    free(w.buf);

    /* code 300 is not defined yet (next is 259) */
    memset(&w, 0, sizeof w);
    const unsigned bad[] = {256, 'A', 300, 257};
    for (size_t i = 0; i < 4; i++) {
        bw_put(&w, bad[i], 9);
    }
    bw_flush(&w);
    CHECK_EQ_INT(sp_lzw_decode(w.buf, w.len, out, sizeof out, &written, &err), SP_E_CORRUPT);
    CHECK(err.msg[0] != '\0');
    free(w.buf);

    /* a string code straight after a clear */
    memset(&w, 0, sizeof w);
    const unsigned bad2[] = {256, 258, 257};
    for (size_t i = 0; i < 3; i++) {
        bw_put(&w, bad2[i], 9);
    }
    bw_flush(&w);
    sp_err_clear(&err);
    CHECK_EQ_INT(sp_lzw_decode(w.buf, w.len, out, sizeof out, &written, &err), SP_E_CORRUPT);
    free(w.buf);

    /* old-style LSB-first streams are refused, not misread */
    const uint8_t old[] = {0x00, 0x01, 0x82, 0x10};
    sp_err_clear(&err);
    CHECK_EQ_INT(sp_lzw_decode(old, sizeof old, out, sizeof out, &written, &err),
                 SP_E_UNSUPPORTED);
    CHECK_EQ_INT(written, 0);

    /* empty input, empty output */
    sp_err_clear(&err);
    CHECK_EQ_INT(sp_lzw_decode(NULL, 0, out, sizeof out, &written, &err), SP_OK);
    CHECK_EQ_INT(written, 0);
    CHECK_EQ_INT(sp_lzw_decode((const uint8_t[]){0x80, 0x00}, 2, NULL, 0, &written, &err), SP_OK);
}

static void test_lzw_broken(void) {
    /* truncations of a valid stream: OK with a correct prefix, or an error */
    size_t n = 50000, enc_len, written;
    uint8_t *data = make_data(n, 2);
    uint8_t *enc = lzw_encode(data, n, false, &enc_len);
    uint8_t *out = malloc(n);
    int bad = 0;
    for (size_t cut = 0; cut < enc_len; cut += 1 + cut / 7) {
        sp_err err = {0};
        sp_status st = sp_lzw_decode(enc, cut, out, n, &written, &err);
        bad += st != SP_OK || written > n || memcmp(out, data, written) != 0;
    }
    CHECK_EQ_INT(bad, 0);

    /* flipped bytes and pure garbage: anything but a crash, and only the documented statuses */
    bad = 0;
    for (int round = 0; round < 3000; round++) {
        uint8_t *copy = malloc(enc_len);
        memcpy(copy, enc, enc_len);
        size_t len = enc_len;
        if (round % 3 == 0) {
            for (size_t i = 0; i < len; i++) {
                copy[i] = (uint8_t)rng();
            }
            len = rng() % len;
        } else {
            for (int k = 0; k < 1 + round % 5; k++) {
                copy[rng() % len] ^= (uint8_t)(1u << (rng() % 8));
            }
        }
        sp_err err = {0};
        sp_status st = sp_lzw_decode(copy, len, out, n, &written, &err);
        bad += !(st == SP_OK || st == SP_E_CORRUPT || st == SP_E_UNSUPPORTED) || written > n;
        bad += st != SP_OK && err.msg[0] == '\0';
        free(copy);
    }
    CHECK_EQ_INT(bad, 0);
    free(out);
    free(enc);
    free(data);
}

/* ---- Deflate and Zstandard ---------------------------------------------------------------- */

static void test_deflate(void) {
    struct libdeflate_compressor *c = libdeflate_alloc_compressor(6);
    size_t n = 100000;
    uint8_t *data = make_data(n, 3);
    size_t cap = libdeflate_zlib_compress_bound(c, n);
    uint8_t *enc = malloc(cap);
    size_t enc_len = libdeflate_zlib_compress(c, data, n, enc, cap);
    CHECK(enc_len > 0);
    uint8_t *out = malloc(n + 10);
    size_t written = 0;
    sp_err err = {0};

    CHECK_EQ_INT(sp_deflate_decode(enc, enc_len, out, n, &written, &err), SP_OK);
    CHECK_EQ_INT(written, n);
    CHECK(memcmp(out, data, n) == 0);
    CHECK_EQ_INT(sp_deflate_decode(enc, enc_len, out, n + 10, &written, &err), SP_OK);
    CHECK_EQ_INT(written, n);

    CHECK_EQ_INT(sp_deflate_decode(enc, enc_len, out, n - 1, &written, &err), SP_E_CORRUPT);
    CHECK(strstr(err.msg, "more than") != NULL);
    CHECK_EQ_INT(written, 0);

    sp_err_clear(&err);
    CHECK_EQ_INT(sp_deflate_decode(enc, enc_len / 2, out, n, &written, &err), SP_E_CORRUPT);
    sp_err_clear(&err);
    CHECK_EQ_INT(sp_deflate_decode(enc, 0, out, n, &written, &err), SP_E_CORRUPT);
    int bad = 0;
    for (int round = 0; round < 200; round++) {
        uint8_t *copy = malloc(enc_len);
        memcpy(copy, enc, enc_len);
        copy[rng() % enc_len] ^= (uint8_t)(1u << (rng() % 8));
        sp_err_clear(&err);
        sp_status st = sp_deflate_decode(copy, enc_len, out, n, &written, &err);
        /* the Adler-32 trailer catches every single-bit flip */
        bad += st != SP_E_CORRUPT;
        free(copy);
    }
    CHECK_EQ_INT(bad, 0);

    /* empty payload */
    size_t e0 = libdeflate_zlib_compress(c, data, 0, enc, cap);
    sp_err_clear(&err);
    CHECK_EQ_INT(sp_deflate_decode(enc, e0, out, n, &written, &err), SP_OK);
    CHECK_EQ_INT(written, 0);

    libdeflate_free_compressor(c);
    free(out);
    free(enc);
    free(data);
}

static void test_zstd(void) {
    size_t n = 100000;
    uint8_t *data = make_data(n, 2);
    size_t cap = ZSTD_compressBound(n);
    uint8_t *enc = malloc(cap);
    size_t enc_len = ZSTD_compress(enc, cap, data, n, 3);
    CHECK(!ZSTD_isError(enc_len));
    uint8_t *out = malloc(n + 10);
    size_t written = 0;
    sp_err err = {0};

    CHECK_EQ_INT(sp_zstd_decode(enc, enc_len, out, n, &written, &err), SP_OK);
    CHECK_EQ_INT(written, n);
    CHECK(memcmp(out, data, n) == 0);
    CHECK_EQ_INT(sp_zstd_decode(enc, enc_len, out, n + 10, &written, &err), SP_OK);
    CHECK_EQ_INT(written, n);

    CHECK_EQ_INT(sp_zstd_decode(enc, enc_len, out, n - 1, &written, &err), SP_E_CORRUPT);
    CHECK(strstr(err.msg, "more than") != NULL);

    sp_err_clear(&err);
    CHECK_EQ_INT(sp_zstd_decode(enc, enc_len - 3, out, n, &written, &err), SP_E_CORRUPT);
    CHECK(strncmp(err.msg, "Zstandard: ", 11) == 0 && strlen(err.msg) > 11);
    sp_err_clear(&err);
    CHECK_EQ_INT(sp_zstd_decode(enc, 0, out, n, &written, &err), SP_E_CORRUPT);
    enc[0] ^= 0xFF; /* the frame magic */
    sp_err_clear(&err);
    CHECK_EQ_INT(sp_zstd_decode(enc, enc_len, out, n, &written, &err), SP_E_CORRUPT);
    enc[0] ^= 0xFF;

    /* zstd has no checksum by default, so a flipped bit may decode to other bytes; it must
     * still never overrun */
    int bad = 0;
    for (int round = 0; round < 500; round++) {
        uint8_t *copy = malloc(enc_len);
        memcpy(copy, enc, enc_len);
        copy[rng() % enc_len] ^= (uint8_t)(1u << (rng() % 8));
        sp_err_clear(&err);
        sp_status st = sp_zstd_decode(copy, enc_len, out, n, &written, &err);
        bad += (st != SP_OK && st != SP_E_CORRUPT) || written > n;
        free(copy);
    }
    CHECK_EQ_INT(bad, 0);
    free(out);
    free(enc);
    free(data);
}

/* ---- predictor ---------------------------------------------------------------------------- */

static void test_predictor(void) {
    sp_err err = {0};
    /* 8-bit RGB, 3 pixels a row, 2 rows, rows padded to 10 bytes */
    uint8_t b8[20] = {10, 20, 30, 1, 2, 3, 255, 254, 253, 99,
                      0,  0,  0,  5, 5, 5, 5,   5,   5,   98};
    CHECK_EQ_INT(sp_predictor_undo(b8, 10, 3, 2, 3, 8, false, &err), SP_OK);
    const uint8_t want8[20] = {10, 20, 30, 11, 22, 33, 10, 20, 30, 99,
                               0,  0,  0,  5,  5,  5,  10, 10, 10, 98};
    CHECK(memcmp(b8, want8, 20) == 0);

    /* 16-bit, 1 sample, little-endian: 1000, +5, -1 (65535) -> 1000, 1005, 1004 */
    uint8_t le[6] = {0xE8, 0x03, 0x05, 0x00, 0xFF, 0xFF};
    CHECK_EQ_INT(sp_predictor_undo(le, 6, 3, 1, 1, 16, false, &err), SP_OK);
    const uint8_t want_le[6] = {0xE8, 0x03, 0xED, 0x03, 0xEC, 0x03};
    CHECK(memcmp(le, want_le, 6) == 0);

    /* 16-bit, 2 samples, big-endian: carries cross the byte boundary */
    uint8_t be[8] = {0x00, 0xFF, 0x12, 0x34, 0x00, 0x01, 0x00, 0x01};
    CHECK_EQ_INT(sp_predictor_undo(be, 8, 2, 1, 2, 16, true, &err), SP_OK);
    const uint8_t want_be[8] = {0x00, 0xFF, 0x12, 0x34, 0x01, 0x00, 0x12, 0x35};
    CHECK(memcmp(be, want_be, 8) == 0);

    CHECK_EQ_INT(sp_predictor_undo(be, 8, 2, 1, 2, 32, true, &err), SP_E_UNSUPPORTED);
    sp_err_clear(&err);
    CHECK_EQ_INT(sp_predictor_undo(be, 8, 3, 1, 2, 16, true, &err), SP_E_INVALID_ARG);
    sp_err_clear(&err);
    CHECK_EQ_INT(sp_predictor_undo(be, 8, UINT64_MAX, 1, 2, 16, true, &err), SP_E_INVALID_ARG);
}

/* ---- JPEG --------------------------------------------------------------------------------- */

typedef struct jpeg_opts {
    int comps;          /* 1, 3 or 4 */
    bool rgb;           /* store R, G, B components untransformed */
    bool ids_123;       /* with rgb: component ids 1, 2, 3 and no Adobe marker, as Aperio
                           writes them, so only the container can tell it is RGB */
    bool progressive;
    bool abbreviated;   /* image without tables; tables go to *tables */
    int quality;
} jpeg_opts;

/* A smooth picture with noise and edges, so every stage of the codec has work to do. */
static uint8_t *make_image(unsigned w, unsigned h, int comps) {
    uint8_t *p = malloc((size_t)w * h * comps);
    for (unsigned y = 0; y < h; y++) {
        for (unsigned x = 0; x < w; x++) {
            for (int c = 0; c < comps; c++) {
                unsigned v = (x * (3 + c) + y * (5 - c) + (rng() & 15)) & 255;
                if (((x / 8) ^ (y / 8)) & 1) {
                    v = 255 - v;
                }
                p[((size_t)y * w + x) * comps + c] = (uint8_t)v;
            }
        }
    }
    return p;
}

static uint8_t *jpeg_encode(const uint8_t *pix, unsigned w, unsigned h, const jpeg_opts *o,
                            size_t *len, uint8_t **tables, size_t *tables_len) {
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr jerr;
    c.err = jpeg_std_error(&jerr);
    jpeg_create_compress(&c);
    c.image_width = w;
    c.image_height = h;
    c.input_components = o->comps;
    c.in_color_space = o->comps == 1 ? JCS_GRAYSCALE : o->comps == 4 ? JCS_CMYK : JCS_RGB;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, o->quality ? o->quality : 85, TRUE);
    if (o->rgb) {
        jpeg_set_colorspace(&c, JCS_RGB);
        if (o->ids_123) {
            c.write_Adobe_marker = FALSE;
            for (int i = 0; i < 3; i++) {
                c.comp_info[i].component_id = i + 1;
            }
        }
    }
    if (o->progressive) {
        jpeg_simple_progression(&c);
    }
    if (o->abbreviated) {
        unsigned char *tb = NULL;
        unsigned long tl = 0;
        jpeg_mem_dest(&c, &tb, &tl);
        jpeg_write_tables(&c);
        *tables = malloc(tl);
        memcpy(*tables, tb, tl);
        *tables_len = tl;
        free(tb);
        jpeg_suppress_tables(&c, TRUE);
    }
    unsigned char *buf = NULL;
    unsigned long blen = 0;
    jpeg_mem_dest(&c, &buf, &blen);
    jpeg_start_compress(&c, o->abbreviated ? FALSE : TRUE);
    size_t row = (size_t)w * o->comps;
    while (c.next_scanline < h) {
        JSAMPROW r = (JSAMPROW)(pix + c.next_scanline * row);
        jpeg_write_scanlines(&c, &r, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    *len = blen;
    return buf;
}

/* libjpeg's own answer, to RGB or grey, with the container's colour space forced as asked. */
static uint8_t *jpeg_reference(const uint8_t *data, size_t len, J_COLOR_SPACE force,
                               unsigned *w, unsigned *h, int *comps) {
    struct jpeg_decompress_struct d;
    struct jpeg_error_mgr jerr;
    d.err = jpeg_std_error(&jerr);
    jpeg_create_decompress(&d);
    jpeg_mem_src(&d, data, (unsigned long)len);
    jpeg_read_header(&d, TRUE);
    if (force != JCS_UNKNOWN) {
        d.jpeg_color_space = force;
    }
    d.out_color_space = d.num_components == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_start_decompress(&d);
    *w = d.output_width;
    *h = d.output_height;
    *comps = d.output_components;
    size_t row = (size_t)*w * *comps;
    uint8_t *pix = malloc(row * *h);
    while (d.output_scanline < d.output_height) {
        JSAMPROW r = pix + d.output_scanline * row;
        jpeg_read_scanlines(&d, &r, 1);
    }
    jpeg_finish_decompress(&d);
    jpeg_destroy_decompress(&d);
    return pix;
}

/* Does the area hold the reference's top-left cw x ch pixels as RGBA with alpha 255? */
static bool rgba_matches(const uint8_t *rgba, size_t stride, const uint8_t *ref, unsigned ref_w,
                         int ref_comps, unsigned cw, unsigned ch) {
    for (unsigned y = 0; y < ch; y++) {
        for (unsigned x = 0; x < cw; x++) {
            const uint8_t *p = rgba + y * stride + 4 * (size_t)x;
            const uint8_t *r = ref + ((size_t)y * ref_w + x) * ref_comps;
            for (int c = 0; c < 3; c++) {
                if (p[c] != r[ref_comps == 1 ? 0 : c]) {
                    return false;
                }
            }
            if (p[3] != 255) {
                return false;
            }
        }
    }
    return true;
}

static void check_jpeg_against_reference(const char *what, const jpeg_opts *o,
                                         sp_jpeg_space space, J_COLOR_SPACE force) {
    unsigned w = 67, h = 45;
    uint8_t *pix = make_image(w, h, o->comps);
    size_t len;
    uint8_t *tables = NULL;
    size_t tables_len = 0;
    uint8_t *jpg = jpeg_encode(pix, w, h, o, &len, NULL, NULL);
    unsigned rw, rh;
    int rc;
    uint8_t *ref = jpeg_reference(jpg, len, force, &rw, &rh, &rc);
    CHECK(rw == w && rh == h);

    size_t stride = 4 * (size_t)w;
    uint8_t *rgba = malloc(stride * h);
    sp_err err = {0};
    sp_status st = sp_jpeg_decode_rgba(jpg, len, NULL, 0, space, w, h, rgba, stride, &err);
    if (st != SP_OK) {
        fprintf(stderr, "%s: %s\n", what, err.msg);
    }
    CHECK_EQ_INT(st, SP_OK);
    bool same = rgba_matches(rgba, stride, ref, rw, rc, w, h);
    if (!same) {
        fprintf(stderr, "%s: pixels differ from libjpeg\n", what);
    }
    CHECK(same);

    /* the same picture as an abbreviated stream plus tables decodes to the same pixels */
    jpeg_opts ab = *o;
    ab.abbreviated = true;
    size_t alen;
    uint8_t *abbr = jpeg_encode(pix, w, h, &ab, &alen, &tables, &tables_len);
    CHECK(alen < len);
    memset(rgba, 0, stride * h);
    sp_err_clear(&err);
    CHECK_EQ_INT(
        sp_jpeg_decode_rgba(abbr, alen, tables, tables_len, space, w, h, rgba, stride, &err),
        SP_OK);
    CHECK(rgba_matches(rgba, stride, ref, rw, rc, w, h));
    uint32_t hw = 0, hh = 0;
    int hc = 0;
    CHECK_EQ_INT(sp_jpeg_read_header(abbr, alen, tables, tables_len, &hw, &hh, &hc, &err), SP_OK);
    CHECK(hw == w && hh == h && hc == o->comps);
    /* without its tables it cannot decode (no quantisation tables) */
    sp_err_clear(&err);
    st = sp_jpeg_decode_rgba(abbr, alen, NULL, 0, space, w, h, rgba, stride, &err);
    CHECK_EQ_INT(st, SP_E_CORRUPT);
    CHECK(strncmp(err.msg, "JPEG: ", 6) == 0);

    free(abbr);
    free(tables);
    free(rgba);
    free(ref);
    free(jpg);
    free(pix);
}

static void test_jpeg_pixels(void) {
    jpeg_opts ycc = {.comps = 3};
    check_jpeg_against_reference("YCbCr 4:2:0", &ycc, SP_JPEG_SPACE_YCBCR, JCS_UNKNOWN);
    check_jpeg_against_reference("YCbCr auto", &ycc, SP_JPEG_SPACE_AUTO, JCS_UNKNOWN);
    jpeg_opts prog = {.comps = 3, .progressive = true};
    check_jpeg_against_reference("progressive", &prog, SP_JPEG_SPACE_AUTO, JCS_UNKNOWN);
    jpeg_opts rgb = {.comps = 3, .rgb = true, .ids_123 = true, .quality = 95};
    check_jpeg_against_reference("RGB components", &rgb, SP_JPEG_SPACE_RGB, JCS_RGB);
    jpeg_opts rgb_marked = {.comps = 3, .rgb = true};
    check_jpeg_against_reference("RGB, Adobe marker", &rgb_marked, SP_JPEG_SPACE_AUTO,
                                 JCS_UNKNOWN);
    jpeg_opts grey = {.comps = 1};
    check_jpeg_against_reference("grey", &grey, SP_JPEG_SPACE_GREY, JCS_UNKNOWN);
    check_jpeg_against_reference("grey auto", &grey, SP_JPEG_SPACE_AUTO, JCS_UNKNOWN);

    /* The declared space matters: RGB components read as YCbCr give other colours. */
    unsigned w = 32, h = 16;
    uint8_t *pix = make_image(w, h, 3);
    size_t len;
    uint8_t *jpg = jpeg_encode(pix, w, h, &rgb, &len, NULL, NULL);
    uint8_t *a = malloc(4 * w * h), *b = malloc(4 * w * h);
    sp_err err = {0};
    CHECK_EQ_INT(sp_jpeg_decode_rgba(jpg, len, NULL, 0, SP_JPEG_SPACE_RGB, w, h, a, 4 * w, &err),
                 SP_OK);
    CHECK_EQ_INT(sp_jpeg_decode_rgba(jpg, len, NULL, 0, SP_JPEG_SPACE_AUTO, w, h, b, 4 * w, &err),
                 SP_OK);
    CHECK(memcmp(a, b, 4 * w * h) != 0);
    /* a grey container with a colour stream, and the reverse, are inconsistent */
    CHECK_EQ_INT(sp_jpeg_decode_rgba(jpg, len, NULL, 0, SP_JPEG_SPACE_GREY, w, h, a, 4 * w, &err),
                 SP_E_CORRUPT);
    free(jpg);
    free(pix);
    pix = make_image(w, h, 1);
    jpg = jpeg_encode(pix, w, h, &grey, &len, NULL, NULL);
    sp_err_clear(&err);
    CHECK_EQ_INT(sp_jpeg_decode_rgba(jpg, len, NULL, 0, SP_JPEG_SPACE_YCBCR, w, h, a, 4 * w,
                                     &err),
                 SP_E_CORRUPT);
    free(jpg);
    free(pix);
    free(a);
    free(b);
}

/* A decoded image bigger than the area is cropped; a smaller one leaves the rest alone. */
static void test_jpeg_areas(void) {
    unsigned w = 67, h = 45;
    for (int comps = 1; comps <= 3; comps += 2) {
        uint8_t *pix = make_image(w, h, comps);
        jpeg_opts o = {.comps = comps};
        size_t len;
        uint8_t *jpg = jpeg_encode(pix, w, h, &o, &len, NULL, NULL);
        unsigned rw, rh;
        int rc;
        uint8_t *ref = jpeg_reference(jpg, len, JCS_UNKNOWN, &rw, &rh, &rc);
        static const unsigned areas[][2] = {{30, 20}, {67, 20}, {30, 45}, {100, 60}, {1, 1},
                                            {67, 45}, {0, 10},  {10, 0}};
        for (size_t i = 0; i < sizeof areas / sizeof areas[0]; i++) {
            unsigned aw = areas[i][0], ah = areas[i][1];
            size_t stride = 4 * (size_t)aw + 12; /* padding that must stay untouched */
            size_t size = stride * (ah + 1);
            uint8_t *area = malloc(size);
            memset(area, 0xA5, size);
            sp_err err = {0};
            CHECK_EQ_INT(sp_jpeg_decode_rgba(jpg, len, NULL, 0, SP_JPEG_SPACE_AUTO, aw, ah, area,
                                             stride, &err),
                         SP_OK);
            unsigned cw = aw < w ? aw : w, ch = ah < h ? ah : h;
            CHECK(rgba_matches(area, stride, ref, rw, rc, cw, ch));
            size_t untouched = 0;
            for (unsigned y = 0; y <= ah; y++) {
                for (size_t x = 0; x < stride; x++) {
                    bool inside = y < ch && x < 4 * (size_t)cw;
                    untouched += !inside && area[y * stride + x] == 0xA5;
                }
            }
            CHECK_EQ_INT(untouched, size - 4 * (size_t)cw * ch);
            free(area);
        }
        free(ref);
        free(jpg);
        free(pix);
    }
}

static void test_jpeg_broken(void) {
    unsigned w = 64, h = 64;
    uint8_t *pix = make_image(w, h, 3);
    jpeg_opts o = {.comps = 3};
    size_t len;
    uint8_t *jpg = jpeg_encode(pix, w, h, &o, &len, NULL, NULL);
    uint8_t *rgba = malloc(4 * w * h);
    sp_err err = {0};

    /* cut inside the header: no image */
    CHECK_EQ_INT(sp_jpeg_decode_rgba(jpg, 100, NULL, 0, SP_JPEG_SPACE_AUTO, w, h, rgba, 4 * w,
                                     &err),
                 SP_E_CORRUPT);
    CHECK(strncmp(err.msg, "JPEG: ", 6) == 0);
    /* cut inside the entropy data: libjpeg warns, pads, and the tile counts as decoded */
    sp_err_clear(&err);
    CHECK_EQ_INT(sp_jpeg_decode_rgba(jpg, len * 2 / 3, NULL, 0, SP_JPEG_SPACE_AUTO, w, h, rgba,
                                     4 * w, &err),
                 SP_OK);
    CHECK_EQ_INT(rgba[4 * w * h - 1], 255);
    /* empty, garbage */
    sp_err_clear(&err);
    CHECK_EQ_INT(sp_jpeg_decode_rgba(jpg, 0, NULL, 0, SP_JPEG_SPACE_AUTO, w, h, rgba, 4 * w, &err),
                 SP_E_CORRUPT);
    uint8_t junk[300];
    for (size_t i = 0; i < sizeof junk; i++) {
        junk[i] = (uint8_t)rng();
    }
    sp_err_clear(&err);
    CHECK_EQ_INT(sp_jpeg_decode_rgba(junk, sizeof junk, NULL, 0, SP_JPEG_SPACE_AUTO, w, h, rgba,
                                     4 * w, &err),
                 SP_E_CORRUPT);
    /* a whole image given as the tables */
    sp_err_clear(&err);
    CHECK_EQ_INT(sp_jpeg_decode_rgba(jpg, len, jpg, len, SP_JPEG_SPACE_AUTO, w, h, rgba, 4 * w,
                                     &err),
                 SP_E_CORRUPT);
    /* tables as the image */
    jpeg_opts ab = {.comps = 3, .abbreviated = true};
    uint8_t *tables = NULL;
    size_t tables_len = 0, alen;
    uint8_t *abbr = jpeg_encode(pix, w, h, &ab, &alen, &tables, &tables_len);
    sp_err_clear(&err);
    CHECK_EQ_INT(sp_jpeg_decode_rgba(tables, tables_len, NULL, 0, SP_JPEG_SPACE_AUTO, w, h, rgba,
                                     4 * w, &err),
                 SP_E_CORRUPT);
    free(abbr);
    free(tables);

    /* random damage everywhere: any status, no crash, no leak */
    int bad = 0;
    for (int round = 0; round < 400; round++) {
        uint8_t *copy = malloc(len);
        memcpy(copy, jpg, len);
        for (int k = 0; k < 1 + round % 4; k++) {
            copy[rng() % len] = (uint8_t)rng();
        }
        size_t clen = round % 5 == 0 ? rng() % len : len;
        sp_err_clear(&err);
        sp_status st = sp_jpeg_decode_rgba(copy, clen, NULL, 0, SP_JPEG_SPACE_AUTO, w, h, rgba,
                                           4 * w, &err);
        bad += st != SP_OK && (err.msg[0] == '\0' || st == SP_E_INVALID_ARG);
        free(copy);
    }
    CHECK_EQ_INT(bad, 0);

    /* CMYK is refused by name */
    free(pix);
    pix = make_image(w, h, 4);
    jpeg_opts cmyk = {.comps = 4};
    free(jpg);
    jpg = jpeg_encode(pix, w, h, &cmyk, &len, NULL, NULL);
    sp_err_clear(&err);
    CHECK_EQ_INT(sp_jpeg_decode_rgba(jpg, len, NULL, 0, SP_JPEG_SPACE_AUTO, w, h, rgba, 4 * w,
                                     &err),
                 SP_E_UNSUPPORTED);
    CHECK(strstr(err.msg, "CMYK") != NULL);
    uint32_t hw, hh;
    int hc;
    CHECK_EQ_INT(sp_jpeg_read_header(jpg, len, NULL, 0, &hw, &hh, &hc, &err), SP_OK);
    CHECK_EQ_INT(hc, 4);

    /* a bad area is the caller's error */
    sp_err_clear(&err);
    CHECK_EQ_INT(sp_jpeg_decode_rgba(jpg, len, NULL, 0, SP_JPEG_SPACE_AUTO, w, h, rgba, 4 * w - 1,
                                     &err),
                 SP_E_INVALID_ARG);
    sp_err_clear(&err);
    CHECK_EQ_INT(sp_jpeg_decode_rgba(jpg, len, NULL, 0, SP_JPEG_SPACE_AUTO, UINT64_MAX / 2, 2,
                                     rgba, SIZE_MAX / 2, &err),
                 SP_E_INVALID_ARG);
    sp_err_clear(&err);
    CHECK_EQ_INT(sp_jpeg_read_header(jpg, 3, NULL, 0, &hw, &hh, &hc, &err), SP_E_CORRUPT);

    free(rgba);
    free(jpg);
    free(pix);
}

/* A progressive header claiming 30000 x 30000 pixels would make libjpeg allocate gigabytes of
 * coefficients; the work-memory cap turns that into SP_E_LIMIT. */
static void test_jpeg_huge(void) {
    unsigned w = 16, h = 16;
    uint8_t *pix = make_image(w, h, 3);
    jpeg_opts o = {.comps = 3, .progressive = true};
    size_t len;
    uint8_t *jpg = jpeg_encode(pix, w, h, &o, &len, NULL, NULL);
    size_t sof = 0;
    for (size_t i = 0; i + 9 < len; i++) {
        if (jpg[i] == 0xFF && jpg[i + 1] == 0xC2) {
            sof = i;
            break;
        }
    }
    CHECK(sof > 0);
    jpg[sof + 5] = 30000 >> 8; /* height, then width, big-endian */
    jpg[sof + 6] = 30000 & 255;
    jpg[sof + 7] = 30000 >> 8;
    jpg[sof + 8] = 30000 & 255;
    uint8_t rgba[4 * 16 * 16];
    sp_err err = {0};
    uint32_t hw, hh;
    int hc;
    CHECK_EQ_INT(sp_jpeg_read_header(jpg, len, NULL, 0, &hw, &hh, &hc, &err), SP_OK);
    CHECK(hw == 30000 && hh == 30000);
    CHECK_EQ_INT(sp_jpeg_decode_rgba(jpg, len, NULL, 0, SP_JPEG_SPACE_AUTO, 16, 16, rgba, 64,
                                     &err),
                 SP_E_LIMIT);
    CHECK(strstr(err.msg, "memory") != NULL);
    free(jpg);
    free(pix);
}

/* Over a thousand scans (legal: one per band, component and bit) is treated as an attack. */
static void test_jpeg_many_scans(void) {
    unsigned w = 16, h = 16;
    uint8_t *pix = make_image(w, h, 3);
    static jpeg_scan_info scans[3 + 3 * 63 * 6];
    int n = 0;
    for (int c = 0; c < 3; c++) {
        scans[n++] = (jpeg_scan_info){.comps_in_scan = 1, .component_index = {c}};
        for (int band = 1; band <= 63; band++) {
            for (int al = 5; al >= 0; al--) {
                scans[n++] = (jpeg_scan_info){.comps_in_scan = 1,
                                              .component_index = {c},
                                              .Ss = band,
                                              .Se = band,
                                              .Ah = al == 5 ? 0 : al + 1,
                                              .Al = al};
            }
        }
    }
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr jerr;
    c.err = jpeg_std_error(&jerr);
    jpeg_create_compress(&c);
    c.image_width = w;
    c.image_height = h;
    c.input_components = 3;
    c.in_color_space = JCS_RGB;
    jpeg_set_defaults(&c);
    c.scan_info = scans;
    c.num_scans = n;
    unsigned char *buf = NULL;
    unsigned long blen = 0;
    jpeg_mem_dest(&c, &buf, &blen);
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < h) {
        JSAMPROW r = pix + c.next_scanline * 3 * w;
        jpeg_write_scanlines(&c, &r, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);

    uint8_t rgba[4 * 16 * 16];
    sp_err err = {0};
    CHECK_EQ_INT(sp_jpeg_decode_rgba(buf, blen, NULL, 0, SP_JPEG_SPACE_AUTO, w, h, rgba, 4 * w,
                                     &err),
                 SP_E_CORRUPT);
    CHECK(strstr(err.msg, "scans") != NULL);
    free(buf);
    free(pix);
}

/* ---- real slides ---------------------------------------------------------------------------- */

/* Just enough of a classic little-endian TIFF reader to find chunks; the test file is known. */
typedef struct tiff_file {
    uint8_t *data;
    size_t len;
} tiff_file;

static uint32_t rd16(const tiff_file *f, size_t off) {
    return off + 2 <= f->len ? (uint32_t)f->data[off] | (uint32_t)f->data[off + 1] << 8 : 0;
}
static uint32_t rd32(const tiff_file *f, size_t off) {
    return off + 4 <= f->len ? rd16(f, off) | rd16(f, off + 2) << 16 : 0;
}

/* Offset of directory `dir`'s entry for `tag`, or 0. */
static size_t tiff_entry(const tiff_file *f, int dir, unsigned tag) {
    size_t ifd = rd32(f, 4);
    for (int d = 0; d < dir && ifd != 0; d++) {
        ifd = rd32(f, ifd + 2 + 12 * (size_t)rd16(f, ifd));
    }
    if (ifd == 0) {
        return 0;
    }
    for (uint32_t i = 0, n = rd16(f, ifd); i < n; i++) {
        size_t e = ifd + 2 + 12 * (size_t)i;
        if (rd16(f, e) == tag) {
            return e;
        }
    }
    return 0;
}

/* Element i of a SHORT or LONG tag. */
static uint32_t tiff_value(const tiff_file *f, int dir, unsigned tag, uint32_t i) {
    size_t e = tiff_entry(f, dir, tag);
    if (e == 0) {
        return 0;
    }
    uint32_t type = rd16(f, e + 2), count = rd32(f, e + 4);
    uint32_t size = type == 3 ? 2 : 4;
    size_t base = (size_t)count * size <= 4 ? e + 8 : rd32(f, e + 8);
    return type == 3 ? rd16(f, base + 2 * (size_t)i) : rd32(f, base + 4 * (size_t)i);
}

static bool load_slide(tiff_file *f) {
    const char *dir = unit_testdata();
    if (dir == NULL) {
        fprintf(stderr, "test_codecs: no SP_TESTDATA, skipping the real-slide checks\n");
        return false;
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/aperio/CMU-1-Small-Region.svs", dir);
    FILE *fp = fopen(path, "rb");
    if (fp == NULL) {
        fprintf(stderr, "test_codecs: %s missing, skipping the real-slide checks\n", path);
        return false;
    }
    fseek(fp, 0, SEEK_END);
    f->len = (size_t)ftell(fp);
    fseek(fp, 0, SEEK_SET);
    f->data = malloc(f->len);
    bool ok = fread(f->data, 1, f->len, fp) == f->len;
    fclose(fp);
    return ok;
}

/* The label: 387 x 463 RGB, LZW strips of 7 rows with horizontal differencing. */
static void test_real_lzw_label(const tiff_file *f) {
    uint32_t w = tiff_value(f, 2, 256, 0), h = tiff_value(f, 2, 257, 0);
    uint32_t rps = tiff_value(f, 2, 278, 0);
    CHECK(w == 387 && h == 463 && rps == 7 && tiff_value(f, 2, 259, 0) == 5 &&
          tiff_value(f, 2, 317, 0) == 2);
    size_t row = (size_t)w * 3;
    uint8_t *img = calloc(row, h);
    int bad = 0;
    for (uint32_t s = 0; s * rps < h; s++) {
        uint32_t rows = h - s * rps < rps ? h - s * rps : rps;
        uint32_t off = tiff_value(f, 2, 273, s), n = tiff_value(f, 2, 279, s);
        size_t written = 0;
        sp_err err = {0};
        uint8_t *dst = img + (size_t)s * rps * row;
        bad += off + (uint64_t)n > f->len;
        bad += sp_lzw_decode(f->data + off, n, dst, row * rows, &written, &err) != SP_OK;
        bad += written != row * rows;
        bad += sp_predictor_undo(dst, row, w, rows, 3, 8, false, &err) != SP_OK;
    }
    CHECK_EQ_INT(bad, 0);
    /* what PIL and OpenSlide 4.0.1 return for the label, as RGB */
    CHECK(fnv1a(img, row * h, FNV_INIT) == 0xaf0d5f879dec0c3bu);
    free(img);
}

/* Level-0 tiles: 240 x 240 JPEG with shared tables, RGB components (photometric RGB). */
static void test_real_jpeg_tiles(const tiff_file *f) {
    size_t te = tiff_entry(f, 0, 347);
    CHECK(te != 0);
    if (te == 0) {
        return;
    }
    const uint8_t *tables = f->data + rd32(f, te + 8);
    size_t tables_len = rd32(f, te + 4);
    static const struct {
        uint32_t tile, w, h;
        uint64_t hash; /* of OpenSlide 4.0.1's read_region, RGBA */
    } cases[] = {
        {14, 240, 240, 0xbc06a1d9dc7db3ceu}, /* (960, 240) */
        {9, 60, 240, 0x5a20b7e03c154605u},   /* (2160, 0): the right edge, cropped */
        {120, 240, 87, 0xa56397110645b6c5u}, /* (0, 2880): the bottom edge, cropped */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint32_t off = tiff_value(f, 0, 324, cases[i].tile);
        uint32_t n = tiff_value(f, 0, 325, cases[i].tile);
        uint8_t *rgba = malloc(4 * (size_t)cases[i].w * cases[i].h);
        sp_err err = {0};
        CHECK_EQ_INT(sp_jpeg_decode_rgba(f->data + off, n, tables, tables_len, SP_JPEG_SPACE_RGB,
                                         cases[i].w, cases[i].h, rgba, 4 * (size_t)cases[i].w,
                                         &err),
                     SP_OK);
        uint64_t hash = fnv1a(rgba, 4 * (size_t)cases[i].w * cases[i].h, FNV_INIT);
        if (hash != cases[i].hash) {
            fprintf(stderr, "tile %u: hash %016llx\n", cases[i].tile, (unsigned long long)hash);
        }
        CHECK(hash == cases[i].hash);
        free(rgba);
    }
}

/* ---- BMP ---------------------------------------------------------------------------------- */

static void put32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

/* A 24-bit BITMAPINFOHEADER bitmap of `rgb` (w x h, top row first); top_down stores rows
 * top-first with a negative height. Returns its length. */
static size_t make_bmp(const uint8_t *rgb, int w, int h, bool top_down, uint8_t *out) {
    size_t row = ((size_t)w * 3 + 3) & ~(size_t)3;
    memset(out, 0, 54 + row * (size_t)h);
    out[0] = 'B';
    out[1] = 'M';
    put32(out + 2, (uint32_t)(54 + row * (size_t)h));
    put32(out + 10, 54);
    put32(out + 14, 40);
    put32(out + 18, (uint32_t)w);
    put32(out + 22, (uint32_t)(top_down ? -h : h));
    out[26] = 1;
    out[28] = 24;
    put32(out + 34, (uint32_t)(row * (size_t)h));
    for (int y = 0; y < h; y++) {
        uint8_t *d = out + 54 + (size_t)(top_down ? y : h - 1 - y) * row;
        for (int x = 0; x < w; x++) {
            const uint8_t *s = rgb + ((size_t)y * (size_t)w + (size_t)x) * 3;
            d[3 * x] = s[2];
            d[3 * x + 1] = s[1];
            d[3 * x + 2] = s[0];
        }
    }
    return 54 + row * (size_t)h;
}

static void test_bmp(void) {
    enum { W = 7, H = 5 }; /* 21-byte rows padded to 24 */
    uint8_t rgb[W * H * 3], file[54 + 24 * H], rgba[W * H * 4];
    for (size_t i = 0; i < sizeof rgb; i++) {
        rgb[i] = (uint8_t)rng();
    }
    for (int top_down = 0; top_down < 2; top_down++) {
        size_t n = make_bmp(rgb, W, H, top_down, file);
        sp_err err = {0};
        memset(rgba, 0x5A, sizeof rgba);
        CHECK_EQ_INT(sp_bmp_decode_rgba(file, n, W, H, rgba, W * 4, &err), SP_OK);
        bool same = true;
        for (int i = 0; i < W * H; i++) {
            same = same && memcmp(rgba + 4 * i, rgb + 3 * i, 3) == 0 && rgba[4 * i + 3] == 255;
        }
        CHECK(same);
        /* every truncation is refused, with the output zeroed */
        for (size_t cut = 0; cut < n; cut++) {
            sp_err e = {0};
            memset(rgba, 0x5A, sizeof rgba);
            sp_status st = sp_bmp_decode_rgba(file, cut, W, H, rgba, W * 4, &e);
            if (st != SP_E_CORRUPT || e.msg[0] == '\0' || rgba[0] != 0 || rgba[sizeof rgba - 1]) {
                CHECK(!"a truncated BMP was not refused cleanly");
                break;
            }
        }
    }
    static const struct {
        size_t at;
        uint32_t value;
        int bytes;
        sp_status want;
        const char *fragment;
    } spoils[] = {
        {0, 'X', 1, SP_E_CORRUPT, "signature"},
        {14, 108, 4, SP_E_UNSUPPORTED, "info header of 108 bytes"}, /* BITMAPV4HEADER */
        {18, W + 1, 4, SP_E_CORRUPT, "8x5 where 7x5"},
        {22, 0, 4, SP_E_CORRUPT, "7x0 where"},
        {22, 0x80000000u, 4, SP_E_CORRUPT, "where 7x5"}, /* INT32_MIN rows, top-down */
        {26, 2, 2, SP_E_CORRUPT, "2 planes"},
        {28, 8, 2, SP_E_UNSUPPORTED, "8 bits per pixel"},
        {28, 32, 2, SP_E_UNSUPPORTED, "32 bits per pixel"},
        {30, 1, 4, SP_E_UNSUPPORTED, "compression 1"}, /* RLE8 */
        {30, 3, 4, SP_E_UNSUPPORTED, "compression 3"}, /* BI_BITFIELDS */
        {34, 7, 4, SP_E_CORRUPT, "header says 7 bytes"},
        {46, 16, 4, SP_E_UNSUPPORTED, "palette of 16"},
        {10, 53, 4, SP_E_CORRUPT, "at offset 53"},
        {10, 0xFFFFFFF0u, 4, SP_E_CORRUPT, "do not fit"},
    };
    for (size_t i = 0; i < sizeof spoils / sizeof spoils[0]; i++) {
        size_t n = make_bmp(rgb, W, H, false, file);
        if (spoils[i].bytes == 1) {
            file[spoils[i].at] = (uint8_t)spoils[i].value;
        } else if (spoils[i].bytes == 2) {
            file[spoils[i].at] = (uint8_t)spoils[i].value;
            file[spoils[i].at + 1] = (uint8_t)(spoils[i].value >> 8);
        } else {
            put32(file + spoils[i].at, spoils[i].value);
        }
        sp_err err = {0};
        CHECK_EQ_INT(sp_bmp_decode_rgba(file, n, W, H, rgba, W * 4, &err), spoils[i].want);
        if (strstr(err.msg, spoils[i].fragment) == NULL) {
            fprintf(stderr, "BMP spoil %zu: message \"%s\" lacks \"%s\"\n", i, err.msg,
                    spoils[i].fragment);
            CHECK(!"BMP message");
        }
    }
}

/* ---- PNG ---------------------------------------------------------------------------------- */

/* A PNG of w x h pixels through libpng's simplified writer (format PNG_FORMAT_*, 8 or 16 bits
 * per sample); returns a malloc'd stream and its length. */
static uint8_t *make_png(const void *pixels, int w, int h, png_uint_32 format, size_t *len) {
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    img.width = (png_uint_32)w;
    img.height = (png_uint_32)h;
    img.format = format;
    png_alloc_size_t size = 0;
    if (!png_image_write_to_memory(&img, NULL, &size, 0, pixels, 0, NULL)) {
        return NULL;
    }
    uint8_t *out = malloc(size);
    if (out != NULL && !png_image_write_to_memory(&img, out, &size, 0, pixels, 0, NULL)) {
        free(out);
        return NULL;
    }
    *len = size;
    return out;
}

static void test_png(void) {
    enum { W = 9, H = 6 };
    uint8_t rgb[W * H * 3], grey[W * H], rgba_in[W * H * 4], rgba[W * H * 4];
    uint16_t rgb16[W * H * 3];
    for (size_t i = 0; i < sizeof rgb; i++) {
        rgb[i] = (uint8_t)rng();
        rgb16[i] = (uint16_t)(rgb[i] * 257); /* scales back to the same byte */
    }
    for (size_t i = 0; i < sizeof grey; i++) {
        grey[i] = (uint8_t)rng();
    }
    memset(rgba_in, 0x80, sizeof rgba_in);
    size_t n = 0;
    uint8_t *png = make_png(rgb, W, H, PNG_FORMAT_RGB, &n);
    CHECK(png != NULL);
    sp_err err = {0};
    CHECK_EQ_INT(sp_png_decode_rgba(png, n, W, H, rgba, W * 4, &err), SP_OK);
    bool same = true;
    for (int i = 0; i < W * H; i++) {
        same = same && memcmp(rgba + 4 * i, rgb + 3 * i, 3) == 0 && rgba[4 * i + 3] == 255;
    }
    CHECK(same);
    /* a size other than the caller's, and every truncation, are refused with the output zeroed */
    sp_err e = {0};
    CHECK_EQ_INT(sp_png_decode_rgba(png, n, W, H - 1, rgba, W * 4, &e), SP_E_CORRUPT);
    CHECK(strstr(e.msg, "9x6 where 9x5") != NULL);
    for (size_t cut = 0; cut < n; cut++) {
        sp_err e2 = {0};
        memset(rgba, 0x5A, sizeof rgba);
        sp_status st = sp_png_decode_rgba(png, cut, W, H, rgba, W * 4, &e2);
        if (st != SP_E_CORRUPT || e2.msg[0] == '\0' || rgba[0] != 0 || rgba[sizeof rgba - 1]) {
            fprintf(stderr, "PNG cut at %zu: status %d \"%s\"\n", cut, st, e2.msg);
            CHECK(!"a truncated PNG was not refused cleanly");
            break;
        }
    }
    free(png);
    /* 16-bit samples are scaled to 8 bits */
    png = make_png(rgb16, W, H, PNG_FORMAT_RGB | PNG_FORMAT_FLAG_LINEAR, &n);
    CHECK(png != NULL);
    sp_err_clear(&err);
    CHECK_EQ_INT(sp_png_decode_rgba(png, n, W, H, rgba, W * 4, &err), SP_OK);
    CHECK(memcmp(rgba, rgb, 3) == 0);
    CHECK(memcmp(rgba + 4 * (W * H - 1), rgb + 3 * (W * H - 1), 3) == 0);
    free(png);
    /* grey is replicated into R, G, B */
    png = make_png(grey, W, H, PNG_FORMAT_GRAY, &n);
    CHECK(png != NULL);
    sp_err_clear(&err);
    CHECK_EQ_INT(sp_png_decode_rgba(png, n, W, H, rgba, W * 4, &err), SP_OK);
    same = true;
    for (int i = 0; i < W * H; i++) {
        same = same && rgba[4 * i] == grey[i] && rgba[4 * i + 1] == grey[i] &&
               rgba[4 * i + 2] == grey[i] && rgba[4 * i + 3] == 255;
    }
    CHECK(same);
    free(png);
    /* transparency is refused, as OpenSlide refuses it */
    png = make_png(rgba_in, W, H, PNG_FORMAT_RGBA, &n);
    CHECK(png != NULL);
    sp_err_clear(&err);
    CHECK_EQ_INT(sp_png_decode_rgba(png, n, W, H, rgba, W * 4, &err), SP_E_UNSUPPORTED);
    CHECK(strstr(err.msg, "transparency") != NULL);
    free(png);
    /* not a PNG at all */
    sp_err_clear(&err);
    CHECK_EQ_INT(sp_png_decode_rgba(rgb, sizeof rgb, W, H, rgba, W * 4, &err), SP_E_CORRUPT);
    CHECK(strstr(err.msg, "signature") != NULL);
}

void unit_run(void) {
    test_lzw_known();
    test_lzw_roundtrip();
    test_lzw_broken();
    test_deflate();
    test_zstd();
    test_predictor();
    test_jpeg_pixels();
    test_jpeg_areas();
    test_jpeg_broken();
    test_jpeg_huge();
    test_jpeg_many_scans();
    test_bmp();
    test_png();
    tiff_file f = {0};
    if (load_slide(&f)) {
        test_real_lzw_label(&f);
        test_real_jpeg_tiles(&f);
    }
    free(f.data);
}
