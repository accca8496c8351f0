/* region.c — reading regions and associated images into caller buffers, for every format.
 *
 * A region read walks the tiles of one level that intersect the request, has the format decode
 * each into RGBA scratch, and copies the part inside both the request and the level into the
 * caller's buffer, converting to the requested pixel format. Pixels outside the level (or in
 * missing tiles) stay transparent, or the background colour in RGB. On any error the output is
 * zeroed and the error sticks to the slide.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/slide_internal.h"

/* Composite straight RGBA over the background into RGB, rounding to nearest. */
static void rgba_to_rgb(const uint8_t *src, uint8_t *dst, int64_t n, const uint8_t bg[3]) {
    for (int64_t i = 0; i < n; i++, src += 4, dst += 3) {
        unsigned a = src[3];
        if (a == 255) {
            dst[0] = src[0];
            dst[1] = src[1];
            dst[2] = src[2];
        } else {
            for (int c = 0; c < 3; c++) {
                dst[c] = (uint8_t)((src[c] * a + bg[c] * (255 - a) + 127) / 255);
            }
        }
    }
}

static void fill_empty(uint8_t *dst, int64_t stride, int64_t w, int64_t h, sp_pixel_format fmt,
                       const uint8_t bg[3]) {
    for (int64_t y = 0; y < h; y++) {
        uint8_t *row = dst + y * stride;
        if (fmt == SP_PIXEL_RGBA8) {
            memset(row, 0, (size_t)w * 4);
        } else {
            for (int64_t x = 0; x < w; x++) {
                memcpy(row + x * 3, bg, 3);
            }
        }
    }
}

/* Zero the w x h area of a caller's buffer (rows of `stride` bytes): what an error leaves. */
static void zero_area(void *dst, int64_t stride, int64_t w, int64_t h, sp_pixel_format fmt) {
    if (h > 0) {
        memset(dst, 0, (size_t)((h - 1) * stride + w * sp_pixel_format_bytes(fmt)));
    }
}

/* Checks shared by region and associated reads; returns SP_OK when the buffer is usable. */
static sp_status check_buffer(sp_pixel_format fmt, const void *dst, int64_t stride, int64_t w,
                              int64_t h) {
    int bpp = sp_pixel_format_bytes(fmt);
    if (bpp == 0 || dst == NULL || w < 0 || h < 0 || w > INT64_MAX / 4 || stride < w * bpp) {
        return SP_E_INVALID_ARG;
    }
    if (h > 0 && stride > INT64_MAX / h) {
        return SP_E_INVALID_ARG;
    }
    return SP_OK;
}

static sp_status sticky_status(sp_slide *s) {
    pthread_mutex_lock(&s->error_lock);
    sp_status st = s->sticky;
    pthread_mutex_unlock(&s->error_lock);
    return st;
}

static sp_status paint(sp_slide *s, const sp_level *l, sp_pixel_format fmt, uint8_t *dst,
                       int64_t stride, int64_t lx, int64_t ly, int64_t w, int64_t h, sp_err *err) {
    /* The part of the request inside the level. */
    int64_t x0 = lx > 0 ? lx : 0, y0 = ly > 0 ? ly : 0;
    int64_t x1 = lx + w < l->width ? lx + w : l->width;
    int64_t y1 = ly + h < l->height ? ly + h : l->height;
    if (x0 >= x1 || y0 >= y1) {
        return SP_OK;
    }
    uint64_t tile_stride = (uint64_t)l->tile_width * 4;
    uint8_t *tile = NULL;
    sp_status st = sp_alloc(&s->limits, tile_stride * (uint64_t)l->tile_height, "tile buffer",
                            (void **)&tile, err);
    int bpp = sp_pixel_format_bytes(fmt);
    for (int64_t row = y0 / l->tile_height; st == SP_OK && row * l->tile_height < y1; row++) {
        for (int64_t col = x0 / l->tile_width; st == SP_OK && col * l->tile_width < x1; col++) {
            st = s->ops->read_tile(s, l, col, row, tile, tile_stride, err);
            if (st != SP_OK) {
                break;
            }
            int64_t tx = col * l->tile_width, ty = row * l->tile_height;
            int64_t cx0 = tx > x0 ? tx : x0, cy0 = ty > y0 ? ty : y0;
            int64_t cx1 = tx + l->tile_width < x1 ? tx + l->tile_width : x1;
            int64_t cy1 = ty + l->tile_height < y1 ? ty + l->tile_height : y1;
            for (int64_t y = cy0; y < cy1; y++) {
                const uint8_t *src = tile + (uint64_t)(y - ty) * tile_stride + (cx0 - tx) * 4;
                uint8_t *out = dst + (y - ly) * stride + (cx0 - lx) * bpp;
                if (fmt == SP_PIXEL_RGBA8) {
                    memcpy(out, src, (size_t)(cx1 - cx0) * 4);
                } else {
                    rgba_to_rgb(src, out, cx1 - cx0, s->background);
                }
            }
        }
    }
    free(tile);
    return st;
}

sp_status sp_slide_read_region(sp_slide *s, sp_pixel_format fmt, void *dst, int64_t stride,
                               int32_t level, int64_t x, int64_t y, int64_t w, int64_t h) {
    if (s == NULL || check_buffer(fmt, dst, stride, w, h) != SP_OK) {
        return SP_E_INVALID_ARG;
    }
    if (level < 0 || level >= s->n_levels) {
        zero_area(dst, stride, w, h, fmt);
        return SP_E_INVALID_ARG;
    }
    const sp_level *l = &s->levels[level];
    fill_empty(dst, stride, w, h, fmt, s->background);
    sp_status st = sticky_status(s);
    if (st != SP_OK) {
        zero_area(dst, stride, w, h, fmt);
        return st;
    }
    if (w == 0 || h == 0) {
        return SP_OK;
    }
    /* Level coordinates of the request's origin; far-off origins simply paint nothing. */
    double lxd = floor((double)x / l->downsample), lyd = floor((double)y / l->downsample);
    if (!(fabs(lxd) < 9e15 && fabs(lyd) < 9e15)) {
        return SP_E_INVALID_ARG;
    }
    sp_err err = {0};
    st = paint(s, l, fmt, dst, stride, (int64_t)lxd, (int64_t)lyd, w, h, &err);
    if (st != SP_OK) {
        zero_area(dst, stride, w, h, fmt);
        sp_slide_record_error(s, &err);
    }
    return st;
}

sp_status sp_slide_read_associated(sp_slide *s, const char *name, sp_pixel_format fmt, void *dst,
                                   int64_t stride) {
    if (s == NULL || name == NULL) {
        return SP_E_INVALID_ARG;
    }
    const sp_associated *a = NULL;
    for (int32_t i = 0; i < s->n_associated; i++) {
        if (strcmp(s->associated[i].name, name) == 0) {
            a = &s->associated[i];
        }
    }
    if (a == NULL) {
        return SP_E_NOT_FOUND;
    }
    if (check_buffer(fmt, dst, stride, a->width, a->height) != SP_OK) {
        return SP_E_INVALID_ARG;
    }
    sp_status st = sticky_status(s);
    if (st != SP_OK) {
        zero_area(dst, stride, a->width, a->height, fmt);
        return st;
    }
    sp_err err = {0};
    uint8_t *rgba = NULL;
    st = sp_calloc(&s->limits, (uint64_t)a->width * (uint64_t)a->height, 4, "associated image",
                   (void **)&rgba, &err);
    if (st == SP_OK) {
        st = s->ops->read_associated(s, a, rgba, (uint64_t)a->width * 4, &err);
    }
    if (st == SP_OK) {
        for (int64_t y = 0; y < a->height; y++) {
            const uint8_t *src = rgba + y * a->width * 4;
            uint8_t *out = (uint8_t *)dst + y * stride;
            if (fmt == SP_PIXEL_RGBA8) {
                memcpy(out, src, (size_t)a->width * 4);
            } else {
                rgba_to_rgb(src, out, a->width, s->background);
            }
        }
    } else {
        zero_area(dst, stride, a->width, a->height, fmt);
        sp_slide_record_error(s, &err);
    }
    free(rgba);
    return st;
}
