/* serve_render.c — turns one parsed image request (IIIF or Deep Zoom) into encoded bytes with
 * the library's region reads: a request at a scale a slide level has is read from that level
 * with sp_slide_read_region (so a tile equals `slidepipe region` of the same area), a request
 * at a power-of-two scale with sp_slide_read_region_scaled (best level, scaled JPEG decode,
 * tile cache), and any other size by reading at the nearer scale and resampling to the size
 * asked (nearest pixel). Then mirroring, rotation by 90s, grey or bitonal, and the encoder.
 * JPEG is read as RGB (composited over the slide's background), PNG and WebP keep alpha. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

/* The slide level whose downsample is `scale` (within rounding), or -1. */
static int32_t level_at_scale(sp_slide *slide, double scale) {
    for (int32_t l = 0; l < sp_slide_level_count(slide); l++) {
        double ds;
        if (sp_slide_level_downsample(slide, l, &ds) == SP_OK && fabs(ds - scale) < 1e-9) {
            return l;
        }
    }
    return -1;
}

/* A whole scale s with the output exactly the region over s rounded up, or 0. */
static int64_t exact_scale(const serve_render *r) {
    for (int64_t s = 1; s <= (INT64_C(1) << 40); s *= 2) {
        if ((r->w + s - 1) / s == r->out_w && (r->h + s - 1) / s == r->out_h) {
            return s;
        }
        if ((r->w + s - 1) / s < r->out_w) {
            break;
        }
    }
    return 0;
}

static sp_status read_scaled(sp_slide *slide, sp_pixel_format fmt, uint8_t *dst, int64_t stride,
                             double scale, int64_t x, int64_t y, int64_t w, int64_t h) {
    int32_t level = level_at_scale(slide, scale);
    if (level >= 0) {
        return sp_slide_read_region(slide, fmt, dst, stride, level, x, y, w, h);
    }
    return sp_slide_read_region_scaled(slide, fmt, dst, stride, scale, x, y, w, h);
}

/* Read the region at out_w x out_h into a new buffer of `bpp` bytes a pixel. */
static sp_status read_pixels(sp_slide *slide, const serve_render *r, int bpp, uint8_t **out) {
    sp_pixel_format fmt = bpp == 4 ? SP_PIXEL_RGBA8 : SP_PIXEL_RGB8;
    uint8_t *dst = malloc((size_t)(r->out_w * r->out_h * bpp));
    if (dst == NULL) {
        return SP_E_NOMEM;
    }
    sp_status st;
    int64_t s = exact_scale(r);
    if (s > 0) {
        st =
            read_scaled(slide, fmt, dst, r->out_w * bpp, (double)s, r->x, r->y, r->out_w, r->out_h);
    } else {
        /* Read at the finer of the two axes' scales (not below 1), then pick nearest pixels; a
         * very distorted size reads at the coarser one so the buffer stays near the output's. */
        double sx = (double)r->w / (double)r->out_w, sy = (double)r->h / (double)r->out_h;
        double ds = fmax(1.0, fmin(sx, sy));
        int64_t iw = (int64_t)ceil((double)r->w / ds), ih = (int64_t)ceil((double)r->h / ds);
        if ((double)iw * (double)ih > 4.0 * (double)(r->out_w * r->out_h) + 65536.0) {
            ds = fmax(1.0, fmax(sx, sy));
            iw = (int64_t)ceil((double)r->w / ds), ih = (int64_t)ceil((double)r->h / ds);
        }
        uint8_t *tmp = malloc((size_t)(iw * ih * bpp));
        if (tmp == NULL) {
            free(dst);
            return SP_E_NOMEM;
        }
        st = read_scaled(slide, fmt, tmp, iw * bpp, ds, r->x, r->y, iw, ih);
        for (int64_t j = 0; st == SP_OK && j < r->out_h; j++) {
            int64_t sj = (int64_t)(((double)j + 0.5) * (double)ih / (double)r->out_h);
            sj = sj >= ih ? ih - 1 : sj;
            for (int64_t i = 0; i < r->out_w; i++) {
                int64_t si = (int64_t)(((double)i + 0.5) * (double)iw / (double)r->out_w);
                si = si >= iw ? iw - 1 : si;
                memcpy(dst + (j * r->out_w + i) * bpp, tmp + (sj * iw + si) * bpp, (size_t)bpp);
            }
        }
        free(tmp);
    }
    if (st != SP_OK) {
        free(dst);
        return st;
    }
    *out = dst;
    return SP_OK;
}

/* Mirror (horizontally) then rotate clockwise by `rotation`; returns the new buffer (the old one
 * is freed) and its size, or NULL when out of memory. */
static uint8_t *turn(uint8_t *src, int64_t w, int64_t h, int bpp, bool mirror, int rotation,
                     int64_t *ow, int64_t *oh) {
    bool swap = rotation == 90 || rotation == 270;
    *ow = swap ? h : w, *oh = swap ? w : h;
    if (!mirror && rotation == 0) {
        return src;
    }
    uint8_t *dst = malloc((size_t)(w * h * bpp));
    if (dst == NULL) {
        free(src);
        return NULL;
    }
    for (int64_t y = 0; y < h; y++) {
        for (int64_t x = 0; x < w; x++) {
            int64_t sx = mirror ? w - 1 - x : x, dx, dy;
            switch (rotation) {
            case 90: dx = h - 1 - y, dy = x; break;
            case 180: dx = w - 1 - x, dy = h - 1 - y; break;
            case 270: dx = y, dy = w - 1 - x; break;
            default: dx = x, dy = y; break;
            }
            memcpy(dst + (dy * *ow + dx) * bpp, src + (y * w + sx) * bpp, (size_t)bpp);
        }
    }
    free(src);
    return dst;
}

int serve_render_image(sp_slide *slide, const serve_render *r, uint8_t **body, size_t *len,
                       const char **mime, char *msg, size_t msg_len) {
    bool grey = r->quality != SERVE_COLOR;
    int bpp = (r->format == SERVE_JPEG || grey) ? 3 : 4;
    uint8_t *px = NULL;
    sp_status st = read_pixels(slide, r, bpp, &px);
    if (st != SP_OK) {
        const char *why = sp_slide_error(slide);
        snprintf(msg, msg_len, "reading the region failed: %s", why ? why : sp_status_str(st));
        return st == SP_E_LIMIT ? 400 : 500;
    }
    int channels = bpp;
    if (grey) { /* ITU-R BT.601 luma, like libjpeg's RGB to grey */
        int64_t n = r->out_w * r->out_h;
        for (int64_t i = 0; i < n; i++) {
            const uint8_t *p = px + i * 3;
            int v = (299 * p[0] + 587 * p[1] + 114 * p[2] + 500) / 1000;
            px[i] = r->quality == SERVE_BITONAL ? (v >= 128 ? 255 : 0) : (uint8_t)v;
        }
        channels = 1;
    }
    int64_t w, h;
    px = turn(px, r->out_w, r->out_h, channels, r->mirror, r->rotation, &w, &h);
    if (px == NULL || !serve_encode(r->format, px, w, h, w * channels, channels, body, len)) {
        free(px);
        snprintf(msg, msg_len, "out of memory encoding a %lldx%lld image", (long long)w,
                 (long long)h);
        return 500;
    }
    free(px);
    *mime = serve_format_mime(r->format);
    return 0;
}
