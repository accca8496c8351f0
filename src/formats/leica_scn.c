/* leica_scn.c — Leica SCN (SCN400 and the Aperio/Leica scanners that write it): a tiled BigTIFF
 * whose first ImageDescription is an XML <scn> document in the 2010/03/10 or 2010/10/01 Leica
 * namespace. Its <collection> is the glass slide (sizeX/sizeY in nanometres) holding <image>s,
 * each placed on the slide by its <view> (offset and size in nanometres) and stored as one TIFF
 * directory per <dimension> (a resolution; only focal plane z=0 is read). OpenSlide's rules, which
 * this follows: the image covering the whole collection at offset 0 is the macro (the largest of
 * its dimensions becomes the "macro" associated image); every other brightfield image is a main
 * image, and all main images together make the pyramid: level k holds the k-th largest dimension
 * of each (they must have the same illumination, objective and dimension count, and resolutions
 * within 2%), at the finest of their nanometres per pixel, each placed at its offset converted to
 * that level's pixels (truncated), the level covering the whole collection (rounded up). Where no
 * main image lies the level is transparent; a later image paints over an earlier one. Images of
 * another illumination (fluorescence) are skipped. Properties: leica.barcode (base64-decoded in
 * the 2010/10/01 namespace), the first main image's aperture, creation date, device model and
 * version, illumination source and objective (which, when an integer, is the objective power),
 * the TIFF tags of level 0's first directory without the XML; the MPP from that directory's
 * resolution when its unit is the centimetre. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fill.h"
#include "formats/tiff_slide.h"
#include "formats/vendor_xml.h"

static const char *const leica_namespaces[2] = {
    "http://www.leica-microsystems.com/scn/2010/03/10",
    "http://www.leica-microsystems.com/scn/2010/10/01",
};

/* One TIFF directory of a main image, placed on a level. */
typedef struct scn_area {
    const sp_tiff_dir *dir;
    int64_t x, y; /* level pixels */
} scn_area;

typedef struct scn_level {
    scn_area *areas;
    int n_areas;
    double nm_per_pixel;
    bool parts; /* every area's tiles decode in part (JPEG, JPEG 2000) */
} scn_level;

typedef struct leica {
    scn_level *levels;
    int n_levels;
} leica;

/* What the XML says about one image. */
typedef struct scn_dimension {
    int64_t ifd, width, height;
    double nm_per_pixel;
} scn_dimension;

typedef struct scn_image {
    char *creation_date, *device_model, *device_version, *illumination, *objective, *aperture;
    bool is_macro;
    int64_t nm_across, nm_down, nm_x, nm_y;
    scn_dimension *dims;
    int n_dims;
} scn_image;

typedef struct scn_collection {
    char *barcode;
    int64_t nm_across, nm_down;
    scn_image *images;
    int n_images;
} scn_collection;

static bool has_leica_namespace(xmlDoc *doc) {
    xmlNode *root = xmlDocGetRootElement(doc);
    if (root == NULL || root->ns == NULL || root->ns->prefix != NULL || root->ns->href == NULL) {
        return false;
    }
    for (int i = 0; i < 2; i++) {
        if (strcmp((const char *)root->ns->href, leica_namespaces[i]) == 0) {
            return true;
        }
    }
    return false;
}

static bool leica_detect(const sp_probe *p) {
    if (p->tiff == NULL || !p->tiff->dirs[0].tiled) {
        return false;
    }
    const char *desc = p->tiff->dirs[0].description;
    if (desc == NULL ||
        (strstr(desc, leica_namespaces[0]) == NULL && strstr(desc, leica_namespaces[1]) == NULL)) {
        return false;
    }
    xmlDoc *doc = NULL;
    sp_err ignored = {0};
    if (sp_vendor_xml_parse(desc, strlen(desc), p->limits, "the Leica XML", &doc, &ignored) !=
        SP_OK) {
        return false;
    }
    bool ok = has_leica_namespace(doc);
    xmlFreeDoc(doc);
    return ok;
}

/* ---- reading: a level tile is painted from the areas under it ------------------------------ */

/* Copy the opaque pixels of decoded chunk `buf` (cw x ch at area pixel (cx, cy)) that fall in
 * the area rectangle [ax0, ax1) x [ay0, ay1) (area pixels) into the tile at (tx, ty) = the tile's
 * origin in area pixels. Transparent pixels (a missing chunk) leave what is below. */
static void paint_chunk(const uint8_t *buf, int64_t cw, int64_t ch, int64_t cx, int64_t cy,
                        int64_t ax0, int64_t ay0, int64_t ax1, int64_t ay1, int64_t tx, int64_t ty,
                        uint8_t *rgba, uint64_t stride) {
    int64_t x0 = cx > ax0 ? cx : ax0, x1 = cx + cw < ax1 ? cx + cw : ax1;
    int64_t y0 = cy > ay0 ? cy : ay0, y1 = cy + ch < ay1 ? cy + ch : ay1;
    for (int64_t y = y0; y < y1; y++) {
        const uint8_t *src = buf + (uint64_t)((y - cy) * cw + (x0 - cx)) * 4;
        uint8_t *dst = rgba + (uint64_t)(y - ty) * stride + (uint64_t)(x0 - tx) * 4;
        for (int64_t x = x0; x < x1; x++, src += 4, dst += 4) {
            if (src[3] != 0) {
                memcpy(dst, src, 4);
            }
        }
    }
}

/* Decode straight into the tile only the parts of the chunks under [ax0, ax1) x [ay0, ay1)
 * (area pixels, inside the image); missing chunks leave what is below, as transparent pixels
 * painted over it would. (tx, ty) is the tile's origin in area pixels. */
static sp_status paint_area_parts(sp_slide *s, const sp_tiff_dir *d, int64_t ax0, int64_t ay0,
                                  int64_t ax1, int64_t ay1, int64_t tx, int64_t ty, unsigned bpp,
                                  uint8_t *rgba, uint64_t stride, sp_err *err) {
    static const uint8_t transparent[4] = {0, 0, 0, 0};
    int64_t cw = (int64_t)d->chunk_width, ch = (int64_t)d->chunk_height;
    sp_status st = SP_OK;
    for (int64_t row = ay0 / ch; st == SP_OK && row <= (ay1 - 1) / ch; row++) {
        for (int64_t col = ax0 / cw; st == SP_OK && col <= (ax1 - 1) / cw; col++) {
            uint64_t index = (uint64_t)row * d->chunks_across + (uint64_t)col;
            if (d->chunk_offsets[index] == 0 || d->chunk_byte_counts[index] == 0) {
                continue;
            }
            int64_t x0 = col * cw > ax0 ? col * cw : ax0,
                    x1 = (col + 1) * cw < ax1 ? (col + 1) * cw : ax1;
            int64_t y0 = row * ch > ay0 ? row * ch : ay0,
                    y1 = (row + 1) * ch < ay1 ? (row + 1) * ch : ay1;
            uint8_t *dst = rgba + (uint64_t)(y0 - ty) * stride + (uint64_t)(x0 - tx) * bpp;
            st = sp_tiff_decode_chunk_area(s->container, d, index, 1, (uint64_t)(x0 - col * cw),
                                           (uint64_t)(y0 - row * ch), (uint64_t)(x1 - x0),
                                           (uint64_t)(y1 - y0), bpp, dst, stride, transparent, err);
        }
    }
    return st;
}

/* Paint area `a` into the rectangle (x0, y0, w, h) of level pixels held by `rgba` (bpp 3 or 4;
 * 4 unless `parts`). */
static sp_status paint_area(sp_slide *s, const scn_area *a, int64_t x0, int64_t y0, int64_t w,
                            int64_t h, bool parts, unsigned bpp, uint8_t *rgba, uint64_t stride,
                            sp_err *err) {
    const sp_tiff_dir *d = a->dir;
    /* The tile and the area's image, in area pixels. */
    int64_t tx = x0 - a->x, ty = y0 - a->y;
    int64_t ax0 = tx > 0 ? tx : 0, ay0 = ty > 0 ? ty : 0;
    int64_t ax1 = tx + w < (int64_t)d->width ? tx + w : (int64_t)d->width;
    int64_t ay1 = ty + h < (int64_t)d->height ? ty + h : (int64_t)d->height;
    if (ax0 >= ax1 || ay0 >= ay1) {
        return SP_OK;
    }
    int64_t cw = (int64_t)d->chunk_width, ch = (int64_t)d->chunk_height;
    if (parts) {
        return paint_area_parts(s, d, ax0, ay0, ax1, ay1, tx, ty, bpp, rgba, stride, err);
    }
    uint8_t *buf = NULL;
    sp_status st =
        sp_alloc(&s->limits, (uint64_t)cw * (uint64_t)ch * 4, "a Leica tile", (void **)&buf, err);
    for (int64_t row = ay0 / ch; st == SP_OK && row <= (ay1 - 1) / ch; row++) {
        for (int64_t col = ax0 / cw; st == SP_OK && col <= (ax1 - 1) / cw; col++) {
            memset(buf, 0, (size_t)(cw * ch * 4));
            st = sp_tiff_decode_chunk(s->container, d,
                                      (uint64_t)row * d->chunks_across + (uint64_t)col, buf,
                                      (uint64_t)cw * 4, err);
            if (st == SP_OK) {
                paint_chunk(buf, cw, ch, col * cw, row * ch, ax0, ay0, ax1, ay1, tx, ty, rgba,
                            stride);
            }
        }
    }
    free(buf);
    return st;
}

static sp_status leica_read_tile(sp_slide *s, const sp_level *l, int64_t col, int64_t row,
                                 uint8_t *rgba, uint64_t stride, sp_err *err) {
    const scn_level *sl = l->priv;
    for (int64_t y = 0; y < l->tile_height; y++) {
        memset(rgba + (uint64_t)y * stride, 0, (size_t)l->tile_width * 4);
    }
    sp_status st = SP_OK;
    for (int i = 0; st == SP_OK && i < sl->n_areas; i++) {
        st = paint_area(s, &sl->areas[i], col * l->tile_width, row * l->tile_height, l->tile_width,
                        l->tile_height, sl->parts, 4, rgba, stride, err);
    }
    return st;
}

static unsigned leica_area_scales(sp_slide *s, const sp_level *l) {
    (void)s;
    return ((const scn_level *)l->priv)->parts ? 1u : 0u;
}

/* Only the part (x, y, w, h) of a level tile: each area decodes only the parts of its tiles under
 * it, so a region decodes about its own pixels whatever the areas' offsets. */
static sp_status leica_read_tile_area(sp_slide *s, const sp_level *l, int64_t col, int64_t row,
                                      unsigned scale, int64_t x, int64_t y, int64_t w, int64_t h,
                                      sp_pixel_format format, uint8_t *dst, int64_t stride,
                                      const uint8_t *empty, sp_err *err) {
    const scn_level *sl = l->priv;
    int bpp = sp_pixel_format_bytes(format);
    if (scale != 1 || !sl->parts || (bpp != 3 && bpp != 4)) {
        return sp_err_set(err, SP_E_INVALID_ARG, "a Leica level tile read at 1/%u", scale);
    }
    sp_fill_pixels(dst, stride, w, h, bpp, empty);
    sp_status st = SP_OK;
    for (int i = 0; st == SP_OK && i < sl->n_areas; i++) {
        st = paint_area(s, &sl->areas[i], col * l->tile_width + x, row * l->tile_height + y, w, h,
                        true, (unsigned)bpp, dst, (uint64_t)stride, err);
    }
    return st;
}

static void leica_destroy(sp_slide *s) {
    leica *le = s->priv;
    if (le != NULL) {
        for (int i = 0; i < le->n_levels; i++) {
            free(le->levels[i].areas);
        }
        free(le->levels);
        free(le);
        s->priv = NULL;
    }
    sp_tiff_slide_ops.destroy(s);
}

static const sp_slide_ops leica_ops = {
    .read_tile = leica_read_tile,
    .read_associated = sp_tiff_slide_read_associated,
    .destroy = leica_destroy,
    .area_scales = leica_area_scales,
    .read_tile_area = leica_read_tile_area,
};

/* ---- the XML ------------------------------------------------------------------------------- */

static void collection_free(scn_collection *c) {
    for (int i = 0; i < c->n_images; i++) {
        scn_image *im = &c->images[i];
        xmlFree(im->creation_date);
        xmlFree(im->device_model);
        xmlFree(im->device_version);
        xmlFree(im->illumination);
        xmlFree(im->objective);
        xmlFree(im->aperture);
        free(im->dims);
    }
    free(c->images);
    free(c->barcode);
}

/* An integer attribute (the whole value, base 10). */
static sp_status int_attr(xmlNode *node, const char *name, int64_t *out, sp_err *err) {
    xmlChar *v = xmlGetProp(node, (const xmlChar *)name);
    char *end = NULL;
    errno = 0;
    long long n = v != NULL ? strtoll((const char *)v, &end, 10) : 0;
    bool ok = v != NULL && *v != '\0' && *end == '\0' && errno == 0;
    xmlFree(v);
    if (!ok) {
        return sp_err_set(err, SP_E_CORRUPT, "the Leica XML's <%s> has no integer %s",
                          (const char *)node->name, name);
    }
    *out = n;
    return SP_OK;
}

static int dimension_cmp(const void *a, const void *b) {
    const scn_dimension *x = a, *y = b;
    return (x->width < y->width) - (x->width > y->width);
}

/* Base64 text to a NUL-terminated string (characters outside the alphabet skipped). */
static char *base64_string(const char *text) {
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t n = strlen(text), k = 0;
    char *out = malloc(n / 4 * 3 + 4);
    if (out == NULL) {
        return NULL;
    }
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n && text[i] != '='; i++) {
        const char *p = text[i] != '\0' ? strchr(alphabet, text[i]) : NULL;
        if (p == NULL) {
            continue;
        }
        acc = (acc << 6 | (uint32_t)(p - alphabet)) & 0xFFFFFF;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[k++] = (char)(acc >> bits);
        }
    }
    out[k] = '\0';
    return out;
}

static sp_status parse_image(xmlDoc *doc, xmlNode *node, const scn_collection *c, scn_image *im,
                             sp_err *err) {
    xmlXPathObject *view = sp_vendor_xml_select(doc, node, "d:view");
    if (view == NULL) {
        return sp_err_set(err, SP_E_CORRUPT, "a Leica <image> without a <view>");
    }
    xmlNode *v = view->nodesetval->nodeTab[0];
    sp_status st = int_attr(v, "sizeX", &im->nm_across, err);
    if (st == SP_OK) {
        st = int_attr(v, "sizeY", &im->nm_down, err);
    }
    if (st == SP_OK) {
        st = int_attr(v, "offsetX", &im->nm_x, err);
    }
    if (st == SP_OK) {
        st = int_attr(v, "offsetY", &im->nm_y, err);
    }
    xmlXPathFreeObject(view);
    if (st != SP_OK) {
        return st;
    }
    im->creation_date = sp_vendor_xml_string(doc, node, "d:creationDate/text()");
    im->device_model = sp_vendor_xml_string(doc, node, "d:device/@model");
    im->device_version = sp_vendor_xml_string(doc, node, "d:device/@version");
    im->illumination = sp_vendor_xml_string(
        doc, node, "d:scanSettings/d:illuminationSettings/d:illuminationSource/text()");
    im->objective =
        sp_vendor_xml_string(doc, node, "d:scanSettings/d:objectiveSettings/d:objective/text()");
    im->aperture = sp_vendor_xml_string(
        doc, node, "d:scanSettings/d:illuminationSettings/d:numericalAperture/text()");
    im->is_macro = im->nm_x == 0 && im->nm_y == 0 && im->nm_across == c->nm_across &&
                   im->nm_down == c->nm_down;
    xmlXPathObject *dims = sp_vendor_xml_select(doc, node, "d:pixels/d:dimension");
    if (dims == NULL) {
        return sp_err_set(err, SP_E_CORRUPT, "a Leica <image> without a <dimension>");
    }
    im->dims = calloc((size_t)dims->nodesetval->nodeNr, sizeof *im->dims);
    if (im->dims == NULL) {
        st = sp_err_set(err, SP_E_NOMEM, "out of memory reading the Leica XML");
    }
    for (int i = 0; st == SP_OK && i < dims->nodesetval->nodeNr; i++) {
        xmlNode *dn = dims->nodesetval->nodeTab[i];
        xmlChar *z = xmlGetProp(dn, (const xmlChar *)"z");
        bool other_plane = z != NULL && strcmp((const char *)z, "0") != 0;
        xmlFree(z);
        if (other_plane) {
            continue; /* focal planes other than z=0 are not read */
        }
        scn_dimension *d = &im->dims[im->n_dims];
        st = int_attr(dn, "ifd", &d->ifd, err);
        if (st == SP_OK) {
            st = int_attr(dn, "sizeX", &d->width, err);
        }
        if (st == SP_OK) {
            st = int_attr(dn, "sizeY", &d->height, err);
        }
        if (st == SP_OK && (d->width <= 0 || d->height <= 0)) {
            st = sp_err_set(err, SP_E_CORRUPT, "a Leica <dimension> of %lldx%lld pixels",
                            (long long)d->width, (long long)d->height);
        }
        if (st == SP_OK) {
            d->nm_per_pixel = (double)im->nm_across / (double)d->width;
            im->n_dims++;
        }
    }
    xmlXPathFreeObject(dims);
    if (st == SP_OK && im->n_dims > 1) {
        qsort(im->dims, (size_t)im->n_dims, sizeof *im->dims, dimension_cmp);
    }
    return st;
}

static sp_status parse_collection(xmlDoc *doc, scn_collection *c, sp_err *err) {
    xmlXPathObject *col = sp_vendor_xml_select(doc, NULL, "/d:scn/d:collection");
    if (col == NULL) {
        return sp_err_set(err, SP_E_CORRUPT, "the Leica XML has no <collection>");
    }
    xmlNode *cn = col->nodesetval->nodeTab[0];
    xmlXPathFreeObject(col);
    char *barcode = sp_vendor_xml_string(doc, NULL, "/d:scn/d:collection/d:barcode/text()");
    if (barcode != NULL) {
        c->barcode = base64_string(barcode);
        xmlFree(barcode);
    } else {
        /* The 2010/03/10 namespace's attribute, kept as it is (whether it is base64 is unknown). */
        char *attr = sp_vendor_xml_string(doc, NULL, "/d:scn/d:collection/@barcode");
        c->barcode = attr != NULL ? strdup(attr) : NULL;
        xmlFree(attr);
    }
    sp_status st = int_attr(cn, "sizeX", &c->nm_across, err);
    if (st == SP_OK) {
        st = int_attr(cn, "sizeY", &c->nm_down, err);
    }
    if (st != SP_OK) {
        return st;
    }
    xmlXPathObject *images = sp_vendor_xml_select(doc, cn, "d:image");
    if (images == NULL) {
        return sp_err_set(err, SP_E_CORRUPT, "the Leica XML has no <image>");
    }
    c->images = calloc((size_t)images->nodesetval->nodeNr, sizeof *c->images);
    if (c->images == NULL) {
        st = sp_err_set(err, SP_E_NOMEM, "out of memory reading the Leica XML");
    }
    for (int i = 0; st == SP_OK && i < images->nodesetval->nodeNr; i++) {
        st = parse_image(doc, images->nodesetval->nodeTab[i], c, &c->images[i], err);
        c->n_images++;
    }
    xmlXPathFreeObject(images);
    return st;
}

/* ---- open ---------------------------------------------------------------------------------- */

static bool is_brightfield(const scn_image *im) {
    return im->illumination != NULL && strcmp(im->illumination, "brightfield") == 0;
}

static bool same_text(const char *a, const char *b) {
    return strcmp(a != NULL ? a : "", b != NULL ? b : "") == 0;
}

/* The TIFF directory a <dimension> names: tiled and decodable. */
static sp_status dimension_dir(const sp_tiff *t, const scn_dimension *d, const sp_tiff_dir **out,
                               sp_err *err) {
    if (d->ifd < 0 || d->ifd >= (int64_t)t->n_dirs) {
        return sp_err_set(err, SP_E_CORRUPT, "the Leica XML names TIFF directory %lld of %u",
                          (long long)d->ifd, t->n_dirs);
    }
    *out = &t->dirs[d->ifd];
    if (!(*out)->tiled) {
        return sp_err_set(err, SP_E_CORRUPT, "Leica TIFF directory %lld is not tiled",
                          (long long)d->ifd);
    }
    return sp_tiff_check_decodable(t, *out, err);
}

static sp_status set_text(sp_slide *s, const char *key, const char *value, sp_err *err) {
    return value != NULL ? sp_props_set(&s->props, key, value, err) : SP_OK;
}

static sp_status add_first_image_properties(sp_slide *s, const scn_image *im, sp_err *err) {
    sp_status st = set_text(s, "leica.aperture", im->aperture, err);
    if (st == SP_OK) {
        st = set_text(s, "leica.creation-date", im->creation_date, err);
    }
    if (st == SP_OK) {
        st = set_text(s, "leica.device-model", im->device_model, err);
    }
    if (st == SP_OK) {
        st = set_text(s, "leica.device-version", im->device_version, err);
    }
    if (st == SP_OK) {
        st = set_text(s, "leica.illumination-source", im->illumination, err);
    }
    if (st == SP_OK) {
        st = set_text(s, "leica.objective", im->objective, err);
    }
    if (st == SP_OK && im->objective != NULL && im->objective[0] != '\0') {
        char *end;
        errno = 0;
        long long power = strtoll(im->objective, &end, 10);
        if (*end == '\0' && errno == 0) {
            st = sp_slide_set_number(s, SP_PROPERTY_OBJECTIVE_POWER, (double)power, err);
        }
    }
    return st;
}

/* The pyramid from the main images (see the file's header). */
static sp_status build_levels(sp_slide *s, const scn_collection *c, sp_err *err) {
    const sp_tiff *t = s->container;
    leica *le = s->priv;
    const scn_image *first = NULL;
    int n_main = 0;
    for (int i = 0; i < c->n_images; i++) {
        n_main += !c->images[i].is_macro && is_brightfield(&c->images[i]);
    }
    sp_status st = SP_OK;
    for (int i = 0; st == SP_OK && i < c->n_images; i++) {
        const scn_image *im = &c->images[i];
        if (im->is_macro || !is_brightfield(im)) {
            continue;
        }
        if (first == NULL) {
            first = im;
            st = add_first_image_properties(s, im, err);
            le->levels = calloc((size_t)im->n_dims, sizeof *le->levels);
            if (st == SP_OK && le->levels == NULL && im->n_dims > 0) {
                st = sp_err_set(err, SP_E_NOMEM, "out of memory opening a Leica slide");
            }
            le->n_levels = im->n_dims;
            for (int k = 0; st == SP_OK && k < im->n_dims; k++) {
                le->levels[k].areas = calloc((size_t)n_main, sizeof *le->levels[k].areas);
                le->levels[k].nm_per_pixel = im->dims[k].nm_per_pixel;
                if (le->levels[k].areas == NULL) {
                    st = sp_err_set(err, SP_E_NOMEM, "out of memory opening a Leica slide");
                }
            }
        } else if (!same_text(im->illumination, first->illumination) ||
                   !same_text(im->objective, first->objective) || im->n_dims != first->n_dims) {
            st = sp_err_set(err, SP_E_UNSUPPORTED,
                            "Leica main images that differ (illumination, objective or "
                            "resolutions) are not read, as in OpenSlide");
        }
        for (int k = 0; st == SP_OK && k < im->n_dims; k++) {
            scn_level *sl = &le->levels[k];
            const scn_dimension *d = &im->dims[k];
            if (im != first) {
                double ref = first->dims[k].nm_per_pixel;
                if (1 - fabs(d->nm_per_pixel - ref) / ref < 0.98) {
                    st = sp_err_set(err, SP_E_CORRUPT,
                                    "Leica main images with inconsistent resolutions");
                    break;
                }
                sl->nm_per_pixel = fmin(sl->nm_per_pixel, d->nm_per_pixel);
            }
            scn_area *a = &sl->areas[sl->n_areas];
            st = dimension_dir(t, d, &a->dir, err);
            if (st == SP_OK) {
                a->x = im->nm_x; /* nanometres until the level's scale is known */
                a->y = im->nm_y;
                sl->n_areas++;
            }
        }
    }
    if (st == SP_OK && first == NULL) {
        st = sp_err_set(err, SP_E_CORRUPT, "the Leica XML has no brightfield main image");
    }
    for (int k = 0; st == SP_OK && k < le->n_levels; k++) {
        scn_level *sl = &le->levels[k];
        double w = ceil((double)c->nm_across / sl->nm_per_pixel);
        double h = ceil((double)c->nm_down / sl->nm_per_pixel);
        if (!(w >= 1 && h >= 1 && w < 9e15 && h < 9e15)) {
            st = sp_err_set(err, SP_E_CORRUPT, "a Leica level of %gx%g pixels", w, h);
            break;
        }
        for (int i = 0; i < sl->n_areas; i++) {
            sl->areas[i].x = (int64_t)((double)sl->areas[i].x / sl->nm_per_pixel);
            sl->areas[i].y = (int64_t)((double)sl->areas[i].y / sl->nm_per_pixel);
        }
        sl->parts = true;
        for (int i = 0; i < sl->n_areas; i++) {
            sl->parts = sl->parts && (sp_tiff_area_scales(t, sl->areas[i].dir) & 1u) != 0;
        }
        const sp_tiff_dir *d0 = sl->areas[0].dir;
        sp_level l = {
            .width = (int64_t)w,
            .height = (int64_t)h,
            .tile_width = (int64_t)d0->chunk_width,
            .tile_height = (int64_t)d0->chunk_height,
            .compression = sp_tiff_compression_name(d0->compression),
            .priv = sl,
        };
        st = sp_slide_add_level(s, &l, err);
    }
    return st;
}

static sp_status add_macro(sp_slide *s, const scn_collection *c, sp_err *err) {
    const sp_tiff *t = s->container;
    bool have = false;
    for (int i = 0; i < c->n_images; i++) {
        const scn_image *im = &c->images[i];
        if (!im->is_macro || !is_brightfield(im) || im->n_dims == 0) {
            continue;
        }
        if (have) {
            return sp_err_set(err, SP_E_CORRUPT, "the Leica XML has several macro images");
        }
        const sp_tiff_dir *d = NULL;
        sp_status st = dimension_dir(t, &im->dims[0], &d, err);
        if (st == SP_OK) {
            st = sp_tiff_slide_add_associated(s, "macro", d, err);
        }
        if (st != SP_OK) {
            return st;
        }
        have = true;
    }
    return SP_OK;
}

static sp_status add_tiff_properties(sp_slide *s, sp_err *err) {
    const sp_tiff *t = s->container;
    const sp_tiff_dir *d = ((const scn_level *)s->levels[0].priv)->areas[0].dir;
    sp_status st = sp_tiff_slide_add_properties(s, d, false, err);
    sp_props_remove(&s->props, "tiff.ImageDescription");
    uint64_t unit = 2;
    const sp_tiff_entry *ue = sp_tiff_find(d, SP_TAG_RESOLUTION_UNIT);
    if (ue != NULL && !sp_tiff_entry_uint(t, ue, 0, &unit)) {
        unit = 0;
    }
    static const struct {
        uint16_t tag;
        const char *key;
    } res[2] = {{SP_TAG_X_RESOLUTION, SP_PROPERTY_MPP_X}, {SP_TAG_Y_RESOLUTION, SP_PROPERTY_MPP_Y}};
    for (int i = 0; st == SP_OK && unit == 3 && i < 2; i++) {
        double v;
        if (sp_tiff_entry_double(t, sp_tiff_find(d, res[i].tag), 0, &v)) {
            /* Through a float, as libtiff hands the resolution to OpenSlide. */
            st = sp_slide_set_number(s, res[i].key, 10000.0 / (double)(float)v, err);
        }
    }
    return st;
}

static sp_status leica_open(sp_slide *s, sp_probe *p, sp_err *err) {
    sp_tiff_slide_adopt(s, p);
    s->ops = &leica_ops;
    s->prefetch = false; /* no prefetch op: a level tile is painted from several directories */
    const sp_tiff *t = s->container;
    leica *le = calloc(1, sizeof *le);
    s->priv = le;
    if (le == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory opening a Leica slide");
    }
    const char *desc = t->dirs[0].description;
    xmlDoc *doc = NULL;
    scn_collection c = {0};
    sp_status st = sp_vendor_xml_parse(desc, desc != NULL ? strlen(desc) : 0, &s->limits,
                                       "the Leica XML", &doc, err);
    if (st == SP_OK) {
        st = parse_collection(doc, &c, err);
    }
    xmlFreeDoc(doc);
    if (st == SP_OK && c.barcode != NULL) {
        st = sp_props_set(&s->props, "leica.barcode", c.barcode, err);
    }
    if (st == SP_OK) {
        st = build_levels(s, &c, err);
    }
    if (st == SP_OK) {
        st = add_macro(s, &c, err);
    }
    if (st == SP_OK) {
        st = add_tiff_properties(s, err);
    }
    collection_free(&c);
    return st;
}

const sp_format sp_format_leica_scn = {"leica", leica_detect, leica_open};
