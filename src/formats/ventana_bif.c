/* ventana_bif.c — Ventana / Roche BIF (iScan Coreo, HT, DP 200): a tiled BigTIFF whose first
 * directory carries an XMP packet (tag 700) with an <iScan> element (or <Metadata><iScan>), and
 * whose levels are the directories described "level=N mag=M ...". Level 0 carries a second XMP
 * packet, <EncodeInfo>, describing the scanned areas (AOIs) and the camera tiles: each level-0
 * TIFF tile is one camera frame, and neighbouring frames overlap. The layout is OpenSlide 4's:
 * tiles are numbered in a serpentine from the bottom-left (right along the bottom row, left
 * along the next, ...), every RIGHT and UP TileJointInfo gives an overlap weighted by its
 * confidence, and the weighted means make one tile advance for the whole slide (tile size minus
 * mean overlap). Each scanned AOI is a grid of frames starting at the TIFF tile its AoiOrigin
 * names, placed at its Pos-X / Pos-Y (Pos-Y counted from below all areas, turned top-down). On a
 * lower level of downsample d (level 0's magnification over its own) each frame is the d-th part
 * of the level's TIFF tile holding it (the lower levels store the frames side by side, without
 * overlap), placed at its level-0 position / d. Where frames overlap, the one in the lower row,
 * then the right column, is seen (OpenSlide 4.0.1 paints them top-left first; checked against it
 * pixel for pixel by tests/data/test_ventana.py). A level spans the
 * frames' farthest edge (rounded up); outside every frame it is transparent. Without the
 * EncodeInfo packet (a Ventana TIFF) each level is its TIFF directory as it is. Associated
 * images: "Label Image" / "Label_Image" is the macro, "Thumbnail" the thumbnail. Properties: the
 * iScan attributes as ventana.NAME, the objective power from Magnification, the MPP from
 * ScanRes, the TIFF tags of level 0. Frames are placed on whole pixels: OpenSlide draws a frame
 * at a fractional position with cairo's filtering, which this does not imitate (docs/formats.md).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fill.h"
#include "formats/tiff_slide.h"
#include "formats/vendor_xml.h"

enum { TAG_XMP = 700 };

/* One scanned area: a grid of frames. */
typedef struct bif_area {
    int64_t x, y;                 /* level-0 pixels, top-down */
    int64_t start_col, start_row; /* the TIFF tile of its first frame */
    int64_t across, down;
} bif_area;

typedef struct bif_level {
    const sp_tiff_dir *dir;
    unsigned scale; /* level 0's frames per this level's TIFF tile, each way (the downsample) */
} bif_level;

typedef struct bif {
    bif_area *areas;
    int n_areas;
    double advance_x, advance_y; /* level-0 pixels between frames */
    int64_t tile_w, tile_h;      /* level 0's TIFF tile */
    bif_level *levels;
    int n_levels;
} bif;

/* ---- detect ---------------------------------------------------------------------------------- */

/* The XMP packet of `d` as a NUL-terminated copy (to free), or NULL. */
static char *xmp_of(const sp_tiff_dir *d) {
    const sp_tiff_entry *e = sp_tiff_find(d, TAG_XMP);
    if (e == NULL || e->data == NULL || e->size == 0 ||
        (e->type != 1 && e->type != 7 && e->type != 2)) {
        return NULL;
    }
    return strndup((const char *)e->data, (size_t)e->size);
}

/* The <iScan> element: the root, or a child of a <Metadata> root. */
static xmlNode *iscan_of(xmlDoc *doc) {
    xmlNode *root = xmlDocGetRootElement(doc);
    if (sp_vendor_xml_is(root, "iScan")) {
        return root;
    }
    if (sp_vendor_xml_is(root, "Metadata")) {
        for (xmlNode *c = root->children; c != NULL; c = c->next) {
            if (sp_vendor_xml_is(c, "iScan")) {
                return c;
            }
        }
    }
    return NULL;
}

static bool ventana_detect(const sp_probe *p) {
    if (p->tiff == NULL) {
        return false;
    }
    char *xml = xmp_of(&p->tiff->dirs[0]);
    bool ok = false;
    if (xml != NULL && strstr(xml, "iScan") != NULL) {
        xmlDoc *doc = NULL;
        sp_err ignored = {0};
        if (sp_vendor_xml_parse(xml, strlen(xml), p->limits, "the Ventana XMP", &doc, &ignored) ==
            SP_OK) {
            ok = iscan_of(doc) != NULL;
            xmlFreeDoc(doc);
        }
    }
    free(xml);
    return ok;
}

/* ---- reading --------------------------------------------------------------------------------- */

/* A frame under a level tile: its grid position and where it lands (level pixels). */
typedef struct frame {
    int64_t col, row;
    int64_t x, y;
} frame;

static int frame_cmp(const void *a, const void *b) {
    const frame *f = a, *g = b;
    if (f->row != g->row) {
        return f->row < g->row ? -1 : 1; /* top rows first */
    }
    return (f->col > g->col) - (f->col < g->col); /* then left columns first */
}

/* Decoded TIFF tiles of one read_tile call, so that the frames sharing a lower level's tile
 * decode it once. */
enum { BIF_CACHE = 16 };
typedef struct tile_cache {
    int64_t col[BIF_CACHE], row[BIF_CACHE];
    uint8_t *buf[BIF_CACHE];
    int n, next;
} tile_cache;

static sp_status cached_tile(sp_slide *s, const sp_tiff_dir *d, int64_t col, int64_t row,
                             tile_cache *c, const uint8_t **out, sp_err *err) {
    for (int i = 0; i < c->n; i++) {
        if (c->col[i] == col && c->row[i] == row) {
            *out = c->buf[i];
            return SP_OK;
        }
    }
    int slot = c->n < BIF_CACHE ? c->n++ : c->next;
    c->next = (slot + 1) % BIF_CACHE;
    uint64_t bytes = d->chunk_width * d->chunk_height * 4;
    if (c->buf[slot] == NULL) {
        sp_status st = sp_alloc(&s->limits, bytes, "a Ventana tile", (void **)&c->buf[slot], err);
        if (st != SP_OK) {
            c->n--;
            return st;
        }
    }
    c->col[slot] = c->row[slot] = -1;
    memset(c->buf[slot], 0, (size_t)bytes);
    if (col < 0 || row < 0 || (uint64_t)col >= d->chunks_across ||
        (uint64_t)row >= d->chunks_down) {
        return sp_err_set(err, SP_E_CORRUPT,
                          "a Ventana frame in TIFF tile (%lld, %lld), outside "
                          "the level's %llux%llu tiles",
                          (long long)col, (long long)row, (unsigned long long)d->chunks_across,
                          (unsigned long long)d->chunks_down);
    }
    sp_status st =
        sp_tiff_decode_chunk(s->container, d, (uint64_t)row * d->chunks_across + (uint64_t)col,
                             c->buf[slot], d->chunk_width * 4, err);
    if (st != SP_OK) {
        return st;
    }
    /* Pixels beyond the directory's image (an edge tile's padding) are not shown. */
    int64_t x_end = (int64_t)d->width - col * (int64_t)d->chunk_width;
    int64_t y_end = (int64_t)d->height - row * (int64_t)d->chunk_height;
    for (int64_t y = 0; y < (int64_t)d->chunk_height; y++) {
        uint8_t *line = c->buf[slot] + (uint64_t)y * d->chunk_width * 4;
        if (y >= y_end) {
            memset(line, 0, (size_t)d->chunk_width * 4);
        } else if (x_end < (int64_t)d->chunk_width) {
            int64_t keep = x_end > 0 ? x_end : 0;
            memset(line + keep * 4, 0, (size_t)((int64_t)d->chunk_width - keep) * 4);
        }
    }
    c->col[slot] = col;
    c->row[slot] = row;
    *out = c->buf[slot];
    return SP_OK;
}

/* Paint frame f by decoding straight into the level tile only the part of its TIFF tile that
 * shows (JPEG and JPEG 2000 tiles): no whole-tile decode, no copy. */
static sp_status paint_frame_part(sp_slide *s, const bif *b, const bif_level *bl, const frame *f,
                                  int64_t x0, int64_t y0, int64_t w, int64_t h, unsigned bpp,
                                  uint8_t *rgba, uint64_t stride, sp_err *err) {
    static const uint8_t transparent[4] = {0, 0, 0, 0};
    const sp_tiff_dir *d = bl->dir;
    int64_t k = bl->scale, col = f->col / k, row = f->row / k;
    if ((uint64_t)col >= d->chunks_across || (uint64_t)row >= d->chunks_down) {
        return sp_err_set(err, SP_E_CORRUPT,
                          "a Ventana frame in TIFF tile (%lld, %lld), outside "
                          "the level's %llux%llu tiles",
                          (long long)col, (long long)row, (unsigned long long)d->chunks_across,
                          (unsigned long long)d->chunks_down);
    }
    uint64_t index = (uint64_t)row * d->chunks_across + (uint64_t)col;
    if (d->chunk_offsets[index] == 0 || d->chunk_byte_counts[index] == 0) {
        return SP_OK; /* a missing tile: transparent, painting nothing */
    }
    int64_t tw = (int64_t)d->chunk_width, th = (int64_t)d->chunk_height;
    int64_t fw = (b->tile_w + k - 1) / k, fh = (b->tile_h + k - 1) / k;
    int64_t sx = (f->col % k) * b->tile_w / k, sy = (f->row % k) * b->tile_h / k;
    /* The frame's pixels that exist: inside its TIFF tile and inside the directory's image. */
    int64_t vis_w = fw, vis_h = fh;
    vis_w = sx + vis_w <= tw ? vis_w : tw - sx;
    vis_h = sy + vis_h <= th ? vis_h : th - sy;
    int64_t img_w = (int64_t)d->width - col * tw - sx, img_h = (int64_t)d->height - row * th - sy;
    vis_w = vis_w <= img_w ? vis_w : img_w;
    vis_h = vis_h <= img_h ? vis_h : img_h;
    int64_t ax0 = f->x > x0 ? f->x : x0, ax1 = f->x + vis_w < x0 + w ? f->x + vis_w : x0 + w;
    int64_t ay0 = f->y > y0 ? f->y : y0, ay1 = f->y + vis_h < y0 + h ? f->y + vis_h : y0 + h;
    if (ax0 >= ax1 || ay0 >= ay1) {
        return SP_OK;
    }
    uint8_t *dst = rgba + (uint64_t)(ay0 - y0) * stride + (uint64_t)(ax0 - x0) * bpp;
    return sp_tiff_decode_chunk_area(s->container, d, index, 1, (uint64_t)(sx + ax0 - f->x),
                                     (uint64_t)(sy + ay0 - f->y), (uint64_t)(ax1 - ax0),
                                     (uint64_t)(ay1 - ay0), bpp, dst, stride, transparent, err);
}

/* Paint frame f (its part of the level's TIFF tile) into the level tile at (x0, y0). */
static sp_status paint_frame(sp_slide *s, const bif *b, const bif_level *bl, const frame *f,
                             int64_t x0, int64_t y0, int64_t w, int64_t h, tile_cache *cache,
                             uint8_t *rgba, uint64_t stride, sp_err *err) {
    const sp_tiff_dir *d = bl->dir;
    int64_t k = bl->scale;
    const uint8_t *tile = NULL;
    sp_status st = cached_tile(s, d, f->col / k, f->row / k, cache, &tile, err);
    if (st != SP_OK) {
        return st;
    }
    int64_t fw = (b->tile_w + k - 1) / k, fh = (b->tile_h + k - 1) / k;
    int64_t sx = (f->col % k) * b->tile_w / k, sy = (f->row % k) * b->tile_h / k;
    int64_t tw = (int64_t)d->chunk_width, th = (int64_t)d->chunk_height;
    int64_t ax0 = f->x > x0 ? f->x : x0, ax1 = f->x + fw < x0 + w ? f->x + fw : x0 + w;
    int64_t ay0 = f->y > y0 ? f->y : y0, ay1 = f->y + fh < y0 + h ? f->y + fh : y0 + h;
    for (int64_t y = ay0; y < ay1; y++) {
        int64_t ty = sy + (y - f->y);
        if (ty >= th) {
            break;
        }
        for (int64_t x = ax0; x < ax1; x++) {
            int64_t tx = sx + (x - f->x);
            if (tx >= tw) {
                break;
            }
            const uint8_t *src = tile + (uint64_t)(ty * tw + tx) * 4;
            if (src[3] != 0) {
                memcpy(rgba + (uint64_t)(y - y0) * stride + (uint64_t)(x - x0) * 4, src, 4);
            }
        }
    }
    return SP_OK;
}

/* The first and last frame index (0-based, within an area of n frames starting at level-0
 * position p) that may touch [lo, hi) level pixels at downsample k. */
static void frame_range(double p, double advance, int64_t size, int64_t n, int64_t k, int64_t lo,
                        int64_t hi, int64_t *first, int64_t *last) {
    double a = floor(((double)(lo * k) - p - (double)size) / advance) - 1;
    double z = ceil(((double)(hi * k) - p) / advance) + 1;
    *first = a < 0 ? 0 : a > (double)n ? n : (int64_t)a;
    *last = z < 0 ? -1 : z > (double)(n - 1) ? n - 1 : (int64_t)z;
}

/* Paint the frames under the rectangle (x0, y0, w, h) of level pixels held by `rgba` (bpp 3
 * or 4; 4 unless the level's tiles decode in part), already filled with what shows where no
 * frame lies. */
static sp_status paint_rect(sp_slide *s, const sp_level *l, int64_t x0, int64_t y0, int64_t w,
                            int64_t h, unsigned bpp, uint8_t *rgba, uint64_t stride, sp_err *err) {
    const bif *b = s->priv;
    const bif_level *bl = l->priv;
    int64_t k = bl->scale;
    /* The frames under the tile, painted top-left first so that the bottom-right one shows. */
    size_t n = 0, cap = 0;
    frame *frames = NULL;
    sp_status st = SP_OK;
    for (int i = 0; st == SP_OK && i < b->n_areas; i++) {
        const bif_area *a = &b->areas[i];
        int64_t c0, c1, r0, r1;
        frame_range((double)a->x, b->advance_x, b->tile_w, a->across, k, x0, x0 + w, &c0, &c1);
        frame_range((double)a->y, b->advance_y, b->tile_h, a->down, k, y0, y0 + h, &r0, &r1);
        for (int64_t r = r0; st == SP_OK && r <= r1; r++) {
            for (int64_t c = c0; st == SP_OK && c <= c1; c++) {
                frame f = {
                    .col = a->start_col + c,
                    .row = a->start_row + r,
                    .x = llround(((double)a->x + (double)c * b->advance_x) / (double)k),
                    .y = llround(((double)a->y + (double)r * b->advance_y) / (double)k),
                };
                int64_t fw = (b->tile_w + k - 1) / k, fh = (b->tile_h + k - 1) / k;
                if (f.x >= x0 + w || f.y >= y0 + h || f.x + fw <= x0 || f.y + fh <= y0) {
                    continue;
                }
                if (n == cap) {
                    cap = cap ? cap * 2 : 16;
                    frame *grown = realloc(frames, cap * sizeof *frames);
                    if (grown == NULL) {
                        st = sp_err_set(err, SP_E_NOMEM, "out of memory reading a Ventana tile");
                        break;
                    }
                    frames = grown;
                }
                frames[n++] = f;
            }
        }
    }
    if (st == SP_OK && n > 1) {
        qsort(frames, n, sizeof *frames, frame_cmp);
    }
    tile_cache cache = {0};
    bool parts = (sp_tiff_area_scales(s->container, bl->dir) & 1u) != 0;
    for (size_t i = 0; st == SP_OK && i < n; i++) {
        st = parts ? paint_frame_part(s, b, bl, &frames[i], x0, y0, w, h, bpp, rgba, stride, err)
                   : paint_frame(s, b, bl, &frames[i], x0, y0, w, h, &cache, rgba, stride, err);
    }
    for (int i = 0; i < cache.n; i++) {
        free(cache.buf[i]);
    }
    free(frames);
    return st;
}

static sp_status bif_read_tile(sp_slide *s, const sp_level *l, int64_t col, int64_t row,
                               uint8_t *rgba, uint64_t stride, sp_err *err) {
    for (int64_t y = 0; y < l->tile_height; y++) {
        memset(rgba + (uint64_t)y * stride, 0, (size_t)l->tile_width * 4);
    }
    return paint_rect(s, l, col * l->tile_width, row * l->tile_height, l->tile_width,
                      l->tile_height, 4, rgba, stride, err);
}

static unsigned bif_area_scales(sp_slide *s, const sp_level *l) {
    return (sp_tiff_area_scales(s->container, ((const bif_level *)l->priv)->dir) & 1u) ? 1u : 0u;
}

/* Only the part (x, y, w, h) of a level tile: each frame under it decodes only the part of its
 * TIFF tile that shows, straight into `dst`. */
static sp_status bif_read_tile_area(sp_slide *s, const sp_level *l, int64_t col, int64_t row,
                                    unsigned scale, int64_t x, int64_t y, int64_t w, int64_t h,
                                    sp_pixel_format format, uint8_t *dst, int64_t stride,
                                    const uint8_t *empty, sp_err *err) {
    int bpp = sp_pixel_format_bytes(format);
    if (scale != 1 || bif_area_scales(s, l) == 0 || (bpp != 3 && bpp != 4)) {
        return sp_err_set(err, SP_E_INVALID_ARG, "a Ventana level tile read at 1/%u", scale);
    }
    sp_fill_pixels(dst, stride, w, h, bpp, empty);
    return paint_rect(s, l, col * l->tile_width + x, row * l->tile_height + y, w, h, (unsigned)bpp,
                      dst, (uint64_t)stride, err);
}

static void bif_destroy(sp_slide *s) {
    bif *b = s->priv;
    if (b != NULL) {
        free(b->areas);
        free(b->levels);
        free(b);
        s->priv = NULL;
    }
    sp_tiff_slide_ops.destroy(s);
}

static const sp_slide_ops bif_ops = {
    .read_tile = bif_read_tile,
    .read_associated = sp_tiff_slide_read_associated,
    .destroy = bif_destroy,
    .area_scales = bif_area_scales,
    .read_tile_area = bif_read_tile_area,
};

/* ---- the level-0 XMP (EncodeInfo) ---------------------------------------------------------- */

static sp_status int_attr(xmlNode *node, const char *name, int64_t *out, sp_err *err) {
    xmlChar *v = xmlGetProp(node, (const xmlChar *)name);
    char *end = NULL;
    errno = 0;
    long long n = v != NULL ? strtoll((const char *)v, &end, 10) : 0;
    bool ok = v != NULL && *v != '\0' && *end == '\0' && errno == 0;
    xmlFree(v);
    if (!ok) {
        return sp_err_set(err, SP_E_CORRUPT, "the Ventana XMP's <%s> has no integer %s",
                          (const char *)node->name, name);
    }
    *out = n;
    return SP_OK;
}

static sp_status double_attr(xmlNode *node, const char *name, double *out, sp_err *err) {
    xmlChar *v = xmlGetProp(node, (const xmlChar *)name);
    char *end = NULL;
    double d = v != NULL ? sp_strtod((const char *)v, &end) : NAN;
    bool ok = v != NULL && *v != '\0' && *end == '\0' && isfinite(d);
    xmlFree(v);
    if (!ok) {
        return sp_err_set(err, SP_E_CORRUPT, "the Ventana XMP's <%s> has no number %s",
                          (const char *)node->name, name);
    }
    *out = d;
    return SP_OK;
}

/* Tile number `attr` of a joint (1-based, serpentine from the bottom-left) to (col, row),
 * top-down. */
static sp_status joint_tile(xmlNode *joint, const char *attr, const bif_area *a, int64_t *col,
                            int64_t *row, sp_err *err) {
    int64_t t;
    sp_status st = int_attr(joint, attr, &t, err);
    if (st != SP_OK) {
        return st;
    }
    if (t < 1 || t > a->across * a->down) {
        return sp_err_set(err, SP_E_CORRUPT, "a Ventana tile joint names tile %lld of %lld",
                          (long long)t, (long long)(a->across * a->down));
    }
    t--;
    int64_t c = t % a->across, r = t / a->across;
    if (r % 2) {
        c = a->across - c - 1;
    }
    *col = c;
    *row = a->down - r - 1;
    return SP_OK;
}

/* Limits on what a hostile EncodeInfo may declare. */
#define BIF_MAX_FRAMES (1LL << 24)

static sp_status parse_area(xmlNode *info, xmlNode *origin, bif *b, bif_area *a, double sums[4],
                            sp_err *err) {
    int64_t ox, oy, w, h;
    double px, py;
    sp_status st = int_attr(origin, "OriginX", &ox, err);
    if (st == SP_OK) {
        st = int_attr(origin, "OriginY", &oy, err);
    }
    if (st == SP_OK) {
        st = int_attr(info, "Width", &w, err);
    }
    if (st == SP_OK) {
        st = int_attr(info, "Height", &h, err);
    }
    if (st == SP_OK && (w != b->tile_w || h != b->tile_h)) {
        st = sp_err_set(err, SP_E_CORRUPT,
                        "Ventana frames of %lldx%lld pixels in TIFF tiles of %lldx%lld",
                        (long long)w, (long long)h, (long long)b->tile_w, (long long)b->tile_h);
    }
    if (st == SP_OK && (ox < 0 || oy < 0 || ox % w != 0 || oy % h != 0)) {
        st = sp_err_set(err, SP_E_CORRUPT, "a Ventana area origin (%lld, %lld) off the tile grid",
                        (long long)ox, (long long)oy);
    }
    if (st == SP_OK) {
        a->start_col = ox / w;
        a->start_row = oy / h;
        st = int_attr(info, "NumCols", &a->across, err);
    }
    if (st == SP_OK) {
        st = int_attr(info, "NumRows", &a->down, err);
    }
    if (st == SP_OK && (a->across < 1 || a->down < 1 || a->across > BIF_MAX_FRAMES / a->down)) {
        st = sp_err_set(err, SP_E_CORRUPT, "a Ventana area of %lldx%lld frames",
                        (long long)a->across, (long long)a->down);
    }
    if (st == SP_OK) {
        st = double_attr(info, "Pos-X", &px, err);
    }
    if (st == SP_OK) {
        st = double_attr(info, "Pos-Y", &py, err);
    }
    if (st == SP_OK && !(fabs(px) < 1e15 && fabs(py) < 1e15)) {
        st = sp_err_set(err, SP_E_CORRUPT, "a Ventana area at (%g, %g)", px, py);
    }
    if (st != SP_OK) {
        return st;
    }
    a->x = (int64_t)px;
    a->y = (int64_t)py;
    for (xmlNode *j = info->children; st == SP_OK && j != NULL; j = j->next) {
        if (!sp_vendor_xml_is(j, "TileJointInfo")) {
            continue;
        }
        int64_t c1, r1, c2, r2, confidence;
        double overlap_x, overlap_y;
        st = joint_tile(j, "Tile1", a, &c1, &r1, err);
        if (st == SP_OK) {
            st = joint_tile(j, "Tile2", a, &c2, &r2, err);
        }
        xmlChar *dir = st == SP_OK ? xmlGetProp(j, (const xmlChar *)"Direction") : NULL;
        bool right = dir != NULL && strcmp((const char *)dir, "RIGHT") == 0;
        bool up = dir != NULL && strcmp((const char *)dir, "UP") == 0;
        xmlFree(dir);
        if (st == SP_OK && !right && !up) {
            st = sp_err_set(err, SP_E_CORRUPT,
                            "a Ventana tile joint whose Direction is not "
                            "RIGHT or UP");
        }
        if (st == SP_OK &&
            ((right && !(c2 == c1 + 1 && r2 == r1)) || (up && !(c2 == c1 && r2 == r1 - 1)))) {
            st = sp_err_set(err, SP_E_CORRUPT,
                            "a Ventana tile joint between tiles that do not "
                            "touch");
        }
        if (st == SP_OK) {
            st = double_attr(j, "OverlapX", &overlap_x, err);
        }
        if (st == SP_OK) {
            st = double_attr(j, "OverlapY", &overlap_y, err);
        }
        if (st == SP_OK) {
            st = int_attr(j, "Confidence", &confidence, err);
        }
        if (st == SP_OK && (confidence < 0 || confidence > (1LL << 31))) {
            st = sp_err_set(err, SP_E_CORRUPT, "a Ventana joint confidence of %lld",
                            (long long)confidence);
        }
        if (st == SP_OK && up) {
            sums[2] += (double)confidence * -overlap_y;
            sums[3] += (double)confidence;
        } else if (st == SP_OK) {
            sums[0] += (double)confidence * -overlap_x;
            sums[1] += (double)confidence;
        }
    }
    return st;
}

static sp_status parse_encode_info(xmlDoc *doc, bif *b, sp_err *err) {
    xmlXPathObject *infos =
        sp_vendor_xml_select(doc, NULL, "/EncodeInfo/SlideStitchInfo/ImageInfo");
    xmlXPathObject *origins = sp_vendor_xml_select(doc, NULL, "/EncodeInfo/AoiOrigin/*");
    sp_status st = SP_OK;
    if (infos == NULL || origins == NULL ||
        infos->nodesetval->nodeNr != origins->nodesetval->nodeNr) {
        st = sp_err_set(err, SP_E_CORRUPT,
                        "the Ventana EncodeInfo's areas and origins do not "
                        "match");
    }
    if (st == SP_OK) {
        b->areas = calloc((size_t)infos->nodesetval->nodeNr, sizeof *b->areas);
        if (b->areas == NULL) {
            st = sp_err_set(err, SP_E_NOMEM, "out of memory reading the Ventana EncodeInfo");
        }
    }
    double sums[4] = {0, 0, 0, 0}; /* x offsets, x weights, y offsets, y weights */
    for (int i = 0; st == SP_OK && i < infos->nodesetval->nodeNr; i++) {
        xmlNode *info = infos->nodesetval->nodeTab[i];
        int64_t scanned;
        st = int_attr(info, "AOIScanned", &scanned, err);
        if (st == SP_OK && scanned) {
            st = parse_area(info, origins->nodesetval->nodeTab[i], b, &b->areas[b->n_areas], sums,
                            err);
            b->n_areas++;
        }
    }
    xmlXPathFreeObject(infos);
    xmlXPathFreeObject(origins);
    if (st != SP_OK) {
        return st;
    }
    if (b->n_areas == 0) {
        return sp_err_set(err, SP_E_CORRUPT, "the Ventana EncodeInfo has no scanned area");
    }
    /* Without joints in a direction (one column or row) frames abut: OpenSlide divides by zero
     * there. */
    b->advance_x = (double)b->tile_w + (sums[1] > 0 ? sums[0] / sums[1] : 0);
    b->advance_y = (double)b->tile_h + (sums[3] > 0 ? sums[2] / sums[3] : 0);
    /* Real overlaps are a few percent of a frame; frames overlapping by more than half would
     * put hundreds of frames under one level tile (a hostile file's way to make reads crawl). */
    if (!(b->advance_x >= (double)b->tile_w / 2 && b->advance_y >= (double)b->tile_h / 2 &&
          b->advance_x <= 4.0 * (double)b->tile_w && b->advance_y <= 4.0 * (double)b->tile_h)) {
        return sp_err_set(err, SP_E_UNSUPPORTED,
                          "Ventana frames %gx%g pixels apart for frames of "
                          "%lldx%lld: overlaps beyond half a frame are not read",
                          b->advance_x, b->advance_y, (long long)b->tile_w, (long long)b->tile_h);
    }
    /* Pos-Y runs up from below every area: turn it into a top-down position. */
    int64_t top = 0;
    for (int i = 0; i < b->n_areas; i++) {
        bif_area *a = &b->areas[i];
        int64_t height = (int64_t)((double)(a->down - 1) * b->advance_y + (double)b->tile_h);
        top = a->y + height > top ? a->y + height : top;
    }
    for (int i = 0; i < b->n_areas; i++) {
        bif_area *a = &b->areas[i];
        int64_t height = (int64_t)((double)(a->down - 1) * b->advance_y + (double)b->tile_h);
        a->y = top - a->y - height;
    }
    return SP_OK;
}

/* ---- open ------------------------------------------------------------------------------------ */

/* "level=N mag=M ..." into N and M; false when either is missing or malformed. */
static bool parse_level_description(const char *desc, int64_t *level, double *mag) {
    bool have_level = false, have_mag = false;
    const char *p = desc;
    while (*p != '\0') {
        const char *end = strchr(p, ' ');
        size_t n = end != NULL ? (size_t)(end - p) : strlen(p);
        char item[128];
        if (n < sizeof item) {
            memcpy(item, p, n);
            item[n] = '\0';
            char *eq = strchr(item, '=');
            if (eq != NULL) {
                *eq = '\0';
                char *v = eq + 1, *stop;
                if (strcmp(item, "level") == 0) {
                    errno = 0;
                    long long lv = strtoll(v, &stop, 10);
                    have_level = *v != '\0' && *stop == '\0' && errno == 0;
                    *level = lv;
                } else if (strcmp(item, "mag") == 0) {
                    *mag = sp_strtod(v, &stop);
                    have_mag = *v != '\0' && *stop == '\0' && !isnan(*mag);
                }
            }
        }
        p += n;
        while (*p == ' ') {
            p++;
        }
    }
    return have_level && have_mag;
}

static sp_status add_iscan_properties(sp_slide *s, xmlDoc *doc, sp_err *err) {
    xmlNode *iscan = iscan_of(doc);
    sp_status st = SP_OK;
    for (xmlAttr *a = iscan != NULL ? iscan->properties : NULL; st == SP_OK && a != NULL;
         a = a->next) {
        xmlChar *v = xmlGetNoNsProp(iscan, a->name);
        char key[256];
        if (v != NULL && *v != '\0' &&
            snprintf(key, sizeof key, "ventana.%s", (const char *)a->name) < (int)sizeof key) {
            st = sp_props_set(&s->props, key, (const char *)v, err);
        }
        xmlFree(v);
    }
    const char *mag = sp_props_get(&s->props, "ventana.Magnification");
    if (st == SP_OK && mag != NULL && *mag != '\0') {
        char *end;
        errno = 0;
        long long power = strtoll(mag, &end, 10);
        if (*end == '\0' && errno == 0) {
            st = sp_slide_set_number(s, SP_PROPERTY_OBJECTIVE_POWER, (double)power, err);
        }
    }
    const char *res = sp_props_get(&s->props, "ventana.ScanRes");
    if (st == SP_OK && res != NULL && *res != '\0') {
        char *end;
        double mpp = sp_strtod(res, &end);
        if (*end == '\0' && isfinite(mpp)) {
            st = sp_slide_set_number(s, SP_PROPERTY_MPP_X, mpp, err);
            if (st == SP_OK) {
                st = sp_slide_set_number(s, SP_PROPERTY_MPP_Y, mpp, err);
            }
        }
    }
    return st;
}

/* The levels with a BIF's frame layout. */
static sp_status add_bif_level(sp_slide *s, bif *b, const sp_tiff_dir *d, double downsample,
                               sp_err *err) {
    if ((int64_t)d->chunk_width != b->tile_w || (int64_t)d->chunk_height != b->tile_h) {
        return sp_err_set(err, SP_E_CORRUPT, "Ventana levels with different TIFF tile sizes");
    }
    double k = round(downsample);
    if (!(k >= 1 && k <= 1024) || fabs(k - downsample) > 1e-9) {
        return sp_err_set(err, SP_E_UNSUPPORTED,
                          "a Ventana level at downsample %g (not a whole "
                          "number) is not read",
                          downsample);
    }
    bif_level *bl = &b->levels[b->n_levels++];
    bl->dir = d;
    bl->scale = (unsigned)k;
    double right = 0, bottom = 0;
    for (int i = 0; i < b->n_areas; i++) {
        const bif_area *a = &b->areas[i];
        double r = ((double)a->x + (double)(a->across - 1) * b->advance_x + (double)b->tile_w) / k;
        double bo = ((double)a->y + (double)(a->down - 1) * b->advance_y + (double)b->tile_h) / k;
        right = r > right ? r : right;
        bottom = bo > bottom ? bo : bottom;
    }
    sp_level l = {
        .width = (int64_t)ceil(right),
        .height = (int64_t)ceil(bottom),
        .downsample = downsample,
        .tile_width = b->tile_w,
        .tile_height = b->tile_h,
        .compression = sp_tiff_compression_name(d->compression),
        .priv = bl,
    };
    if (l.width < 1 || l.height < 1) {
        return sp_err_set(err, SP_E_CORRUPT, "a Ventana level of %lldx%lld pixels",
                          (long long)l.width, (long long)l.height);
    }
    sp_tiff_slide_take_icc(s, d); /* the first level's embedded ICC profile, as OpenSlide 4 */
    return sp_slide_add_level(s, &l, err);
}

static sp_status ventana_open(sp_slide *s, sp_probe *p, sp_err *err) {
    sp_tiff_slide_adopt(s, p);
    s->ops = &bif_ops; /* its destroy frees the bif; a Ventana TIFF gets the TIFF ops back below */
    s->prefetch = false; /* no prefetch op: a level tile is painted from several frames */
    const sp_tiff *t = s->container;
    bif *b = calloc(1, sizeof *b);
    s->priv = b;
    if (b == NULL || (b->levels = calloc(t->n_dirs, sizeof *b->levels)) == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory opening a Ventana slide");
    }
    char *xml = xmp_of(&t->dirs[0]);
    xmlDoc *doc = NULL;
    sp_status st = sp_vendor_xml_parse(xml != NULL ? xml : "", xml != NULL ? strlen(xml) : 0,
                                       &s->limits, "the Ventana XMP", &doc, err);
    free(xml);
    if (st == SP_OK) {
        st = add_iscan_properties(s, doc, err);
    }
    xmlFreeDoc(doc);
    int64_t next = 0;
    double prev_mag = INFINITY, mag0 = 0;
    const sp_tiff_dir *level0 = NULL;
    bool is_bif = false;
    for (uint32_t i = 0; st == SP_OK && i < t->n_dirs; i++) {
        const sp_tiff_dir *d = &t->dirs[i];
        const char *desc = d->description;
        if (desc == NULL) {
            continue;
        }
        if (strstr(desc, "level=") != NULL) {
            int64_t level = 0;
            double mag = 0;
            if (!parse_level_description(desc, &level, &mag)) {
                st = sp_err_set(err, SP_E_CORRUPT,
                                "Ventana directory %u: \"%s\" gives no level "
                                "and magnification",
                                i, desc);
                break;
            }
            if (level != next++ || !(mag < prev_mag) || !(mag > 0)) {
                st = sp_err_set(err, SP_E_CORRUPT,
                                "Ventana directory %u: level %lld at "
                                "magnification %g is out of order",
                                i, (long long)level, mag);
                break;
            }
            prev_mag = mag;
            if (!d->tiled) {
                st = sp_err_set(err, SP_E_CORRUPT, "Ventana level directory %u is not tiled", i);
                break;
            }
            st = sp_tiff_check_decodable(t, d, err);
            if (st != SP_OK) {
                break;
            }
            if (level == 0) {
                mag0 = mag;
                level0 = d;
                b->tile_w = (int64_t)d->chunk_width;
                b->tile_h = (int64_t)d->chunk_height;
                char *encode = xmp_of(d);
                if (encode != NULL) {
                    xmlDoc *edoc = NULL;
                    st = sp_vendor_xml_parse(encode, strlen(encode), &s->limits,
                                             "the Ventana level-0 XMP", &edoc, err);
                    if (st == SP_OK) {
                        st = parse_encode_info(edoc, b, err);
                    }
                    xmlFreeDoc(edoc);
                    free(encode);
                    is_bif = true;
                }
            }
            if (st != SP_OK) {
                break;
            }
            double downsample = mag0 / mag;
            if (is_bif) {
                st = add_bif_level(s, b, d, downsample, err);
            } else {
                st = sp_tiff_slide_add_level(s, d, err);
                if (st == SP_OK) {
                    s->levels[s->n_levels - 1].downsample = downsample;
                }
            }
        } else if (strcmp(desc, "Label Image") == 0 || strcmp(desc, "Label_Image") == 0) {
            st = sp_tiff_slide_add_associated(s, "macro", d, err);
        } else if (strcmp(desc, "Thumbnail") == 0) {
            st = sp_tiff_slide_add_associated(s, "thumbnail", d, err);
        }
    }
    if (st == SP_OK && level0 == NULL) {
        st = sp_err_set(err, SP_E_CORRUPT, "a Ventana slide with no pyramid level");
    }
    if (st == SP_OK && !is_bif) {
        free(b->areas);
        free(b->levels);
        free(b);
        s->priv = NULL;
        s->ops = &sp_tiff_slide_ops;
    }
    if (st == SP_OK) {
        st = sp_tiff_slide_add_properties(s, level0, false, err);
    }
    return st;
}

const sp_format sp_format_ventana_bif = {"ventana", ventana_detect, ventana_open};
