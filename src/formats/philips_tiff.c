/* philips_tiff.c — Philips TIFF (the IntelliSite scanners' export): a TIFF whose Software starts
 * "Philips" and whose first ImageDescription is an XML DataObject of ObjectType "DPUfsImport".
 * Every tiled directory of the main chain is a level (each after the first must be marked
 * reduced-resolution, and none larger than the one before). The stored level sizes are padded to
 * whole tiles, so, as OpenSlide does, the XML's per-level DICOM_PIXEL_SPACING gives each level's
 * downsample (rounded to an integer) and a level's size is level 0's divided by it; the padding
 * beyond is not shown. Slides with several scanned areas are sparse: tiles never written have a
 * zero byte count and read as transparent, like any missing TIFF tile. The label and macro are
 * stripped directories whose ImageDescription starts "Label" / "Macro", or else base64 JPEGs in
 * the XML (PIM_DP_IMAGE_DATA of the LABELIMAGE / MACROIMAGE scanned image). Properties: the
 * XML's attributes as philips.NAME (the first WSI image's own attributes flattened in, the pixel
 * data representations as philips.PIIM_PIXEL_DATA_REPRESENTATION_SEQUENCE[i].NAME), the TIFF tags
 * except the XML description; MPP from DICOM_PIXEL_SPACING (millimetres, row then column) and the
 * objective power from DICOM_DERIVATION_DESCRIPTION's "levels=" item. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codecs/codec.h"
#include "formats/tiff_slide.h"
#include "formats/vendor_xml.h"

#define PHILIPS_WSI "[Attribute/@Name='PIM_DP_IMAGE_TYPE' and Attribute/text()='%s']"
#define PHILIPS_SCANNED "/DataObject/Attribute[@Name='PIM_DP_SCANNED_IMAGES']/Array/DataObject"

/* An associated image: a TIFF directory, or a JPEG decoded from the XML at open. */
typedef struct philips_assoc {
    const sp_tiff_dir *dir;
    uint8_t *jpeg;
    size_t jpeg_len;
} philips_assoc;

typedef struct philips {
    philips_assoc assoc[2]; /* label, macro */
} philips;

static const char *const assoc_names[2] = {"label", "macro"};
static const char *const assoc_types[2] = {"LABELIMAGE", "MACROIMAGE"};
static const char *const assoc_prefixes[2] = {"Label", "Macro"};

static bool philips_detect(const sp_probe *p) {
    if (p->tiff == NULL) {
        return false;
    }
    const sp_tiff_dir *d = &p->tiff->dirs[0];
    const char *software = sp_tiff_entry_string(sp_tiff_find(d, SP_TAG_SOFTWARE));
    return software != NULL && strncmp(software, "Philips", 7) == 0 &&
           sp_vendor_xml_root_is(d->description, p->limits, "DataObject", "ObjectType",
                                 "DPUfsImport");
}

/* ---- ops: levels are TIFF directories, associated images TIFF directories or XML JPEGs ---- */

static sp_status philips_read_tile(sp_slide *s, const sp_level *l, int64_t col, int64_t row,
                                   uint8_t *rgba, uint64_t stride, sp_err *err) {
    return sp_tiff_slide_ops.read_tile(s, l, col, row, rgba, stride, err);
}

static unsigned philips_area_scales(sp_slide *s, const sp_level *l) {
    return sp_tiff_slide_ops.area_scales(s, l);
}

static sp_status philips_read_tile_area(sp_slide *s, const sp_level *l, int64_t col, int64_t row,
                                        unsigned scale, int64_t x, int64_t y, int64_t w, int64_t h,
                                        sp_pixel_format format, uint8_t *dst, int64_t stride,
                                        const uint8_t *empty, sp_err *err) {
    return sp_tiff_slide_ops.read_tile_area(s, l, col, row, scale, x, y, w, h, format, dst, stride,
                                            empty, err);
}

static void philips_prefetch(sp_slide *s, const sp_level *l, const sp_tile_pos *tiles, size_t n) {
    sp_tiff_slide_ops.prefetch(s, l, tiles, n);
}

static sp_status philips_read_associated(sp_slide *s, const sp_associated *a, uint8_t *rgba,
                                         uint64_t stride, sp_err *err) {
    const philips_assoc *pa = a->priv;
    if (pa->dir != NULL) {
        return sp_tiff_decode_image(s->container, pa->dir, rgba, stride, err);
    }
    return sp_jpeg_decode_rgba(pa->jpeg, pa->jpeg_len, NULL, 0, SP_JPEG_SPACE_AUTO,
                               (uint64_t)a->width, (uint64_t)a->height, rgba, stride, err);
}

static void philips_destroy(sp_slide *s) {
    philips *ph = s->priv;
    if (ph != NULL) {
        for (int i = 0; i < 2; i++) {
            free(ph->assoc[i].jpeg);
        }
        free(ph);
        s->priv = NULL;
    }
    sp_tiff_slide_ops.destroy(s);
}

static const sp_slide_ops philips_ops = {
    .read_tile = philips_read_tile,
    .read_associated = philips_read_associated,
    .destroy = philips_destroy,
    .area_scales = philips_area_scales,
    .read_tile_area = philips_read_tile_area,
    .prefetch = philips_prefetch,
};

/* ---- the XML -------------------------------------------------------------------------------- */

/* A node's text content as a new string (xmlFree), or NULL. */
static char *content(xmlNode *node) {
    return (char *)xmlNodeGetContent(node);
}

/* Whether element `node` has an element child. */
static bool has_element_child(const xmlNode *node) {
    for (const xmlNode *c = node->children; c != NULL; c = c->next) {
        if (c->type == XML_ELEMENT_NODE) {
            return true;
        }
    }
    return false;
}

/* The property prefix nesting that a hostile document could make deep; real files nest twice. */
#define PHILIPS_MAX_DEPTH 8

static sp_status add_attributes(sp_slide *s, xmlDoc *doc, xmlNode *parent, const char *xpath,
                                const char *prefix, int depth, sp_err *err);

/* One Attribute element: the scanned images recurse into the first WSI image's attributes, the
 * pixel data representations into each representation's, and a leaf becomes prefix.NAME. */
static sp_status add_attribute(sp_slide *s, xmlDoc *doc, xmlNode *node, const char *prefix,
                               int depth, sp_err *err) {
    xmlChar *name = xmlGetProp(node, (const xmlChar *)"Name");
    if (name == NULL) {
        return SP_OK;
    }
    sp_status st = SP_OK;
    char key[512];
    if (strcmp((const char *)name, "PIM_DP_SCANNED_IMAGES") == 0) {
        char xpath[256];
        snprintf(xpath, sizeof xpath, "Array/DataObject" PHILIPS_WSI "[1]/Attribute", "WSI");
        st = add_attributes(s, doc, node, xpath, prefix, depth + 1, err);
    } else if (strcmp((const char *)name, "PIIM_PIXEL_DATA_REPRESENTATION_SEQUENCE") == 0) {
        xmlXPathObject *reps = sp_vendor_xml_select(doc, node, "Array/DataObject");
        for (int i = 0; st == SP_OK && reps != NULL && i < reps->nodesetval->nodeNr; i++) {
            if (snprintf(key, sizeof key, "%s.%s[%d]", prefix, (const char *)name, i) <
                (int)sizeof key) {
                st = add_attributes(s, doc, reps->nodesetval->nodeTab[i], "Attribute", key,
                                    depth + 1, err);
            }
        }
        xmlXPathFreeObject(reps);
    } else if (!has_element_child(node)) {
        char *value = content(node);
        if (value != NULL &&
            snprintf(key, sizeof key, "%s.%s", prefix, (const char *)name) < (int)sizeof key) {
            st = sp_props_set(&s->props, key, value, err);
        }
        xmlFree(value);
    }
    xmlFree(name);
    return st;
}

static sp_status add_attributes(sp_slide *s, xmlDoc *doc, xmlNode *parent, const char *xpath,
                                const char *prefix, int depth, sp_err *err) {
    if (depth > PHILIPS_MAX_DEPTH) {
        return SP_OK;
    }
    xmlXPathObject *nodes = sp_vendor_xml_select(doc, parent, xpath);
    sp_status st = SP_OK;
    for (int i = 0; st == SP_OK && nodes != NULL && i < nodes->nodesetval->nodeNr; i++) {
        st = add_attribute(s, doc, nodes->nodesetval->nodeTab[i], prefix, depth, err);
    }
    xmlXPathFreeObject(nodes);
    return st;
}

static bool parse_number(const char *text, double *out) {
    char *end;
    *out = sp_strtod(text, &end);
    return end != text && *end == '\0' && !isnan(*out);
}

/* DICOM_PIXEL_SPACING: two quoted numbers separated by one space, row spacing (height) first,
 * in millimetres. */
static bool parse_spacing(const char *text, double *w, double *h) {
    const char *space = strchr(text, ' ');
    if (space == NULL || strchr(space + 1, ' ') != NULL) {
        return false;
    }
    char parts[2][64];
    const char *begin[2] = {text, space + 1};
    size_t len[2] = {(size_t)(space - text), strlen(space + 1)};
    for (int i = 0; i < 2; i++) {
        const char *b = begin[i];
        size_t n = len[i];
        while (n > 0 && (*b == '"' || *b == ' ' || *b == '\t' || *b == '\n' || *b == '\r')) {
            b++, n--;
        }
        while (n > 0 && (b[n - 1] == '"' || b[n - 1] == ' ' || b[n - 1] == '\t' ||
                         b[n - 1] == '\n' || b[n - 1] == '\r')) {
            n--;
        }
        if (n == 0 || n >= sizeof parts[i]) {
            return false;
        }
        memcpy(parts[i], b, n);
        parts[i][n] = '\0';
    }
    return parse_number(parts[1], w) && parse_number(parts[0], h);
}

/* The objective power: the first number of the "levels=" item of the dash-separated
 * DICOM_DERIVATION_DESCRIPTION, when it is 1 to 200 (larger first numbers are not powers);
 * items from "sourceFilename" on are not read (its quoted value may hold dashes). */
static unsigned parse_objective(const char *derivation) {
    const char *item = derivation;
    while (item != NULL) {
        const char *next = strchr(item, '-');
        size_t n = next != NULL ? (size_t)(next - item) : strlen(item);
        const char *eq = memchr(item, '=', n);
        size_t key_len = eq != NULL ? (size_t)(eq - item) : n;
        if (key_len == 14 && strncmp(item, "sourceFilename", 14) == 0) {
            return 0;
        }
        if (eq != NULL && key_len == 6 && strncmp(item, "levels", 6) == 0) {
            const char *v = eq + 1, *stop = item + n;
            unsigned long long power = 0;
            const char *d = v;
            while (d < stop && *d >= '0' && *d <= '9' && power <= 1000) {
                power = power * 10 + (unsigned)(*d++ - '0');
            }
            bool whole = d > v && (d == stop || *d == ',');
            return whole && power >= 1 && power <= 200 ? (unsigned)power : 0;
        }
        item = next != NULL ? next + 1 : NULL;
    }
    return 0;
}

static sp_status add_derived_properties(sp_slide *s, sp_err *err) {
    sp_status st = SP_OK;
    const char *spacing = sp_props_get(&s->props, "philips.DICOM_PIXEL_SPACING");
    double w, h;
    if (spacing != NULL && parse_spacing(spacing, &w, &h)) {
        st = sp_slide_set_number(s, SP_PROPERTY_MPP_X, 1e3 * w, err);
        if (st == SP_OK) {
            st = sp_slide_set_number(s, SP_PROPERTY_MPP_Y, 1e3 * h, err);
        }
    }
    const char *derivation = sp_props_get(&s->props, "philips.DICOM_DERIVATION_DESCRIPTION");
    unsigned power = derivation != NULL ? parse_objective(derivation) : 0;
    if (st == SP_OK && power != 0) {
        st = sp_slide_set_number(s, SP_PROPERTY_OBJECTIVE_POWER, power, err);
    }
    return st;
}

/* ---- associated images from the XML --------------------------------------------------------- */

static int base64_value(unsigned char c) {
    if (c >= 'A' && c <= 'Z') {
        return c - 'A';
    }
    if (c >= 'a' && c <= 'z') {
        return c - 'a' + 26;
    }
    if (c >= '0' && c <= '9') {
        return c - '0' + 52;
    }
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* Decode base64 text, skipping characters outside the alphabet (line breaks), up to the first
 * '='. *out (to free) holds *len bytes. */
static sp_status base64_decode(const char *text, const sp_limits *limits, uint8_t **out,
                               size_t *len, sp_err *err) {
    size_t n = strlen(text);
    uint8_t *buf = NULL;
    sp_status st = sp_alloc(limits, n / 4 * 3 + 3, "a base64 image", (void **)&buf, err);
    if (st != SP_OK) {
        return st;
    }
    uint32_t acc = 0;
    int bits = 0;
    size_t k = 0;
    for (size_t i = 0; i < n && text[i] != '='; i++) {
        int v = base64_value((unsigned char)text[i]);
        if (v < 0) {
            continue;
        }
        acc = (acc << 6 | (uint32_t)v) & 0xFFFFFF;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            buf[k++] = (uint8_t)(acc >> bits);
        }
    }
    *out = buf;
    *len = k;
    return SP_OK;
}

/* The label or macro from the XML, when there is no such TIFF directory: errors leave it out (the
 * slide still opens, as in OpenSlide). */
static sp_status add_xml_associated(sp_slide *s, xmlDoc *doc, int which, sp_err *err) {
    philips *ph = s->priv;
    philips_assoc *pa = &ph->assoc[which];
    if (pa->dir != NULL) {
        return SP_OK;
    }
    char xpath[512];
    snprintf(xpath, sizeof xpath,
             PHILIPS_SCANNED PHILIPS_WSI "[1]/Attribute[@Name='PIM_DP_IMAGE_DATA']/text()",
             assoc_types[which]);
    xmlXPathObject *r = sp_vendor_xml_select(doc, NULL, xpath);
    char *text = r != NULL ? content(r->nodesetval->nodeTab[0]) : NULL;
    xmlXPathFreeObject(r);
    if (text == NULL) {
        return SP_OK;
    }
    sp_err ignored = {0};
    sp_status st = base64_decode(text, &s->limits, &pa->jpeg, &pa->jpeg_len, &ignored);
    xmlFree(text);
    uint32_t w = 0, h = 0;
    int components = 0;
    if (st == SP_OK &&
        sp_jpeg_read_header(pa->jpeg, pa->jpeg_len, NULL, 0, &w, &h, &components, &ignored) ==
            SP_OK &&
        w > 0 && h > 0) {
        return sp_slide_add_associated(s, assoc_names[which], w, h, pa, err);
    }
    free(pa->jpeg);
    pa->jpeg = NULL;
    return st == SP_E_NOMEM ? sp_err_set(err, st, "%s", ignored.msg) : SP_OK;
}

/* ---- open ----------------------------------------------------------------------------------- */

/* The levels: every tiled directory of the main chain, sized and scaled from the XML's pixel
 * spacings (one per level, level 0's first). */
static sp_status add_levels(sp_slide *s, xmlDoc *doc, sp_err *err) {
    const sp_tiff *t = s->container;
    const sp_tiff_dir *prev = NULL;
    uint32_t n = 0;
    for (uint32_t i = 0; i < t->n_dirs; i++) {
        const sp_tiff_dir *d = &t->dirs[i];
        if (!d->tiled) {
            continue;
        }
        if (prev != NULL && !(d->subfile_type & 1)) {
            return sp_err_set(err, SP_E_CORRUPT,
                              "Philips TIFF directory %u is tiled but not reduced-resolution", i);
        }
        if (prev != NULL && (d->width > prev->width || d->height > prev->height)) {
            return sp_err_set(err, SP_E_CORRUPT,
                              "Philips TIFF directory %u is larger than the level before it", i);
        }
        sp_status st = sp_tiff_check_decodable(t, d, err);
        if (st != SP_OK) {
            return st;
        }
        prev = d;
        n++;
    }
    if (n == 0) {
        return sp_err_set(err, SP_E_CORRUPT, "a Philips TIFF without a tiled directory");
    }
    xmlXPathObject *spacings = sp_vendor_xml_select(
        doc, NULL,
        PHILIPS_SCANNED "[Attribute/@Name='PIM_DP_IMAGE_TYPE' and Attribute/text()='WSI'][1]"
                        "/Attribute[@Name='PIIM_PIXEL_DATA_REPRESENTATION_SEQUENCE']/Array"
                        "/DataObject[@ObjectType='PixelDataRepresentation']"
                        "/Attribute[@Name='DICOM_PIXEL_SPACING']/text()");
    int found = spacings != NULL ? spacings->nodesetval->nodeNr : 0;
    sp_status st = SP_OK;
    if ((uint32_t)found != n) {
        st = sp_err_set(err, SP_E_CORRUPT,
                        "the Philips XML gives %d pixel spacings for %u tiled levels", found, n);
    }
    double w0 = 0, h0 = 0;
    uint32_t k = 0;
    for (uint32_t i = 0; st == SP_OK && i < t->n_dirs; i++) {
        const sp_tiff_dir *d = &t->dirs[i];
        if (!d->tiled) {
            continue;
        }
        char *text = content(spacings->nodesetval->nodeTab[k]);
        double w, h;
        bool ok = text != NULL && parse_spacing(text, &w, &h);
        xmlFree(text);
        if (!ok) {
            st = sp_err_set(err, SP_E_CORRUPT,
                            "level %u: the Philips pixel spacing is not two numbers", k);
            break;
        }
        sp_level l = {
            .width = (int64_t)d->width,
            .height = (int64_t)d->height,
            .tile_width = (int64_t)d->chunk_width,
            .tile_height = (int64_t)d->chunk_height,
            .compression = sp_tiff_compression_name(d->compression),
            .priv = d,
        };
        sp_tiff_slide_take_icc(s, d); /* level 0's profile (the first level with one) */
        if (k == 0) {
            w0 = w;
            h0 = h;
        } else {
            /* Integer downsamples, as in OpenSlide: the spacings' ratios carry rounding. */
            double ds = round((w / w0 + h / h0) / 2);
            if (!(ds >= 1 && ds <= 1e9)) {
                st = sp_err_set(err, SP_E_CORRUPT,
                                "level %u: the Philips pixel spacings give downsample %g", k, ds);
                break;
            }
            l.downsample = ds;
            l.width = (int64_t)((double)s->levels[0].width / ds);
            l.height = (int64_t)((double)s->levels[0].height / ds);
            if (l.width == 0 || l.height == 0 || l.width > (int64_t)d->width ||
                l.height > (int64_t)d->height) {
                st = sp_err_set(err, SP_E_CORRUPT,
                                "level %u: %llux%llu pixels stored, %lldx%lld expected", k,
                                (unsigned long long)d->width, (unsigned long long)d->height,
                                (long long)l.width, (long long)l.height);
                break;
            }
        }
        st = sp_slide_add_level(s, &l, err);
        k++;
    }
    xmlXPathFreeObject(spacings);
    return st;
}

static sp_status philips_open(sp_slide *s, sp_probe *p, sp_err *err) {
    sp_tiff_slide_adopt(s, p);
    s->ops = &philips_ops;
    const sp_tiff *t = s->container;
    philips *ph = calloc(1, sizeof *ph);
    s->priv = ph;
    if (ph == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory opening a Philips TIFF");
    }
    const char *desc = t->dirs[0].description;
    xmlDoc *doc = NULL;
    sp_status st = sp_vendor_xml_parse(desc, desc != NULL ? strlen(desc) : 0, &s->limits,
                                       "the Philips ImageDescription", &doc, err);
    if (st == SP_OK) {
        xmlXPathObject *wsi =
            sp_vendor_xml_select(doc, NULL,
                                 PHILIPS_SCANNED "[Attribute/@Name='PIM_DP_IMAGE_TYPE' and "
                                                 "Attribute/text()='WSI']");
        int count = wsi != NULL ? wsi->nodesetval->nodeNr : 0;
        xmlXPathFreeObject(wsi);
        if (count != 1) {
            st = sp_err_set(err, SP_E_CORRUPT, "the Philips XML describes %d WSI images, not one",
                            count);
        }
    }
    if (st == SP_OK) {
        st = add_levels(s, doc, err);
    }
    for (uint32_t i = 0; st == SP_OK && i < t->n_dirs; i++) {
        const sp_tiff_dir *d = &t->dirs[i];
        for (int a = 0; a < 2 && !d->tiled && d->description != NULL; a++) {
            if (ph->assoc[a].dir == NULL && strncmp(d->description, assoc_prefixes[a], 5) == 0) {
                sp_err ignored = {0};
                if (sp_tiff_check_decodable(t, d, &ignored) == SP_OK) {
                    ph->assoc[a].dir = d;
                    st = sp_slide_add_associated(s, assoc_names[a], (int64_t)d->width,
                                                 (int64_t)d->height, &ph->assoc[a], err);
                }
            }
        }
    }
    if (st == SP_OK) {
        st = sp_tiff_slide_add_properties(s, &t->dirs[0], false, err);
        sp_props_remove(&s->props, "tiff.ImageDescription");
    }
    if (st == SP_OK) {
        st = add_attributes(s, doc, NULL, "/DataObject/Attribute", "philips", 0, err);
    }
    if (st == SP_OK) {
        st = add_derived_properties(s, err);
    }
    for (int a = 0; st == SP_OK && a < 2; a++) {
        st = add_xml_associated(s, doc, a, err);
    }
    xmlFreeDoc(doc);
    return st;
}

const sp_format sp_format_philips_tiff = {"philips", philips_detect, philips_open};
