/* mirax.c — 3DHISTECH MIRAX: `NAME.mrxs` beside a folder NAME/ holding Slidedat.ini, Index.dat
 * and the Data*.dat files whose JPEG images make the zoom levels (mirax_index.c reads the two
 * descriptions; this file places the images and reads pixels).
 *
 * The scanner's camera takes photos on a grid whose step is less than a photo (neighbours
 * overlap), records where each photo really landed (the position layer: 9-byte records, plain or
 * zlib-compressed), and cuts each photo into CameraImageDivisionsPerSide^2 stored images. Each
 * higher zoom level halves 2x2 images of the level below into one, whatever photo they came
 * from, so an image there spans several photos and is cut back into one piece per photo, each
 * drawn at its own photo's position. Placement follows OpenSlide 4's tile map: every piece has a
 * cell (col, row) in a grid of the level's nominal advance and a small offset from it. OpenSlide
 * draws the cells from the bottom-right with cairo's SATURATE operator, so where pieces overlap
 * the one with the largest (row, col) lies on top; a piece whose place falls between pixels (at
 * a zoom level, a camera position that is not a multiple of the concatenation: most of them on
 * a real slide) is resampled bilinearly by pixman, its edges partly transparent. Slidepipe
 * repeats that arithmetic (see paint_piece), so its pixels equal OpenSlide's output, the
 * partial alpha of those edges included. Positions whose level-0 images are all missing draw
 * nothing at any level. Slidepipe reads a level as a regular grid of tiles, each painted from
 * the pieces that meet it, decoding only the rectangle of each JPEG that it needs; when
 * OpenSlide reports a tile size (no overlap, no offsets) the grid uses it, else 256x256.
 * Levels keep OpenSlide's dimensions (the sum of image sizes less overlaps, divided by the
 * concatenation) and downsamples (the concatenation, exactly). Slidedat.ini's keys become
 * mirax.SECTION.KEY properties; level 0's section gives the MPP and the fill colour, GENERAL
 * the objective power. Label, macro and thumbnail are JPEG records. Each zoom level stores its
 * images in the format its IMAGE_FORMAT names: JPEG, PNG or BMP24 (24-bit bitmaps), each
 * decoded whole by its codec (src/codecs/); PNG and BMP decode to the same pixels as OpenSlide's.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codecs/codec.h"
#include "formats/format.h"
#include "formats/mirax_index.h"
#include "io/paths.h"

static const char MRXS_EXT[] = ".mrxs";
#define POSITION_RECORD 9
#define VIRTUAL_TILE 256

/* A rectangle of one stored image drawn at a place in its level. */
typedef struct mx_piece {
    int32_t record; /* index into the level's records */
    int32_t src_x, src_y, w, h;
    int64_t dst_x, dst_y; /* the whole pixel at or left of / above its place */
    int32_t frac_x, frac_y; /* its place's fraction of a pixel, in 1/65536 (pixman's fixed point) */
} mx_piece;

typedef struct mx_level {
    const sp_mirax_record *records;
    int image_w, image_h;
    double advance_x, advance_y;
    int64_t reach_x, reach_y; /* the most a piece reaches beyond its cell's nominal place */
    int32_t *cells;           /* images_x * images_y piece numbers, -1 where none */
    int64_t cols, rows;
    mx_piece *pieces;
    size_t n_pieces, cap_pieces;
    bool hint; /* OpenSlide reports a tile size (integer advance, no overlap, no offsets) */
    bool cut;  /* several pieces per image: OpenSlide draws each from an ARGB32 copy of its part,
                * else straight from the RGB24 image, and pixman composites the two differently */
    sp_mirax_image_format format; /* how its images are stored (IMAGE_FORMAT) */
} mx_level;

/* Decoded stored images, kept for the next tiles that need them: a tile meets several images
 * and an image several tiles, so without them each image would be decoded several times. */
#define IMAGE_CACHE_SLOTS 64
#define IMAGE_CACHE_BYTES ((size_t)32 << 20)

typedef struct mx_image {
    const struct mx_level *level; /* NULL: a free slot */
    int32_t record;
    uint8_t *rgba; /* image_w x image_h straight RGBA8 (alpha 255) */
    size_t bytes;
    uint64_t used;
    int refs;
} mx_image;

typedef struct mirax {
    sp_mirax_layout layout;
    sp_mirax_index index;
    sp_source **files;
    int n_files;
    mx_level levels[SP_MIRAX_MAX_LEVELS];
    sp_mirax_record assoc[3];
    pthread_mutex_t lock; /* guards the image cache */
    bool lock_made;
    mx_image images[IMAGE_CACHE_SLOTS];
    size_t image_bytes;
    uint64_t clock;
} mirax;

static bool mirax_detect(const sp_probe *p) {
    size_t n = strlen(p->path), e = strlen(MRXS_EXT);
    return p->tiff == NULL && !p->is_directory && p->src != NULL && n > e &&
           strcmp(p->path + n - e, MRXS_EXT) == 0;
}

/* ---- files ------------------------------------------------------------------------------------ */

/* A file name from Slidedat.ini must stay inside the slide's folder. */
static bool plain_name(const char *name) {
    return name[0] != '\0' && strchr(name, '/') == NULL && strchr(name, '\\') == NULL &&
           strcmp(name, ".") != 0 && strcmp(name, "..") != 0;
}

static sp_status open_sibling(const char *dir, const char *name, sp_source **out, sp_err *err) {
    if (!plain_name(name)) {
        return sp_err_set(err, SP_E_CORRUPT,
                          "Slidedat.ini names file \"%.60s\", which is not in the slide's folder",
                          name);
    }
    size_t len = strlen(dir) + strlen(name) + 2;
    char *path = malloc(len);
    if (path == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory opening a MIRAX file");
    }
    snprintf(path, len, "%s/%s", dir, name);
    sp_status st = sp_source_open_any(path, out, err);
    free(path);
    return st;
}

/* The bytes of a record (to free). */
static sp_status read_record(const mirax *m, const sp_limits *limits, const sp_mirax_record *r,
                             uint8_t **out, sp_err *err) {
    *out = NULL;
    if (r->length == 0) {
        return sp_err_set(err, SP_E_CORRUPT, "an empty record in MIRAX data file %d", r->fileno);
    }
    sp_status st = sp_alloc(limits, r->length, "a MIRAX record", (void **)out, err);
    if (st == SP_OK) {
        st = sp_source_read(m->files[r->fileno], r->offset, *out, r->length, err);
    }
    if (st != SP_OK) {
        free(*out);
        *out = NULL;
    }
    return st;
}

/* ---- positions ------------------------------------------------------------------------------ */

/* Where each camera position lies at level 0 (x, y pairs), from the position record or, without
 * one, from the nominal grid. */
static sp_status read_positions(const mirax *m, const sp_limits *limits, int64_t n_pos,
                                int64_t **out, sp_err *err) {
    const sp_mirax_layout *L = &m->layout;
    const sp_mirax_zoom *z0 = &L->zoom[0];
    int64_t *pos = NULL;
    sp_status st = sp_calloc(limits, (uint64_t)(n_pos > 0 ? n_pos : 1), 2 * sizeof *pos,
                             "MIRAX camera positions", (void **)&pos, err);
    if (st != SP_OK) {
        return st;
    }
    if (!m->index.has_position) {
        int64_t across = L->images_x / L->divisions;
        for (int64_t i = 0; i < n_pos; i++) {
            pos[2 * i] = (int64_t)((double)(i % across) *
                                   ((double)z0->image_w * L->divisions - z0->overlap_x));
            pos[2 * i + 1] = (int64_t)((double)(i / across) *
                                       ((double)z0->image_h * L->divisions - z0->overlap_y));
        }
        *out = pos;
        return SP_OK;
    }
    uint64_t want = (uint64_t)n_pos * POSITION_RECORD;
    uint8_t *raw = NULL, *buf = NULL;
    st = read_record(m, limits, &m->index.position, &raw, err);
    if (st == SP_OK && L->positions_compressed) {
        size_t got = 0;
        st = sp_alloc(limits, want > 0 ? want : 1, "MIRAX camera positions", (void **)&buf, err);
        if (st == SP_OK) {
            st = sp_deflate_decode(raw, m->index.position.length, buf, (size_t)want, &got, err);
        }
        if (st == SP_OK && got != want) {
            st = sp_err_set(err, SP_E_CORRUPT,
                            "the compressed position layer holds %zu bytes where %llu positions "
                            "need %llu",
                            got, (unsigned long long)n_pos, (unsigned long long)want);
        }
    } else if (st == SP_OK) {
        if (m->index.position.length != want) {
            st = sp_err_set(err, SP_E_CORRUPT,
                            "the position layer holds %u bytes where %llu positions need %llu",
                            m->index.position.length, (unsigned long long)n_pos,
                            (unsigned long long)want);
        }
        buf = raw;
        raw = NULL;
    }
    int64_t concat0 = (int64_t)1 << z0->concat_exponent;
    for (int64_t i = 0; st == SP_OK && i < n_pos; i++) {
        const uint8_t *p = buf + POSITION_RECORD * i;
        if (p[0] & 0xFE) {
            st = sp_err_set(err, SP_E_CORRUPT, "camera position %lld has flag %u", (long long)i,
                            p[0]);
            break;
        }
        int32_t x = (int32_t)((uint32_t)p[1] | (uint32_t)p[2] << 8 | (uint32_t)p[3] << 16 |
                              (uint32_t)p[4] << 24);
        int32_t y = (int32_t)((uint32_t)p[5] | (uint32_t)p[6] << 8 | (uint32_t)p[7] << 16 |
                              (uint32_t)p[8] << 24);
        pos[2 * i] = (int64_t)x * concat0;
        pos[2 * i + 1] = (int64_t)y * concat0;
    }
    free(raw);
    free(buf);
    if (st != SP_OK) {
        free(pos);
        return st;
    }
    *out = pos;
    return SP_OK;
}

/* ---- placing the pieces ------------------------------------------------------------------- */

/* The per-level parameters of OpenSlide's MIRAX reader. */
typedef struct level_params {
    int64_t concat, tile_count_divisor, tiles_per_image, positions_per_tile;
    double tile_w, tile_h;
} level_params;

static sp_status add_piece(mx_level *l, const sp_limits *limits, const mx_piece *piece,
                           int64_t col, int64_t row, sp_err *err) {
    if (l->n_pieces == l->cap_pieces) {
        size_t cap = l->cap_pieces ? l->cap_pieces * 2 : 256;
        mx_piece *grown = NULL;
        sp_status st = sp_calloc(limits, cap, sizeof *grown, "MIRAX pieces", (void **)&grown, err);
        if (st != SP_OK) {
            return st;
        }
        if (l->pieces != NULL) {
            memcpy(grown, l->pieces, l->n_pieces * sizeof *grown);
        }
        free(l->pieces);
        l->pieces = grown;
        l->cap_pieces = cap;
    }
    if (l->n_pieces >= INT32_MAX) {
        return sp_err_set(err, SP_E_LIMIT, "too many MIRAX pieces");
    }
    /* A later piece in the same cell replaces the earlier one, as in OpenSlide's tile map. */
    l->cells[row * l->cols + col] = (int32_t)l->n_pieces;
    l->pieces[l->n_pieces++] = *piece;
    return SP_OK;
}

/* Cut each stored image of level `z` into pieces and place them. `active` marks the positions
 * with a level-0 image (set while placing level 0). */
static sp_status place_level(mirax *m, const sp_limits *limits, int z, const level_params *lp,
                             const int64_t *pos, int64_t n_pos, uint8_t *active, sp_err *err) {
    const sp_mirax_layout *L = &m->layout;
    mx_level *l = &m->levels[z];
    const int div = L->divisions;
    const int64_t across = L->images_x / div;
    const int64_t image0_w = L->zoom[0].image_w, image0_h = L->zoom[0].image_h;
    double max_off_x = 0, max_off_y = 0;
    sp_status st = SP_OK;
    for (size_t r = 0; st == SP_OK && r < m->index.n_records[z]; r++) {
        const sp_mirax_record *rec = &m->index.records[z][r];
        int64_t x = rec->image_index % L->images_x, y = rec->image_index / L->images_x;
        for (int64_t yi = 0; st == SP_OK && yi < lp->tiles_per_image; yi++) {
            int64_t yy = y + yi * div;
            if (yy >= L->images_y) {
                break;
            }
            for (int64_t xi = 0; st == SP_OK && xi < lp->tiles_per_image; xi++) {
                int64_t xx = x + xi * div;
                if (xx >= L->images_x) {
                    break;
                }
                int64_t xp = xx / div, yp = yy / div, cp = yp * across + xp;
                if (cp >= n_pos) {
                    continue;
                }
                if (z == 0) {
                    /* Position (0, 0) can only be the first one's: others there are unused. */
                    if (pos[2 * cp] == 0 && pos[2 * cp + 1] == 0 && (xp != 0 || yp != 0)) {
                        continue;
                    }
                    active[cp] = 1;
                } else {
                    bool any = false;
                    for (int64_t ypp = yp; !any && ypp < yp + lp->positions_per_tile; ypp++) {
                        for (int64_t xpp = xp; !any && xpp < xp + lp->positions_per_tile; xpp++) {
                            int64_t cpp = ypp * across + xpp;
                            any = cpp >= 0 && cpp < n_pos && active[cpp];
                        }
                    }
                    if (!any) {
                        continue;
                    }
                }
                double pos_x = (double)(pos[2 * cp] + image0_w * (xx - xp * div)) /
                               (double)lp->concat;
                double pos_y = (double)(pos[2 * cp + 1] + image0_h * (yy - yp * div)) /
                               (double)lp->concat;
                int64_t col = x / lp->tile_count_divisor + xi, row = y / lp->tile_count_divisor + yi;
                double off_x = pos_x - (double)col * l->advance_x;
                double off_y = pos_y - (double)row * l->advance_y;
                if (off_x != 0 || off_y != 0) {
                    l->hint = false;
                }
                max_off_x = fmax(max_off_x, fabs(off_x));
                max_off_y = fmax(max_off_y, fabs(off_y));
                mx_piece piece = {
                    .record = (int32_t)r,
                    .src_x = (int32_t)floor(lp->tile_w * (double)xi),
                    .src_y = (int32_t)floor(lp->tile_h * (double)yi),
                    .w = (int32_t)ceil(lp->tile_w),
                    .h = (int32_t)ceil(lp->tile_h),
                    .dst_x = (int64_t)floor(pos_x),
                    .dst_y = (int64_t)floor(pos_y),
                    .frac_x = (int32_t)lround((pos_x - floor(pos_x)) * 65536.0),
                    .frac_y = (int32_t)lround((pos_y - floor(pos_y)) * 65536.0),
                };
                st = add_piece(l, limits, &piece, col, row, err);
            }
        }
    }
    l->reach_x = (int64_t)ceil(max_off_x) + (int64_t)ceil(lp->tile_w) + 1;
    l->reach_y = (int64_t)ceil(max_off_y) + (int64_t)ceil(lp->tile_h) + 1;
    return st;
}

/* Levels, pieces and the tile grid of every zoom level. */
static sp_status build_levels(sp_slide *s, mirax *m, sp_err *err) {
    const sp_mirax_layout *L = &m->layout;
    const sp_mirax_zoom *z0 = &L->zoom[0];
    const int div = L->divisions;
    bool overlapping = m->index.has_position || z0->overlap_x != 0 || z0->overlap_y != 0;

    /* The level-0 size: image sizes, less the overlap after the last image of each photo. */
    int64_t base_w = 0, base_h = 0;
    for (int i = 0; i < L->images_x; i++) {
        bool full = i % div != div - 1 || i == L->images_x - 1;
        base_w = (int64_t)((double)base_w + (full ? z0->image_w : z0->image_w - z0->overlap_x));
    }
    for (int i = 0; i < L->images_y; i++) {
        bool full = i % div != div - 1 || i == L->images_y - 1;
        base_h = (int64_t)((double)base_h + (full ? z0->image_h : z0->image_h - z0->overlap_y));
    }

    int64_t n_pos = (int64_t)(L->images_x / div) * (L->images_y / div);
    int64_t *pos = NULL;
    uint8_t *active = NULL;
    sp_status st = read_positions(m, &s->limits, n_pos, &pos, err);
    if (st == SP_OK) {
        st = sp_calloc(&s->limits, (uint64_t)(n_pos > 0 ? n_pos : 1), 1, "MIRAX positions",
                       (void **)&active, err);
    }
    level_params lp[SP_MIRAX_MAX_LEVELS];
    int exponent = 0;
    bool all_hints = true;
    for (int z = 0; st == SP_OK && z < L->n_zoom; z++) {
        const sp_mirax_zoom *hs = &L->zoom[z];
        mx_level *l = &m->levels[z];
        exponent += hs->concat_exponent;
        level_params *p = &lp[z];
        p->concat = (int64_t)1 << exponent;
        int64_t per_image = p->concat / div > 1 ? p->concat / div : 1;
        if (overlapping) {
            p->tile_count_divisor = p->concat < div ? p->concat : div;
            p->tiles_per_image = per_image;
            p->positions_per_tile = 1;
        } else {
            p->tile_count_divisor = p->concat;
            p->tiles_per_image = 1;
            p->positions_per_tile = per_image;
        }
        p->tile_w = (double)hs->image_w / (double)p->tiles_per_image;
        p->tile_h = (double)hs->image_h / (double)p->tiles_per_image;
        int64_t images_per_position = div / p->concat > 1 ? div / p->concat : 1;
        l->advance_x = p->tile_w - hs->overlap_x / (double)images_per_position;
        l->advance_y = p->tile_h - hs->overlap_y / (double)images_per_position;
        if (!(l->advance_x >= 1) || !(l->advance_y >= 1)) {
            st = sp_err_set(err, SP_E_CORRUPT,
                            "Slidedat.ini: zoom level %d overlaps its %gx%g pieces by %gx%g", z,
                            p->tile_w, p->tile_h, hs->overlap_x, hs->overlap_y);
            break;
        }
        l->hint = floor(l->advance_x) == l->advance_x && floor(l->advance_y) == l->advance_y &&
                  l->advance_x == p->tile_w && l->advance_y == p->tile_h;
        l->records = m->index.records[z];
        l->cut = p->tiles_per_image > 1;
        l->image_w = hs->image_w;
        l->image_h = hs->image_h;
        l->cols = L->images_x;
        l->rows = L->images_y;
        st = sp_calloc(&s->limits, (uint64_t)l->cols * (uint64_t)l->rows, sizeof *l->cells,
                       "MIRAX tile map", (void **)&l->cells, err);
        if (st == SP_OK) {
            memset(l->cells, 0xFF, (size_t)(l->cols * l->rows) * sizeof *l->cells);
            l->format = hs->format;
        }
        if (st == SP_OK) {
            st = place_level(m, &s->limits, z, p, pos, n_pos, active, err);
        }
        all_hints = all_hints && l->hint;
    }
    free(pos);
    free(active);
    for (int z = 0; st == SP_OK && z < L->n_zoom; z++) {
        const mx_level *l = &m->levels[z];
        sp_level level = {
            .width = base_w / lp[z].concat,
            .height = base_h / lp[z].concat,
            .downsample = (double)(lp[z].concat / lp[0].concat),
            .tile_width = all_hints ? (int64_t)l->advance_x : VIRTUAL_TILE,
            .tile_height = all_hints ? (int64_t)l->advance_y : VIRTUAL_TILE,
            .compression = l->format == SP_MIRAX_PNG   ? "png"
                           : l->format == SP_MIRAX_BMP ? "bmp"
                                                       : "jpeg",
            .priv = l,
        };
        if (level.width <= 0 || level.height <= 0) {
            continue;
        }
        st = sp_slide_add_level(s, &level, err);
    }
    return st;
}

/* ---- decoded images ----------------------------------------------------------------------- */

/* Image `record` of level `l`, decoded: from the cache (*slot its slot, to release) or decoded
 * now (*slot -1: the caller frees *rgba once done when the cache had no room). */
static sp_status get_image(mirax *m, const sp_limits *limits, const mx_level *l, int32_t record,
                           uint8_t **rgba, int *slot, sp_err *err) {
    pthread_mutex_lock(&m->lock);
    for (int i = 0; i < IMAGE_CACHE_SLOTS; i++) {
        mx_image *e = &m->images[i];
        if (e->level == l && e->record == record) {
            e->refs++;
            e->used = ++m->clock;
            *rgba = e->rgba;
            *slot = i;
            pthread_mutex_unlock(&m->lock);
            return SP_OK;
        }
    }
    pthread_mutex_unlock(&m->lock);

    const sp_mirax_record *rec = &l->records[record];
    uint8_t *stored = NULL, *img = NULL;
    uint32_t w = (uint32_t)l->image_w, h = (uint32_t)l->image_h;
    int components = 0;
    size_t bytes = (size_t)l->image_w * (size_t)l->image_h * 4;
    sp_status st = read_record(m, limits, rec, &stored, err);
    if (st == SP_OK && l->format == SP_MIRAX_JPEG) {
        st = sp_jpeg_read_header(stored, rec->length, NULL, 0, &w, &h, &components, err);
    }
    if (st == SP_OK && (w != (uint32_t)l->image_w || h != (uint32_t)l->image_h)) {
        st = sp_err_set(err, SP_E_CORRUPT,
                        "MIRAX image %d (data file %d, offset %u) is %ux%u where Slidedat.ini "
                        "says %dx%d",
                        rec->image_index, rec->fileno, rec->offset, w, h, l->image_w, l->image_h);
    }
    if (st == SP_OK) {
        st = sp_alloc(limits, bytes, "a MIRAX image", (void **)&img, err);
    }
    /* PNG and BMP decoders check the stream's size against the image's themselves. */
    if (st == SP_OK && l->format == SP_MIRAX_JPEG) {
        st = sp_jpeg_decode_rgba(stored, rec->length, NULL, 0, SP_JPEG_SPACE_AUTO,
                                 (uint64_t)l->image_w, (uint64_t)l->image_h, img,
                                 (size_t)l->image_w * 4, err);
    } else if (st == SP_OK && l->format == SP_MIRAX_PNG) {
        st = sp_png_decode_rgba(stored, rec->length, (uint64_t)l->image_w, (uint64_t)l->image_h,
                                img, (size_t)l->image_w * 4, err);
    } else if (st == SP_OK) {
        st = sp_bmp_decode_rgba(stored, rec->length, (uint64_t)l->image_w, (uint64_t)l->image_h,
                                img, (size_t)l->image_w * 4, err);
    }
    free(stored);
    if (st != SP_OK) {
        free(img);
        return st;
    }
    *rgba = img;
    *slot = -1;
    /* Keep it: in a free slot, or in place of the least recently used unreferenced ones. */
    pthread_mutex_lock(&m->lock);
    for (;;) {
        int free_slot = -1, victim = -1;
        for (int i = 0; i < IMAGE_CACHE_SLOTS; i++) {
            mx_image *e = &m->images[i];
            if (e->level == NULL) {
                free_slot = free_slot < 0 ? i : free_slot;
            } else if (e->refs == 0 && (victim < 0 || e->used < m->images[victim].used)) {
                victim = i;
            }
        }
        if (free_slot >= 0 && m->image_bytes + bytes <= IMAGE_CACHE_BYTES) {
            m->images[free_slot] =
                (mx_image){l, record, img, bytes, ++m->clock, 1};
            m->image_bytes += bytes;
            *slot = free_slot;
            break;
        }
        if (victim < 0 || bytes > IMAGE_CACHE_BYTES) {
            break; /* no room: the caller frees it */
        }
        free(m->images[victim].rgba);
        m->image_bytes -= m->images[victim].bytes;
        m->images[victim] = (mx_image){0};
    }
    pthread_mutex_unlock(&m->lock);
    return SP_OK;
}

static void release_image(mirax *m, uint8_t *rgba, int slot) {
    if (slot < 0) {
        free(rgba);
        return;
    }
    pthread_mutex_lock(&m->lock);
    m->images[slot].refs--;
    pthread_mutex_unlock(&m->lock);
}

/* ---- reading ------------------------------------------------------------------------------ */

/* Pieces are drawn as OpenSlide draws them through cairo and pixman, established by comparing
 * with OpenSlide 4.0.1 and with cairo 1.16 / pixman 0.42 directly (Debian's OpenSlide 3.4.1,
 * built on those, gives OpenSlide 4.0.1's pixels on these slides): with the SATURATE operator (a
 * piece fills only what the pieces drawn before it left transparent, so the first drawn wins).
 * A piece whose place falls between pixels is sampled bilinearly (weights from the place's
 * 16-bit fraction, transparent outside the piece) and composited in pixman's single-precision
 * pipeline: bytes to floats by x / 255, the combiner in floats, floats back to bytes by
 * pixman's unorm rounding. A piece on whole pixels is composited the same way when OpenSlide
 * draws it from an ARGB32 copy of its part of the image (several pieces per image), and with
 * pixman's 8-bit combiner when it draws it straight from the RGB24 image. The steps below keep
 * pixman's order (mirax.c is built with -ffp-contract=off, so no step is fused). The tile is
 * premultiplied while pieces are drawn, then made straight as openslide-python does
 * (mirax_read_tile). */

static inline float unorm_to_float(uint8_t v) {
    return (float)v * (1.f / 255.f);
}

static inline uint8_t float_to_unorm(float f) {
    f = f > 1.0f ? 1.0f : f < 0.0f ? 0.0f : f;
    uint32_t u = (uint32_t)(f * 256.0f);
    return (uint8_t)(u - (u >> 8));
}

static inline uint8_t mul_un8(unsigned a, unsigned b) {
    unsigned t = a * b + 0x80;
    return (uint8_t)(((t >> 8) + t) >> 8);
}

/* SATURATE of an opaque RGB24 pixel on whole pixels: pixman's 8-bit combiner. */
static inline void saturate_8(const uint8_t s[4], uint8_t d[4]) {
    unsigned room = 255u - d[3];
    unsigned f = (room * 255u + 127u) / 255u; /* s's alpha is 255 */
    for (int c = 0; c < 4; c++) {
        unsigned v = d[c] + (unsigned)mul_un8(s[c], f);
        d[c] = (uint8_t)(v > 255 ? 255 : v);
    }
}

/* d = SATURATE(s, d) for premultiplied s (floats) and d (bytes, in place): pixman's float
 * combiner. */
static inline void saturate(const float s[4], uint8_t d[4]) {
    float da = unorm_to_float(d[3]), sa = s[3];
    float fa = (-FLT_MIN < sa && sa < FLT_MIN) ? 1.0f : (1.0f - da) / sa;
    fa = fa > 1.0f ? 1.0f : fa < 0.0f ? 0.0f : fa;
    for (int c = 0; c < 4; c++) {
        float v = s[c] * fa + unorm_to_float(d[c]);
        d[c] = float_to_unorm(v > 1.0f ? 1.0f : v);
    }
}

static void paint_piece(const mx_level *l, const mx_piece *p, const uint8_t *img, int64_t x0,
                        int64_t y0, int64_t ix0, int64_t iy0, int64_t ix1, int64_t iy1,
                        uint8_t *rgba, uint64_t stride) {
    /* Destination pixel X samples the piece at X - place (pixel centres on both sides): between
     * its columns floor(X - place) and the next. The piece is the image's rectangle at
     * (src_x, src_y), w x h, cut to the image. */
    const int64_t place_x = p->dst_x * 65536 + p->frac_x, place_y = p->dst_y * 65536 + p->frac_y;
    const int64_t cx1 = p->src_x + p->w > l->image_w ? l->image_w - p->src_x : p->w;
    const int64_t cy1 = p->src_y + p->h > l->image_h ? l->image_h - p->src_y : p->h;
    const int64_t img_stride = (int64_t)l->image_w * 4;
    const uint8_t *src = img + (int64_t)p->src_y * img_stride + (int64_t)p->src_x * 4;
    static const uint8_t clear[4] = {0, 0, 0, 0};
    const bool whole = p->frac_x == 0 && p->frac_y == 0;
    if (whole) {
        /* On whole pixels each destination pixel takes one source pixel; outside the piece the
         * source is transparent and SATURATE leaves the destination as it is. */
        for (int64_t Y = iy0; Y < iy1; Y++) {
            int64_t sy = Y - p->dst_y;
            if (sy < 0 || sy >= cy1) {
                continue;
            }
            int64_t xa = ix0 > p->dst_x ? ix0 : p->dst_x;
            int64_t xb = ix1 < p->dst_x + cx1 ? ix1 : p->dst_x + cx1;
            const uint8_t *q = src + sy * img_stride + (xa - p->dst_x) * 4;
            uint8_t *d = rgba + (uint64_t)(Y - y0) * stride + (uint64_t)(xa - x0) * 4;
            for (int64_t X = xa; X < xb; X++, d += 4, q += 4) {
                uint32_t dv;
                memcpy(&dv, d, 4);
                if (dv == 0) {
                    memcpy(d, q, 4); /* a copy onto nothing: SATURATE's result, exactly */
                } else if (d[3] == 255) {
                    continue; /* SATURATE leaves an opaque pixel as it is */
                } else if (!l->cut) {
                    saturate_8(q, d);
                } else {
                    float sf[4];
                    for (int c = 0; c < 4; c++) {
                        sf[c] = unorm_to_float(q[c]);
                    }
                    saturate(sf, d);
                }
            }
        }
        return;
    }
    for (int64_t Y = iy0; Y < iy1; Y++) {
        int64_t fy = Y * 65536 - place_y;
        int64_t y1 = fy >> 16;
        const float dy = (float)(fy & 0xFFFF) * (1.f / 65536.f);
        uint8_t *d = rgba + (uint64_t)(Y - y0) * stride + (uint64_t)(ix0 - x0) * 4;
        for (int64_t X = ix0; X < ix1; X++, d += 4) {
            if (d[3] == 255) {
                continue; /* SATURATE leaves an opaque pixel as it is */
            }
            int64_t fx = X * 65536 - place_x;
            int64_t x1 = fx >> 16;
            const uint8_t *q[4];
            for (int k = 0; k < 4; k++) {
                int64_t sx = x1 + (k & 1), sy = y1 + (k >> 1);
                bool inside = sx >= 0 && sx < cx1 && sy >= 0 && sy < cy1;
                q[k] = inside ? src + sy * img_stride + sx * 4 : clear;
            }
            float s[4];
            const float dx = (float)(fx & 0xFFFF) * (1.f / 65536.f);
            const float dxy = dx * dy, dxiy = dx * (1.f - dy), dixy = (1.f - dx) * dy;
            const float dixiy = (1.f - dx) * (1.f - dy);
            for (int c = 0; c < 4; c++) {
                float v = unorm_to_float(q[0][c]) * dixiy;
                v = v + unorm_to_float(q[1][c]) * dxiy;
                v = v + unorm_to_float(q[2][c]) * dixy;
                v = v + unorm_to_float(q[3][c]) * dxy;
                s[c] = v;
            }
            saturate(s, d);
        }
    }
}

/* Premultiplied to straight alpha, as openslide-python converts OpenSlide's pixels (truncating:
 * 255 * c / a). */
static void unpremultiply(uint8_t *rgba, uint64_t stride, int64_t w, int64_t h) {
    for (int64_t y = 0; y < h; y++) {
        uint8_t *p = rgba + (uint64_t)y * stride;
        for (int64_t x = 0; x < w; x++, p += 4) {
            unsigned a = p[3];
            if (a != 0 && a != 255) {
                for (int c = 0; c < 3; c++) {
                    unsigned v = p[c] * 255u / a;
                    p[c] = (uint8_t)(v > 255 ? 255 : v);
                }
            }
        }
    }
}

static sp_status mirax_read_tile(sp_slide *s, const sp_level *level, int64_t col, int64_t row,
                                 uint8_t *rgba, uint64_t stride, sp_err *err) {
    mirax *m = s->priv;
    const mx_level *l = level->priv;
    const int64_t x0 = col * level->tile_width, y0 = row * level->tile_height;
    const int64_t x1 = x0 + level->tile_width, y1 = y0 + level->tile_height;
    for (int64_t r = 0; r < level->tile_height; r++) {
        memset(rgba + (uint64_t)r * stride, 0, (size_t)level->tile_width * 4);
    }
    /* The cells whose pieces can reach this tile, drawn from the bottom-right as OpenSlide draws
     * them (with SATURATE the first drawn wins: the largest (row, col) lies on top). */
    int64_t c_lo = (int64_t)floor((double)(x0 - l->reach_x) / l->advance_x);
    int64_t c_hi = (int64_t)ceil((double)(x1 + l->reach_x) / l->advance_x);
    int64_t r_lo = (int64_t)floor((double)(y0 - l->reach_y) / l->advance_y);
    int64_t r_hi = (int64_t)ceil((double)(y1 + l->reach_y) / l->advance_y);
    c_lo = c_lo < 0 ? 0 : c_lo;
    r_lo = r_lo < 0 ? 0 : r_lo;
    c_hi = c_hi >= l->cols ? l->cols - 1 : c_hi;
    r_hi = r_hi >= l->rows ? l->rows - 1 : r_hi;
    uint8_t *img = NULL;
    int img_slot = -1;
    int32_t img_record = -1;
    bool blended = false;
    sp_status st = SP_OK;
    for (int64_t rr = r_hi; st == SP_OK && rr >= r_lo; rr--) {
        for (int64_t cc = c_hi; st == SP_OK && cc >= c_lo; cc--) {
            int32_t n = l->cells[rr * l->cols + cc];
            if (n < 0) {
                continue;
            }
            const mx_piece *p = &l->pieces[n];
            /* Between pixels, a piece reaches one more column (row) than it has. */
            int64_t pw = p->w + (p->frac_x != 0), ph = p->h + (p->frac_y != 0);
            int64_t ix0 = p->dst_x > x0 ? p->dst_x : x0, iy0 = p->dst_y > y0 ? p->dst_y : y0;
            int64_t ix1 = p->dst_x + pw < x1 ? p->dst_x + pw : x1;
            int64_t iy1 = p->dst_y + ph < y1 ? p->dst_y + ph : y1;
            if (ix0 >= ix1 || iy0 >= iy1) {
                continue;
            }
            if (p->record != img_record) {
                if (img != NULL) {
                    release_image(m, img, img_slot);
                }
                img = NULL;
                img_record = -1;
                if ((st = get_image(m, &s->limits, l, p->record, &img, &img_slot, err)) != SP_OK) {
                    break;
                }
                img_record = p->record;
            }
            paint_piece(l, p, img, x0, y0, ix0, iy0, ix1, iy1, rgba, stride);
            blended = blended || p->frac_x != 0 || p->frac_y != 0;
        }
    }
    if (img != NULL) {
        release_image(m, img, img_slot);
    }
    if (st != SP_OK) {
        for (int64_t r = 0; r < level->tile_height; r++) {
            memset(rgba + (uint64_t)r * stride, 0, (size_t)level->tile_width * 4);
        }
    } else if (blended) {
        unpremultiply(rgba, stride, level->tile_width, level->tile_height);
    }
    return st;
}

static sp_status mirax_read_associated(sp_slide *s, const sp_associated *a, uint8_t *rgba,
                                       uint64_t stride, sp_err *err) {
    const mirax *m = s->priv;
    uint8_t *jpeg = NULL;
    const sp_mirax_record *rec = a->priv;
    sp_status st = read_record(m, &s->limits, rec, &jpeg, err);
    if (st == SP_OK) {
        st = sp_jpeg_decode_rgba(jpeg, rec->length, NULL, 0, SP_JPEG_SPACE_AUTO,
                                 (uint64_t)a->width, (uint64_t)a->height, rgba, (size_t)stride,
                                 err);
    }
    free(jpeg);
    return st;
}

static void mirax_destroy(sp_slide *s) {
    mirax *m = s->priv;
    if (m == NULL) {
        return;
    }
    for (int i = 0; i < SP_MIRAX_MAX_LEVELS; i++) {
        free(m->levels[i].cells);
        free(m->levels[i].pieces);
    }
    for (int i = 0; i < IMAGE_CACHE_SLOTS; i++) {
        free(m->images[i].rgba);
    }
    if (m->lock_made) {
        pthread_mutex_destroy(&m->lock);
    }
    for (int i = 0; m->files != NULL && i < m->n_files; i++) {
        sp_source_close(m->files[i]);
    }
    free(m->files);
    sp_mirax_index_free(&m->index);
    sp_mirax_layout_free(&m->layout);
    free(m);
    s->priv = NULL;
}

static const sp_slide_ops mirax_ops = {
    .read_tile = mirax_read_tile,
    .read_associated = mirax_read_associated,
    .destroy = mirax_destroy,
};

/* ---- open ------------------------------------------------------------------------------------ */

static sp_status add_associated(sp_slide *s, mirax *m, int slot, const char *name,
                                const sp_mirax_record *rec, sp_err *err) {
    m->assoc[slot] = *rec;
    uint8_t *jpeg = NULL;
    uint32_t w = 0, h = 0;
    int components = 0;
    sp_status st = read_record(m, &s->limits, rec, &jpeg, err);
    if (st == SP_OK) {
        st = sp_jpeg_read_header(jpeg, rec->length, NULL, 0, &w, &h, &components, err);
    }
    free(jpeg);
    if (st != SP_OK) {
        char msg[SP_ERR_MSG_MAX];
        snprintf(msg, sizeof msg, "%s", err != NULL ? err->msg : "");
        sp_err_clear(err);
        return sp_err_set(err, st, "the %s image: %s", name, msg);
    }
    return sp_slide_add_associated(s, name, w, h, &m->assoc[slot], err);
}

static sp_status add_properties(sp_slide *s, const sp_mirax_ini *ini, const mirax *m,
                                sp_err *err) {
    sp_status st = SP_OK;
    for (size_t i = 0; st == SP_OK && i < ini->n; i++) {
        const sp_mirax_entry *e = &ini->entries[i];
        size_t len = strlen(e->section) + strlen(e->key) + 8;
        char *key = malloc(len);
        if (key == NULL) {
            return sp_err_set(err, SP_E_NOMEM, "out of memory storing MIRAX properties");
        }
        snprintf(key, len, "mirax.%s.%s", e->section, e->key);
        st = sp_props_set(&s->props, key, e->value, err);
        free(key);
    }
    char buf[32];
    snprintf(buf, sizeof buf, "%d", m->layout.objective);
    if (st == SP_OK) {
        st = sp_props_set(&s->props, SP_PROPERTY_OBJECTIVE_POWER, buf, err);
    }
    if (st == SP_OK) {
        st = sp_slide_set_number(s, SP_PROPERTY_MPP_X, m->layout.zoom[0].mpp_x, err);
    }
    if (st == SP_OK) {
        st = sp_slide_set_number(s, SP_PROPERTY_MPP_Y, m->layout.zoom[0].mpp_y, err);
    }
    return st;
}

static sp_status mirax_open(sp_slide *s, sp_probe *p, sp_err *err) {
    mirax *m = calloc(1, sizeof *m);
    if (m == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory opening a MIRAX slide");
    }
    s->priv = m;
    s->ops = &mirax_ops;
    m->lock_made = pthread_mutex_init(&m->lock, NULL) == 0;
    if (!m->lock_made) {
        return sp_err_set(err, SP_E_NOMEM, "cannot create a lock for a MIRAX slide");
    }
    size_t dir_len = strlen(p->path) - strlen(MRXS_EXT);
    char *dir = malloc(dir_len + 1);
    if (dir != NULL) {
        memcpy(dir, p->path, dir_len);
        dir[dir_len] = '\0';
    }
    char *text = NULL;
    size_t text_len = 0;
    sp_mirax_ini ini = {0};
    sp_source *src = NULL, *index_src = NULL;
    sp_status st = dir != NULL ? SP_OK : sp_err_set(err, SP_E_NOMEM, "out of memory");
    if (st == SP_OK) {
        st = open_sibling(dir, "Slidedat.ini", &src, err);
    }
    if (st == SP_OK) {
        st = sp_source_read_whole(src, "Slidedat.ini", SP_MIRAX_SLIDEDAT_MAX, &text, &text_len,
                                  err);
        src = NULL; /* closed by sp_source_read_whole */
    }
    if (st == SP_OK && strlen(text) != text_len) {
        st = sp_err_set(err, SP_E_CORRUPT, "Slidedat.ini holds a NUL byte");
    }
    if (st == SP_OK) {
        st = sp_mirax_ini_parse(text, &ini, err);
    }
    if (st == SP_OK) {
        st = sp_mirax_layout_read(&ini, &m->layout, err);
    }
    if (st == SP_OK) {
        st = open_sibling(dir, m->layout.index_file, &index_src, err);
    }
    if (st == SP_OK) {
        m->files = calloc((size_t)m->layout.n_files, sizeof *m->files);
        st = m->files != NULL ? SP_OK : sp_err_set(err, SP_E_NOMEM, "out of memory");
    }
    for (int i = 0; st == SP_OK && i < m->layout.n_files; i++, m->n_files++) {
        st = open_sibling(dir, m->layout.files[i], &m->files[i], err);
    }
    if (st == SP_OK) {
        st = sp_mirax_index_read(index_src, m->layout.index_file, &m->layout, &s->limits,
                                 &m->index, err);
    }
    if (st == SP_OK && m->index.has_macro) {
        st = add_associated(s, m, 0, "macro", &m->index.macro, err);
    }
    if (st == SP_OK && m->index.has_label) {
        st = add_associated(s, m, 1, "label", &m->index.label, err);
    }
    if (st == SP_OK && m->index.has_thumbnail) {
        st = add_associated(s, m, 2, "thumbnail", &m->index.thumbnail, err);
    }
    if (st == SP_OK) {
        st = build_levels(s, m, err);
    }
    if (st == SP_OK) {
        uint32_t bgr = m->layout.zoom[0].fill_bgr;
        s->background[0] = (uint8_t)(bgr & 0xFF);
        s->background[1] = (uint8_t)(bgr >> 8 & 0xFF);
        s->background[2] = (uint8_t)(bgr >> 16 & 0xFF);
        st = add_properties(s, &ini, m, err);
    }
    sp_source_close(src);
    sp_source_close(index_src);
    sp_mirax_ini_free(&ini);
    free(text);
    free(dir);
    return st;
}

const sp_format sp_format_mirax = {"mirax", mirax_detect, mirax_open};
