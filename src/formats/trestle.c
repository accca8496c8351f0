/* trestle.c — Trestle (MedScan): a tiled TIFF whose first Software tag starts "MedScan", whose
 * first ImageDescription is present, and whose every directory is tiled; each directory is a
 * level. The ImageDescription is a list of "key=value" pairs separated by ';', each kept as the
 * property trestle.KEY (key and value trimmed). Two of them shape the slide: "OverlapsXY= 64 64
 * 32 32 16 16" gives each level in turn the pixels by which its tiles overlap their right and
 * lower neighbours (levels past the list: none), and "Background Color=RRGGBB" the background.
 * The layout is OpenSlide 4's: tile (c, r) of a level starts at (c * (tile - overlap_x),
 * r * (tile - overlap_y)), so the level is its TIFF image less (tiles - 1) overlaps each way, and
 * where tiles overlap the lower-right one is seen (OpenSlide 4.0.1 paints them top-left first,
 * whatever the region). So level pixel (x, y) is pixel (x - c * advance, y - r * advance) of
 * TIFF tile (c, r) = (x / advance, y / advance), the last tile of a row or column also showing
 * what lies past its advance. A level tile here is one such advance-sized cell. Objective power
 * comes from "Objective Power" (an integer), the microns per pixel from XResolution and
 * YResolution (which Trestle fills with MPP, not pixels per unit), the "macro" from the JPEG
 * file beside the slide named with the slide's extension (after its path's last '.') replaced by
 * ".Full"; a missing or unreadable one leaves the slide without a macro, as in OpenSlide.
 * Stricter than OpenSlide: an overlap that is not a decimal number of pixels, and a level whose
 * overlap is not smaller than its tile, make the file malformed (OpenSlide reads garbage).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

#include "base/fill.h"
#include "base/strings.h"
#include "codecs/codec.h"
#include "formats/tiff_slide.h"
#include "io/paths.h"

static const char SOFTWARE_PREFIX[] = "MedScan";
static const char OVERLAPS_KEY[] = "OverlapsXY=";
static const char BACKGROUND_KEY[] = "Background Color=";

typedef struct trestle_level {
    const sp_tiff_dir *dir;
    int64_t advance_x, advance_y; /* tile size less the overlap: one cell of the level */
} trestle_level;

typedef struct trestle {
    trestle_level *levels;
    uint8_t *macro; /* the .Full file's JPEG bytes, or NULL */
    size_t macro_len;
} trestle;

/* ---- detect ---------------------------------------------------------------------------------- */

static bool trestle_detect(const sp_probe *p) {
    if (p->tiff == NULL || p->tiff->n_dirs == 0) {
        return false;
    }
    const sp_tiff_dir *first = &p->tiff->dirs[0];
    const char *software = sp_tiff_entry_string(sp_tiff_find(first, SP_TAG_SOFTWARE));
    if (software == NULL || strncmp(software, SOFTWARE_PREFIX, strlen(SOFTWARE_PREFIX)) != 0 ||
        first->description == NULL) {
        return false;
    }
    for (uint32_t i = 0; i < p->tiff->n_dirs; i++) {
        if (!p->tiff->dirs[i].tiled) {
            return false; /* OpenSlide leaves such a file to the generic TIFF reader */
        }
    }
    return true;
}

/* ---- the ImageDescription -------------------------------------------------------------------- */

static bool is_ascii_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

/* [*begin, *end) without leading and trailing ASCII white space. */
static void trim_span(const char **begin, const char **end) {
    while (*begin < *end && is_ascii_space(**begin)) {
        (*begin)++;
    }
    while (*end > *begin && is_ascii_space((*end)[-1])) {
        (*end)--;
    }
}

/* One OverlapsXY entry [p, end): a decimal number of pixels, white space around it allowed;
 * nothing at all (two spaces in a row, a trailing space) is 0, as OpenSlide reads it. */
static sp_status parse_overlap(const char *p, const char *end, int64_t *out, sp_err *err) {
    const char *b = p, *e = end;
    trim_span(&b, &e);
    int64_t v = 0;
    for (const char *c = b; c < e; c++) {
        if (*c < '0' || *c > '9' || v > (INT32_MAX - (*c - '0')) / 10) {
            return sp_err_set(err, SP_E_CORRUPT,
                              "the Trestle ImageDescription's OverlapsXY has \"%.*s\", not a "
                              "number of pixels",
                              (int)(end - p > 40 ? 40 : end - p), p);
        }
        v = v * 10 + (*c - '0');
    }
    *out = v;
    return SP_OK;
}

/* The overlaps of "OverlapsXY= X0 Y0 X1 Y1 ..." in [p, end): split at single spaces, the first
 * part being the key; an odd last entry is ignored, as in OpenSlide, but every entry must be a
 * number (a malformed list is malformed anywhere). */
static sp_status parse_overlaps(const sp_limits *limits, const char *p, const char *end,
                                int64_t **pairs, size_t *n_pairs, sp_err *err) {
    size_t entries = 0;
    for (const char *c = p; c < end; c++) {
        entries += *c == ' ';
    }
    free(*pairs); /* a later OverlapsXY wins */
    *pairs = NULL;
    *n_pairs = 0;
    size_t n = entries / 2;
    sp_status st = SP_OK;
    if (n > 0) {
        st = sp_calloc(limits, n * 2, sizeof **pairs, "the Trestle overlaps", (void **)pairs, err);
    }
    const char *part = (const char *)memchr(p, ' ', (size_t)(end - p));
    for (size_t i = 0; st == SP_OK && i < entries; i++) {
        part++; /* past the space */
        const char *stop = (const char *)memchr(part, ' ', (size_t)(end - part));
        stop = stop != NULL ? stop : end;
        int64_t v = 0;
        st = parse_overlap(part, stop, &v, err);
        if (st == SP_OK && i < n * 2) {
            (*pairs)[i] = v;
        }
        part = stop;
    }
    if (st == SP_OK) {
        *n_pairs = n;
    }
    return st;
}

/* "key=value" in [p, end) as trestle.KEY; an item without '=' (or empty) names no property
 * (OpenSlide 4.0.1 lists none for it either). */
static sp_status add_item_property(sp_slide *s, const char *p, const char *end, sp_err *err) {
    const char *eq = memchr(p, '=', (size_t)(end - p));
    if (eq == NULL) {
        return SP_OK;
    }
    const char *kb = p, *ke = eq, *vb = eq + 1, *ve = end;
    trim_span(&kb, &ke);
    trim_span(&vb, &ve);
    char *key = sp_strdup_printf("trestle.%.*s", (int)(ke - kb), kb);
    char *value = sp_strdup_printf("%.*s", (int)(ve - vb), vb);
    sp_status st = key != NULL && value != NULL
                       ? sp_props_set(&s->props, key, value, err)
                       : sp_err_set(err, SP_E_NOMEM, "out of memory reading the Trestle metadata");
    free(key);
    free(value);
    return st;
}

/* "Background Color=RRGGBB": the value, trimmed, must be one hexadecimal number (a sign and a
 * "0x" allowed, as OpenSlide 4.0.1 reads it), of which the low 24 bits are the colour; anything
 * else leaves the background white. */
static sp_status set_background(sp_slide *s, const char *p, const char *end, sp_err *err) {
    trim_span(&p, &end);
    char hex[64];
    if (p == end || (size_t)(end - p) >= sizeof hex) {
        return SP_OK;
    }
    memcpy(hex, p, (size_t)(end - p));
    hex[end - p] = '\0';
    char *stop;
    errno = 0;
    unsigned long long bg = strtoull(hex, &stop, 16);
    if (*stop != '\0' || errno != 0) {
        return SP_OK;
    }
    s->background[0] = (uint8_t)(bg >> 16 & 0xFF);
    s->background[1] = (uint8_t)(bg >> 8 & 0xFF);
    s->background[2] = (uint8_t)(bg & 0xFF);
    char text[8];
    snprintf(text, sizeof text, "%02X%02X%02X", s->background[0], s->background[1],
             s->background[2]);
    return sp_props_set(&s->props, "slidepipe.background-color", text, err);
}

static bool starts_with(const char *p, const char *end, const char *prefix) {
    size_t n = strlen(prefix);
    return (size_t)(end - p) >= n && memcmp(p, prefix, n) == 0;
}

/* Every item of the description, and the overlaps (pairs[2 * level], pairs[2 * level + 1]). */
static sp_status parse_description(sp_slide *s, const char *desc, int64_t **pairs, size_t *n_pairs,
                                   sp_err *err) {
    sp_status st = SP_OK;
    for (const char *p = desc; st == SP_OK;) {
        const char *end = strchr(p, ';');
        end = end != NULL ? end : p + strlen(p);
        st = add_item_property(s, p, end, err);
        if (st == SP_OK && starts_with(p, end, OVERLAPS_KEY)) {
            st = parse_overlaps(&s->limits, p, end, pairs, n_pairs, err);
        } else if (st == SP_OK && starts_with(p, end, BACKGROUND_KEY)) {
            st = set_background(s, p + strlen(BACKGROUND_KEY), end, err);
        }
        if (*end == '\0') {
            break;
        }
        p = end + 1;
    }
    /* "Objective Power", when it is an integer, written as one. */
    const char *power = sp_props_get(&s->props, "trestle.Objective Power");
    if (st == SP_OK && power != NULL && *power != '\0') {
        char *stop;
        long long v = strtoll(power, &stop, 10);
        if (*stop == '\0') {
            char text[32];
            snprintf(text, sizeof text, "%lld", v);
            st = sp_props_set(&s->props, SP_PROPERTY_OBJECTIVE_POWER, text, err);
        }
    }
    return st;
}

/* ---- reading --------------------------------------------------------------------------------- */

/* Where level tile (col, row) lies: the TIFF tile showing it and the cell's offset in that tile
 * (beyond the advance only in the last column or row). */
static void cell_source(const trestle_level *tl, int64_t col, int64_t row, uint64_t *index,
                        int64_t *u0, int64_t *v0, int64_t *valid_w, int64_t *valid_h) {
    const sp_tiff_dir *d = tl->dir;
    int64_t c = col < (int64_t)d->chunks_across ? col : (int64_t)d->chunks_across - 1;
    int64_t r = row < (int64_t)d->chunks_down ? row : (int64_t)d->chunks_down - 1;
    *index = (uint64_t)r * d->chunks_across + (uint64_t)c;
    *u0 = (col - c) * tl->advance_x;
    *v0 = (row - r) * tl->advance_y;
    /* The TIFF tile's pixels inside the TIFF image (an edge tile's padding is not shown). */
    int64_t tw = (int64_t)d->chunk_width, th = (int64_t)d->chunk_height;
    int64_t iw = (int64_t)d->width - c * tw, ih = (int64_t)d->height - r * th;
    *valid_w = iw < tw ? iw : tw;
    *valid_h = ih < th ? ih : th;
}

static sp_status trestle_read_tile(sp_slide *s, const sp_level *l, int64_t col, int64_t row,
                                   uint8_t *rgba, uint64_t stride, sp_err *err) {
    const trestle_level *tl = l->priv;
    const sp_tiff_dir *d = tl->dir;
    for (int64_t y = 0; y < l->tile_height; y++) {
        memset(rgba + (uint64_t)y * stride, 0, (size_t)l->tile_width * 4);
    }
    uint64_t index;
    int64_t u0, v0, vw, vh;
    cell_source(tl, col, row, &index, &u0, &v0, &vw, &vh);
    int64_t w = vw - u0 < l->tile_width ? vw - u0 : l->tile_width;
    int64_t h = vh - v0 < l->tile_height ? vh - v0 : l->tile_height;
    if (w <= 0 || h <= 0) {
        return SP_OK;
    }
    uint8_t *tile = NULL;
    uint64_t tile_stride = d->chunk_width * 4;
    sp_status st =
        sp_alloc(&s->limits, tile_stride * d->chunk_height, "a Trestle tile", (void **)&tile, err);
    if (st == SP_OK) {
        memset(tile, 0, (size_t)(tile_stride * d->chunk_height));
        st = sp_tiff_decode_chunk(s->container, d, index, tile, tile_stride, err);
    }
    for (int64_t y = 0; st == SP_OK && y < h; y++) {
        memcpy(rgba + (uint64_t)y * stride, tile + (uint64_t)(v0 + y) * tile_stride + u0 * 4,
               (size_t)w * 4);
    }
    free(tile);
    return st;
}

static unsigned trestle_area_scales(sp_slide *s, const sp_level *l) {
    return sp_tiff_slide_dir_area_scales(s, ((const trestle_level *)l->priv)->dir);
}

/* The area (x, y, w, h) of level tile (col, row) seen at 1/scale: the same area of its TIFF
 * tile, shifted by the cell's offset, decoded straight into dst. */
static sp_status trestle_read_tile_area(sp_slide *s, const sp_level *l, int64_t col, int64_t row,
                                        unsigned scale, int64_t x, int64_t y, int64_t w, int64_t h,
                                        sp_pixel_format format, uint8_t *dst, int64_t stride,
                                        const uint8_t *empty, sp_err *err) {
    const trestle_level *tl = l->priv;
    int bpp = sp_pixel_format_bytes(format);
    if ((trestle_area_scales(s, l) & scale) == 0 || (bpp != 3 && bpp != 4) ||
        tl->advance_x % scale != 0 || tl->advance_y % scale != 0) {
        return sp_err_set(err, SP_E_INVALID_ARG, "a Trestle level tile read at 1/%u", scale);
    }
    sp_fill_pixels(dst, stride, w, h, bpp, empty);
    uint64_t index;
    int64_t u0, v0, vw, vh;
    cell_source(tl, col, row, &index, &u0, &v0, &vw, &vh);
    int64_t k = scale, tx = u0 / k + x, ty = v0 / k + y;
    int64_t cols = (vw + k - 1) / k - tx, rows = (vh + k - 1) / k - ty;
    cols = cols < w ? cols : w;
    rows = rows < h ? rows : h;
    if (cols <= 0 || rows <= 0) {
        return SP_OK;
    }
    return sp_tiff_decode_chunk_area(s->container, tl->dir, index, scale, (uint64_t)tx,
                                     (uint64_t)ty, (uint64_t)cols, (uint64_t)rows, (unsigned)bpp,
                                     dst, (uint64_t)stride, empty, err);
}

static sp_status trestle_read_associated(sp_slide *s, const sp_associated *a, uint8_t *rgba,
                                         uint64_t stride, sp_err *err) {
    const trestle *tr = s->priv;
    return sp_jpeg_decode_rgba(tr->macro, tr->macro_len, NULL, 0, SP_JPEG_SPACE_AUTO,
                               (uint64_t)a->width, (uint64_t)a->height, rgba, (size_t)stride, err);
}

static void trestle_destroy(sp_slide *s) {
    trestle *tr = s->priv;
    if (tr != NULL) {
        free(tr->levels);
        free(tr->macro);
        free(tr);
        s->priv = NULL;
    }
    sp_tiff_slide_ops.destroy(s);
}

static const sp_slide_ops trestle_ops = {
    .read_tile = trestle_read_tile,
    .read_associated = trestle_read_associated,
    .destroy = trestle_destroy,
    .area_scales = trestle_area_scales,
    .read_tile_area = trestle_read_tile_area,
};

/* ---- open ------------------------------------------------------------------------------------ */

static sp_status add_level(sp_slide *s, trestle *tr, uint32_t i, const int64_t *pairs,
                           size_t n_pairs, sp_err *err) {
    const sp_tiff_dir *d = &((const sp_tiff *)s->container)->dirs[i];
    sp_status st = sp_tiff_check_decodable(s->container, d, err);
    if (st != SP_OK) {
        return st;
    }
    int64_t ox = i < n_pairs ? pairs[2 * i] : 0, oy = i < n_pairs ? pairs[2 * i + 1] : 0;
    int64_t tw = (int64_t)d->chunk_width, th = (int64_t)d->chunk_height;
    if (ox >= tw || oy >= th) {
        return sp_err_set(err, SP_E_CORRUPT,
                          "Trestle level %u: tiles of %lldx%lld pixels overlapping by %lldx%lld "
                          "(OverlapsXY) leave no tile advance",
                          i, (long long)tw, (long long)th, (long long)ox, (long long)oy);
    }
    if (d->width == 0 || d->height == 0 || d->chunks_across == 0 || d->chunks_down == 0) {
        return sp_err_set(err, SP_E_CORRUPT, "Trestle level %u is empty", i);
    }
    trestle_level *tl = &tr->levels[i];
    tl->dir = d;
    tl->advance_x = tw - ox;
    tl->advance_y = th - oy;
    sp_level l = {
        .width = (int64_t)d->width - ((int64_t)d->chunks_across - 1) * ox,
        .height = (int64_t)d->height - ((int64_t)d->chunks_down - 1) * oy,
        .tile_width = tl->advance_x,
        .tile_height = tl->advance_y,
        .compression = sp_tiff_compression_name(d->compression),
        .priv = tl,
    };
    return sp_slide_add_level(s, &l, err);
}

/* The macro: the JPEG file beside the slide, its path's extension replaced by ".Full". Any
 * failure (no such file, not a JPEG) only leaves it out. */
static sp_status add_macro(sp_slide *s, trestle *tr, const char *slide_path, sp_err *err) {
    const char *dot = strrchr(slide_path, '.');
    int stem = (int)(dot != NULL ? dot - slide_path : (ptrdiff_t)strlen(slide_path));
    char *path = sp_strdup_printf("%.*s.Full", stem, slide_path);
    if (path == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory opening the Trestle macro");
    }
    sp_err ignored = {0};
    sp_source *src = NULL;
    char *data = NULL;
    size_t len = 0;
    uint32_t w = 0, h = 0;
    int components = 0;
    if (sp_source_open_any(path, &src, &ignored) == SP_OK &&
        sp_source_read_whole(src, path, (uint64_t)s->limits.value[SP_LIMIT_MAX_ALLOC], &data, &len,
                             &ignored) == SP_OK &&
        sp_jpeg_read_header((const uint8_t *)data, len, NULL, 0, &w, &h, &components, &ignored) ==
            SP_OK) {
        tr->macro = (uint8_t *)data;
        tr->macro_len = len;
        data = NULL;
    }
    free(data);
    free(path);
    return tr->macro != NULL ? sp_slide_add_associated(s, "macro", w, h, NULL, err) : SP_OK;
}

static sp_status trestle_open(sp_slide *s, sp_probe *p, sp_err *err) {
    sp_tiff_slide_adopt(s, p);
    s->ops = &trestle_ops;
    s->prefetch = false; /* no prefetch op: level tiles are not the TIFF's tiles */
    const sp_tiff *t = s->container;
    trestle *tr = calloc(1, sizeof *tr);
    s->priv = tr;
    if (tr == NULL || (tr->levels = calloc(t->n_dirs, sizeof *tr->levels)) == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory opening a Trestle slide");
    }
    int64_t *pairs = NULL;
    size_t n_pairs = 0;
    sp_status st = parse_description(s, t->dirs[0].description, &pairs, &n_pairs, err);
    for (uint32_t i = 0; st == SP_OK && i < t->n_dirs; i++) {
        st = add_level(s, tr, i, pairs, n_pairs, err);
    }
    free(pairs);
    if (st == SP_OK) {
        st = sp_tiff_slide_add_properties(s, &t->dirs[0], false, err);
    }
    /* XResolution and YResolution hold the microns per pixel themselves. */
    double mpp[2];
    for (int k = 0; st == SP_OK && k < 2; k++) {
        uint16_t tag = k == 0 ? SP_TAG_X_RESOLUTION : SP_TAG_Y_RESOLUTION;
        if (sp_tiff_entry_double(t, sp_tiff_find(&t->dirs[0], tag), 0, &mpp[k]) &&
            isfinite(mpp[k])) {
            st =
                sp_slide_set_number(s, k == 0 ? SP_PROPERTY_MPP_X : SP_PROPERTY_MPP_Y, mpp[k], err);
        }
    }
    if (st == SP_OK && p->path != NULL) {
        st = add_macro(s, tr, p->path, err);
    }
    return st;
}

const sp_format sp_format_trestle = {"trestle", trestle_detect, trestle_open};
