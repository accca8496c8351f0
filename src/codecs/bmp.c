/* bmp.c — Windows bitmaps (MIRAX levels stored as "BMP24"), decoded into straight RGBA8.
 *
 * Only the one kind of bitmap MIRAX scanners write is read, and everything else is refused with
 * a message that names what was found: a 14-byte file header ("BM", file size, pixel offset), a
 * 40-byte BITMAPINFOHEADER, one plane, 24 bits per pixel, no compression (BI_RGB), no palette.
 * Rows are B, G, R triples padded to a multiple of 4 bytes, bottom-up when the height is
 * positive and top-down when it is negative. Every size is checked against the stream's length
 * before a pixel is read, so the decoder never reads past `len`, and the image must be exactly
 * the caller's width x height. Written for slidepipe from the format's published layout.
 */
#include "codecs/codec.h"

#include <string.h>

#define FILE_HEADER 14
#define INFO_HEADER 40
#define BI_RGB 0

static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint16_t le16(const uint8_t *p) {
    return (uint16_t)(p[0] | p[1] << 8);
}

static sp_status bmp_decode(const uint8_t *data, size_t len, uint64_t width, uint64_t height,
                            uint8_t *rgba, size_t stride, sp_err *err) {
    if (len < FILE_HEADER + INFO_HEADER) {
        return sp_err_set(err, SP_E_CORRUPT, "BMP: %zu bytes, shorter than its headers (54)", len);
    }
    if (data[0] != 'B' || data[1] != 'M') {
        return sp_err_set(err, SP_E_CORRUPT, "BMP: no \"BM\" signature");
    }
    uint32_t pixel_offset = le32(data + 10);
    const uint8_t *info = data + FILE_HEADER;
    uint32_t info_size = le32(info);
    if (info_size != INFO_HEADER) {
        return sp_err_set(err, SP_E_UNSUPPORTED,
                          "BMP: info header of %u bytes (only the 40-byte BITMAPINFOHEADER is "
                          "read)",
                          info_size);
    }
    int32_t w = (int32_t)le32(info + 4), h = (int32_t)le32(info + 8);
    uint16_t planes = le16(info + 12), bits = le16(info + 14);
    uint32_t compression = le32(info + 16), image_size = le32(info + 20);
    uint32_t palette = le32(info + 32);
    if (planes != 1) {
        return sp_err_set(err, SP_E_CORRUPT, "BMP: %u planes (1 expected)", planes);
    }
    if (bits != 24) {
        return sp_err_set(err, SP_E_UNSUPPORTED, "BMP: %u bits per pixel (only 24-bit BGR is read)",
                          bits);
    }
    if (compression != BI_RGB) {
        return sp_err_set(err, SP_E_UNSUPPORTED,
                          "BMP: compression %u (only uncompressed BI_RGB is read)", compression);
    }
    if (palette != 0) {
        return sp_err_set(err, SP_E_UNSUPPORTED, "BMP: a palette of %u colours in a 24-bit image",
                          palette);
    }
    bool top_down = h < 0;
    /* INT32_MIN has no positive counterpart: no real bitmap is that tall */
    uint64_t abs_h =
        top_down ? (h == INT32_MIN ? UINT64_MAX : (uint64_t) - (int64_t)h) : (uint64_t)h;
    if (w <= 0 || abs_h == 0 || (uint64_t)w != width || abs_h != height) {
        return sp_err_set(err, SP_E_CORRUPT, "BMP image is %dx%d where %llux%llu was expected", w,
                          h, (unsigned long long)width, (unsigned long long)height);
    }
    uint64_t row_bytes = ((uint64_t)w * 3 + 3) & ~(uint64_t)3;
    uint64_t pixel_bytes = row_bytes * abs_h;
    if (pixel_offset < FILE_HEADER + INFO_HEADER || pixel_offset > len ||
        pixel_bytes > len - pixel_offset) {
        return sp_err_set(err, SP_E_CORRUPT,
                          "BMP: %llu bytes of pixels at offset %u do not fit in %zu bytes",
                          (unsigned long long)pixel_bytes, pixel_offset, len);
    }
    if (image_size != 0 && image_size != pixel_bytes) {
        return sp_err_set(err, SP_E_CORRUPT,
                          "BMP: the header says %u bytes of pixels where %dx%d needs %llu",
                          image_size, w, h, (unsigned long long)pixel_bytes);
    }
    const uint8_t *pixels = data + pixel_offset;
    for (uint64_t y = 0; y < height; y++) {
        const uint8_t *s = pixels + (top_down ? y : height - 1 - y) * row_bytes;
        uint8_t *d = rgba + y * stride;
        for (uint64_t x = 0; x < width; x++, s += 3, d += 4) {
            d[0] = s[2];
            d[1] = s[1];
            d[2] = s[0];
            d[3] = 255;
        }
    }
    return SP_OK;
}

sp_status sp_bmp_decode_rgba(const uint8_t *data, size_t len, uint64_t width, uint64_t height,
                             uint8_t *rgba, size_t stride, sp_err *err) {
    if (data == NULL || rgba == NULL || width == 0 || height == 0 || stride < width * 4) {
        return sp_err_set(err, SP_E_INVALID_ARG, "BMP: bad arguments");
    }
    /* Nothing is written before every check has passed, so a refused stream leaves the output
     * untouched; clear it anyway, as codec.h promises zeroed output on error. */
    sp_status st = bmp_decode(data, len, width, height, rgba, stride, err);
    if (st != SP_OK) {
        for (uint64_t y = 0; y < height; y++) {
            memset(rgba + y * stride, 0, (size_t)width * 4);
        }
    }
    return st;
}
