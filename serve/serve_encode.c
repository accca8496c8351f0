/* serve_encode.c — the image encoders of `slidepipe serve`: pixels in memory to a JPEG
 * (libjpeg-turbo, quality 90, 4:2:0 like most slide scanners), a PNG (libpng, fast
 * compression: tiles are served once and cached by the browser) or a WebP (libwebp, lossy at
 * quality 90, keeping alpha). The libraries are those the project links. */
#include <setjmp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h> /* after stdio.h: it uses FILE and size_t */
#include <webp/encode.h>

#include "png_encode.h"
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
    case SERVE_PNG: return png_encode(px, width, height, stride, channels, 1, out, out_len);
    case SERVE_WEBP: return encode_webp(px, width, height, stride, channels, out, out_len);
    }
    return false;
}
