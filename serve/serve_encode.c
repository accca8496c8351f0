/* serve_encode.c — the image encoders of `slidepipe serve`: pixels in memory to a JPEG
 * (libjpeg-turbo, quality 90, 4:2:0 like most slide scanners), a PNG (libpng, fast
 * compression: tiles are served once and cached by the browser) or a WebP (libwebp, lossy at
 * quality 90, keeping alpha). The libraries are those the project links. */
#include <png.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h> /* after stdio.h: it uses FILE and size_t */
#include <webp/encode.h>

#include "serve.h"

const char *serve_format_mime(serve_format format) {
    switch (format) {
    case SERVE_JPEG: return "image/jpeg";
    case SERVE_PNG: return "image/png";
    case SERVE_WEBP: return "image/webp";
    }
    return "application/octet-stream";
}

bool serve_format_from_ext(const char *ext, serve_format *out) {
    if (strcmp(ext, "jpg") == 0 || strcmp(ext, "jpeg") == 0) {
        *out = SERVE_JPEG;
    } else if (strcmp(ext, "png") == 0) {
        *out = SERVE_PNG;
    } else if (strcmp(ext, "webp") == 0) {
        *out = SERVE_WEBP;
    } else {
        return false;
    }
    return true;
}

struct jpeg_fail {
    struct jpeg_error_mgr mgr;
    jmp_buf jump;
};

static void jpeg_fail_exit(j_common_ptr cinfo) {
    longjmp(((struct jpeg_fail *)cinfo->err)->jump, 1);
}

static bool encode_jpeg(const uint8_t *px, int64_t w, int64_t h, int64_t stride, int channels,
                        uint8_t **out, size_t *out_len) {
    struct jpeg_compress_struct c;
    struct jpeg_fail err;
    unsigned char *mem = NULL;
    unsigned long mem_len = 0;
    c.err = jpeg_std_error(&err.mgr);
    err.mgr.error_exit = jpeg_fail_exit;
    if (setjmp(err.jump)) {
        jpeg_destroy_compress(&c);
        free(mem);
        return false;
    }
    jpeg_create_compress(&c);
    jpeg_mem_dest(&c, &mem, &mem_len);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = channels;
    c.in_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, 90, TRUE);
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = (JSAMPROW)(px + (int64_t)c.next_scanline * stride);
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    *out = mem;
    *out_len = mem_len;
    return true;
}

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

static bool encode_png(const uint8_t *px, int64_t w, int64_t h, int64_t stride, int channels,
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
    png_set_compression_level(png, 1);
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

static bool encode_webp(const uint8_t *px, int64_t w, int64_t h, int64_t stride, int channels,
                        uint8_t **out, size_t *out_len) {
    uint8_t *tmp = NULL;
    if (channels == 1) { /* libwebp takes RGB: widen grey */
        tmp = malloc((size_t)(w * h * 3));
        if (tmp == NULL) {
            return false;
        }
        for (int64_t y = 0; y < h; y++) {
            for (int64_t x = 0; x < w; x++) {
                memset(tmp + (y * w + x) * 3, px[y * stride + x], 3);
            }
        }
        px = tmp, stride = w * 3, channels = 3;
    }
    uint8_t *mem = NULL;
    size_t n = channels == 4 ? WebPEncodeRGBA(px, (int)w, (int)h, (int)stride, 90.0f, &mem)
                             : WebPEncodeRGB(px, (int)w, (int)h, (int)stride, 90.0f, &mem);
    free(tmp);
    if (n == 0) {
        WebPFree(mem);
        return false;
    }
    /* WebP's buffer must be freed by WebPFree; hand the caller a malloc'd copy. */
    *out = malloc(n);
    if (*out != NULL) {
        memcpy(*out, mem, n);
        *out_len = n;
    }
    WebPFree(mem);
    return *out != NULL;
}

bool serve_encode(serve_format format, const uint8_t *px, int64_t width, int64_t height,
                  int64_t stride, int channels, uint8_t **out, size_t *out_len) {
    switch (format) {
    case SERVE_JPEG: return encode_jpeg(px, width, height, stride, channels, out, out_len);
    case SERVE_PNG: return encode_png(px, width, height, stride, channels, out, out_len);
    case SERVE_WEBP: return encode_webp(px, width, height, stride, channels, out, out_len);
    }
    return false;
}
