/* hamamatsu_vms.c — Hamamatsu VMS: a `.vms` key file (hamamatsu_keys.h) naming a grid of JPEG
 * files (NoJpegColumns x NoJpegRows) that together make the slide, a map JPEG (MapFile) and a
 * macro photo.
 *
 * Each JPEG has restart markers and is read, as in OpenSlide 4, as a grid of tiles, one per
 * restart interval (jpeg_restart.h): the restart interval's MCUs wide and one MCU tall. The
 * slide's tiles are its JPEGs' tiles side by side: the first JPEG's tile counts give every
 * JPEG's place (the last column and row may hold fewer), the level's size is the sum of the
 * first row's widths by the first column's heights, and where the tiles do not reach (a JPEG
 * whose height is not a whole number of MCUs) the level is transparent, as in OpenSlide. The
 * slide and the map are levels, each also seen through libjpeg's DCT scaling at 1/2, 1/4 and
 * 1/8 (sizes rounded down); levels of equal width keep the later one (the map's), as
 * OpenSlide's table does. A JPEG whose width is not a whole number of tiles is refused
 * (OpenSlide would number its intervals wrongly). The restart markers are found by reading
 * each JPEG once when the slide opens; the OptimisationFile (where each row of intervals
 * starts) is not needed for that and is only a property.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fill.h"
#include "codecs/codec.h"
#include "formats/hamamatsu_keys.h"
#include "formats/jpeg_restart.h"

/* One JPEG file, cut into restart intervals. */
typedef struct vms_jpeg {
    sp_source *src;
    uint8_t *header; /* SOI .. end of SOS, frame size set to one tile's */
    size_t header_len;
    uint64_t *starts; /* every interval's start, then the file's end */
    uint64_t width, height, tile_width, tile_height, tiles_across, tiles_down;
} vms_jpeg;

/* The slide's grid of JPEGs or the map's one. */
typedef struct vms_image {
    const vms_jpeg *jpegs;
    int cols, rows;
    uint64_t width, height, tiles_across, tiles_down, tile_width, tile_height;
} vms_image;

typedef struct vms_level {
    const vms_image *image;
    unsigned scale;
} vms_level;

typedef struct vms {
    sp_hamamatsu_keys keys;
    vms_jpeg *jpegs;
    size_t n_jpegs;
    vms_image images[2];
    vms_level levels[8];
} vms;

static bool vms_detect(const sp_probe *p) {
    return sp_hamamatsu_keys_detect(p, false);
}

/* ---- opening a JPEG ----------------------------------------------------------------------- */

static sp_status open_jpeg(const sp_hamamatsu_keys *keys, const sp_limits *limits, const char *name,
                           vms_jpeg *out, sp_err *err) {
    char where[96];
    snprintf(where, sizeof where, "JPEG %.60s", name);
    sp_status st = sp_hamamatsu_open_file(keys, name, &out->src, err);
    if (st != SP_OK) {
        return st;
    }
    uint64_t size = sp_source_size(out->src);
    size_t want = size < SP_JPEG_RESTART_MAX_HEADER ? (size_t)size : SP_JPEG_RESTART_MAX_HEADER;
    uint8_t *head = malloc(want > 0 ? want : 1);
    if (head == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory reading %s", where);
    }
    sp_jpeg_restart_layout lay;
    st = sp_source_read(out->src, 0, head, want, err);
    if (st == SP_OK) {
        st = sp_jpeg_restart_parse_header(head, want, where, &lay, err);
    }
    if (st == SP_OK && lay.components != 3) {
        st = sp_err_set(err, SP_E_UNSUPPORTED, "%s has %u colour components (3 are read)", where,
                        lay.components);
    } else if (st == SP_OK && lay.restart_interval == 0) {
        st = sp_err_set(err, SP_E_CORRUPT, "%s has no restart markers", where);
    } else if (st == SP_OK && (lay.width == 0 || lay.height == 0)) {
        st = sp_err_set(err, SP_E_CORRUPT, "%s is %ux%u pixels", where, lay.width, lay.height);
    }
    uint64_t mcus_across = 0, mcus_down = 0, n = 0;
    if (st == SP_OK) {
        mcus_across = (lay.width + lay.mcu_width - 1) / lay.mcu_width;
        mcus_down = (lay.height + lay.mcu_height - 1) / lay.mcu_height;
        out->width = lay.width;
        out->height = lay.height;
        out->tile_width = (uint64_t)lay.restart_interval * lay.mcu_width;
        out->tile_height = lay.mcu_height;
        if (mcus_across % lay.restart_interval != 0) {
            st = sp_err_set(err, SP_E_CORRUPT,
                            "%s: the restart interval (%u MCUs) does not divide a row of %llu "
                            "MCUs",
                            where, lay.restart_interval, (unsigned long long)mcus_across);
        } else if (out->width % out->tile_width != 0) {
            st = sp_err_set(err, SP_E_UNSUPPORTED,
                            "%s: its width (%llu) is not a whole number of %llu-pixel tiles", where,
                            (unsigned long long)out->width, (unsigned long long)out->tile_width);
        } else if (out->height < out->tile_height) {
            st = sp_err_set(err, SP_E_CORRUPT, "%s is less than one MCU tall", where);
        }
    }
    if (st == SP_OK) {
        out->tiles_across = out->width / out->tile_width;
        out->tiles_down = out->height / out->tile_height; /* a partial MCU row is not shown */
        n = out->tiles_across * mcus_down;
        st = sp_calloc(limits, n + 1, sizeof *out->starts, "VMS restart intervals",
                       (void **)&out->starts, err);
    }
    if (st == SP_OK) {
        st = sp_jpeg_restart_scan(out->src, lay.header_len, size, n, out->starts, where, err);
    }
    if (st == SP_OK) {
        sp_jpeg_restart_set_frame_size(head, &lay, out->tile_width, out->tile_height);
        uint8_t *fitted = realloc(head, lay.header_len);
        out->header = fitted != NULL ? fitted : head;
        out->header_len = lay.header_len;
        return SP_OK;
    }
    free(head);
    return st;
}

/* Lay the JPEGs of the slide's grid out as OpenSlide does, checking that they fit together. */
static sp_status place_jpegs(vms_image *img, const vms_jpeg *jpegs, int cols, int rows,
                             const sp_hamamatsu_keys *keys, sp_err *err) {
    const vms_jpeg *j0 = &jpegs[0];
    *img = (vms_image){.jpegs = jpegs,
                       .cols = cols,
                       .rows = rows,
                       .tile_width = j0->tile_width,
                       .tile_height = j0->tile_height};
    for (int i = 0; i < cols * rows; i++) {
        const vms_jpeg *j = &jpegs[i];
        int c = i % cols, r = i / cols;
        bool last_col = c == cols - 1, last_row = r == rows - 1;
        if (j->tile_width != j0->tile_width || j->tile_height != j0->tile_height ||
            (last_col ? j->tiles_across > j0->tiles_across : j->tiles_across != j0->tiles_across) ||
            (last_row ? j->tiles_down > j0->tiles_down : j->tiles_down != j0->tiles_down)) {
            return sp_err_set(
                err, SP_E_CORRUPT,
                "%s: JPEG %.60s (%llux%llu tiles of %llux%llu) does not fit the "
                "grid of the first (%llux%llu of %llux%llu)",
                keys->file, keys->images[i], (unsigned long long)j->tiles_across,
                (unsigned long long)j->tiles_down, (unsigned long long)j->tile_width,
                (unsigned long long)j->tile_height, (unsigned long long)j0->tiles_across,
                (unsigned long long)j0->tiles_down, (unsigned long long)j0->tile_width,
                (unsigned long long)j0->tile_height);
        }
        if (r == 0) {
            img->width += j->width;
            img->tiles_across += j->tiles_across;
        }
        if (c == 0) {
            img->height += j->height;
            img->tiles_down += j->tiles_down;
        }
    }
    return SP_OK;
}

/* ---- reading tiles ------------------------------------------------------------------------ */

static unsigned vms_area_scales(sp_slide *s, const sp_level *l) {
    (void)s;
    return sp_jpeg_restart_area_scales(((const vms_level *)l->priv)->scale);
}

static sp_status vms_read_tile_area(sp_slide *s, const sp_level *l, int64_t col, int64_t row,
                                    unsigned scale, int64_t x, int64_t y, int64_t w, int64_t h,
                                    sp_pixel_format format, uint8_t *dst, int64_t stride,
                                    const uint8_t *empty, sp_err *err) {
    const vms_level *vl = l->priv;
    const vms_image *img = vl->image;
    unsigned total = vl->scale * scale;
    int bpp = sp_pixel_format_bytes(format);
    if (col < 0 || row < 0 || total > 8) {
        return sp_err_set(err, SP_E_INVALID_ARG, "VMS tile (%lld, %lld) at 1/%u is not in the grid",
                          (long long)col, (long long)row, total);
    }
    const vms_jpeg *j0 = &img->jpegs[0];
    uint64_t jc = (uint64_t)col / j0->tiles_across, jr = (uint64_t)row / j0->tiles_down;
    uint64_t lc = (uint64_t)col % j0->tiles_across, lr = (uint64_t)row % j0->tiles_down;
    const vms_jpeg *j = jc < (uint64_t)img->cols && jr < (uint64_t)img->rows
                            ? &img->jpegs[jr * (uint64_t)img->cols + jc]
                            : NULL;
    if ((uint64_t)col >= img->tiles_across || (uint64_t)row >= img->tiles_down || j == NULL ||
        lc >= j->tiles_across || lr >= j->tiles_down) {
        sp_fill_pixels(dst, stride, w, h, bpp, empty); /* beyond the tiles: as OpenSlide */
        return SP_OK;
    }
    uint64_t index = lr * j->tiles_across + lc;
    return sp_jpeg_restart_decode_area(j->src, &s->limits, j->header, j->header_len,
                                       j->starts[index], j->starts[index + 1], total, x, y, w, h,
                                       bpp, dst, stride, empty, err);
}

static sp_status vms_read_tile(sp_slide *s, const sp_level *l, int64_t col, int64_t row,
                               uint8_t *rgba, uint64_t stride, sp_err *err) {
    static const uint8_t transparent[4] = {0, 0, 0, 0};
    return vms_read_tile_area(s, l, col, row, 1, 0, 0, l->tile_width, l->tile_height,
                              SP_PIXEL_RGBA8, rgba, (int64_t)stride, transparent, err);
}

static sp_status vms_read_associated(sp_slide *s, const sp_associated *a, uint8_t *rgba,
                                     uint64_t stride, sp_err *err) {
    return sp_hamamatsu_read_macro(s, &((const vms *)s->priv)->keys, a, rgba, stride, err);
}

static void vms_destroy(sp_slide *s) {
    vms *v = s->priv;
    if (v == NULL) {
        return;
    }
    for (size_t i = 0; i < v->n_jpegs; i++) {
        sp_source_close(v->jpegs[i].src);
        free(v->jpegs[i].header);
        free(v->jpegs[i].starts);
    }
    free(v->jpegs);
    sp_hamamatsu_keys_free(&v->keys);
    free(v);
    s->priv = NULL;
}

static const sp_slide_ops vms_ops = {
    .read_tile = vms_read_tile,
    .read_associated = vms_read_associated,
    .destroy = vms_destroy,
    .area_scales = vms_area_scales,
    .read_tile_area = vms_read_tile_area,
};

/* ---- open --------------------------------------------------------------------------------- */

/* The slide and the map at 1/1 .. 1/8, one level per width (a later one replaces an earlier
 * of the same width, as in OpenSlide's table keyed by width). */
static sp_status add_levels(sp_slide *s, vms *v, sp_err *err) {
    int n = 0;
    for (int i = 0; i < 2; i++) {
        for (unsigned scale = 1; scale <= 8; scale *= 2) {
            const vms_image *img = &v->images[i];
            uint64_t w = img->width / scale;
            int same = -1;
            for (int k = 0; k < n; k++) {
                if (v->levels[k].image->width / v->levels[k].scale == w) {
                    same = k;
                }
            }
            if (w == 0 || img->height / scale == 0) {
                continue;
            }
            v->levels[same >= 0 ? same : n++] = (vms_level){img, scale};
        }
    }
    sp_status st = SP_OK;
    for (int k = 0; st == SP_OK && k < n; k++) {
        const vms_level *vl = &v->levels[k];
        sp_level l = {
            .width = (int64_t)(vl->image->width / vl->scale),
            .height = (int64_t)(vl->image->height / vl->scale),
            .tile_width = (int64_t)(vl->image->tile_width / vl->scale),
            .tile_height = (int64_t)(vl->image->tile_height / vl->scale),
            .compression = "jpeg",
            .priv = vl,
        };
        st = sp_slide_add_level(s, &l, err);
    }
    return st;
}

static sp_status vms_open(sp_slide *s, sp_probe *p, sp_err *err) {
    vms *v = calloc(1, sizeof *v);
    s->priv = v;
    s->ops = &vms_ops;
    if (v == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory opening a VMS slide");
    }
    sp_status st = sp_hamamatsu_keys_read(p, false, &v->keys, err);
    size_t n = 0;
    if (st == SP_OK) {
        n = (size_t)v->keys.cols * (size_t)v->keys.rows + 1;
        v->jpegs = calloc(n, sizeof *v->jpegs);
        st = v->jpegs != NULL ? SP_OK : sp_err_set(err, SP_E_NOMEM, "out of memory");
    }
    for (size_t i = 0; st == SP_OK && i < n; i++, v->n_jpegs++) {
        st = open_jpeg(&v->keys, &s->limits, v->keys.images[i], &v->jpegs[i], err);
    }
    if (st == SP_OK) {
        st = place_jpegs(&v->images[0], v->jpegs, v->keys.cols, v->keys.rows, &v->keys, err);
    }
    if (st == SP_OK) {
        st = place_jpegs(&v->images[1], &v->jpegs[n - 1], 1, 1, &v->keys, err);
    }
    if (st == SP_OK) {
        st = sp_hamamatsu_add_macro(s, &v->keys, err);
    }
    if (st == SP_OK) {
        st = add_levels(s, v, err);
    }
    if (st == SP_OK) {
        /* Level 0: the widest (the slide, unless the map is wider). */
        const sp_level *widest = &s->levels[0];
        for (int32_t i = 1; i < s->n_levels; i++) {
            widest = s->levels[i].width > widest->width ? &s->levels[i] : widest;
        }
        st = sp_hamamatsu_add_properties(s, &v->keys, widest->width, widest->height, err);
    }
    return st;
}

const sp_format sp_format_hamamatsu_vms = {"hamamatsu", vms_detect, vms_open};
