/* test_tiff.c — the TIFF container and the generic TIFF format on files built in memory: both
 * byte orders, classic and BigTIFF, tiles and strips, missing tiles, and hostile structures
 * (cycles, truncation, absurd counts, too many directories, zero tile sizes) that must give
 * clean errors. A small TIFF builder here writes exactly the bytes each case needs. */
#include <stdlib.h>
#include <string.h>

#include "slide/slide.h"
#include "tiff/tiff.h"
#include "unit.h"

/* ---- a minimal TIFF builder ---- */

typedef struct builder {
    uint8_t buf[1 << 16];
    size_t len;
    int be, big;
} builder;

typedef struct tag {
    uint16_t tag, type;
    uint32_t count;
    uint64_t values[8]; /* up to 8 values; with a larger count values[0] is the offset */
} tag;

static void put(builder *b, size_t at, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; i++) {
        int shift = b->be ? (bytes - 1 - i) * 8 : i * 8;
        b->buf[at + i] = (uint8_t)(v >> shift);
    }
}

static size_t append(builder *b, const void *data, size_t n) {
    size_t at = b->len;
    memcpy(b->buf + at, data, n);
    b->len += n;
    return at;
}

static void header(builder *b, int be, int big) {
    memset(b, 0, sizeof *b);
    b->be = be;
    b->big = big;
    b->buf[0] = b->buf[1] = be ? 'M' : 'I';
    put(b, 2, big ? 43 : 42, 2);
    if (big) {
        put(b, 4, 8, 2);
        put(b, 6, 0, 2);
        b->len = 16;
    } else {
        b->len = 8;
    }
}

/* Write an IFD with `n` tags (sorted by the caller) at the end; returns its offset. Values that
 * do not fit inline are written before the IFD. */
static size_t ifd(builder *b, const tag *tags, int n, uint64_t next) {
    size_t value_at[32];
    int esize = b->big ? 20 : 12, inline_max = b->big ? 8 : 4;
    for (int i = 0; i < n; i++) {
        int tsize = tags[i].type == 3 ? 2 : tags[i].type == 16 ? 8 : tags[i].type == 2 ? 1 : 4;
        size_t bytes = (size_t)tsize * tags[i].count;
        value_at[i] = 0;
        if (tags[i].count > 8) {
            value_at[i] = tags[i].values[0]; /* hostile counts: point anywhere, write nothing */
        } else if ((int)bytes > inline_max) {
            value_at[i] = b->len;
            for (uint32_t k = 0; k < tags[i].count; k++) {
                put(b, b->len, tags[i].values[k < 8 ? k : 7], tsize);
                b->len += (size_t)tsize;
            }
        }
    }
    if (b->len % 2) {
        b->len++;
    }
    size_t at = b->len;
    put(b, at, (uint64_t)n, b->big ? 8 : 2);
    size_t p = at + (b->big ? 8 : 2);
    for (int i = 0; i < n; i++, p += (size_t)esize) {
        int tsize = tags[i].type == 3 ? 2 : tags[i].type == 16 ? 8 : tags[i].type == 2 ? 1 : 4;
        put(b, p, tags[i].tag, 2);
        put(b, p + 2, tags[i].type, 2);
        put(b, p + 4, tags[i].count, b->big ? 8 : 4);
        size_t vp = p + (b->big ? 12 : 8);
        if (value_at[i]) {
            put(b, vp, value_at[i], b->big ? 8 : 4);
        } else {
            for (uint32_t k = 0; k < tags[i].count; k++) {
                put(b, vp + k * (size_t)tsize, tags[i].values[k], tsize);
            }
        }
    }
    put(b, p, next, b->big ? 8 : 4);
    b->len = p + (b->big ? 8 : 4);
    return at;
}

static void set_first_ifd(builder *b, uint64_t offset) { put(b, b->big ? 8 : 4, offset, b->big ? 8 : 4); }

/* A 12x10 RGB image in 8x8 uncompressed tiles (2x2 tiles); pixel (x, y) = (x*20, y*20, x+y).
 * When `missing` the last tile has offset 0. Returns the IFD offset. */
static size_t tiled_rgb(builder *b, int missing, uint64_t next) {
    uint64_t offsets[4];
    for (int t = 0; t < 4; t++) {
        uint8_t tile[8 * 8 * 3];
        for (int y = 0; y < 8; y++) {
            for (int x = 0; x < 8; x++) {
                int gx = (t % 2) * 8 + x, gy = (t / 2) * 8 + y;
                uint8_t *px = tile + (y * 8 + x) * 3;
                px[0] = (uint8_t)(gx * 20);
                px[1] = (uint8_t)(gy * 20);
                px[2] = (uint8_t)(gx + gy);
            }
        }
        offsets[t] = append(b, tile, sizeof tile);
    }
    if (missing) {
        offsets[3] = 0;
    }
    uint32_t off_type = b->big ? 16 : 4;
    tag tags[] = {
        {256, 3, 1, {12}},
        {257, 3, 1, {10}},
        {258, 3, 3, {8, 8, 8}},
        {259, 3, 1, {1}},
        {262, 3, 1, {2}},
        {277, 3, 1, {3}},
        {322, 3, 1, {8}},
        {323, 3, 1, {8}},
        {324, (uint16_t)off_type, 4, {offsets[0], offsets[1], offsets[2], offsets[3]}},
        {325, 4, 4, {192, 192, 192, 192}},
    };
    return ifd(b, tags, 10, next);
}

static sp_status open_built(builder *b, const sp_limits *limits, sp_slide **slide, sp_err *err) {
    sp_source *src = NULL;
    sp_limits defaults;
    sp_limits_default(&defaults);
    sp_status st = sp_source_open_memory(b->buf, b->len, "built.tif", &src, err);
    if (st != SP_OK) {
        return st;
    }
    return sp_slide_open_source(src, "built.tif", limits ? limits : &defaults, slide, err);
}

static void check_pixels(sp_slide *slide, int missing) {
    uint8_t px[14 * 12 * 4];
    memset(px, 0xAB, sizeof px);
    /* 14x12 from (-1, -1): a border of outside pixels all around the 12x10 image. */
    CHECK_EQ_INT(sp_slide_read_region(slide, SP_PIXEL_RGBA8, px, 14 * 4, 0, -1, -1, 14, 12), SP_OK);
    int bad = 0;
    for (int y = 0; y < 12; y++) {
        for (int x = 0; x < 14; x++) {
            const uint8_t *p = px + (y * 14 + x) * 4;
            int gx = x - 1, gy = y - 1;
            int inside = gx >= 0 && gx < 12 && gy >= 0 && gy < 10;
            if (missing && gx >= 8 && gy >= 8) {
                inside = 0;
            }
            uint8_t want[4] = {0, 0, 0, 0};
            if (inside) {
                want[0] = (uint8_t)(gx * 20);
                want[1] = (uint8_t)(gy * 20);
                want[2] = (uint8_t)(gx + gy);
                want[3] = 255;
            }
            bad += memcmp(p, want, 4) != 0;
        }
    }
    CHECK_EQ_INT(bad, 0);
}

static void test_valid_variants(void) {
    for (int be = 0; be <= 1; be++) {
        for (int big = 0; big <= 1; big++) {
            builder *b = malloc(sizeof *b);
            header(b, be, big);
            set_first_ifd(b, tiled_rgb(b, 0, 0));
            sp_slide *slide = NULL;
            sp_err err = {0};
            CHECK_EQ_INT(open_built(b, NULL, &slide, &err), SP_OK);
            if (slide != NULL) {
                CHECK(strcmp(sp_slide_format(slide), "generic-tiff") == 0);
                int64_t w, h;
                CHECK_EQ_INT(sp_slide_level_dimensions(slide, 0, &w, &h), SP_OK);
                CHECK_EQ_INT(w, 12);
                CHECK_EQ_INT(h, 10);
                check_pixels(slide, 0);
            } else {
                fprintf(stderr, "be=%d big=%d: %s\n", be, big, err.msg);
            }
            sp_slide_close(slide);
            free(b);
        }
    }
}

static void test_missing_tile_is_transparent(void) {
    builder *b = malloc(sizeof *b);
    header(b, 0, 0);
    set_first_ifd(b, tiled_rgb(b, 1, 0));
    sp_slide *slide = NULL;
    sp_err err = {0};
    CHECK_EQ_INT(open_built(b, NULL, &slide, &err), SP_OK);
    if (slide) {
        check_pixels(slide, 1);
    }
    sp_slide_close(slide);
    free(b);
}

/* Open must fail with `want`, and the message must contain `needle`. */
static void expect_open_error(builder *b, const sp_limits *limits, sp_status want,
                              const char *needle) {
    sp_slide *slide = NULL;
    sp_err err = {0};
    sp_status st = open_built(b, limits, &slide, &err);
    CHECK_EQ_INT(st, want);
    CHECK(slide == NULL);
    if (strstr(err.msg, needle) == NULL) {
        fprintf(stderr, "message '%s' lacks '%s'\n", err.msg, needle);
        CHECK(0);
    }
    sp_slide_close(slide);
}

static void test_hostile_structures(void) {
    builder *b = malloc(sizeof *b);

    /* An IFD whose next pointer is itself. */
    header(b, 0, 0);
    size_t at = tiled_rgb(b, 0, 0);
    set_first_ifd(b, at);
    put(b, at + 2 + 10 * 12, at, 4);
    expect_open_error(b, NULL, SP_E_CORRUPT, "cycle");

    /* The first IFD beyond the end of the file. */
    header(b, 0, 0);
    set_first_ifd(b, 1u << 20);
    b->len = 64;
    expect_open_error(b, NULL, SP_E_CORRUPT, "truncated");

    /* A tag claiming 2^31 LONG values. */
    header(b, 0, 0);
    tag huge[] = {{256, 3, 1, {12}}, {257, 3, 1, {10}}, {273, 4, 0x7fffffff, {8}}};
    set_first_ifd(b, ifd(b, huge, 3, 0));
    expect_open_error(b, NULL, SP_E_LIMIT, "metadata limit");

    /* Zero tile width. */
    header(b, 0, 0);
    tag zero[] = {{256, 3, 1, {12}}, {257, 3, 1, {10}}, {322, 3, 1, {0}}, {323, 3, 1, {8}}};
    set_first_ifd(b, ifd(b, zero, 4, 0));
    expect_open_error(b, NULL, SP_E_CORRUPT, "tile size is zero");

    /* A chain of 5 directories against a limit of 4. */
    header(b, 0, 0);
    uint64_t next = 0;
    for (int i = 0; i < 5; i++) {
        tag t[] = {{254, 4, 1, {1}}, {256, 3, 1, {0}}, {257, 3, 1, {0}}}; /* not images */
        next = ifd(b, t, 3, next);
    }
    set_first_ifd(b, next);
    sp_limits lim;
    sp_limits_default(&lim);
    lim.value[SP_LIMIT_MAX_DIRECTORIES] = 4;
    expect_open_error(b, &lim, SP_E_LIMIT, "directories");

    /* Tile offsets fewer than tiles. */
    header(b, 0, 0);
    tag few[] = {{256, 3, 1, {12}}, {257, 3, 1, {10}}, {322, 3, 1, {8}}, {323, 3, 1, {8}},
                 {324, 4, 1, {8}},  {325, 4, 1, {192}}};
    set_first_ifd(b, ifd(b, few, 6, 0));
    expect_open_error(b, NULL, SP_E_CORRUPT, "chunks expected");

    /* Not a TIFF at all, and an empty file. */
    memcpy(b->buf, "IJrE random text", 16);
    b->len = 16;
    expect_open_error(b, NULL, SP_E_NOT_A_SLIDE, "not a recognised");
    b->len = 0;
    expect_open_error(b, NULL, SP_E_NOT_A_SLIDE, "empty");
    free(b);
}

static void test_tile_limit_and_sticky_error(void) {
    builder *b = malloc(sizeof *b);
    header(b, 0, 0);
    set_first_ifd(b, tiled_rgb(b, 0, 0));
    sp_limits lim;
    sp_limits_default(&lim);
    lim.value[SP_LIMIT_MAX_TILE_PIXELS] = 63;
    expect_open_error(b, &lim, SP_E_LIMIT, "tile limit");

    /* A tile whose bytes lie past the end: open succeeds, the read fails and the error sticks. */
    header(b, 0, 0);
    set_first_ifd(b, tiled_rgb(b, 0, 0));
    sp_slide *slide = NULL;
    sp_err err = {0};
    CHECK_EQ_INT(open_built(b, NULL, &slide, &err), SP_OK);
    if (slide) {
        sp_tiff_dir *d = (sp_tiff_dir *)slide->levels[0].priv;
        d->chunk_offsets[0] = 1u << 30;
        uint8_t px[4 * 4 * 4];
        memset(px, 0x55, sizeof px);
        CHECK_EQ_INT(sp_slide_read_region(slide, SP_PIXEL_RGBA8, px, 16, 0, 0, 0, 4, 4),
                     SP_E_CORRUPT);
        int zero = 1;
        for (size_t i = 0; i < sizeof px; i++) {
            zero &= px[i] == 0;
        }
        CHECK(zero);
        CHECK(sp_slide_error(slide) != NULL && strstr(sp_slide_error(slide), "truncated"));
        /* Reading an intact tile now fails too: the first error sticks. */
        CHECK_EQ_INT(sp_slide_read_region(slide, SP_PIXEL_RGBA8, px, 16, 0, 9, 9, 2, 2),
                     SP_E_CORRUPT);
    }
    sp_slide_close(slide);
    free(b);
}

static void test_argument_errors_do_not_stick(void) {
    builder *b = malloc(sizeof *b);
    header(b, 1, 0);
    set_first_ifd(b, tiled_rgb(b, 0, 0));
    sp_slide *slide = NULL;
    sp_err err = {0};
    CHECK_EQ_INT(open_built(b, NULL, &slide, &err), SP_OK);
    if (slide) {
        uint8_t px[8 * 8 * 4];
        CHECK_EQ_INT(sp_slide_read_region(slide, SP_PIXEL_RGBA8, px, 8 * 4, 1, 0, 0, 8, 8),
                     SP_E_INVALID_ARG);
        CHECK_EQ_INT(sp_slide_read_region(slide, SP_PIXEL_RGBA8, px, 3, 0, 0, 0, 8, 8),
                     SP_E_INVALID_ARG);
        CHECK_EQ_INT(sp_slide_read_region(slide, (sp_pixel_format)7, px, 64, 0, 0, 0, 8, 8),
                     SP_E_INVALID_ARG);
        CHECK(sp_slide_error(slide) == NULL);
        CHECK_EQ_INT(sp_slide_read_region(slide, SP_PIXEL_RGBA8, px, 8 * 4, 0, 0, 0, 8, 8), SP_OK);
        /* RGB composites outside pixels over the white background. */
        uint8_t rgb[3];
        CHECK_EQ_INT(sp_slide_read_region(slide, SP_PIXEL_RGB8, rgb, 3, 0, 100, 100, 1, 1), SP_OK);
        CHECK(rgb[0] == 255 && rgb[1] == 255 && rgb[2] == 255);
        CHECK_EQ_INT(sp_slide_read_region(slide, SP_PIXEL_RGB8, rgb, 3, 0, 3, 2, 1, 1), SP_OK);
        CHECK(rgb[0] == 60 && rgb[1] == 40 && rgb[2] == 5);
    }
    sp_slide_close(slide);
    free(b);
}

void unit_run(void) {
    test_valid_variants();
    test_missing_tile_is_transparent();
    test_hostile_structures();
    test_tile_limit_and_sticky_error();
    test_argument_errors_do_not_stick();
}
