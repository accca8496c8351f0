/* region.c — reading regions and associated images into caller buffers, for every format.
 *
 * A region read walks the tiles of one level (optionally seen at 1/2, 1/4, 1/8 through DCT
 * scaling) that intersect the request. Per tile it copies from the process-wide tile cache,
 * or has the format decode just the needed part straight into the caller's rows, or decodes
 * the whole tile into a cache entry and copies the part out (docs/reading.md gives the policy).
 * A format that decodes tiles as parts of blocks in a layout of its own (Zarr chunks) has the
 * decoded block cached instead, and the part is painted from it.
 * Pixels outside the level (or in missing tiles) are transparent, or the background colour in
 * RGB, and are written once. On any error the output is zeroed and the error sticks to the
 * slide.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/fill.h"
#include "base/simd_x86.h"
#include "slide/icc.h"
#include "slide/slide.h"
#include "slide/tile_cache.h"

/* Composite straight RGBA pixels over the background into RGB, rounding to nearest. */
static void composite_rgb(const uint8_t *src, uint8_t *dst, int64_t n, const uint8_t bg[3]) {
    for (int64_t i = 0; i < n; i++, src += 4, dst += 3) {
        unsigned a = src[3];
        for (int c = 0; c < 3; c++) {
            dst[c] = (uint8_t)((src[c] * a + bg[c] * (255 - a) + 127) / 255);
        }
    }
}

#ifdef SP_HAVE_X86
/* Sixteen pixels at a time while all are opaque: one shuffle per 4 pixels drops the alpha bytes,
 * and the four 12-byte results are joined into three 16-byte stores. Returns the pixels done. */
__attribute__((target("ssse3"))) static int64_t rgba_to_rgb_opaque_ssse3(const uint8_t *src,
                                                                         uint8_t *dst, int64_t n) {
    const __m128i pack = _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
    const __m128i alpha = _mm_set1_epi32((int)0xFF000000u);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16, src += 64, dst += 48) {
        __m128i v0 = _mm_loadu_si128((const __m128i *)src);
        __m128i v1 = _mm_loadu_si128((const __m128i *)(src + 16));
        __m128i v2 = _mm_loadu_si128((const __m128i *)(src + 32));
        __m128i v3 = _mm_loadu_si128((const __m128i *)(src + 48));
        __m128i all = _mm_and_si128(_mm_and_si128(v0, v1), _mm_and_si128(v2, v3));
        if (_mm_movemask_epi8(_mm_cmpeq_epi32(_mm_and_si128(all, alpha), alpha)) != 0xFFFF) {
            break;
        }
        __m128i p0 = _mm_shuffle_epi8(v0, pack), p1 = _mm_shuffle_epi8(v1, pack);
        __m128i p2 = _mm_shuffle_epi8(v2, pack), p3 = _mm_shuffle_epi8(v3, pack);
        _mm_storeu_si128((__m128i *)dst, _mm_or_si128(p0, _mm_slli_si128(p1, 12)));
        _mm_storeu_si128((__m128i *)(dst + 16),
                         _mm_or_si128(_mm_srli_si128(p1, 4), _mm_slli_si128(p2, 8)));
        _mm_storeu_si128((__m128i *)(dst + 32),
                         _mm_or_si128(_mm_srli_si128(p2, 8), _mm_slli_si128(p3, 4)));
    }
    return i;
}
#endif

/* RGBA to RGB over the background. Opaque pixels (the usual case) take the shuffle above where
 * the CPU has it: the byte loop with a test per pixel cost about 1 ns a pixel, which showed in
 * every read of a cached tile into RGB. */
static void rgba_to_rgb(const uint8_t *src, uint8_t *dst, int64_t n, const uint8_t bg[3]) {
    int64_t i = 0;
#ifdef SP_HAVE_X86
    if (__builtin_cpu_supports("ssse3")) {
        while (i + 16 <= n) {
            int64_t done = rgba_to_rgb_opaque_ssse3(src + 4 * i, dst + 3 * i, n - i);
            i += done;
            if (i + 16 > n) {
                break;
            }
            composite_rgb(src + 4 * i, dst + 3 * i, 16, bg); /* a group with some alpha */
            i += 16;
        }
    }
#endif
    for (; i < n; i++) {
        if (src[4 * i + 3] == 255) {
            memcpy(dst + 3 * i, src + 4 * i, 3);
        } else {
            composite_rgb(src + 4 * i, dst + 3 * i, 1, bg);
        }
    }
}

/* Zero the w x h area of a caller's buffer (rows of `stride` bytes): what an error leaves. */
static void zero_area(void *dst, int64_t stride, int64_t w, int64_t h, sp_pixel_format fmt) {
    if (h > 0) {
        memset(dst, 0, (size_t)((h - 1) * stride + w * sp_pixel_format_bytes(fmt)));
    }
}

/* Checks shared by region and associated reads; returns SP_OK when the buffer is usable. */
static sp_status check_buffer(sp_pixel_format fmt, const void *dst, int64_t stride, int64_t w,
                              int64_t h) {
    int bpp = sp_pixel_format_bytes(fmt);
    if (bpp == 0 || dst == NULL || w < 0 || h < 0 || w > INT64_MAX / 4 || stride < w * bpp) {
        return SP_E_INVALID_ARG;
    }
    if (h > 0 && stride > INT64_MAX / h) {
        return SP_E_INVALID_ARG;
    }
    return SP_OK;
}

static sp_status sticky_status(sp_slide *s) {
    pthread_mutex_lock(&s->error_lock);
    sp_status st = s->sticky;
    pthread_mutex_unlock(&s->error_lock);
    return st;
}

/* Where a region read goes: a level seen at 1/scale (scale 1 is the level itself). */
typedef struct paint_job {
    sp_slide *s;
    int32_t level;
    const sp_level *l;
    unsigned scale;
    int64_t tile_w, tile_h; /* a tile's pixels at 1/scale */
    int64_t width, height;  /* the level's pixels at 1/scale */
    sp_pixel_format fmt;
    uint8_t *dst;
    int64_t stride;
    int64_t lx, ly, w, h; /* the request, in pixels at 1/scale */
    int64_t shared;       /* the band along the request's edges that is read again */
} paint_job;

/* Copy the part [cx0, cx1) x [cy0, cy1) of a decoded tile whose top-left is (tx, ty) into the
 * caller's buffer, converting to the requested format. */
static void copy_out(const paint_job *j, const uint8_t *tile, int64_t tile_stride, int64_t tx,
                     int64_t ty, int64_t cx0, int64_t cy0, int64_t cx1, int64_t cy1) {
    int bpp = sp_pixel_format_bytes(j->fmt);
    for (int64_t y = cy0; y < cy1; y++) {
        const uint8_t *src = tile + (y - ty) * tile_stride + (cx0 - tx) * 4;
        uint8_t *out = j->dst + (y - j->ly) * j->stride + (cx0 - j->lx) * bpp;
        if (j->fmt == SP_PIXEL_RGBA8) {
            memcpy(out, src, (size_t)(cx1 - cx0) * 4);
        } else {
            rgba_to_rgb(src, out, cx1 - cx0, j->s->background);
        }
    }
}

/* Decode tile (col, row) whole into `tile` (held by the caller, tile_w x tile_h RGBA8). */
static sp_status decode_whole(const paint_job *j, int64_t col, int64_t row, sp_cached_tile *tile,
                              sp_err *err) {
    static const uint8_t transparent[4] = {0, 0, 0, 0};
    uint8_t *px = sp_cached_tile_pixels(tile);
    if (j->scale == 1) {
        return j->s->ops->read_tile(j->s, j->l, col, row, px, (uint64_t)j->tile_w * 4, err);
    }
    return j->s->ops->read_tile_area(j->s, j->l, col, row, j->scale, 0, 0, j->tile_w, j->tile_h,
                                     SP_PIXEL_RGBA8, px, j->tile_w * 4, transparent, err);
}

bool sp_slide_block_key(const sp_slide *s, int32_t level, unsigned scale, int64_t col, int64_t row,
                        sp_pixel_format fmt, sp_tile_key *key, uint64_t *bytes) {
    sp_tile_pos block;
    if (scale != 1 || s->ops->block_of == NULL ||
        !s->ops->block_of(s, &s->levels[level], col, row, fmt, &block, bytes)) {
        return false;
    }
    *key = (sp_tile_key){s->cache_id, level, 0, block.col, block.row};
    return true;
}

/* Append to tiles[*n..cap) the tiles of level `level` seen at 1/scale that the cache does not
 * hold, from the k-th on of the `total` tiles of a block `cols` tiles wide at (col0, row0)
 * (row-major); returns the index of the first tile not looked at. */
static int64_t uncached_tiles(const sp_slide *s, int32_t level, unsigned scale, int64_t col0,
                              int64_t row0, int64_t cols, int64_t total, int64_t k,
                              sp_tile_pos *tiles, size_t *n, size_t cap) {
    bool caching = sp_tile_cache_enabled();
    for (; k < total && *n < cap; k++) {
        sp_tile_pos p = {col0 + k % cols, row0 + k / cols};
        sp_tile_key key = {s->cache_id, level, scale, p.col, p.row}, block;
        uint64_t bytes;
        bool held =
            caching &&
            (sp_tile_cache_holds(&key) ||
             (sp_slide_block_key(s, level, scale, p.col, p.row, SP_PIXEL_RGBA8, &block, &bytes) &&
              sp_tile_cache_holds(&block)));
        if (!held) {
            tiles[(*n)++] = p;
        }
    }
    return k;
}

/* Tell the format which tiles come next when its data is remote: from the k-th of the request's
 * `total` tiles on (row-major, `cols` a row, from (col0, row0)), up to SP_PREFETCH_TILES that are
 * not cached. Returns the index of the first tile not looked at. */
static int64_t announce(const paint_job *j, int64_t col0, int64_t row0, int64_t cols,
                        int64_t total, int64_t k) {
    sp_tile_pos tiles[SP_PREFETCH_TILES];
    size_t n = 0;
    k = uncached_tiles(j->s, j->level, j->scale, col0, row0, cols, total, k, tiles, &n,
                       SP_PREFETCH_TILES);
    if (n >= 2) {
        j->s->ops->prefetch(j->s, j->l, tiles, n);
    }
    return k;
}

/* Paint the part [cx0, cx1) x [cy0, cy1) of the request from the decoded block cached under
 * `key` (block_key), decoding it into a new entry offered to the cache when it is not there. */
static sp_status paint_from_block(const paint_job *j, const sp_tile_key *key, uint64_t bytes,
                                  int64_t cx0, int64_t cy0, int64_t cx1, int64_t cy1, sp_err *err) {
    sp_slide *s = j->s;
    sp_tile_pos block = {key->col, key->row};
    sp_cached_tile *entry = sp_tile_cache_get(key);
    if (entry == NULL) {
        entry = sp_tile_cache_alloc_bytes(bytes);
        if (entry == NULL) {
            return sp_err_set(err, SP_E_NOMEM, "out of memory for a decoded block of %llu bytes",
                              (unsigned long long)bytes);
        }
        sp_status st = s->ops->decode_block(s, j->l, block, sp_cached_tile_pixels(entry), err);
        if (st != SP_OK) {
            sp_tile_cache_release(entry);
            return st;
        }
        sp_tile_cache_put(entry, key);
    }
    uint8_t *out =
        j->dst + (cy0 - j->ly) * j->stride + (cx0 - j->lx) * sp_pixel_format_bytes(j->fmt);
    s->ops->paint_block(s, j->l, sp_cached_tile_pixels(entry), block, cx0, cy0, cx1 - cx0,
                        cy1 - cy0, j->fmt, out, j->stride);
    sp_tile_cache_release(entry);
    return SP_OK;
}

/* Paint every tile the request touches. Per tile (docs/reading.md, "Tile cache"): where the
 * format decodes it as part of a block of its own, the part is painted from the cached block;
 * otherwise a cached tile is copied out; otherwise, when the format can decode part of the tile
 * straight into the caller's rows and the tile has not been asked for recently, only the part
 * needed is decoded there; otherwise the tile is decoded whole, offered to the cache, and copied
 * out. */
static sp_status paint(const paint_job *j, sp_err *err) {
    sp_slide *s = j->s;
    int bpp = sp_pixel_format_bytes(j->fmt);
    uint8_t empty[4] = {0, 0, 0, 0};
    if (j->fmt == SP_PIXEL_RGB8) {
        memcpy(empty, s->background, 3);
    }
    /* The part of the request inside the level; what lies outside it is empty. */
    int64_t x0 = j->lx > 0 ? j->lx : 0, y0 = j->ly > 0 ? j->ly : 0;
    int64_t x1 = j->lx + j->w < j->width ? j->lx + j->w : j->width;
    int64_t y1 = j->ly + j->h < j->height ? j->ly + j->h : j->height;
    if (x0 >= x1 || y0 >= y1) {
        sp_fill_pixels(j->dst, j->stride, j->w, j->h, bpp, empty);
        return SP_OK;
    }
    sp_fill_pixels(j->dst, j->stride, j->w, y0 - j->ly, bpp, empty);
    sp_fill_pixels(j->dst + (y1 - j->ly) * j->stride, j->stride, j->w, j->ly + j->h - y1, bpp,
                   empty);
    uint8_t *mid = j->dst + (y0 - j->ly) * j->stride;
    sp_fill_pixels(mid, j->stride, x0 - j->lx, y1 - y0, bpp, empty);
    sp_fill_pixels(mid + (x1 - j->lx) * bpp, j->stride, j->lx + j->w - x1, y1 - y0, bpp, empty);

    unsigned scales = s->ops->area_scales ? s->ops->area_scales(s, j->l) : 0;
    bool area_ok =
        (scales & j->scale) != 0 && (j->fmt == SP_PIXEL_RGBA8 || (scales & SP_AREA_OPAQUE) != 0);
    bool caching = sp_tile_cache_enabled();
    sp_cached_tile *scratch = NULL; /* reused for whole decodes when nothing is cached */
    int64_t col0 = x0 / j->tile_w, row0 = y0 / j->tile_h;
    int64_t cols = (x1 - 1) / j->tile_w - col0 + 1, rows = (y1 - 1) / j->tile_h - row0 + 1;
    bool prefetching = s->prefetch && s->ops->prefetch != NULL && cols * rows >= 2;
    int64_t announced = 0; /* tiles before this index have been announced */
    sp_status st = SP_OK;
    for (int64_t row = row0; st == SP_OK && row * j->tile_h < y1; row++) {
        for (int64_t col = col0; st == SP_OK && col * j->tile_w < x1; col++) {
            int64_t k = (row - row0) * cols + (col - col0);
            if (prefetching && k == announced) {
                announced = announce(j, col0, row0, cols, cols * rows, k);
            }
            int64_t tx = col * j->tile_w, ty = row * j->tile_h;
            int64_t cx0 = tx > x0 ? tx : x0, cy0 = ty > y0 ? ty : y0;
            int64_t cx1 = tx + j->tile_w < x1 ? tx + j->tile_w : x1;
            int64_t cy1 = ty + j->tile_h < y1 ? ty + j->tile_h : y1;
            sp_tile_key key = {s->cache_id, j->level, j->scale, col, row}, block;
            uint64_t block_bytes;
            if (caching &&
                sp_slide_block_key(s, j->level, j->scale, col, row, j->fmt, &block, &block_bytes) &&
                sp_tile_cache_admits_bytes(block_bytes) &&
                block_bytes <= (uint64_t)s->limits.value[SP_LIMIT_MAX_ALLOC]) {
                st = paint_from_block(j, &block, block_bytes, cx0, cy0, cx1, cy1, err);
                continue;
            }
            sp_cached_tile *tile = caching ? sp_tile_cache_get(&key) : NULL;
            bool shared = caching && j->shared > 0 &&
                          (ty < j->ly + j->shared || ty + j->tile_h > j->ly + j->h - j->shared ||
                           tx < j->lx + j->shared || tx + j->tile_w > j->lx + j->w - j->shared);
            if (tile == NULL && area_ok && !shared && !(caching && sp_tile_cache_seen(&key))) {
                uint8_t *out = j->dst + (cy0 - j->ly) * j->stride + (cx0 - j->lx) * bpp;
                st = s->ops->read_tile_area(s, j->l, col, row, j->scale, cx0 - tx, cy0 - ty,
                                            cx1 - cx0, cy1 - cy0, j->fmt, out, j->stride, empty,
                                            err);
                continue;
            }
            if (tile == NULL) {
                if (caching || scratch == NULL) {
                    tile = sp_tile_cache_alloc(j->tile_w, j->tile_h);
                } else {
                    tile = scratch;
                    scratch = NULL;
                }
                if (tile == NULL) {
                    st = sp_err_set(err, SP_E_NOMEM, "out of memory for a %lldx%lld tile",
                                    (long long)j->tile_w, (long long)j->tile_h);
                    break;
                }
                st = decode_whole(j, col, row, tile, err);
                if (st == SP_OK && caching) {
                    sp_tile_cache_put(tile, &key);
                }
            }
            if (st == SP_OK) {
                copy_out(j, sp_cached_tile_pixels(tile), j->tile_w * 4, tx, ty, cx0, cy0, cx1, cy1);
            }
            if (!caching && scratch == NULL) {
                scratch = tile;
            } else {
                sp_tile_cache_release(tile);
            }
        }
    }
    sp_tile_cache_release(scratch);
    return st;
}

sp_status sp_slide_read_level_area(sp_slide *s, sp_pixel_format fmt, void *dst, int64_t stride,
                                   int32_t level, unsigned scale, int64_t lx, int64_t ly, int64_t w,
                                   int64_t h, int64_t shared) {
    if (s == NULL || check_buffer(fmt, dst, stride, w, h) != SP_OK ||
        (scale != 1 && scale != 2 && scale != 4 && scale != 8)) {
        return SP_E_INVALID_ARG;
    }
    if (level < 0 || level >= s->n_levels) {
        zero_area(dst, stride, w, h, fmt);
        return SP_E_INVALID_ARG;
    }
    const sp_level *l = &s->levels[level];
    unsigned scales = s->ops->area_scales ? s->ops->area_scales(s, l) : 0;
    if (scale != 1 && ((scales & scale) == 0 || l->tile_width % scale || l->tile_height % scale)) {
        zero_area(dst, stride, w, h, fmt);
        return SP_E_INVALID_ARG;
    }
    sp_status st = sticky_status(s);
    if (st != SP_OK) {
        zero_area(dst, stride, w, h, fmt);
        return st;
    }
    if (w == 0 || h == 0) {
        return SP_OK;
    }
    paint_job j = {
        .s = s,
        .level = level,
        .l = l,
        .scale = scale,
        .tile_w = l->tile_width / scale,
        .tile_h = l->tile_height / scale,
        .width = (l->width + scale - 1) / scale,
        .height = (l->height + scale - 1) / scale,
        .fmt = fmt,
        .dst = dst,
        .stride = stride,
        .lx = lx,
        .ly = ly,
        .w = w,
        .h = h,
        .shared = shared,
    };
    sp_err err = {0};
    st = paint(&j, &err);
    if (st != SP_OK) {
        zero_area(dst, stride, w, h, fmt);
        sp_slide_record_error(s, &err);
    } else {
        sp_slide_icc_apply(s, fmt, dst, stride, w, h); /* nothing unless turned on */
    }
    return st;
}

bool sp_level_origin(const sp_level *l, int64_t x, int64_t y, int64_t *lx, int64_t *ly) {
    double lxd = floor((double)x / l->downsample), lyd = floor((double)y / l->downsample);
    bool near = fabs(lxd) < 9e15 && fabs(lyd) < 9e15;
    *lx = near ? (int64_t)lxd : 0;
    *ly = near ? (int64_t)lyd : 0;
    return near;
}

sp_status sp_slide_read_region(sp_slide *s, sp_pixel_format fmt, void *dst, int64_t stride,
                               int32_t level, int64_t x, int64_t y, int64_t w, int64_t h) {
    if (s == NULL || check_buffer(fmt, dst, stride, w, h) != SP_OK) {
        return SP_E_INVALID_ARG;
    }
    if (level >= 0 && level < s->n_levels) {
        /* Level coordinates of the request's origin; far-off origins are refused. */
        int64_t lx, ly;
        if (!sp_level_origin(&s->levels[level], x, y, &lx, &ly) && w > 0 && h > 0) {
            uint8_t empty[4] = {0, 0, 0, 0};
            if (fmt == SP_PIXEL_RGB8) {
                memcpy(empty, s->background, 3);
            }
            sp_fill_pixels(dst, stride, w, h, sp_pixel_format_bytes(fmt), empty);
            return SP_E_INVALID_ARG;
        }
        return sp_slide_read_level_area(s, fmt, dst, stride, level, 1, lx, ly, w, h, 0);
    }
    return sp_slide_read_level_area(s, fmt, dst, stride, level, 1, 0, 0, w, h, 0);
}

void sp_slide_prefetch_regions(sp_slide *s, const sp_region_request *reqs, size_t n) {
    sp_tile_pos tiles[SP_PREFETCH_TILES];
    size_t count = 0;
    int32_t level = n > 0 ? reqs[0].level : -1;
    if (s == NULL || !s->prefetch || s->ops->prefetch == NULL || level < 0 ||
        level >= s->n_levels) {
        return;
    }
    const sp_level *l = &s->levels[level];
    for (size_t i = 0; i < n && count < SP_PREFETCH_TILES; i++) {
        const sp_region_request *r = &reqs[i];
        int64_t lx, ly;
        if (r->slide != s || r->level != level || r->width <= 0 || r->height <= 0 ||
            !sp_level_origin(l, r->x, r->y, &lx, &ly)) {
            continue;
        }
        /* The part of the region inside the level, in tiles. */
        int64_t x0 = lx > 0 ? lx : 0, y0 = ly > 0 ? ly : 0;
        int64_t x1 = lx + r->width < l->width ? lx + r->width : l->width;
        int64_t y1 = ly + r->height < l->height ? ly + r->height : l->height;
        if (x0 >= x1 || y0 >= y1) {
            continue;
        }
        int64_t col0 = x0 / l->tile_width, row0 = y0 / l->tile_height;
        int64_t cols = (x1 - 1) / l->tile_width - col0 + 1;
        int64_t rows = (y1 - 1) / l->tile_height - row0 + 1;
        uncached_tiles(s, level, 1, col0, row0, cols, cols * rows, 0, tiles, &count,
                       SP_PREFETCH_TILES);
    }
    if (count > 0) {
        s->ops->prefetch(s, l, tiles, count);
    }
}

sp_status sp_slide_read_associated(sp_slide *s, const char *name, sp_pixel_format fmt, void *dst,
                                   int64_t stride) {
    if (s == NULL || name == NULL) {
        return SP_E_INVALID_ARG;
    }
    const sp_associated *a = NULL;
    for (int32_t i = 0; i < s->n_associated; i++) {
        if (strcmp(s->associated[i].name, name) == 0) {
            a = &s->associated[i];
        }
    }
    if (a == NULL) {
        return SP_E_NOT_FOUND;
    }
    if (check_buffer(fmt, dst, stride, a->width, a->height) != SP_OK) {
        return SP_E_INVALID_ARG;
    }
    sp_status st = sticky_status(s);
    if (st != SP_OK) {
        zero_area(dst, stride, a->width, a->height, fmt);
        return st;
    }
    sp_err err = {0};
    uint8_t *rgba = NULL;
    st = sp_calloc(&s->limits, (uint64_t)a->width * (uint64_t)a->height, 4, "associated image",
                   (void **)&rgba, &err);
    if (st == SP_OK) {
        st = s->ops->read_associated(s, a, rgba, (uint64_t)a->width * 4, &err);
    }
    if (st == SP_OK) {
        for (int64_t y = 0; y < a->height; y++) {
            const uint8_t *src = rgba + y * a->width * 4;
            uint8_t *out = (uint8_t *)dst + y * stride;
            if (fmt == SP_PIXEL_RGBA8) {
                memcpy(out, src, (size_t)a->width * 4);
            } else {
                rgba_to_rgb(src, out, a->width, s->background);
            }
        }
    } else {
        zero_area(dst, stride, a->width, a->height, fmt);
        sp_slide_record_error(s, &err);
    }
    free(rgba);
    return st;
}
