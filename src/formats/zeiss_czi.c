/* zeiss_czi.c — Zeiss CZI (ZISRAW) slides: a mosaic of subblocks placed by their X/Y starts,
 * with pyramid subblocks (stored smaller than the area they cover) making the lower levels.
 * zeiss_czi_dir.c reads the segments; this file builds the levels and paints pixels.
 *
 * Every subblock covers width x height pixels of level 0 from (X, Y) and stores them as
 * stored_width x stored_height pixels: their ratio along X, rounded, is its downsample, and the
 * subblocks of one downsample make one level, placed at ((X - min X) / downsample,
 * (Y - min Y) / downsample) rounded down, where min X, min Y are the top-left of all subblocks
 * (so coordinates start at 0, as OpenSlide 4 places them). Level 0 is the metadata's SizeX x
 * SizeY (else the full-resolution subblocks' bounding box) and a lower level that size divided
 * by its downsample, rounded down; a downsample that some scene lacks is left out (as OpenSlide
 * 4). Slidepipe reads a level as a regular grid of tiles (the level's largest stored subblock,
 * 256 to 2048 pixels) and paints each from the subblocks that meet it, the highest mosaic index
 * (M) on top, then the later in the directory (as libCZI draws them); where none lies the tile
 * stays transparent, as in OpenSlide. Pixel types Gray8, Bgr24, Bgr48 (the high bytes) and
 * Bgra32 (its fourth byte is not alpha: the pixels are opaque), compressed none, JPEG, JPEG XR
 * (Gray8 and Bgr24, through jxrlib: codecs/jpegxr.c), zstd0 or zstd1 (its header and hi/lo byte
 * packing, which only 16-bit pixels use); LZW subblocks and other pixel types are refused when
 * the slide opens. The Z, C and T dimensions are the slide's planes (numbered from each one's
 * lowest start); scenes (S) all belong to the one image. The metadata XML's sections become
 * zeiss.* properties as OpenSlide 4 flattens them, and give the MPP (Scaling/Items/Distance,
 * metres per pixel) and the objective power (the NominalMagnification of the objective the
 * image's ObjectiveSettings name); the attachments "Label", "SlidePreview" and "Thumbnail" become
 * the associated images label, macro and thumbnail, each a JPEG or an embedded CZI image.
 * docs/formats.md says what is read and what is refused.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codecs/codec.h"
#include "formats/format.h"
#include "formats/vendor_xml.h"
#include "formats/zeiss_czi_dir.h"

#define MAX_LEVELS 32
#define TILE_MIN 256
#define TILE_MAX 2048

typedef struct czi_level {
    int64_t downsample;
    int64_t width, height, tile_w, tile_h, across, down;
    int64_t *first; /* across * down + 1 offsets into items: the subblocks meeting each tile */
    int32_t *items; /* entry numbers, in drawing order within a tile */
} czi_level;

/* One image: the slide itself, or an embedded CZI attachment. */
typedef struct czi_image {
    sp_source *src; /* borrowed for the slide; owned for an embedded image */
    sp_czi_file file;
    int64_t min_x, min_y;
    czi_level levels[MAX_LEVELS];
    int n_levels;
} czi_image;

typedef struct czi_assoc {
    sp_czi_attachment attachment;
    bool embedded;
    uint64_t offset, len; /* the JPEG's bytes */
    czi_image image;      /* an embedded CZI's */
} czi_assoc;

typedef struct czi {
    czi_image image;
    czi_assoc assoc[3];
} czi;

static const char *const ASSOCIATED[3][2] = {
    {"Label", "label"}, {"SlidePreview", "macro"}, {"Thumbnail", "thumbnail"}};

static bool czi_detect(const sp_probe *p) {
    return p->src != NULL && p->tiff == NULL && sp_czi_magic(p->head, p->head_len);
}

/* ---- pixels ---------------------------------------------------------------------------------- */

static int bytes_per_pixel(int32_t pixel_type) {
    switch (pixel_type) {
    case SP_CZI_PIXEL_GRAY8: return 1;
    case SP_CZI_PIXEL_BGR24: return 3;
    case SP_CZI_PIXEL_BGRA32: return 4;
    case SP_CZI_PIXEL_BGR48: return 6;
    default: return 0;
    }
}

static const char *pixel_type_name(int32_t t) {
    static const char *const NAMES[] = {"Gray8",
                                        "Gray16",
                                        "Gray32Float",
                                        "Bgr24",
                                        "Bgr48",
                                        NULL,
                                        NULL,
                                        NULL,
                                        "Bgr96Float",
                                        "Bgra32",
                                        "Gray64ComplexFloat",
                                        "Bgr192ComplexFloat",
                                        "Gray32",
                                        "Gray64"};
    return t >= 0 && t < (int32_t)(sizeof NAMES / sizeof *NAMES) && NAMES[t] != NULL ? NAMES[t]
                                                                                     : "unknown";
}

/* Whether this reader decodes the subblock; the reason when not. */
static sp_status check_entry(const sp_czi_entry *e, const sp_limits *limits, sp_err *err) {
    if (bytes_per_pixel(e->pixel_type) == 0) {
        return sp_err_set(err, SP_E_UNSUPPORTED,
                          "subblocks of pixel type %s (%d) are not supported (Gray8, Bgr24, "
                          "Bgr48 and Bgra32 are)",
                          pixel_type_name(e->pixel_type), e->pixel_type);
    }
    switch (e->compression) {
    case SP_CZI_RAW:
    case SP_CZI_JPEG:
    case SP_CZI_ZSTD0:
    case SP_CZI_ZSTD1: break;
    case SP_CZI_JPEGXR:
        if (!sp_jxr_available()) {
            return sp_err_set(err, SP_E_UNSUPPORTED,
                              "JPEG XR subblocks are not supported: slidepipe was built without "
                              "jxrlib (Debian libjxr-dev)");
        }
        if (e->pixel_type != SP_CZI_PIXEL_BGR24 && e->pixel_type != SP_CZI_PIXEL_GRAY8) {
            return sp_err_set(err, SP_E_UNSUPPORTED,
                              "JPEG XR subblocks of pixel type %s are not supported (Gray8 and "
                              "Bgr24 are)",
                              pixel_type_name(e->pixel_type));
        }
        break;
    default:
        return sp_err_set(err, SP_E_UNSUPPORTED,
                          "subblocks of compression %d are not supported (none, JPEG, JPEG XR, "
                          "zstd0 and zstd1 are)",
                          e->compression);
    }
    if (e->stored_width * e->stored_height > limits->value[SP_LIMIT_MAX_TILE_PIXELS]) {
        return sp_err_set(err, SP_E_LIMIT,
                          "a subblock of %lld x %lld pixels is over the limit of %lld pixels",
                          (long long)e->stored_width, (long long)e->stored_height,
                          (long long)limits->value[SP_LIMIT_MAX_TILE_PIXELS]);
    }
    return SP_OK;
}

/* Decode subblock `e` into a new straight RGBA8 buffer of its stored size. */
static sp_status decode_subblock(sp_source *src, const sp_limits *limits, const sp_czi_entry *e,
                                 uint8_t **out, sp_err *err) {
    *out = NULL;
    const int bpp = bytes_per_pixel(e->pixel_type);
    const uint64_t w = (uint64_t)e->stored_width, h = (uint64_t)e->stored_height;
    const uint64_t packed = w * h * (uint64_t)bpp;
    uint8_t *data = NULL, *unpacked = NULL;
    void *rgba = NULL;
    size_t len = 0;
    sp_status st = check_entry(e, limits, err);
    if (st == SP_OK) {
        st = sp_czi_read_subblock(src, limits, e, &data, &len, err);
    }
    if (st == SP_OK) {
        st = sp_calloc(limits, w * h, 4, "a CZI subblock's pixels", &rgba, err);
    }
    const uint8_t *pixels = data;
    if (st == SP_OK && e->compression == SP_CZI_JPEGXR) {
        st = sp_alloc(limits, packed, "a CZI subblock", (void **)&unpacked, err);
        if (st == SP_OK) {
            st = sp_jxr_decode(data, len, (uint32_t)w, (uint32_t)h, (unsigned)bpp, unpacked,
                               (size_t)(w * (uint64_t)bpp), err);
        }
        pixels = unpacked;
    } else if (st == SP_OK && e->compression == SP_CZI_JPEG) {
        st = sp_jpeg_decode_rgba(data, len, NULL, 0, SP_JPEG_SPACE_AUTO, w, h, rgba, w * 4, err);
        pixels = NULL;
    } else if (st == SP_OK && e->compression != SP_CZI_RAW) {
        size_t skip = 0;
        bool hilo = false;
        if (e->compression == SP_CZI_ZSTD1) {
            /* A header first: its size (1, or 3 with chunk 1 whose bit 0 says the low bytes of
             * all 16-bit samples come first, then all the high bytes), then the zstd frame. */
            if (len >= 1 && data[0] == 1) {
                skip = 1;
            } else if (len >= 3 && data[0] == 3 && data[1] == 1) {
                skip = 3;
                hilo = (data[2] & 1) != 0;
            } else {
                st = sp_err_set(err, SP_E_CORRUPT,
                                "the zstd1 subblock at offset %llu has a malformed header",
                                (unsigned long long)e->position);
            }
        }
        size_t written = 0;
        if (st == SP_OK) {
            st = sp_alloc(limits, packed, "a CZI subblock", (void **)&unpacked, err);
        }
        if (st == SP_OK) {
            st = sp_zstd_decode(data + skip, len - skip, unpacked, (size_t)packed, &written, err);
        }
        if (st == SP_OK && written != packed) {
            st = sp_err_set(err, SP_E_CORRUPT,
                            "the subblock at offset %llu decodes to %zu bytes, not the %llu of "
                            "%llu x %llu pixels",
                            (unsigned long long)e->position, written, (unsigned long long)packed,
                            (unsigned long long)w, (unsigned long long)h);
        }
        if (st == SP_OK && hilo) {
            /* Only the high bytes are kept (below): they are the second half. */
            if (packed % 2 != 0) {
                st = sp_err_set(err, SP_E_CORRUPT,
                                "the subblock at offset %llu packs an odd number of bytes as "
                                "16-bit samples",
                                (unsigned long long)e->position);
            } else {
                uint8_t *interleaved = NULL;
                st = sp_alloc(limits, packed, "a CZI subblock", (void **)&interleaved, err);
                for (uint64_t i = 0; st == SP_OK && i < packed / 2; i++) {
                    interleaved[2 * i] = unpacked[i];
                    interleaved[2 * i + 1] = unpacked[packed / 2 + i];
                }
                if (st == SP_OK) {
                    free(unpacked);
                    unpacked = interleaved;
                }
            }
        }
        pixels = unpacked;
    } else if (st == SP_OK && len < packed) {
        st = sp_err_set(err, SP_E_CORRUPT,
                        "the subblock at offset %llu holds %zu bytes, short of the %llu of %llu x "
                        "%llu pixels",
                        (unsigned long long)e->position, len, (unsigned long long)packed,
                        (unsigned long long)w, (unsigned long long)h);
    }
    if (st == SP_OK && pixels != NULL) {
        uint8_t *d = rgba;
        const uint8_t *p = pixels;
        for (uint64_t i = 0; i < w * h; i++, d += 4, p += bpp) {
            if (bpp == 1) {
                d[0] = d[1] = d[2] = p[0];
            } else if (bpp == 6) {
                d[0] = p[5], d[1] = p[3], d[2] = p[1]; /* the high bytes, as OpenSlide */
            } else {
                d[0] = p[2], d[1] = p[1], d[2] = p[0];
            }
            d[3] = 255;
        }
    }
    free(data);
    free(unpacked);
    if (st != SP_OK) {
        free(rgba);
        return st;
    }
    *out = rgba;
    return SP_OK;
}

static int64_t floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/* Subblock `e`'s rectangle on a level of downsample d. */
static void place(const czi_image *im, const sp_czi_entry *e, int64_t d, int64_t *x, int64_t *y) {
    *x = floor_div(e->x - im->min_x, d);
    *y = floor_div(e->y - im->min_y, d);
}

/* Paint the subblocks `items` (n of them) of level `l` onto the area (x0, y0, w, h) of that
 * level, in `rgba` (rows of `stride` bytes), later ones over earlier ones. */
static sp_status paint(const czi_image *im, const sp_limits *limits, const czi_level *l,
                       const int32_t *items, int64_t n, int64_t x0, int64_t y0, int64_t w,
                       int64_t h, uint8_t *rgba, uint64_t stride, sp_err *err) {
    for (int64_t i = 0; i < n; i++) {
        const sp_czi_entry *e = &im->file.entries[items[i]];
        int64_t ex, ey;
        place(im, e, l->downsample, &ex, &ey);
        int64_t ix0 = ex > x0 ? ex : x0, iy0 = ey > y0 ? ey : y0;
        int64_t ix1 = ex + e->stored_width < x0 + w ? ex + e->stored_width : x0 + w;
        int64_t iy1 = ey + e->stored_height < y0 + h ? ey + e->stored_height : y0 + h;
        if (ix0 >= ix1 || iy0 >= iy1) {
            continue;
        }
        uint8_t *px = NULL;
        sp_status st = decode_subblock(im->src, limits, e, &px, err);
        if (st != SP_OK) {
            return st;
        }
        for (int64_t y = iy0; y < iy1; y++) {
            memcpy(rgba + (uint64_t)(y - y0) * stride + (uint64_t)(ix0 - x0) * 4,
                   px + ((uint64_t)(y - ey) * (uint64_t)e->stored_width + (uint64_t)(ix0 - ex)) * 4,
                   (size_t)(ix1 - ix0) * 4);
        }
        free(px);
    }
    return SP_OK;
}

static void clear(uint8_t *rgba, uint64_t stride, int64_t w, int64_t h) {
    for (int64_t r = 0; r < h; r++) {
        memset(rgba + (uint64_t)r * stride, 0, (size_t)w * 4);
    }
}

static sp_status czi_read_tile(sp_slide *s, const sp_level *level, int64_t col, int64_t row,
                               uint8_t *rgba, uint64_t stride, sp_err *err) {
    const czi *c = s->priv;
    const czi_level *l = level->priv;
    clear(rgba, stride, level->tile_width, level->tile_height);
    int64_t t = row * l->across + col;
    sp_status st =
        paint(&c->image, &s->limits, l, l->items + l->first[t], l->first[t + 1] - l->first[t],
              col * l->tile_w, row * l->tile_h, l->tile_w, l->tile_h, rgba, stride, err);
    if (st != SP_OK) {
        clear(rgba, stride, level->tile_width, level->tile_height);
    }
    return st;
}

static sp_status czi_read_associated(sp_slide *s, const sp_associated *a, uint8_t *rgba,
                                     uint64_t stride, sp_err *err) {
    const czi_assoc *as = a->priv;
    if (as->embedded) {
        const czi_level *l = &as->image.levels[0];
        clear(rgba, stride, a->width, a->height);
        sp_status st = SP_OK;
        for (int64_t t = 0; st == SP_OK && t < l->across * l->down; t++) {
            int64_t x0 = t % l->across * l->tile_w, y0 = t / l->across * l->tile_h;
            int64_t w = a->width - x0 < l->tile_w ? a->width - x0 : l->tile_w;
            int64_t h = a->height - y0 < l->tile_h ? a->height - y0 : l->tile_h;
            st = paint(&as->image, &s->limits, l, l->items + l->first[t],
                       l->first[t + 1] - l->first[t], x0, y0, w, h,
                       rgba + (uint64_t)y0 * stride + (uint64_t)x0 * 4, stride, err);
        }
        return st;
    }
    void *jpeg = NULL;
    sp_status st = sp_alloc(&s->limits, as->len, "a CZI attachment", &jpeg, err);
    if (st == SP_OK) {
        st = sp_source_read(s->src, as->offset, jpeg, (size_t)as->len, err);
    }
    if (st == SP_OK) {
        st =
            sp_jpeg_decode_rgba(jpeg, (size_t)as->len, NULL, 0, SP_JPEG_SPACE_AUTO,
                                (uint64_t)a->width, (uint64_t)a->height, rgba, (size_t)stride, err);
    }
    free(jpeg);
    return st;
}

static void image_free(czi_image *im, bool own_source) {
    for (int i = 0; i < im->n_levels; i++) {
        free(im->levels[i].first);
        free(im->levels[i].items);
    }
    sp_czi_file_free(&im->file);
    if (own_source) {
        sp_source_close(im->src);
    }
    memset(im, 0, sizeof *im);
}

static void czi_destroy(sp_slide *s) {
    czi *c = s->priv;
    if (c == NULL) {
        return;
    }
    image_free(&c->image, false);
    for (int i = 0; i < 3; i++) {
        image_free(&c->assoc[i].image, true);
    }
    free(c);
    s->priv = NULL;
}

static const sp_slide_ops czi_ops = {
    .read_tile = czi_read_tile,
    .read_associated = czi_read_associated,
    .destroy = czi_destroy,
};

/* ---- levels ---------------------------------------------------------------------------------- */

/* A subblock's downsample: its logical width over its stored width, rounded to the closest
 * integer (as OpenSlide 4 computes it). */
static int64_t entry_downsample(const sp_czi_entry *e) {
    int64_t d = (e->width + e->stored_width / 2) / e->stored_width;
    return d < 1 ? 1 : d;
}

static bool in_plane(const sp_czi_entry *e, const int64_t want[3]) {
    return e->start[SP_CZI_Z] == want[0] && e->start[SP_CZI_C] == want[1] &&
           e->start[SP_CZI_T] == want[2];
}

/* A subblock in a sort: by key (its scene, or its mosaic index M), then by directory order. */
typedef struct czi_sorted {
    int64_t key;
    int32_t entry;
} czi_sorted;

static int by_key(const void *pa, const void *pb) {
    const czi_sorted *a = pa, *b = pb;
    if (a->key != b->key) {
        return a->key < b->key ? -1 : 1;
    }
    return (a->entry > b->entry) - (a->entry < b->entry);
}

/* Fill level `l`'s tile grid with the subblocks `order` (n, drawing order) whose downsample is
 * its. */
static sp_status index_level(czi_image *im, const sp_limits *limits, czi_level *l,
                             const int32_t *order, size_t n, sp_err *err) {
    const int64_t d = l->downsample;
    int64_t tw = 0, th = 0;
    for (size_t i = 0; i < n; i++) {
        const sp_czi_entry *e = &im->file.entries[order[i]];
        if (entry_downsample(e) == d) {
            tw = e->stored_width > tw ? e->stored_width : tw;
            th = e->stored_height > th ? e->stored_height : th;
        }
    }
    l->tile_w = tw < TILE_MIN ? TILE_MIN : tw > TILE_MAX ? TILE_MAX : tw;
    l->tile_h = th < TILE_MIN ? TILE_MIN : th > TILE_MAX ? TILE_MAX : th;
    l->across = (l->width + l->tile_w - 1) / l->tile_w;
    l->down = (l->height + l->tile_h - 1) / l->tile_h;
    void *first = NULL, *items = NULL;
    sp_status st = sp_calloc(limits, (uint64_t)(l->across * l->down + 1), sizeof(int64_t),
                             "a CZI level's tile index", &first, err);
    if (st != SP_OK) {
        return st;
    }
    l->first = first;
    /* Two passes: count each tile's subblocks, then list them. */
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < n; i++) {
            const sp_czi_entry *e = &im->file.entries[order[i]];
            if (entry_downsample(e) != d) {
                continue;
            }
            int64_t x, y;
            place(im, e, d, &x, &y);
            int64_t c0 = floor_div(x, l->tile_w), r0 = floor_div(y, l->tile_h);
            int64_t c1 = floor_div(x + e->stored_width - 1, l->tile_w);
            int64_t r1 = floor_div(y + e->stored_height - 1, l->tile_h);
            c0 = c0 < 0 ? 0 : c0, r0 = r0 < 0 ? 0 : r0;
            c1 = c1 >= l->across ? l->across - 1 : c1, r1 = r1 >= l->down ? l->down - 1 : r1;
            for (int64_t r = r0; r <= r1; r++) {
                for (int64_t c = c0; c <= c1; c++) {
                    int64_t t = r * l->across + c;
                    if (pass == 0) {
                        l->first[t + 1]++;
                    } else {
                        l->items[l->first[t]++] = order[i];
                    }
                }
            }
        }
        if (pass == 0) {
            for (int64_t t = 0; t < l->across * l->down; t++) {
                l->first[t + 1] += l->first[t];
            }
            st = sp_calloc(limits, (uint64_t)l->first[l->across * l->down] + 1, sizeof(int32_t),
                           "a CZI level's tile index", &items, err);
            if (st != SP_OK) {
                return st;
            }
            l->items = items;
        }
    }
    /* The second pass moved each start to the next tile's: shift them back. */
    memmove(l->first + 1, l->first, (size_t)(l->across * l->down) * sizeof(int64_t));
    l->first[0] = 0;
    return SP_OK;
}

/* Build `im`'s levels from the subblocks of plane `want`. Level 0 is width x height (the
 * metadata's SizeX and SizeY) or, where those are 0, the bounding box of the full-resolution
 * subblocks; the origin is the top-left of all subblocks. A downsample is kept only when every
 * scene has it, so that the lowest level shows them all (as OpenSlide 4). */
static sp_status build_image(czi_image *im, const sp_limits *limits, const int64_t want[3],
                             int64_t width, int64_t height, sp_err *err) {
    int64_t x0 = INT64_MAX, y0 = INT64_MAX, x1 = INT64_MIN, y1 = INT64_MIN;
    int64_t found[MAX_LEVELS];
    int n = 0;
    int32_t *order = NULL;
    size_t n_order = 0;
    sp_status st = sp_calloc(limits, im->file.n_entries, sizeof *order, "the CZI subblock order",
                             (void **)&order, err);
    im->min_x = im->min_y = INT64_MAX;
    for (size_t i = 0; st == SP_OK && i < im->file.n_entries; i++) {
        const sp_czi_entry *e = &im->file.entries[i];
        int64_t d = entry_downsample(e);
        im->min_x = e->x < im->min_x ? e->x : im->min_x;
        im->min_y = e->y < im->min_y ? e->y : im->min_y;
        if (d == 1) {
            x0 = e->x < x0 ? e->x : x0;
            y0 = e->y < y0 ? e->y : y0;
            x1 = e->x + e->width > x1 ? e->x + e->width : x1;
            y1 = e->y + e->height > y1 ? e->y + e->height : y1;
        }
        if (!in_plane(e, want)) {
            continue;
        }
        st = check_entry(e, limits, err);
        order[n_order++] = (int32_t)i;
        bool known = false;
        for (int k = 0; k < n; k++) {
            known = known || found[k] == d;
        }
        if (st == SP_OK && !known) {
            if (n == MAX_LEVELS) {
                st = sp_err_set(err, SP_E_UNSUPPORTED, "the subblocks make more than %d levels",
                                MAX_LEVELS);
            } else {
                found[n++] = d;
            }
        }
    }
    if (st == SP_OK && x0 == INT64_MAX) {
        st = sp_err_set(err, SP_E_CORRUPT,
                        "no subblock holds full-resolution pixels (all are pyramid subblocks)");
    }
    if (st != SP_OK) {
        free(order);
        return st;
    }
    /* The largest downsample every scene has (subblocks sorted by scene), then the drawing
     * order: by mosaic index, the highest frontmost, then in directory order. */
    czi_sorted *sorted = NULL;
    st =
        sp_calloc(limits, n_order, sizeof *sorted, "the CZI subblock order", (void **)&sorted, err);
    if (st != SP_OK) {
        free(order);
        return st;
    }
    for (size_t i = 0; i < n_order; i++) {
        sorted[i] = (czi_sorted){im->file.entries[order[i]].start[SP_CZI_S], order[i]};
    }
    if (n_order > 1) {
        qsort(sorted, n_order, sizeof *sorted, by_key);
    }
    int64_t common = INT64_MAX, most = 0;
    for (size_t i = 0; i < n_order; i++) {
        int64_t d = entry_downsample(&im->file.entries[sorted[i].entry]);
        most = d > most ? d : most;
        if (i + 1 == n_order || sorted[i + 1].key != sorted[i].key) {
            common = most < common ? most : common;
            most = 0;
        }
    }
    for (size_t i = 0; i < n_order; i++) {
        sorted[i] = (czi_sorted){im->file.entries[order[i]].start[SP_CZI_M], order[i]};
    }
    if (n_order > 1) {
        qsort(sorted, n_order, sizeof *sorted, by_key);
    }
    for (size_t i = 0; i < n_order; i++) {
        order[i] = sorted[i].entry;
    }
    free(sorted);
    /* Ascending downsamples (few levels). */
    for (int i = 1; i < n; i++) {
        for (int k = i; k > 0 && found[k - 1] > found[k]; k--) {
            int64_t tmp = found[k];
            found[k] = found[k - 1];
            found[k - 1] = tmp;
        }
    }
    const int64_t w0 = width > 0 ? width : x1 - x0, h0 = height > 0 ? height : y1 - y0;
    for (int i = 0; st == SP_OK && i < n; i++) {
        czi_level *l = &im->levels[im->n_levels];
        l->downsample = found[i];
        l->width = w0 / found[i];
        l->height = h0 / found[i];
        if (found[i] > common || l->width < 1 || l->height < 1) {
            continue; /* a downsample some scene lacks, or larger than the image */
        }
        im->n_levels++;
        st = index_level(im, limits, l, order, n_order, err);
    }
    free(order);
    return st;
}

/* ---- associated images ----------------------------------------------------------------------- */

typedef struct offset_source {
    sp_source *parent;
    uint64_t base;
} offset_source;

static sp_status offset_read(void *ctx, uint64_t offset, void *buf, size_t len, size_t *got,
                             sp_err *err) {
    offset_source *o = ctx;
    sp_status st = sp_source_read(o->parent, o->base + offset, buf, len, err);
    *got = st == SP_OK ? len : 0;
    return st;
}

static void offset_close(void *ctx) {
    free(ctx);
}

static const sp_source_impl OFFSET_IMPL = {.read_at = offset_read, .close = offset_close};

/* An embedded CZI attachment: its level 0 (plane 0) is the image. */
static sp_status open_embedded(sp_slide *s, czi_assoc *as, sp_err *err) {
    offset_source *o = malloc(sizeof *o);
    if (o == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory");
    }
    o->parent = s->src;
    o->base = as->offset;
    char name[128];
    snprintf(name, sizeof name, "the %s attachment", as->attachment.name);
    sp_status st = sp_source_create(&OFFSET_IMPL, o, as->len, name, &as->image.src, err);
    if (st == SP_OK) {
        st = sp_czi_read_file(as->image.src, &s->limits, &as->image.file, err);
    }
    int64_t want[3] = {0, 0, 0};
    for (size_t i = 0; st == SP_OK && i < as->image.file.n_entries; i++) {
        const sp_czi_entry *e = &as->image.file.entries[i];
        for (int k = 0; k < 3 && i == 0; k++) {
            want[k] = e->start[k]; /* the first subblock's plane */
        }
    }
    if (st == SP_OK) {
        st = build_image(&as->image, &s->limits, want, 0, 0, err);
    }
    if (st == SP_OK && (as->image.n_levels == 0 || as->image.levels[0].downsample != 1)) {
        st = sp_err_set(err, SP_E_CORRUPT, "the embedded image has no full-resolution level");
    }
    as->embedded = true;
    return st;
}

static sp_status add_associated(sp_slide *s, czi *c, sp_err *err) {
    for (size_t i = 0; i < c->image.file.n_attachments; i++) {
        const sp_czi_attachment *a = &c->image.file.attachments[i];
        for (int k = 0; k < 3; k++) {
            czi_assoc *as = &c->assoc[k];
            if (strcmp(a->name, ASSOCIATED[k][0]) != 0 || as->len != 0) {
                continue;
            }
            bool jpeg = strcmp(a->type, "JPG") == 0, embedded = strcmp(a->type, "CZI") == 0;
            if (!jpeg && !embedded) {
                continue; /* another kind of content: not an image read here */
            }
            as->attachment = *a;
            sp_status st = sp_czi_attachment_data(s->src, a, &as->offset, &as->len, err);
            int64_t w = 0, h = 0;
            if (st == SP_OK && jpeg) {
                uint8_t head[65536];
                size_t n = as->len < sizeof head ? (size_t)as->len : sizeof head;
                uint32_t jw = 0, jh = 0;
                int components = 0;
                st = sp_source_read(s->src, as->offset, head, n, err);
                if (st == SP_OK) {
                    st = sp_jpeg_read_header(head, n, NULL, 0, &jw, &jh, &components, err);
                }
                w = jw, h = jh;
            } else if (st == SP_OK) {
                st = open_embedded(s, as, err);
                if (st == SP_OK) {
                    w = as->image.levels[0].width, h = as->image.levels[0].height;
                }
            }
            if (st == SP_OK) {
                st = sp_slide_add_associated(s, ASSOCIATED[k][1], w, h, as, err);
            }
            if (st != SP_OK) {
                char msg[SP_ERR_MSG_MAX];
                snprintf(msg, sizeof msg, "%s", err != NULL ? err->msg : "");
                sp_err_clear(err);
                return sp_err_set(err, st, "the %s attachment: %s", a->name, msg);
            }
        }
    }
    return SP_OK;
}

/* ---- open ------------------------------------------------------------------------------------ */

/* ---- properties ------------------------------------------------------------------------------ */

/* The metadata sections flattened into zeiss.* properties, as OpenSlide 4 flattens them: a key is
 * the path of element names below /ImageDocument/Metadata joined by dots, its value the element's
 * last non-blank text; an attribute adds a component of its own name. A member of a list (an
 * element in a parent named as its plural, such as Objectives/Objective, or Items/Distance) is
 * named by its Id attribute, else its Name, else left out; sibling elements that would take the
 * same name are all left out, so that none clobbers another. */
static const char *const SECTIONS[] = {"AttachmentInfos", "DisplaySetting", "Information",
                                       "Scaling"};
#define MAX_KEY 1024
#define MAX_ZEISS_PROPERTIES 20000

typedef struct flattener {
    sp_slide *slide;
    char key[MAX_KEY];
    size_t len;
    size_t added;
    sp_status st;
    sp_err *err;
} flattener;

/* The name `node` takes below its parent, named `parent` in the key (xmlFree it), or NULL. */
static xmlChar *member_name(const char *parent, const xmlNode *node) {
    const char *name = (const char *)node->name;
    if (name == NULL) {
        return NULL; /* a CDATA section: not text to OpenSlide either */
    }
    size_t n = strlen(name);
    bool member = (strlen(parent) == n + 1 && strncmp(parent, name, n) == 0 && parent[n] == 's') ||
                  (strcmp(parent, "Items") == 0 && strcmp(name, "Distance") == 0);
    if (!member) {
        return xmlStrdup(node->name);
    }
    xmlChar *id = xmlGetProp(node, BAD_CAST "Id");
    return id != NULL ? id : xmlGetProp(node, BAD_CAST "Name");
}

/* Append ".component" to the key; false (the key unchanged) when it would be too long. */
static bool push(flattener *f, const char *component) {
    size_t n = strlen(component);
    if (f->len + 1 + n >= MAX_KEY) {
        return false;
    }
    f->key[f->len] = '.';
    memcpy(f->key + f->len + 1, component, n + 1);
    f->len += 1 + n;
    return true;
}

static void pop(flattener *f, size_t len) {
    f->len = len;
    f->key[len] = '\0';
}

static void set_text(flattener *f, const xmlNode *text) {
    if (f->st != SP_OK || text == NULL || !xmlNodeIsText(text) || xmlIsBlankNode(text) ||
        text->content == NULL) {
        return;
    }
    if (f->added++ >= MAX_ZEISS_PROPERTIES) {
        return; /* docs/formats.md: the rest of a huge document is left out */
    }
    f->st = sp_props_set(&f->slide->props, f->key, (const char *)text->content, f->err);
}

/* The key's last component (what `node`'s children see as their parent's name). */
static const char *last_component(const flattener *f) {
    const char *dot = strrchr(f->key, '.');
    return dot != NULL ? dot + 1 : f->key;
}

typedef struct czi_child {
    xmlChar *name; /* NULL: a list member with neither Id nor Name */
    xmlNode *node;
    size_t position;
    bool repeated;
} czi_child;

static int by_name(const void *pa, const void *pb) {
    const czi_child *a = pa, *b = pb;
    if (a->name == NULL || b->name == NULL) {
        return (a->name != NULL) - (b->name != NULL);
    }
    return strcmp((const char *)a->name, (const char *)b->name);
}

static int by_position(const void *pa, const void *pb) {
    const czi_child *a = pa, *b = pb;
    return (a->position > b->position) - (a->position < b->position);
}

static void flatten(flattener *f, xmlNode *node, const char *name) {
    const size_t len = f->len;
    if (f->st != SP_OK || !push(f, name)) {
        return;
    }
    for (xmlAttr *a = node->type == XML_ELEMENT_NODE ? node->properties : NULL; a != NULL;
         a = a->next) {
        const size_t at = f->len;
        if (push(f, (const char *)a->name)) {
            set_text(f, a->children);
            pop(f, at);
        }
    }
    /* The children's names, sorted to find those that more than one child takes. */
    const char *parent = last_component(f);
    size_t n = 0;
    for (xmlNode *child = node->children; child != NULL; child = child->next) {
        n += !xmlNodeIsText(child);
    }
    czi_child *kids = n > 0 ? calloc(n, sizeof *kids) : NULL;
    if (n > 0 && kids == NULL) {
        f->st = sp_err_set(f->err, SP_E_NOMEM, "out of memory reading the CZI metadata");
        pop(f, len);
        return;
    }
    size_t k = 0;
    for (xmlNode *child = node->children; child != NULL; child = child->next) {
        if (!xmlNodeIsText(child)) {
            kids[k] = (czi_child){member_name(parent, child), child, k, false};
            k++;
        }
    }
    if (n > 1) {
        qsort(kids, n, sizeof *kids, by_name);
    }
    for (size_t i = 0; i + 1 < n; i++) {
        if (kids[i].name != NULL && kids[i + 1].name != NULL &&
            xmlStrEqual(kids[i].name, kids[i + 1].name)) {
            kids[i].repeated = kids[i + 1].repeated = true;
        }
    }
    if (n > 1) {
        qsort(kids, n, sizeof *kids, by_position);
    }
    k = 0;
    for (xmlNode *child = node->children; f->st == SP_OK && child != NULL; child = child->next) {
        if (xmlNodeIsText(child)) {
            set_text(f, child);
        } else {
            const czi_child *kid = &kids[k++];
            if (kid->name != NULL && !kid->repeated) { /* no Id or Name; or a repeated name */
                flatten(f, child, (const char *)kid->name);
            }
        }
    }
    for (size_t i = 0; i < n; i++) {
        xmlFree(kids[i].name);
    }
    free(kids);
    pop(f, len);
}

/* A property's value as a positive number; 0 when absent or not one. */
static double prop_number(const sp_slide *s, const char *key) {
    const char *text = sp_props_get(&s->props, key);
    if (text == NULL) {
        return 0;
    }
    char *end = NULL;
    double v = strtod(text, &end);
    return end != text && v > 0 && isfinite(v) ? v : 0;
}

/* zeiss.* from the metadata XML; then the MPP (metres per pixel in Scaling), the objective power
 * (the NominalMagnification of the objective Information/Image/ObjectiveSettings/ObjectiveRef
 * names) and level 0's size (Information/Image/SizeX and SizeY; 0 when absent). */
static sp_status add_properties(sp_slide *s, const czi *c, int64_t *width, int64_t *height,
                                sp_err *err) {
    *width = *height = 0;
    char *xml = NULL;
    size_t len = 0;
    xmlDoc *doc = NULL;
    sp_status st = sp_czi_read_metadata(s->src, &s->limits, &c->image.file, &xml, &len, err);
    if (st == SP_OK && xml != NULL) {
        st = sp_vendor_xml_parse(xml, len, &s->limits, "the CZI metadata", &doc, err);
    }
    xmlNode *root = doc != NULL ? xmlDocGetRootElement(doc) : NULL;
    if (st == SP_OK && root != NULL && sp_vendor_xml_is(root, "ImageDocument")) {
        flattener *f = calloc(1, sizeof *f);
        if (f == NULL) {
            st = sp_err_set(err, SP_E_NOMEM, "out of memory reading the CZI metadata");
        }
        for (xmlNode *m = root->children; f != NULL && m != NULL; m = m->next) {
            if (m->type != XML_ELEMENT_NODE || !sp_vendor_xml_is(m, "Metadata")) {
                continue;
            }
            for (size_t i = 0; i < sizeof SECTIONS / sizeof *SECTIONS; i++) {
                for (xmlNode *n = m->children; n != NULL; n = n->next) {
                    if (n->type == XML_ELEMENT_NODE && sp_vendor_xml_is(n, SECTIONS[i])) {
                        *f = (flattener){.slide = s, .err = err, .key = "zeiss"};
                        f->len = strlen(f->key);
                        flatten(f, n, SECTIONS[i]);
                        st = f->st;
                        break; /* the first, as an XPath selecting one node */
                    }
                }
            }
            break;
        }
        free(f);
    }
    if (doc != NULL) {
        xmlFreeDoc(doc);
    }
    free(xml);
    static const char *const SCALE[2][2] = {{"zeiss.Scaling.Items.X.Value", SP_PROPERTY_MPP_X},
                                            {"zeiss.Scaling.Items.Y.Value", SP_PROPERTY_MPP_Y}};
    for (int i = 0; st == SP_OK && i < 2; i++) {
        double metres = prop_number(s, SCALE[i][0]);
        if (metres > 0) {
            st = sp_slide_set_number(s, SCALE[i][1], metres * 1e6, err);
        }
    }
    const char *ref =
        sp_props_get(&s->props, "zeiss.Information.Image.ObjectiveSettings.ObjectiveRef.Id");
    if (st == SP_OK && ref != NULL && strlen(ref) < 256) {
        char key[320];
        snprintf(key, sizeof key, "zeiss.Information.Instrument.Objectives.%s.NominalMagnification",
                 ref);
        double power = prop_number(s, key);
        if (power > 0) {
            st = sp_slide_set_number(s, SP_PROPERTY_OBJECTIVE_POWER, power, err);
        }
    }
    double w = prop_number(s, "zeiss.Information.Image.SizeX");
    double h = prop_number(s, "zeiss.Information.Image.SizeY");
    if (w >= 1 && h >= 1 && w < 4e9 && h < 4e9) {
        *width = (int64_t)w, *height = (int64_t)h;
    }
    return st;
}

static sp_status czi_open(sp_slide *s, sp_probe *p, sp_err *err) {
    (void)p;
    czi *c = calloc(1, sizeof *c);
    if (c == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory opening a CZI slide");
    }
    s->priv = c;
    s->ops = &czi_ops;
    c->image.src = s->src;
    sp_status st = sp_czi_read_file(s->src, &s->limits, &c->image.file, err);
    if (st != SP_OK) {
        return st;
    }
    /* Planes: each of Z, C, T numbered from its lowest start. */
    int64_t lo[3] = {INT64_MAX, INT64_MAX, INT64_MAX}, hi[3] = {INT64_MIN, INT64_MIN, INT64_MIN};
    for (size_t i = 0; i < c->image.file.n_entries; i++) {
        for (int k = 0; k < 3; k++) {
            int64_t v = c->image.file.entries[i].start[k];
            lo[k] = v < lo[k] ? v : lo[k];
            hi[k] = v > hi[k] ? v : hi[k];
        }
    }
    int64_t want[3];
    for (int k = 0; k < 3; k++) {
        s->plane_count[k] = hi[k] - lo[k] + 1;
        if (s->plane[k] >= s->plane_count[k]) {
            return SP_OK; /* the slide layer names the missing plane */
        }
        want[k] = lo[k] + s->plane[k];
    }
    int64_t width = 0, height = 0;
    st = add_properties(s, c, &width, &height, err);
    if (st == SP_OK) {
        st = build_image(&c->image, &s->limits, want, width, height, err);
    }
    for (int i = 0; st == SP_OK && i < c->image.n_levels; i++) {
        czi_level *l = &c->image.levels[i];
        const char *compression = NULL; /* one name for all the level's subblocks, or "mixed" */
        for (size_t k = 0; k < c->image.file.n_entries; k++) {
            const sp_czi_entry *e = &c->image.file.entries[k];
            if (in_plane(e, want) && entry_downsample(e) == l->downsample) {
                const char *name = e->compression == SP_CZI_JPEG     ? "jpeg"
                                   : e->compression == SP_CZI_JPEGXR ? "jpegxr"
                                   : e->compression == SP_CZI_RAW    ? "none"
                                                                     : "zstd";
                compression = compression == NULL || compression == name ? name : "mixed";
            }
        }
        sp_level level = {
            .width = l->width,
            .height = l->height,
            .downsample = (double)l->downsample,
            .tile_width = l->tile_w,
            .tile_height = l->tile_h,
            .tiles_across = l->across,
            .tiles_down = l->down,
            .compression = compression,
            .priv = l,
        };
        st = sp_slide_add_level(s, &level, err);
    }
    if (st == SP_OK) {
        st = add_associated(s, c, err);
    }
    return st;
}

const sp_format sp_format_zeiss_czi = {"zeiss", czi_detect, czi_open};
