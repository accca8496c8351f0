/* png_encode.c — 8-bit PNG encoding into memory through libpng (see png_encode.h): rows appended
 * to a growing buffer, errors caught with libpng's longjmp. */
#include "png_encode.h"

#include <png.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

struct png_buf {
    uint8_t *data;
    size_t len, cap;
    bool failed;
};

static void png_append(png_structp png, png_bytep data, png_size_t n) {
    struct png_buf *b = png_get_io_ptr(png);
    if (b->failed) {
        return;
    }
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 65536;
        while (cap < b->len + n) {
            cap *= 2;
        }
        uint8_t *p = realloc(b->data, cap);
        if (p == NULL) {
            b->failed = true;
            return;
        }
        b->data = p, b->cap = cap;
    }
    memcpy(b->data + b->len, data, n);
    b->len += n;
}

static void png_flush_none(png_structp png) {
    (void)png;
}

bool png_encode(const uint8_t *px, int64_t w, int64_t h, int64_t stride, int channels, int level,
                uint8_t **out, size_t *out_len) {
    struct png_buf buf = {0};
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (info == NULL) {
        png_destroy_write_struct(&png, NULL);
        return false;
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        free(buf.data);
        return false;
    }
    png_set_write_fn(png, &buf, png_append, png_flush_none);
    png_set_compression_level(png, level);
    int type = channels == 4   ? PNG_COLOR_TYPE_RGBA
               : channels == 3 ? PNG_COLOR_TYPE_RGB
                               : PNG_COLOR_TYPE_GRAY;
    png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, 8, type, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int64_t y = 0; y < h; y++) {
        png_write_row(png, (png_const_bytep)(px + y * stride));
    }
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    if (buf.failed) {
        free(buf.data);
        return false;
    }
    *out = buf.data;
    *out_len = buf.len;
    return true;
}
