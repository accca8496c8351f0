/* fuzz_codecs.c — libFuzzer target for the tile codecs (src/codecs/).
 *
 * Input layout: byte 0 picks the codec (its value mod 10: JPEG, LZW, Deflate, Zstandard,
 * predictor, JPEG 2000, PackBits, WebP, PNG, BMP), the next few bytes pick its parameters, and
 * the rest is the compressed chunk.
 * Every output buffer is allocated at its exact size so that AddressSanitizer catches a write one
 * byte past it. Seeds live in fuzz/corpus/codecs/. `make fuzz` builds it (build-fuzz/fuzz_codecs);
 * `make fuzz-smoke` runs it briefly.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codecs/codec.h"

/* Headers may claim up to 65500 x 65500 pixels; a progressive one makes libjpeg zero its whole
 * coefficient buffer, which the decoder caps at 512 MiB but which would still make every such
 * input take a second. Bigger images are only header-parsed here, which keeps the fuzzer fast. */
#define FUZZ_MAX_JPEG_PIXELS (1u << 22)

/* The status must be one a decoder documents, and an error must carry a message. */
static void check_status(sp_status st, const sp_err *err) {
    if (st != SP_OK && err->msg[0] == '\0') {
        abort();
    }
    if (st != SP_OK && st != SP_E_CORRUPT && st != SP_E_UNSUPPORTED && st != SP_E_LIMIT &&
        st != SP_E_NOMEM) {
        abort();
    }
}

/* [space | tables flag | padded stride | area options][area width - 1][area height - 1]
 * [tables length, 2 bytes if flagged] data. Bits 4-5 of the first byte pick the DCT scale of a
 * second, partial decode (sp_jpeg_decode_area), bit 6 its RGB8 output, bit 7 an offset area. */
static void fuzz_jpeg(const uint8_t *p, size_t n) {
    if (n < 3) {
        return;
    }
    uint8_t flags = p[0];
    sp_jpeg_space space = (sp_jpeg_space)(p[0] & 3);
    bool with_tables = p[0] & 4;
    size_t pad = p[0] & 8 ? 4 : 0;
    uint64_t aw = (uint64_t)p[1] + 1, ah = (uint64_t)p[2] + 1;
    p += 3;
    n -= 3;
    const uint8_t *tables = NULL;
    size_t tables_len = 0;
    if (with_tables) {
        if (n < 2) {
            return;
        }
        tables_len = (size_t)p[0] | (size_t)p[1] << 8;
        p += 2;
        n -= 2;
        if (tables_len > n) {
            return;
        }
        tables = p;
        p += tables_len;
        n -= tables_len;
    }
    /* copies at exact sizes, so reading one byte too far is caught */
    uint8_t *data = malloc(n ? n : 1);
    uint8_t *tab = tables ? malloc(tables_len ? tables_len : 1) : NULL;
    memcpy(data, p, n);
    if (tab) {
        memcpy(tab, tables, tables_len);
    }
    sp_err err = {0};
    uint32_t w, h;
    int comps;
    sp_status st = sp_jpeg_read_header(data, n, tab, tables_len, &w, &h, &comps, &err);
    check_status(st, &err);
    if (st == SP_OK && (uint64_t)w * h <= FUZZ_MAX_JPEG_PIXELS) {
        size_t stride = (size_t)aw * 4 + pad;
        size_t size = stride * (size_t)(ah - 1) + (size_t)aw * 4;
        uint8_t *rgba = malloc(size);
        memset(rgba, 0x5A, size);
        sp_err_clear(&err);
        st = sp_jpeg_decode_rgba(data, n, tab, tables_len, space, aw, ah, rgba, stride, &err);
        check_status(st, &err);
        free(rgba);
        unsigned scale = 1u << (flags >> 4 & 3), bpp = flags & 64 ? 3 : 4;
        uint64_t ax = flags & 128 ? aw / 2 : 0, ay = flags & 128 ? ah / 3 : 0;
        size_t astride = (size_t)aw * bpp + pad;
        size_t asize = astride * (size_t)(ah - 1) + (size_t)aw * bpp;
        uint8_t *area = malloc(asize);
        sp_err_clear(&err);
        st = sp_jpeg_decode_area(data, n, tab, tables_len, space, scale, ax, ay, aw, ah, bpp,
                                 area, astride, NULL, NULL, &err);
        check_status(st, &err);
        free(area);
    }
    free(tab);
    free(data);
}

typedef sp_status (*bytes_decoder)(const uint8_t *, size_t, uint8_t *, size_t, size_t *,
                                   sp_err *);

/* [output length, 2 bytes] data */
static void fuzz_bytes(bytes_decoder decode, const uint8_t *p, size_t n) {
    if (n < 2) {
        return;
    }
    size_t out_len = (size_t)p[0] | (size_t)p[1] << 8;
    out_len *= 4; /* up to 256 KiB, a 256 x 256 RGBA tile */
    p += 2;
    n -= 2;
    uint8_t *data = malloc(n ? n : 1);
    memcpy(data, p, n);
    uint8_t *out = malloc(out_len ? out_len : 1);
    size_t written = 0;
    sp_err err = {0};
    sp_status st = decode(data, n, out_len ? out : NULL, out_len, &written, &err);
    check_status(st, &err);
    if (written > out_len) {
        abort();
    }
    free(out);
    free(data);
}

/* [samples - 1 | bits | byte order | padded rows][width] rows of data */
static void fuzz_predictor(const uint8_t *p, size_t n) {
    if (n < 2) {
        return;
    }
    unsigned samples = (p[0] & 3) + 1;
    unsigned bits = (p[0] & 4) ? 16 : (p[0] & 8) ? 12 : 8;
    bool big_endian = p[0] & 16;
    size_t pad = p[0] & 32 ? 1 : 0;
    uint64_t width = p[1];
    p += 2;
    n -= 2;
    size_t row_bytes = (size_t)width * samples * (bits / 8) + pad;
    if (row_bytes == 0) {
        return;
    }
    uint64_t rows = n / row_bytes;
    uint8_t *buf = malloc(rows * row_bytes ? rows * row_bytes : 1);
    memcpy(buf, p, rows * row_bytes);
    sp_err err = {0};
    sp_status st = sp_predictor_undo(buf, row_bytes, width, rows, samples, bits, big_endian, &err);
    if (st != SP_OK && (err.msg[0] == '\0' || bits != 12)) {
        abort();
    }
    free(buf);
}

/* [space | partial | rgb][area width - 1][area height - 1] codestream, into an area of up to
 * 256 x 256; bit 1 of the first byte adds a partial decode (sp_j2k_decode_area) of the area's
 * lower-right part, bit 2 makes that one RGB8. */
static void fuzz_j2k(const uint8_t *p, size_t n) {
    if (n < 3) {
        return;
    }
    sp_jpeg_space space = p[0] % 2 ? SP_JPEG_SPACE_YCBCR : SP_JPEG_SPACE_RGB;
    uint64_t w = (uint64_t)p[1] + 1, h = (uint64_t)p[2] + 1;
    uint8_t *out = malloc((size_t)(w * h * 4));
    sp_err err = {0};
    sp_status st = sp_j2k_decode_rgba(p + 3, n - 3, space, w, h, out, (size_t)w * 4, &err);
    check_status(st, &err);
    if (p[0] & 2) {
        uint64_t x = w / 3, y = h / 4;
        unsigned bpp = p[0] & 4 ? 3 : 4;
        sp_err_clear(&err);
        st = sp_j2k_decode_area(p + 3, n - 3, space, w, h, x, y, w - x, h - y, bpp, out,
                                (size_t)(w - x) * bpp, NULL, NULL, &err);
        check_status(st, &err);
    }
    free(out);
}

/* [area width - 1][area height - 1] WebP stream, into an area of up to 256 x 256 */
static void fuzz_webp(const uint8_t *p, size_t n) {
    if (n < 2) {
        return;
    }
    uint64_t w = (uint64_t)p[0] + 1, h = (uint64_t)p[1] + 1;
    uint8_t *out = malloc((size_t)(w * h * 4));
    sp_err err = {0};
    check_status(sp_webp_decode_rgba(p + 2, n - 2, w, h, out, (size_t)w * 4, &err), &err);
    free(out);
}

typedef sp_status (*image_decoder)(const uint8_t *, size_t, uint64_t, uint64_t, uint8_t *, size_t,
                                   sp_err *);

/* [area width - 1][area height - 1][padded stride] stream, into an area of up to 256 x 256 (PNG
 * and BMP: the stream must be exactly the area's size). The stream is copied at its exact size
 * and the area allocated at its exact size, so a read or write one byte past either is caught. */
static void fuzz_image(image_decoder decode, const uint8_t *p, size_t n) {
    if (n < 3) {
        return;
    }
    uint64_t w = (uint64_t)p[0] + 1, h = (uint64_t)p[1] + 1;
    size_t stride = (size_t)w * 4 + (p[2] & 1 ? 8 : 0);
    p += 3;
    n -= 3;
    uint8_t *data = malloc(n ? n : 1);
    memcpy(data, p, n);
    size_t size = stride * (size_t)(h - 1) + (size_t)w * 4;
    uint8_t *out = malloc(size);
    sp_err err = {0};
    check_status(decode(data, n, w, h, out, stride, &err), &err);
    free(out);
    free(data);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) {
        return 0;
    }
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    switch (data[0] % 10) {
    case 0:
        fuzz_jpeg(p, n);
        break;
    case 1:
        fuzz_bytes(sp_lzw_decode, p, n);
        break;
    case 2:
        fuzz_bytes(sp_deflate_decode, p, n);
        break;
    case 3:
        fuzz_bytes(sp_zstd_decode, p, n);
        break;
    case 4:
        fuzz_predictor(p, n);
        break;
    case 5:
        fuzz_j2k(p, n);
        break;
    case 6:
        fuzz_bytes(sp_packbits_decode, p, n);
        break;
    case 8:
        fuzz_image(sp_png_decode_rgba, p, n);
        break;
    case 9:
        fuzz_image(sp_bmp_decode_rgba, p, n);
        break;
    default:
        fuzz_webp(p, n);
        break;
    }
    return 0;
}
