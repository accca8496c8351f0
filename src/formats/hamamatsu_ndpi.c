/* hamamatsu_ndpi.c — Hamamatsu NDPI: a TIFF whose directories carry the NDPI tags (65420 on).
 *
 * Each pyramid level (SourceLens > 0) is one strip holding one JPEG stream of the whole level,
 * cut by restart markers into intervals of whole MCUs; the macro image has SourceLens -1 and
 * the map -2 (not shown). A level is read as a grid of tiles, one tile per restart interval
 * (restart-interval MCUs wide, one MCU tall, as OpenSlide does): a tile's JPEG is the stream's
 * header with its frame size set to the tile's, then the interval's entropy-coded bytes, then
 * an end-of-image marker. The intervals start where the McuStarts tag (65426) says, or, when it
 * is absent or does not fit, where a scan of the strip finds the restart markers. So a region
 * decodes only the intervals under it, and a whole level is decoded once, in pieces. As in
 * OpenSlide, the smallest stored level seen through libjpeg's DCT scaling at 1/2, 1/4 and 1/8
 * gives three more levels. Properties: the key=value lines of tag 65449 and SourceLens, X/Y
 * offset from the slide centre become hamamatsu.*; the objective power is level 0's SourceLens
 * and the MPP comes from the resolution tags (centimetres). Focal planes are the directories'
 * Z offsets (chosen_plane); files past 4 GiB have their offsets widened by tiff.c.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/jpeg_restart.h"
#include "formats/tiff_slide.h"

enum {
    NDPI_TAG_FORMAT_FLAG = 65420,
    NDPI_TAG_SOURCE_LENS = 65421,
    NDPI_TAG_X_OFFSET = 65422,
    NDPI_TAG_Y_OFFSET = 65423,
    NDPI_TAG_Z_OFFSET = 65424,
    NDPI_TAG_MCU_STARTS = 65426,
    NDPI_TAG_MCU_STARTS_HIGH = 65432, /* the high halves of McuStarts, for strips past 4 GiB */
    NDPI_TAG_PROPERTY_MAP = 65449,
};

/* The most header bytes (SOI to the end of SOS) before the first interval. */
#define NDPI_MAX_HEADER SP_JPEG_RESTART_MAX_HEADER

/* One stored level's JPEG stream, cut into restart intervals. */
typedef struct ndpi_stream {
    uint8_t *header; /* SOI .. end of the SOS segment, frame size set to one tile's */
    size_t header_len;
    uint64_t *starts; /* n_tiles + 1: where each interval's bytes start, then the strip's end */
    uint64_t tile_width, tile_height; /* pixels of a tile decoded at full size */
    uint64_t tiles_across, tiles_down;
} ndpi_stream;

/* A level: a stored stream seen at 1/scale (scale 1, or 2, 4, 8 for the levels made from the
 * smallest stored one). */
typedef struct ndpi_level {
    const ndpi_stream *stream;
    unsigned scale;
} ndpi_level;

typedef struct ndpi {
    ndpi_stream *streams;
    uint32_t n_streams;
    ndpi_level *levels; /* sized once at open: sp_level.priv points into it */
} ndpi;

static bool ndpi_detect(const sp_probe *p) {
    return p->tiff != NULL && sp_tiff_find(&p->tiff->dirs[0], NDPI_TAG_FORMAT_FLAG) != NULL;
}

/* ---- restart intervals ---------------------------------------------------------------------- */

/* Interval starts from the McuStarts tag (offsets from the strip's start, widened by
 * McuStartsHighBytes where present); false when the tag is absent or does not describe n
 * increasing intervals after the header inside the strip. */
static bool starts_from_tag(const sp_tiff *t, const sp_tiff_dir *d, uint64_t strip,
                            uint64_t strip_end, uint64_t first, uint64_t n, uint64_t *starts) {
    const sp_tiff_entry *e = sp_tiff_find(d, NDPI_TAG_MCU_STARTS);
    const sp_tiff_entry *high = sp_tiff_find(d, NDPI_TAG_MCU_STARTS_HIGH);
    if (e == NULL || e->count != n || (high != NULL && high->count != n)) {
        return false;
    }
    for (uint64_t i = 0; i < n; i++) {
        uint64_t v, h = 0;
        if (!sp_tiff_entry_uint(t, e, i, &v) ||
            (high != NULL && !sp_tiff_entry_uint(t, high, i, &h)) || h > UINT32_MAX ||
            (v |= h << 32) > strip_end - strip) {
            return false;
        }
        starts[i] = strip + v;
        if ((i == 0 && starts[0] != first) || (i > 0 && starts[i] <= starts[i - 1] + 1)) {
            return false;
        }
    }
    starts[n] = strip_end;
    return starts[n - 1] < strip_end;
}

/* ---- opening a level ---------------------------------------------------------------------- */

static sp_status open_stream(const sp_tiff *t, const sp_limits *limits, const sp_tiff_dir *d,
                             uint32_t dir_index, ndpi_stream *out, sp_err *err) {
    char where[64];
    snprintf(where, sizeof where, "NDPI directory %u", dir_index);
    if (d->compression != SP_COMPRESSION_JPEG || d->tiled || d->n_chunks != 1 ||
        d->bits_per_sample != 8) {
        return sp_err_set(err, SP_E_UNSUPPORTED,
                          "%s: a level must be one 8-bit JPEG strip (compression %u, %llu chunks)",
                          where, d->compression, (unsigned long long)d->n_chunks);
    }
    uint64_t strip = d->chunk_offsets[0], strip_end;
    if (strip == 0 || !sp_add_u64(strip, d->chunk_byte_counts[0], &strip_end) ||
        strip_end > sp_source_size(t->src)) {
        return sp_err_set(err, SP_E_CORRUPT, "%s: the JPEG strip lies outside the file", where);
    }
    size_t want = d->chunk_byte_counts[0] < NDPI_MAX_HEADER ? (size_t)d->chunk_byte_counts[0]
                                                            : NDPI_MAX_HEADER;
    uint8_t *head = malloc(want > 0 ? want : 1);
    if (head == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory reading %s", where);
    }
    sp_jpeg_restart_layout lay = {0};
    sp_status st = sp_source_read(t->src, strip, head, want, err);
    if (st == SP_OK) {
        st = sp_jpeg_restart_parse_header(head, want, where, &lay, err);
    }
    /* One interval per tile; a stream without restart markers is one tile. */
    uint64_t mcus_across = (d->width + lay.mcu_width - 1) / (lay.mcu_width ? lay.mcu_width : 1);
    uint64_t mcus_down = (d->height + lay.mcu_height - 1) / (lay.mcu_height ? lay.mcu_height : 1);
    if (st == SP_OK && lay.restart_interval == 0) {
        out->tile_width = d->width;
        out->tile_height = d->height;
    } else if (st == SP_OK && mcus_across % lay.restart_interval != 0) {
        st = sp_err_set(err, SP_E_UNSUPPORTED,
                        "%s: the restart interval (%u MCUs) does not divide a row of %llu MCUs",
                        where, lay.restart_interval, (unsigned long long)mcus_across);
    } else if (st == SP_OK) {
        out->tile_width = (uint64_t)lay.restart_interval * lay.mcu_width;
        out->tile_height = lay.mcu_height;
    }
    if (st == SP_OK && (out->tile_width > 65535 || out->tile_height > 65535)) {
        st = sp_err_set(err, SP_E_UNSUPPORTED,
                        "%s: a %llux%llu JPEG without restart markers is too large to read", where,
                        (unsigned long long)d->width, (unsigned long long)d->height);
    }
    uint64_t n = 0;
    if (st == SP_OK) {
        out->tiles_across = (d->width + out->tile_width - 1) / out->tile_width;
        out->tiles_down = lay.restart_interval ? mcus_down : 1;
        n = out->tiles_across * out->tiles_down;
        st = sp_calloc(limits, n + 1, sizeof *out->starts, "NDPI restart intervals",
                       (void **)&out->starts, err);
    }
    if (st == SP_OK) {
        uint64_t first = strip + lay.header_len;
        if (!starts_from_tag(t, d, strip, strip_end, first, n, out->starts)) {
            st = sp_jpeg_restart_scan(t->src, first, strip_end, n, out->starts, where, err);
        }
    }
    if (st == SP_OK) {
        /* The tile's size in the frame header: what each tile's stream declares. */
        sp_jpeg_restart_set_frame_size(head, &lay, out->tile_width, out->tile_height);
        uint8_t *fitted = realloc(head, lay.header_len);
        out->header = fitted != NULL ? fitted : head;
        out->header_len = lay.header_len;
        return SP_OK;
    }
    free(head);
    free(out->starts);
    out->starts = NULL;
    return st;
}

/* ---- reading tiles ---------------------------------------------------------------------- */

static unsigned ndpi_area_scales(sp_slide *s, const sp_level *l) {
    (void)s;
    return sp_jpeg_restart_area_scales(((const ndpi_level *)l->priv)->scale);
}

static sp_status ndpi_read_tile_area(sp_slide *s, const sp_level *l, int64_t col, int64_t row,
                                     unsigned scale, int64_t x, int64_t y, int64_t w, int64_t h,
                                     sp_pixel_format format, uint8_t *dst, int64_t stride,
                                     const uint8_t *empty, sp_err *err) {
    const ndpi_level *nl = l->priv;
    const ndpi_stream *ns = nl->stream;
    unsigned total = nl->scale * scale;
    if (col < 0 || row < 0 || (uint64_t)col >= ns->tiles_across ||
        (uint64_t)row >= ns->tiles_down || total > 8) {
        return sp_err_set(err, SP_E_INVALID_ARG,
                          "NDPI tile (%lld, %lld) at 1/%u is not in the grid", (long long)col,
                          (long long)row, total);
    }
    uint64_t index = (uint64_t)row * ns->tiles_across + (uint64_t)col;
    return sp_jpeg_restart_decode_area(((const sp_tiff *)s->container)->src, &s->limits, ns->header,
                                       ns->header_len, ns->starts[index], ns->starts[index + 1],
                                       total, x, y, w, h, sp_pixel_format_bytes(format), dst,
                                       stride, empty, err);
}

static sp_status ndpi_read_tile(sp_slide *s, const sp_level *l, int64_t col, int64_t row,
                                uint8_t *rgba, uint64_t stride, sp_err *err) {
    static const uint8_t transparent[4] = {0, 0, 0, 0};
    return ndpi_read_tile_area(s, l, col, row, 1, 0, 0, l->tile_width, l->tile_height,
                               SP_PIXEL_RGBA8, rgba, (int64_t)stride, transparent, err);
}

static void ndpi_prefetch(sp_slide *s, const sp_level *l, const sp_tile_pos *tiles, size_t n) {
    const ndpi_stream *ns = ((const ndpi_level *)l->priv)->stream;
    sp_byte_range ranges[SP_PREFETCH_TILES];
    size_t count = 0;
    for (size_t i = 0; i < n && count < SP_PREFETCH_TILES; i++) {
        uint64_t index = (uint64_t)tiles[i].row * ns->tiles_across + (uint64_t)tiles[i].col;
        if ((uint64_t)tiles[i].col < ns->tiles_across && (uint64_t)tiles[i].row < ns->tiles_down) {
            ranges[count++] =
                (sp_byte_range){ns->starts[index], ns->starts[index + 1] - ns->starts[index]};
        }
    }
    sp_source_prefetch(((sp_tiff *)s->container)->src, ranges, count);
}

static void ndpi_destroy(sp_slide *s) {
    ndpi *nd = s->priv;
    if (nd != NULL) {
        for (uint32_t i = 0; i < nd->n_streams; i++) {
            free(nd->streams[i].header);
            free(nd->streams[i].starts);
        }
        free(nd->streams);
        free(nd->levels);
        free(nd);
        s->priv = NULL;
    }
    sp_tiff_close(s->container);
    s->container = NULL;
}

static const sp_slide_ops ndpi_ops = {
    .read_tile = ndpi_read_tile,
    .read_associated = sp_tiff_slide_read_associated,
    .destroy = ndpi_destroy,
    .area_scales = ndpi_area_scales,
    .read_tile_area = ndpi_read_tile_area,
    .prefetch = ndpi_prefetch,
};

/* ---- properties ------------------------------------------------------------------------- */

/* The key=value lines (ended by CR LF) of tag 65449 as hamamatsu.KEY, split at the first '='
 * and kept as they are (OpenSlide's keys and values, byte for byte); lines without '=' are
 * skipped. */
static sp_status add_property_map(sp_slide *s, const char *map, sp_err *err) {
    char *copy = strdup(map);
    if (copy == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory reading NDPI properties");
    }
    sp_status st = SP_OK;
    for (char *line = copy; st == SP_OK && line != NULL;) {
        char *next = strstr(line, "\r\n");
        if (next != NULL) {
            *next = '\0';
            next += 2;
        }
        char *eq = strchr(line, '=');
        char name[256];
        if (eq != NULL && eq > line) {
            *eq = '\0';
            if (snprintf(name, sizeof name, "hamamatsu.%s", line) < (int)sizeof name) {
                st = sp_props_set(&s->props, name, eq + 1, err);
            }
        }
        line = next;
    }
    free(copy);
    return st;
}

static sp_status add_properties(sp_slide *s, const sp_tiff_dir *d0, double lens, sp_err *err) {
    const sp_tiff *t = s->container;
    sp_status st = sp_tiff_slide_add_properties(s, d0, true, err);
    if (st == SP_OK) {
        st = sp_slide_set_number(s, "hamamatsu.SourceLens", lens, err);
    }
    if (st == SP_OK) {
        st = sp_slide_set_number(s, SP_PROPERTY_OBJECTIVE_POWER, lens, err);
    }
    static const struct {
        uint16_t tag;
        const char *key;
    } offsets[] = {{NDPI_TAG_X_OFFSET, "hamamatsu.XOffsetFromSlideCentre"},
                   {NDPI_TAG_Y_OFFSET, "hamamatsu.YOffsetFromSlideCentre"}};
    for (size_t i = 0; st == SP_OK && i < sizeof offsets / sizeof offsets[0]; i++) {
        double v;
        if (sp_tiff_entry_double(t, sp_tiff_find(d0, offsets[i].tag), 0, &v)) {
            st = sp_slide_set_number(s, offsets[i].key, v, err);
        }
    }
    const char *map = sp_tiff_entry_string(sp_tiff_find(d0, NDPI_TAG_PROPERTY_MAP));
    if (st == SP_OK && map != NULL) {
        st = add_property_map(s, map, err);
    }
    return st;
}

/* ---- open ---------------------------------------------------------------------------------- */

static double dir_number(const sp_tiff *t, const sp_tiff_dir *d, uint16_t tag, double absent) {
    double v;
    return sp_tiff_entry_double(t, sp_tiff_find(d, tag), 0, &v) ? v : absent;
}

static sp_status add_level(sp_slide *s, ndpi_level *nl, const ndpi_stream *ns, const sp_tiff_dir *d,
                           unsigned scale, sp_err *err) {
    nl->stream = ns;
    nl->scale = scale;
    sp_level l = {
        .width = (int64_t)((d->width + scale - 1) / scale),
        .height = (int64_t)((d->height + scale - 1) / scale),
        /* What a tile decodes to at 1/scale: ceil, as the level's size (the same as the floor
         * for restart intervals, whole MCUs; a stream without markers is one tile of any size,
         * and the floor of a tile under 8 pixels was 0). */
        .tile_width = (int64_t)((ns->tile_width + scale - 1) / scale),
        .tile_height = (int64_t)((ns->tile_height + scale - 1) / scale),
        .compression = "jpeg",
        .priv = nl,
    };
    sp_tiff_slide_take_icc(s, d); /* the first level's embedded ICC profile */
    return sp_slide_add_level(s, &l, err);
}

/* Whether directory d is a pyramid level (SourceLens > 0) of some focal plane. */
static bool is_level_dir(const sp_tiff *t, const sp_tiff_dir *d) {
    return dir_number(t, d, NDPI_TAG_SOURCE_LENS, 0) > 0 && d->width > 0 && d->height > 0;
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The focal planes: the distinct Z offsets of the pyramid directories, numbered from the one
 * nearest 0 (the plane OpenSlide shows, so the default), then the others by increasing offset.
 * Sets the slide's count and *z to the offset of the plane asked for; false when there is no
 * such plane (the slide layer names it). */
static bool chosen_plane(sp_slide *s, const sp_tiff *t, double *z) {
    double *offsets = malloc((t->n_dirs + 1) * sizeof *offsets);
    size_t n = 0;
    for (uint32_t i = 0; offsets != NULL && i < t->n_dirs; i++) {
        if (is_level_dir(t, &t->dirs[i])) {
            offsets[n++] = dir_number(t, &t->dirs[i], NDPI_TAG_Z_OFFSET, 0);
        }
    }
    if (offsets == NULL || n == 0) {
        free(offsets);
        *z = 0; /* out of memory, or no level: the open reports that */
        return true;
    }
    qsort(offsets, n, sizeof *offsets, compare_doubles);
    size_t distinct = 0, home = 0;
    for (size_t i = 0; i < n; i++) {
        if (distinct == 0 || offsets[i] != offsets[distinct - 1]) {
            offsets[distinct++] = offsets[i];
            if (fabs(offsets[distinct - 1]) < fabs(offsets[home])) {
                home = distinct - 1;
            }
        }
    }
    s->plane_count[SP_PLANE_Z] = (int64_t)distinct;
    int64_t k = s->plane[SP_PLANE_Z];
    bool found = k < (int64_t)distinct;
    if (found) {
        *z = k == 0 ? offsets[home] : offsets[(size_t)k <= home ? k - 1 : k];
    }
    free(offsets);
    return found;
}

static sp_status ndpi_open(sp_slide *s, sp_probe *p, sp_err *err) {
    sp_tiff_slide_adopt(s, p);
    s->ops = &ndpi_ops;
    const sp_tiff *t = s->container;
    ndpi *nd = calloc(1, sizeof *nd);
    if (nd != NULL) {
        nd->streams = calloc(t->n_dirs, sizeof *nd->streams);
        nd->levels = calloc((size_t)t->n_dirs + 3, sizeof *nd->levels);
    }
    s->priv = nd;
    if (nd == NULL || nd->streams == NULL || nd->levels == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory opening an NDPI slide");
    }
    double z = 0;
    if (!chosen_plane(s, t, &z)) {
        return SP_OK; /* the slide layer names the missing plane */
    }
    sp_status st = SP_OK;
    double lens0 = 0;
    uint32_t smallest = 0; /* the stream whose DCT-scaled views make three more levels */
    const sp_tiff_dir *smallest_dir = NULL;
    for (uint32_t i = 0; st == SP_OK && i < t->n_dirs; i++) {
        const sp_tiff_dir *d = &t->dirs[i];
        double lens = dir_number(t, d, NDPI_TAG_SOURCE_LENS, 0);
        if (lens == -1) {
            st = sp_tiff_slide_add_associated(s, "macro", d, err);
            continue;
        }
        if (!is_level_dir(t, d) || dir_number(t, d, NDPI_TAG_Z_OFFSET, 0) != z) {
            continue; /* the map (lens -2), other focal planes */
        }
        ndpi_stream *ns = &nd->streams[nd->n_streams];
        st = open_stream(t, &s->limits, d, i, ns, err);
        if (st != SP_OK) {
            break;
        }
        st = add_level(s, &nd->levels[nd->n_streams], ns, d, 1, err);
        if (nd->n_streams == 0) {
            lens0 = lens;
        }
        if (smallest_dir == NULL || d->width < smallest_dir->width) {
            smallest = nd->n_streams;
            smallest_dir = d;
        }
        nd->n_streams++;
    }
    uint32_t n_levels = nd->n_streams;
    for (unsigned scale = 2; st == SP_OK && smallest_dir != NULL && scale <= 8; scale *= 2) {
        st =
            add_level(s, &nd->levels[n_levels++], &nd->streams[smallest], smallest_dir, scale, err);
    }
    if (st == SP_OK && nd->n_streams == 0) {
        st = sp_err_set(err, SP_E_CORRUPT, "an NDPI file with no pyramid level");
    }
    if (st == SP_OK) {
        st = add_properties(s, &t->dirs[0], lens0, err);
    }
    return st;
}

const sp_format sp_format_hamamatsu_ndpi = {"hamamatsu", ndpi_detect, ndpi_open};
