/* tiff_slide.c — the shared machinery of TIFF-based formats (see tiff_slide.h). */
#include "formats/tiff_slide.h"
#include "formats/tiff_raw_tiles.h"

#include <stdio.h>
#include <string.h>

static sp_status tiff_read_tile(sp_slide *s, const sp_level *l, int64_t col, int64_t row,
                                uint8_t *rgba, uint64_t stride, sp_err *err) {
    const sp_tiff_dir *d = l->priv;
    uint64_t index = (uint64_t)row * d->chunks_across + (uint64_t)col;
    return sp_tiff_decode_chunk(s->container, d, index, rgba, stride, err);
}

sp_status sp_tiff_slide_read_associated(sp_slide *s, const sp_associated *a, uint8_t *rgba,
                                        uint64_t stride, sp_err *err) {
    return sp_tiff_decode_image(s->container, a->priv, rgba, stride, err);
}

static void tiff_destroy(sp_slide *s) {
    sp_tiff_close(s->container);
    s->container = NULL;
}

unsigned sp_tiff_slide_dir_area_scales(const sp_slide *s, const sp_tiff_dir *d) {
    unsigned scales = sp_tiff_area_scales(s->container, d);
    /* JPEG tiles have no alpha; a JPEG 2000 codestream may carry a fourth component. */
    return scales != 0 && d->compression == SP_COMPRESSION_JPEG ? scales | SP_AREA_OPAQUE : scales;
}

static unsigned tiff_area_scales(sp_slide *s, const sp_level *l) {
    return sp_tiff_slide_dir_area_scales(s, l->priv);
}

static sp_status tiff_read_tile_area(sp_slide *s, const sp_level *l, int64_t col, int64_t row,
                                     unsigned scale, int64_t x, int64_t y, int64_t w, int64_t h,
                                     sp_pixel_format format, uint8_t *dst, int64_t stride,
                                     const uint8_t *empty, sp_err *err) {
    const sp_tiff_dir *d = l->priv;
    uint64_t index = (uint64_t)row * d->chunks_across + (uint64_t)col;
    return sp_tiff_decode_chunk_area(s->container, d, index, scale, (uint64_t)x, (uint64_t)y,
                                     (uint64_t)w, (uint64_t)h,
                                     (unsigned)sp_pixel_format_bytes(format), dst,
                                     (uint64_t)stride, empty, err);
}

static void tiff_prefetch(sp_slide *s, const sp_level *l, const sp_tile_pos *tiles, size_t n) {
    const sp_tiff *t = s->container;
    const sp_tiff_dir *d = l->priv;
    sp_byte_range ranges[SP_PREFETCH_TILES];
    size_t count = 0;
    for (size_t i = 0; i < n && count < SP_PREFETCH_TILES; i++) {
        uint64_t index = (uint64_t)tiles[i].row * d->chunks_across + (uint64_t)tiles[i].col;
        if (index < d->n_chunks && d->chunk_offsets[index] != 0) {
            ranges[count++] = (sp_byte_range){d->chunk_offsets[index], d->chunk_byte_counts[index]};
        }
    }
    sp_source_prefetch(t->src, ranges, count);
}

const sp_slide_ops sp_tiff_slide_ops = {
    .read_tile = tiff_read_tile,
    .read_associated = sp_tiff_slide_read_associated,
    .destroy = tiff_destroy,
    .area_scales = tiff_area_scales,
    .read_tile_area = tiff_read_tile_area,
    .prefetch = tiff_prefetch,
    .raw_level = sp_tiff_raw_level,
    .read_raw_tile = sp_tiff_read_raw_tile,
    .read_raw_rows = sp_tiff_read_raw_rows,
    .raw_rows_at = sp_tiff_raw_rows_at,
};

/* TIFF tag ICCProfile (34675, TIFF/EP and Adobe's TIFF technical note): the profile's bytes. */
#define TAG_ICC_PROFILE 34675

/* A profile over the metadata limit, or no memory to copy it, leaves the slide without one
 * rather than failing an open that does not need it (sp_slide_icc_profile then says none). */
void sp_tiff_slide_take_icc(sp_slide *s, const sp_tiff_dir *d) {
    const sp_tiff_entry *e = sp_tiff_find(d, TAG_ICC_PROFILE);
    if (s->icc_profile == NULL && e != NULL && e->data != NULL && e->size > 0 &&
        (e->type == 1 || e->type == 7)) { /* BYTE or UNDEFINED */
        sp_err ignored = {0};
        sp_slide_set_icc_profile(s, e->data, (size_t)e->size, &ignored);
    }
}

void sp_tiff_slide_adopt(sp_slide *s, sp_probe *probe) {
    s->container = probe->tiff;
    probe->tiff = NULL;
    s->ops = &sp_tiff_slide_ops;
    s->prefetch = sp_source_can_prefetch(((sp_tiff *)s->container)->src);
}

sp_status sp_tiff_slide_add_level(sp_slide *s, const sp_tiff_dir *d, sp_err *err) {
    sp_status st = sp_tiff_check_decodable(s->container, d, err);
    if (st != SP_OK) {
        return st;
    }
    sp_level l = {
        .width = (int64_t)d->width,
        .height = (int64_t)d->height,
        .tile_width = (int64_t)d->chunk_width,
        .tile_height = (int64_t)d->chunk_height,
        .compression = sp_tiff_compression_name(d->compression),
        .priv = d,
    };
    sp_tiff_slide_take_icc(s, d);
    return sp_slide_add_level(s, &l, err);
}

sp_status sp_tiff_slide_add_associated(sp_slide *s, const char *name, const sp_tiff_dir *d,
                                       sp_err *err) {
    sp_err ignored = {0};
    if (sp_tiff_check_decodable(s->container, d, &ignored) != SP_OK) {
        return SP_OK;
    }
    return sp_slide_add_associated(s, name, (int64_t)d->width, (int64_t)d->height, d, err);
}

static sp_status add_string_tag(sp_slide *s, const sp_tiff_dir *d, uint16_t tag, const char *key,
                                sp_err *err) {
    const char *v = sp_tiff_entry_string(sp_tiff_find(d, tag));
    return v ? sp_props_set(&s->props, key, v, err) : SP_OK;
}

sp_status sp_tiff_slide_add_properties(sp_slide *s, const sp_tiff_dir *d, bool mpp_from_resolution,
                                       sp_err *err) {
    static const struct {
        uint16_t tag;
        const char *key;
    } strings[] = {
        {SP_TAG_IMAGE_DESCRIPTION, "tiff.ImageDescription"},
        {SP_TAG_MAKE, "tiff.Make"},
        {SP_TAG_MODEL, "tiff.Model"},
        {SP_TAG_SOFTWARE, "tiff.Software"},
        {SP_TAG_DATE_TIME, "tiff.DateTime"},
        {SP_TAG_ARTIST, "tiff.Artist"},
        {SP_TAG_HOST_COMPUTER, "tiff.HostComputer"},
        {SP_TAG_COPYRIGHT, "tiff.Copyright"},
    };
    const sp_tiff *t = s->container;
    sp_status st = SP_OK;
    for (size_t i = 0; st == SP_OK && i < sizeof strings / sizeof strings[0]; i++) {
        st = add_string_tag(s, d, strings[i].tag, strings[i].key, err);
    }
    double xres = 0, yres = 0;
    bool has_x = sp_tiff_entry_double(t, sp_tiff_find(d, SP_TAG_X_RESOLUTION), 0, &xres);
    bool has_y = sp_tiff_entry_double(t, sp_tiff_find(d, SP_TAG_Y_RESOLUTION), 0, &yres);
    if (st == SP_OK && has_x) {
        st = sp_slide_set_number(s, "tiff.XResolution", xres, err);
    }
    if (st == SP_OK && has_y) {
        st = sp_slide_set_number(s, "tiff.YResolution", yres, err);
    }
    uint64_t unit = 2; /* TIFF default: inch */
    const sp_tiff_entry *ue = sp_tiff_find(d, SP_TAG_RESOLUTION_UNIT);
    if (ue != NULL && !sp_tiff_entry_uint(t, ue, 0, &unit)) {
        unit = 0;
    }
    if (st == SP_OK && ue != NULL) {
        const char *name = unit == 1 ? "none" : unit == 2 ? "inch" : unit == 3 ? "centimeter"
                                                                               : "unknown";
        st = sp_props_set(&s->props, "tiff.ResolutionUnit", name, err);
    }
    double microns = unit == 2 ? 25400.0 : unit == 3 ? 10000.0 : 0.0;
    if (st == SP_OK && mpp_from_resolution && microns > 0 && has_x && has_y && xres > 0 && yres > 0) {
        st = sp_slide_set_number(s, SP_PROPERTY_MPP_X, microns / xres, err);
        if (st == SP_OK) {
            st = sp_slide_set_number(s, SP_PROPERTY_MPP_Y, microns / yres, err);
        }
    }
    return st;
}

sp_status sp_tiff_slide_add_aperio_layout(sp_slide *s, sp_err *err) {
    const sp_tiff *t = s->container;
    sp_status st = SP_OK;
    for (uint32_t i = 0; st == SP_OK && i < t->n_dirs; i++) {
        const sp_tiff_dir *d = &t->dirs[i];
        if (d->width == 0 || d->height == 0) {
            continue;
        }
        if (d->tiled) {
            st = sp_tiff_slide_add_level(s, d, err);
        } else if (i == 1) {
            st = sp_tiff_slide_add_associated(s, "thumbnail", d, err);
        } else if (d->subfile_type == 1) {
            st = sp_tiff_slide_add_associated(s, "label", d, err);
        } else if (d->subfile_type == 9) {
            st = sp_tiff_slide_add_associated(s, "macro", d, err);
        }
    }
    return st;
}
