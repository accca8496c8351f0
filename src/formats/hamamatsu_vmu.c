/* hamamatsu_vmu.c — Hamamatsu VMU: a `.vmu` key file (hamamatsu_keys.h) naming an uncompressed
 * NGR image (ImageFile), a smaller NGR map (MapFile) and a macro JPEG.
 *
 * An NGR file starts with "GN"; little-endian 32-bit integers give its width (at byte 4),
 * height (8), column width (12) and where the pixels start (24). The pixels are 16-bit
 * little-endian R, G, B samples (BitsPerPixel 36: 12 bits used), stored in columns of the
 * column width, each column all of the image's rows from top to bottom. As in OpenSlide 4,
 * each file is a level read in tiles one column wide and 64 rows tall, and each sample becomes
 * 8 bits by dropping its low 4 bits (sample >> 4, kept to 8 bits). A file too short for its
 * pixels is refused when the slide opens (OpenSlide fails each read that reaches past it).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/hamamatsu_keys.h"

#define NGR_TILE_HEIGHT 64
#define NGR_HEADER 28

typedef struct ngr {
    sp_source *src;
    int64_t width, height, column_width;
    uint64_t start;
} ngr;

typedef struct vmu {
    sp_hamamatsu_keys keys;
    ngr files[2]; /* the image, the map */
} vmu;

static bool vmu_detect(const sp_probe *p) {
    return sp_hamamatsu_keys_detect(p, true);
}

static int32_t le32(const uint8_t *p) {
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                     (uint32_t)p[3] << 24);
}

static sp_status open_ngr(const sp_hamamatsu_keys *keys, const char *name, ngr *out, sp_err *err) {
    sp_status st = sp_hamamatsu_open_file(keys, name, &out->src, err);
    uint8_t h[NGR_HEADER];
    if (st == SP_OK && sp_source_size(out->src) < NGR_HEADER) {
        st = sp_err_set(err, SP_E_CORRUPT, "NGR file %.60s is too short for its header", name);
    }
    if (st == SP_OK) {
        st = sp_source_read(out->src, 0, h, sizeof h, err);
    }
    if (st != SP_OK) {
        return st;
    }
    if (h[0] != 'G' || h[1] != 'N') {
        return sp_err_set(err, SP_E_CORRUPT, "%.60s is not an NGR file (no \"GN\")", name);
    }
    int32_t w = le32(h + 4), ht = le32(h + 8), cw = le32(h + 12), start = le32(h + 24);
    if (w <= 0 || ht <= 0 || cw <= 0 || start <= 0) {
        return sp_err_set(err, SP_E_CORRUPT,
                          "NGR file %.60s: width %d, height %d, column width %d, pixels at %d",
                          name, w, ht, cw, start);
    }
    if (w % cw != 0) {
        return sp_err_set(err, SP_E_CORRUPT,
                          "NGR file %.60s: width %d is not a multiple of the column width %d", name,
                          w, cw);
    }
    /* w x h < 2^62: the pixels' bytes checked against the file before they are added up. */
    uint64_t pixels = (uint64_t)w * (uint64_t)ht, size = sp_source_size(out->src);
    uint64_t end = pixels <= (UINT64_MAX - (uint64_t)start) / 6 ? (uint64_t)start + pixels * 6
                                                                : UINT64_MAX;
    if (end > size) {
        return sp_err_set(err, SP_E_CORRUPT,
                          "NGR file %.60s is %llu bytes, short of its %dx%d pixels (%llu bytes)",
                          name, (unsigned long long)size, w, ht, (unsigned long long)end);
    }
    *out = (ngr){out->src, w, ht, cw, (uint64_t)start};
    return SP_OK;
}

static sp_status vmu_read_tile(sp_slide *s, const sp_level *l, int64_t col, int64_t row,
                               uint8_t *rgba, uint64_t stride, sp_err *err) {
    const ngr *g = l->priv;
    int64_t tw = g->column_width;
    if (col < 0 || row < 0 || col >= g->width / tw || row * NGR_TILE_HEIGHT >= g->height) {
        return sp_err_set(err, SP_E_INVALID_ARG, "NGR tile (%lld, %lld) is not in the grid",
                          (long long)col, (long long)row);
    }
    int64_t th = g->height - row * NGR_TILE_HEIGHT;
    th = th < NGR_TILE_HEIGHT ? th : NGR_TILE_HEIGHT;
    uint64_t offset = g->start + (uint64_t)row * NGR_TILE_HEIGHT * (uint64_t)tw * 6 +
                      (uint64_t)col * (uint64_t)g->height * (uint64_t)tw * 6;
    uint8_t *buf = NULL;
    uint64_t bytes = (uint64_t)tw * (uint64_t)th * 6;
    sp_status st = sp_alloc(&s->limits, bytes, "an NGR tile", (void **)&buf, err);
    if (st == SP_OK) {
        st = sp_source_read(g->src, offset, buf, (size_t)bytes, err);
    }
    for (int64_t y = 0; st == SP_OK && y < l->tile_height; y++) {
        uint8_t *out = rgba + (uint64_t)y * stride;
        if (y >= th) {
            memset(out, 0, (size_t)tw * 4); /* below the image */
            continue;
        }
        const uint8_t *in = buf + (uint64_t)y * (uint64_t)tw * 6;
        for (int64_t x = 0; x < tw; x++, in += 6, out += 4) {
            for (int c = 0; c < 3; c++) {
                out[c] = (uint8_t)(((unsigned)in[2 * c] | (unsigned)in[2 * c + 1] << 8) >> 4);
            }
            out[3] = 255;
        }
    }
    free(buf);
    return st;
}

static sp_status vmu_read_associated(sp_slide *s, const sp_associated *a, uint8_t *rgba,
                                     uint64_t stride, sp_err *err) {
    return sp_hamamatsu_read_macro(s, &((const vmu *)s->priv)->keys, a, rgba, stride, err);
}

static void vmu_destroy(sp_slide *s) {
    vmu *v = s->priv;
    if (v == NULL) {
        return;
    }
    for (int i = 0; i < 2; i++) {
        sp_source_close(v->files[i].src);
    }
    sp_hamamatsu_keys_free(&v->keys);
    free(v);
    s->priv = NULL;
}

static const sp_slide_ops vmu_ops = {
    .read_tile = vmu_read_tile,
    .read_associated = vmu_read_associated,
    .destroy = vmu_destroy,
};

static sp_status vmu_open(sp_slide *s, sp_probe *p, sp_err *err) {
    vmu *v = calloc(1, sizeof *v);
    s->priv = v;
    s->ops = &vmu_ops;
    if (v == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory opening a VMU slide");
    }
    sp_status st = sp_hamamatsu_keys_read(p, true, &v->keys, err);
    if (st == SP_OK && sp_hamamatsu_keys_int(&v->keys, "BitsPerPixel", 0) != 36) {
        st = sp_err_set(err, SP_E_UNSUPPORTED, "%s: BitsPerPixel must be 36", v->keys.file);
    }
    const char *order = st == SP_OK ? sp_ini_get(&v->keys.ini, v->keys.group, "PixelOrder") : "";
    if (st == SP_OK && (order == NULL || strcmp(order, "RGB") != 0)) {
        st = sp_err_set(err, SP_E_UNSUPPORTED, "%s: PixelOrder must be RGB", v->keys.file);
    }
    for (int i = 0; st == SP_OK && i < 2; i++) {
        st = open_ngr(&v->keys, v->keys.images[i], &v->files[i], err);
        if (st == SP_OK && (uint64_t)v->files[i].column_width * NGR_TILE_HEIGHT >
                               (uint64_t)s->limits.value[SP_LIMIT_MAX_TILE_PIXELS]) {
            st = sp_err_set(err, SP_E_LIMIT, "NGR file %.60s: a column of %lld pixels is too wide",
                            v->keys.images[i], (long long)v->files[i].column_width);
        }
        if (st == SP_OK) {
            sp_level l = {
                .width = v->files[i].width,
                .height = v->files[i].height,
                .tile_width = v->files[i].column_width,
                .tile_height = NGR_TILE_HEIGHT,
                .compression = "none",
                .priv = &v->files[i],
            };
            st = sp_slide_add_level(s, &l, err);
        }
    }
    if (st == SP_OK) {
        st = sp_hamamatsu_add_macro(s, &v->keys, err);
    }
    if (st == SP_OK) {
        st = sp_hamamatsu_add_properties(s, &v->keys, v->files[0].width, v->files[0].height, err);
    }
    return st;
}

const sp_format sp_format_hamamatsu_vmu = {"hamamatsu", vmu_detect, vmu_open};
