/* test_dicom.c — the DICOM Part 10 reader and the "dicom" format on files built in memory:
 * explicit and implicit VR, nested sequences of undefined length, the wanted-attribute paths
 * (first item only), per-frame positions, Basic and Extended Offset Tables with multi-fragment
 * frames, frames found without a table, and hostile files (truncation at every length, too deep
 * nesting, too many elements, offset tables and fragment walks that point or run off the end)
 * that must give clean errors. A small builder here writes exactly the bytes each case needs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dicom/dicom.h"
#include "slide/slide.h"
#include "unit.h"

#define EXPLICIT_LE "1.2.840.10008.1.2.1"
#define IMPLICIT_LE "1.2.840.10008.1.2"
#define JPEG_BASELINE "1.2.840.10008.1.2.4.50"
#define WSI "1.2.840.10008.5.1.4.1.1.77.1.6"
#define UNDEF 0xFFFFFFFFu

/* ---- a minimal DICOM writer ---- */

typedef struct builder {
    uint8_t buf[1 << 16];
    size_t len;
    int implicit;
} builder;

static void put16(builder *b, uint32_t v) {
    b->buf[b->len++] = (uint8_t)v;
    b->buf[b->len++] = (uint8_t)(v >> 8);
}

static void put32(builder *b, uint32_t v) {
    put16(b, v & 0xFFFF);
    put16(b, v >> 16);
}

static void bytes(builder *b, const void *data, size_t n) {
    memcpy(b->buf + b->len, data, n);
    b->len += n;
}

static int long_vr(const char *vr) {
    return strstr("OB OD OF OL OV OW SQ SV UC UN UR UT UV", vr) != NULL;
}

/* An element header: explicit (unless b->implicit or group FFFE) with `vr`. */
static void header(builder *b, uint16_t g, uint16_t e, const char *vr, uint32_t len) {
    put16(b, g);
    put16(b, e);
    if (b->implicit || g == 0xFFFE) {
        put32(b, len);
    } else if (long_vr(vr)) {
        bytes(b, vr, 2);
        put16(b, 0);
        put32(b, len);
    } else {
        bytes(b, vr, 2);
        put16(b, len);
    }
}

static void element(builder *b, uint16_t g, uint16_t e, const char *vr, const void *v, uint32_t n) {
    header(b, g, e, vr, n);
    bytes(b, v, n);
}

/* A string value, padded to even length as DICOM requires. */
static void str(builder *b, uint16_t g, uint16_t e, const char *vr, const char *s) {
    uint32_t n = (uint32_t)strlen(s);
    uint8_t tmp[256];
    memcpy(tmp, s, n);
    if (n % 2) {
        tmp[n++] = strcmp(vr, "UI") == 0 ? 0 : ' ';
    }
    element(b, g, e, vr, tmp, n);
}

static void us(builder *b, uint16_t g, uint16_t e, uint16_t v) {
    uint8_t x[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    element(b, g, e, "US", x, 2);
}

static void ul(builder *b, uint16_t g, uint16_t e, const char *vr, uint32_t v) {
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    element(b, g, e, vr, x, 4);
}

static void item(builder *b, uint32_t len) {
    header(b, 0xFFFE, 0xE000, "", len);
}
static void item_end(builder *b) {
    header(b, 0xFFFE, 0xE00D, "", 0);
}
static void seq_end(builder *b) {
    header(b, 0xFFFE, 0xE0DD, "", 0);
}

/* Preamble, DICM and the File Meta group (always explicit), then the data set's encoding. */
static void start(builder *b, const char *syntax) {
    memset(b, 0, sizeof *b);
    b->len = 128;
    bytes(b, "DICM", 4);
    str(b, 0x0002, 0x0002, "UI", WSI);
    str(b, 0x0002, 0x0010, "UI", syntax);
    b->implicit = strcmp(syntax, IMPLICIT_LE) == 0;
}

/* Pixel-level attributes of a WSI instance: `cols` x `rows` frames over a `tw` x `th` matrix. */
static void image_attrs(builder *b, int frames, int cols, int rows, int tw, int th,
                        const char *photometric, int samples, const char *organisation) {
    str(b, 0x0008, 0x0008, "CS", "DERIVED\\PRIMARY\\VOLUME\\NONE");
    str(b, 0x0008, 0x0016, "UI", WSI);
    str(b, 0x0008, 0x0018, "UI", "1.2.3.4.5");
    str(b, 0x0020, 0x000E, "UI", "1.2.3.4");
    str(b, 0x0020, 0x9311, "CS", organisation);
    us(b, 0x0028, 0x0002, (uint16_t)samples);
    str(b, 0x0028, 0x0004, "CS", photometric);
    us(b, 0x0028, 0x0006, 0);
    char n[16];
    snprintf(n, sizeof n, "%d", frames);
    str(b, 0x0028, 0x0008, "IS", n);
    us(b, 0x0028, 0x0010, (uint16_t)rows);
    us(b, 0x0028, 0x0011, (uint16_t)cols);
    us(b, 0x0028, 0x0100, 8);
    us(b, 0x0028, 0x0101, 8);
    us(b, 0x0028, 0x0103, 0);
    ul(b, 0x0048, 0x0006, "UL", (uint32_t)tw);
    ul(b, 0x0048, 0x0007, "UL", (uint32_t)th);
}

static sp_status parse_limited(builder *b, size_t len, const sp_limits *limits,
                               const sp_dicom_options *o, sp_dicom **out, sp_source **src,
                               sp_err *err) {
    *out = NULL;
    sp_status st = sp_source_open_memory(b->buf, len, "mem.dcm", src, err);
    if (st == SP_OK) {
        st = sp_dicom_open(*src, limits, o, out, err);
    }
    return st;
}

static sp_status parse(builder *b, size_t len, const sp_dicom_options *o, sp_dicom **out,
                       sp_source **src, sp_err *err) {
    sp_limits limits;
    sp_limits_default(&limits);
    return parse_limited(b, len, &limits, o, out, src, err);
}

/* Parse and index; returns the first failing status. */
static sp_status parse_all(builder *b, size_t len, const sp_dicom_options *o) {
    sp_dicom *d = NULL;
    sp_source *src = NULL;
    sp_err err = {0};
    sp_status st = parse(b, len, o, &d, &src, &err);
    if (st == SP_OK) {
        st = sp_dicom_index_frames(d, &err);
    }
    sp_dicom_close(d);
    sp_source_close(src);
    return st;
}

/* ---- valid files ---- */

/* Native RGB pixel data: `frames` frames of 2x2 pixels, pixel value = frame * 16 + index. */
static void native_pixels(builder *b, int frames) {
    header(b, 0x7FE0, 0x0010, "OB", (uint32_t)frames * 12);
    for (int f = 0; f < frames; f++) {
        for (int i = 0; i < 12; i++) {
            b->buf[b->len++] = (uint8_t)(f * 16 + i);
        }
    }
}

static void build_native(builder *b, const char *syntax) {
    start(b, syntax);
    image_attrs(b, 3, 2, 2, 6, 2, "RGB", 3, "TILED_FULL");
    native_pixels(b, 3);
}

static void test_explicit_and_implicit(void) {
    const char *syntaxes[] = {EXPLICIT_LE, IMPLICIT_LE};
    for (int k = 0; k < 2; k++) {
        builder b;
        build_native(&b, syntaxes[k]);
        sp_dicom *d = NULL;
        sp_source *src = NULL;
        sp_err err = {0};
        CHECK_EQ_INT(parse(&b, b.len, NULL, &d, &src, &err), SP_OK);
        if (d == NULL) {
            sp_source_close(src);
            continue;
        }
        CHECK_EQ_INT(d->implicit_vr, k == 1);
        char s[80];
        CHECK(sp_dicom_string(d, SP_DICOM_IMAGE_TYPE, 2, s, sizeof s) && strcmp(s, "VOLUME") == 0);
        CHECK(!sp_dicom_string(d, SP_DICOM_IMAGE_TYPE, 4, s, sizeof s));
        CHECK(sp_dicom_string(d, SP_DICOM_SERIES_INSTANCE_UID, 0, s, sizeof s) &&
              strcmp(s, "1.2.3.4") == 0);
        int64_t v = 0;
        CHECK(sp_dicom_int(d, SP_DICOM_ROWS, &v) && v == 2);
        CHECK(sp_dicom_int(d, SP_DICOM_TOTAL_PIXEL_MATRIX_COLUMNS, &v) && v == 6);
        CHECK(sp_dicom_int(d, SP_DICOM_NUMBER_OF_FRAMES, &v) && v == 3);
        CHECK(d->has_pixel_data && !d->encapsulated);
        CHECK_EQ_INT(sp_dicom_index_frames(d, &err), SP_OK);
        CHECK_EQ_INT(d->n_frames, 3);
        uint8_t *frame = NULL;
        size_t len = 0;
        CHECK_EQ_INT(sp_dicom_read_frame(d, 2, &frame, &len, &err), SP_OK);
        CHECK(len == 12 && frame != NULL && frame[0] == 32 && frame[11] == 43);
        free(frame);
        CHECK_EQ_INT(sp_dicom_read_frame(d, 3, &frame, &len, &err), SP_E_CORRUPT);
        sp_dicom_close(d);
        sp_source_close(src);
    }
}

/* Nested sequences of undefined length around the wanted paths, an unrelated deep sequence to
 * skip, a second optical path that must not override the first, and per-frame positions. */
static void build_nested(builder *b, const char *syntax, int defined_outer,
                         const char *organisation) {
    start(b, syntax);
    image_attrs(b, 3, 2, 2, 6, 2, "RGB", 3, organisation);
    /* (0040,0555) an unrelated sequence three deep, all undefined length */
    header(b, 0x0040, 0x0555, "SQ", UNDEF);
    item(b, UNDEF);
    header(b, 0x0040, 0x0556, "SQ", UNDEF);
    item(b, UNDEF);
    header(b, 0x0040, 0x0557, "SQ", UNDEF);
    item(b, UNDEF);
    str(b, 0x0048, 0x0112, "DS", "99"); /* ObjectiveLensPower at the wrong path */
    item_end(b);
    seq_end(b);
    item_end(b);
    seq_end(b);
    item_end(b);
    seq_end(b);
    /* OpticalPathSequence: two items; the first one's power counts */
    header(b, 0x0048, 0x0105, "SQ", UNDEF);
    item(b, UNDEF);
    str(b, 0x0048, 0x0112, "DS", "40");
    item_end(b);
    item(b, UNDEF);
    str(b, 0x0048, 0x0112, "DS", "10");
    item_end(b);
    seq_end(b);
    /* SharedFunctionalGroupsSequence > PixelMeasuresSequence > PixelSpacing, with defined
     * lengths when asked (patched after writing) */
    size_t outer_len_at = b->len + (b->implicit ? 4 : 8);
    header(b, 0x5200, 0x9229, "SQ", UNDEF);
    size_t outer_start = b->len;
    item(b, UNDEF);
    header(b, 0x0028, 0x9110, "SQ", UNDEF);
    item(b, UNDEF);
    str(b, 0x0028, 0x0030, "DS", "0.00025\\0.0005");
    item_end(b);
    seq_end(b);
    item_end(b);
    if (defined_outer) {
        uint32_t n = (uint32_t)(b->len - outer_start);
        memcpy(b->buf + outer_len_at, &n, 4); /* little-endian host, as everywhere here */
    } else {
        seq_end(b);
    }
    /* PerFrameFunctionalGroupsSequence: frame positions (1-based), frame 2 without one */
    header(b, 0x5200, 0x9230, "SQ", UNDEF);
    const int pos[3][2] = {{3, 1}, {0, 0}, {1, 1}};
    for (int f = 0; f < 3; f++) {
        item(b, UNDEF);
        if (pos[f][0]) {
            header(b, 0x0048, 0x021A, "SQ", UNDEF);
            item(b, UNDEF);
            ul(b, 0x0048, 0x021E, "SL", (uint32_t)pos[f][0]);
            ul(b, 0x0048, 0x021F, "SL", (uint32_t)pos[f][1]);
            item_end(b);
            seq_end(b);
        }
        item_end(b);
    }
    seq_end(b);
    native_pixels(b, 3);
}

static void test_nested_sequences(void) {
    const char *syntaxes[] = {EXPLICIT_LE, IMPLICIT_LE};
    for (int k = 0; k < 4; k++) {
        builder b;
        build_nested(&b, syntaxes[k % 2], k / 2, "TILED_FULL");
        sp_dicom *d = NULL;
        sp_source *src = NULL;
        sp_err err = {0};
        CHECK_EQ_INT(parse(&b, b.len, NULL, &d, &src, &err), SP_OK);
        if (d != NULL) {
            double v = 0;
            CHECK(sp_dicom_double(d, SP_DICOM_OBJECTIVE_LENS_POWER, 0, &v) && v == 40);
            CHECK(sp_dicom_double(d, SP_DICOM_PIXEL_SPACING, 0, &v) && v == 0.00025);
            CHECK(sp_dicom_double(d, SP_DICOM_PIXEL_SPACING, 1, &v) && v == 0.0005);
            CHECK(d->n_positions >= 3);
            if (d->n_positions >= 3) {
                CHECK(d->positions[0].column == 3 && d->positions[0].row == 1);
                CHECK(d->positions[1].column == SP_DICOM_NO_POSITION);
                CHECK(d->positions[2].column == 1 && d->positions[2].row == 1);
            }
            CHECK(d->has_pixel_data);
        }
        sp_dicom_close(d);
        sp_source_close(src);
    }
}

/* ---- encapsulated pixel data ---- */

static const uint8_t SOI[4] = {0xFF, 0xD8, 0xFF, 0xE0};

/* Encapsulated pixel data: a BOT of `bot` entries (NULL: empty) and fragments of the given
 * sizes; fragment f holds bytes f*10 + i, starting with a JPEG SOI when starts[f]. */
static void encapsulated(builder *b, const uint32_t *bot, int n_bot, const uint32_t *sizes,
                         const int *starts, int n, int delimiter) {
    header(b, 0x7FE0, 0x0010, "OB", UNDEF);
    item(b, (uint32_t)n_bot * 4);
    for (int i = 0; i < n_bot; i++) {
        put32(b, bot[i]);
    }
    for (int f = 0; f < n; f++) {
        item(b, sizes[f]);
        for (uint32_t i = 0; i < sizes[f]; i++) {
            b->buf[b->len++] = (uint8_t)(f * 10 + i);
        }
        if (starts != NULL && starts[f]) {
            memcpy(b->buf + b->len - sizes[f], SOI, 4);
        }
    }
    if (delimiter) {
        seq_end(b);
    }
}

static void jpeg_start(builder *b, int frames) {
    start(b, JPEG_BASELINE);
    image_attrs(b, frames, 2, 2, 2 * frames, 2, "YBR_FULL_422", 3, "TILED_FULL");
}

static void test_basic_offset_table(void) {
    /* 3 frames over 4 fragments: frame 1 is fragments 1 and 2. Item headers are 8 bytes. */
    const uint32_t sizes[4] = {6, 4, 8, 10};
    const uint32_t bot[3] = {0, 14, 14 + 12 + 16};
    builder b;
    jpeg_start(&b, 3);
    encapsulated(&b, bot, 3, sizes, NULL, 4, 1);
    sp_dicom *d = NULL;
    sp_source *src = NULL;
    sp_err err = {0};
    CHECK_EQ_INT(parse(&b, b.len, NULL, &d, &src, &err), SP_OK);
    if (d != NULL) {
        CHECK(d->encapsulated);
        CHECK_EQ_INT(sp_dicom_index_frames(d, &err), SP_OK);
        CHECK_EQ_INT(d->n_frames, 3);
        CHECK_EQ_INT(d->n_fragments, 4);
        if (d->n_frames == 3) {
            CHECK(d->frames[1].n_fragments == 2 && d->frames[1].length == 12);
            CHECK(d->frames[2].first_fragment == 3 && d->frames[2].length == 10);
        }
        uint8_t *f = NULL;
        size_t len = 0;
        CHECK_EQ_INT(sp_dicom_read_frame(d, 1, &f, &len, &err), SP_OK);
        CHECK(len == 12 && f[0] == 10 && f[3] == 13 && f[4] == 20 && f[11] == 27);
        free(f);
    }
    sp_dicom_close(d);
    sp_source_close(src);

    /* A BOT entry that points into the middle of a fragment, or backwards, or the wrong count. */
    const uint32_t mid[3] = {0, 15, 42};
    const uint32_t back[3] = {0, 42, 14};
    const uint32_t *bad[2] = {mid, back};
    for (int k = 0; k < 2; k++) {
        jpeg_start(&b, 3);
        encapsulated(&b, bad[k], 3, sizes, NULL, 4, 1);
        CHECK_EQ_INT(parse_all(&b, b.len, NULL), SP_E_CORRUPT);
    }
    jpeg_start(&b, 3);
    encapsulated(&b, bot, 2, sizes, NULL, 4, 1);
    CHECK_EQ_INT(parse_all(&b, b.len, NULL), SP_E_CORRUPT);
}

static void put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

static void test_extended_offset_table(void) {
    const uint32_t sizes[2] = {6, 10};
    for (int variant = 0; variant < 3; variant++) {
        builder b;
        jpeg_start(&b, 2);
        uint8_t eot[16], lengths[16];
        put_u64(eot, 0);
        put_u64(eot + 8, 14);
        put_u64(lengths, 6);
        put_u64(lengths + 8, variant == 1 ? 11 : 10);                  /* 1: a wrong length */
        element(&b, 0x7FE0, 0x0001, "OV", eot, variant == 2 ? 8 : 16); /* 2: one entry short */
        element(&b, 0x7FE0, 0x0002, "OV", lengths, 16);
        encapsulated(&b, NULL, 0, sizes, NULL, 2, 1);
        sp_dicom *d = NULL;
        sp_source *src = NULL;
        sp_err err = {0};
        CHECK_EQ_INT(parse(&b, b.len, NULL, &d, &src, &err), SP_OK);
        if (d != NULL) {
            sp_status st = sp_dicom_index_frames(d, &err);
            CHECK_EQ_INT(st, variant == 0 ? SP_OK : SP_E_CORRUPT);
            if (variant == 0 && st == SP_OK) {
                CHECK(d->n_frames == 2 && d->frames[1].first_fragment == 1 &&
                      d->frames[1].length == 10);
            }
        }
        sp_dicom_close(d);
        sp_source_close(src);
    }
}

static void test_frames_without_table(void) {
    builder b;
    sp_dicom *d = NULL;
    sp_source *src = NULL;
    sp_err err = {0};
    /* One frame in three fragments: all of them. */
    const uint32_t sizes[3] = {6, 4, 8};
    jpeg_start(&b, 1);
    encapsulated(&b, NULL, 0, sizes, NULL, 3, 1);
    CHECK_EQ_INT(parse(&b, b.len, NULL, &d, &src, &err), SP_OK);
    if (d != NULL) {
        CHECK_EQ_INT(sp_dicom_index_frames(d, &err), SP_OK);
        CHECK(d->n_frames == 1 && d->frames[0].n_fragments == 3 && d->frames[0].length == 18);
    }
    sp_dicom_close(d);
    sp_source_close(src);

    /* Two frames in three fragments: the fragments opening a JPEG stream start the frames. */
    const int starts[3] = {1, 0, 1};
    jpeg_start(&b, 2);
    encapsulated(&b, NULL, 0, sizes, starts, 3, 1);
    CHECK_EQ_INT(parse(&b, b.len, NULL, &d, &src, &err), SP_OK);
    if (d != NULL) {
        CHECK_EQ_INT(sp_dicom_index_frames(d, &err), SP_OK);
        CHECK(d->n_frames == 2 && d->frames[0].n_fragments == 2 && d->frames[1].length == 8);
    }
    sp_dicom_close(d);
    sp_source_close(src);

    /* ... but not when the markers do not give the frame count, nor with too few fragments. */
    const int all[3] = {1, 1, 1};
    jpeg_start(&b, 2);
    encapsulated(&b, NULL, 0, sizes, all, 3, 1);
    CHECK_EQ_INT(parse_all(&b, b.len, NULL), SP_E_CORRUPT);
    jpeg_start(&b, 4);
    encapsulated(&b, NULL, 0, sizes, NULL, 3, 1);
    CHECK_EQ_INT(parse_all(&b, b.len, NULL), SP_E_CORRUPT);
}

static void test_fragment_walk_off_the_end(void) {
    const uint32_t sizes[2] = {6, 10};
    builder b;
    /* No sequence delimiter: the walk reaches the end of the file. */
    jpeg_start(&b, 2);
    encapsulated(&b, NULL, 0, sizes, NULL, 2, 0);
    CHECK_EQ_INT(parse_all(&b, b.len, NULL), SP_E_CORRUPT);
    /* A fragment whose length runs past the end. */
    jpeg_start(&b, 2);
    encapsulated(&b, NULL, 0, sizes, NULL, 2, 1);
    uint32_t huge = 0x7FFFFFF0u;
    memcpy(b.buf + b.len - 8 - 10 - 4, &huge, 4); /* the second fragment's length */
    CHECK_EQ_INT(parse_all(&b, b.len, NULL), SP_E_CORRUPT);
    /* Something other than an item among the fragments. */
    jpeg_start(&b, 2);
    encapsulated(&b, NULL, 0, sizes, NULL, 2, 1);
    b.buf[b.len - 8 - 10 - 8] = 0x01; /* the second item's tag */
    CHECK_EQ_INT(parse_all(&b, b.len, NULL), SP_E_CORRUPT);
}

/* ---- hostile files ---- */

static void test_truncation_everywhere(void) {
    builder full;
    const uint32_t sizes[4] = {6, 4, 8, 10};
    const uint32_t bot[3] = {0, 14, 14 + 12 + 16};
    for (int k = 0; k < 3; k++) {
        if (k == 0) {
            jpeg_start(&full, 3);
            encapsulated(&full, bot, 3, sizes, NULL, 4, 1);
        } else {
            build_nested(&full, k == 1 ? EXPLICIT_LE : IMPLICIT_LE, 1, "TILED_SPARSE");
        }
        CHECK_EQ_INT(parse_all(&full, full.len, NULL), SP_OK);
        int wrong = 0;
        for (size_t len = 0; len < full.len; len++) {
            sp_status st = parse_all(&full, len, NULL);
            sp_status want = len < 132 ? SP_E_NOT_A_SLIDE : SP_E_CORRUPT;
            if (st != want) {
                if (wrong++ < 3) {
                    fprintf(stderr, "truncated to %zu of %zu bytes (case %d): status %d\n", len,
                            full.len, k, st);
                }
            }
        }
        CHECK_EQ_INT(wrong, 0);
    }
}

static void test_limits(void) {
    builder b;
    sp_dicom_options o;
    /* Depth: 16 nested sequences pass by default, 17 do not. */
    for (int depth = 16; depth <= 17; depth++) {
        start(&b, EXPLICIT_LE);
        for (int i = 0; i < depth; i++) {
            header(&b, 0x0040, 0x0555, "SQ", UNDEF);
            item(&b, UNDEF);
        }
        for (int i = 0; i < depth; i++) {
            item_end(&b);
            seq_end(&b);
        }
        native_pixels(&b, 1);
        sp_dicom *d = NULL;
        sp_source *src = NULL;
        sp_err err = {0};
        CHECK_EQ_INT(parse(&b, b.len, NULL, &d, &src, &err), depth == 16 ? SP_OK : SP_E_LIMIT);
        sp_dicom_close(d);
        sp_source_close(src);
    }
    sp_dicom_options_default(&o);
    o.max_depth = 3;
    CHECK_EQ_INT(parse_all(&b, b.len, &o), SP_E_LIMIT);

    /* Elements: the native file has about 20. */
    build_native(&b, EXPLICIT_LE);
    sp_dicom_options_default(&o);
    o.max_elements = 10;
    CHECK_EQ_INT(parse_all(&b, b.len, &o), SP_E_LIMIT);
    o.max_elements = 1000;
    CHECK_EQ_INT(parse_all(&b, b.len, &o), SP_OK);

    /* Frames: NumberOfFrames above the frame limit; and more than the pixel data holds. */
    sp_dicom_options_default(&o);
    o.max_frames = 2;
    CHECK_EQ_INT(parse_all(&b, b.len, &o), SP_E_LIMIT);
    start(&b, EXPLICIT_LE);
    image_attrs(&b, 4, 2, 2, 8, 2, "RGB", 3, "TILED_FULL");
    native_pixels(&b, 3);
    CHECK_EQ_INT(parse_all(&b, b.len, NULL), SP_E_CORRUPT);

    /* A kept value over the metadata limit; a claimed size beyond the file is corrupt. */
    start(&b, EXPLICIT_LE);
    char name[101];
    memset(name, 'x', 100);
    name[100] = '\0';
    str(&b, 0x0008, 0x0070, "LO", name);
    native_pixels(&b, 1);
    sp_limits limits;
    sp_limits_default(&limits);
    limits.value[SP_LIMIT_MAX_METADATA] = 64;
    sp_dicom *d = NULL;
    sp_source *src = NULL;
    sp_err err = {0};
    CHECK_EQ_INT(parse_limited(&b, b.len, &limits, NULL, &d, &src, &err), SP_E_LIMIT);
    sp_dicom_close(d);
    sp_source_close(src);
    start(&b, EXPLICIT_LE);
    header(&b, 0x0008, 0x0070, "UT", 3u << 30); /* Manufacturer, claimed 3 GiB */
    CHECK_EQ_INT(parse_all(&b, b.len, NULL), SP_E_CORRUPT);
}

static void test_hostile_structures(void) {
    builder b;
    /* Big endian and deflated transfer syntaxes are refused. */
    start(&b, "1.2.840.10008.1.2.2");
    CHECK_EQ_INT(parse_all(&b, b.len, NULL), SP_E_UNSUPPORTED);
    start(&b, "1.2.840.10008.1.2.1.99");
    CHECK_EQ_INT(parse_all(&b, b.len, NULL), SP_E_UNSUPPORTED);
    /* No DICM. */
    build_native(&b, EXPLICIT_LE);
    b.buf[128] = 'X';
    CHECK_EQ_INT(parse_all(&b, b.len, NULL), SP_E_NOT_A_SLIDE);
    /* No transfer syntax. */
    memset(&b, 0, sizeof b);
    b.len = 128;
    bytes(&b, "DICM", 4);
    str(&b, 0x0002, 0x0002, "UI", WSI);
    CHECK_EQ_INT(parse_all(&b, b.len, NULL), SP_E_CORRUPT);
    /* An item that overruns its defined-length sequence. */
    start(&b, EXPLICIT_LE);
    header(&b, 0x0040, 0x0555, "SQ", 8);
    item(&b, 100);
    native_pixels(&b, 1);
    CHECK_EQ_INT(parse_all(&b, b.len, NULL), SP_E_CORRUPT);
    /* An element that overruns its defined-length item. */
    start(&b, EXPLICIT_LE);
    header(&b, 0x0040, 0x0555, "SQ", 8 + 8 + 4);
    item(&b, 8 + 4);
    header(&b, 0x0008, 0x0070, "LO", 40);
    bytes(&b, "abcd", 4);
    native_pixels(&b, 1);
    CHECK_EQ_INT(parse_all(&b, b.len, NULL), SP_E_CORRUPT);
    /* A stray delimiter, and a non-item inside a sequence. */
    start(&b, EXPLICIT_LE);
    item_end(&b);
    native_pixels(&b, 1);
    CHECK_EQ_INT(parse_all(&b, b.len, NULL), SP_E_CORRUPT);
    start(&b, EXPLICIT_LE);
    header(&b, 0x0040, 0x0555, "SQ", UNDEF);
    us(&b, 0x0028, 0x0010, 2);
    CHECK_EQ_INT(parse_all(&b, b.len, NULL), SP_E_CORRUPT);
    /* A VR that is not two capital letters. */
    start(&b, EXPLICIT_LE);
    element(&b, 0x0008, 0x0070, "l0", "ab", 2);
    CHECK_EQ_INT(parse_all(&b, b.len, NULL), SP_E_CORRUPT);
    /* Undefined length on a string. */
    start(&b, EXPLICIT_LE);
    header(&b, 0x0008, 0x0070, "UT", UNDEF);
    CHECK_EQ_INT(parse_all(&b, b.len, NULL), SP_E_CORRUPT);
    /* Encapsulated pixel data inside an item (an icon) is skipped, not parsed as data sets. */
    start(&b, EXPLICIT_LE);
    image_attrs(&b, 1, 2, 2, 2, 2, "RGB", 3, "TILED_FULL");
    header(&b, 0x0088, 0x0200, "SQ", UNDEF);
    item(&b, UNDEF);
    const uint32_t icon[1] = {9};
    encapsulated(&b, NULL, 0, icon, NULL, 1, 1);
    item_end(&b);
    seq_end(&b);
    native_pixels(&b, 1);
    CHECK_EQ_INT(parse_all(&b, b.len, NULL), SP_OK);
    /* An undefined-length UN holds a sequence in implicit VR (PS3.5 6.2.2). */
    start(&b, EXPLICIT_LE);
    image_attrs(&b, 1, 2, 2, 2, 2, "RGB", 3, "TILED_FULL");
    header(&b, 0x0048, 0x0105, "UN", UNDEF);
    b.implicit = 1;
    item(&b, UNDEF);
    str(&b, 0x0048, 0x0112, "DS", "20");
    item_end(&b);
    seq_end(&b);
    b.implicit = 0;
    native_pixels(&b, 1);
    sp_dicom *d = NULL;
    sp_source *src = NULL;
    sp_err err = {0};
    CHECK_EQ_INT(parse(&b, b.len, NULL, &d, &src, &err), SP_OK);
    double power = 0;
    CHECK(d != NULL && sp_dicom_double(d, SP_DICOM_OBJECTIVE_LENS_POWER, 0, &power) && power == 20);
    sp_dicom_close(d);
    sp_source_close(src);
}

/* ---- the format over memory ---- */

static sp_status open_slide(builder *b, sp_slide **slide) {
    sp_limits limits;
    sp_limits_default(&limits);
    sp_source *src = NULL;
    sp_err err = {0};
    sp_status st = sp_source_open_memory(b->buf, b->len, "(memory)/slide.dcm", &src, &err);
    if (st == SP_OK) {
        st = sp_slide_open_source(src, "(memory)/slide.dcm", &limits, slide, &err);
    }
    if (st != SP_OK) {
        fprintf(stderr, "open: %s\n", err.msg);
    }
    return st;
}

static void test_native_slide(void) {
    /* Three 2x2 frames over a 6x2 TILED_FULL level; planar configuration 0. */
    builder b;
    build_native(&b, IMPLICIT_LE);
    sp_slide *s = NULL;
    CHECK_EQ_INT(open_slide(&b, &s), SP_OK);
    if (s == NULL) {
        return;
    }
    CHECK(strcmp(sp_slide_format(s), "dicom") == 0);
    int64_t w = 0, h = 0, tw = 0, th = 0;
    CHECK_EQ_INT(sp_slide_level_dimensions(s, 0, &w, &h), SP_OK);
    CHECK(w == 6 && h == 2);
    CHECK_EQ_INT(sp_slide_level_tile_size(s, 0, &tw, &th), SP_OK);
    CHECK(tw == 2 && th == 2);
    CHECK(strcmp(sp_slide_level_compression(s, 0), "none") == 0);
    uint8_t px[2 * 6 * 4];
    CHECK_EQ_INT(sp_slide_read_region(s, SP_PIXEL_RGBA8, px, 6 * 4, 0, 0, 0, 6, 2), SP_OK);
    /* pixel (x, y) is in frame x / 2 at index (y * 2 + x % 2) * 3 */
    int bad = 0;
    for (int y = 0; y < 2; y++) {
        for (int x = 0; x < 6; x++) {
            const uint8_t *p = px + (y * 6 + x) * 4;
            int base = (x / 2) * 16 + (y * 2 + x % 2) * 3;
            bad += p[0] != base || p[1] != base + 1 || p[2] != base + 2 || p[3] != 255;
        }
    }
    CHECK_EQ_INT(bad, 0);
    sp_slide_close(s);
}

static void test_sparse_slide(void) {
    /* TILED_SPARSE: frame 0 at tile (1, 0), frame 1 unplaced, frame 2 at tile (0, 0); tile
     * (2, 0) has no frame and must read transparent. */
    builder b;
    build_nested(&b, EXPLICIT_LE, 0, "TILED_SPARSE");
    sp_slide *s = NULL;
    CHECK_EQ_INT(open_slide(&b, &s), SP_OK);
    if (s == NULL) {
        return;
    }
    uint8_t px[2 * 6 * 4];
    CHECK_EQ_INT(sp_slide_read_region(s, SP_PIXEL_RGBA8, px, 6 * 4, 0, 0, 0, 6, 2), SP_OK);
    CHECK(px[0] == 32 && px[3] == 255);            /* (0,0): frame 2 */
    CHECK(px[2 * 4] == 0 && px[2 * 4 + 3] == 255); /* (2,0): frame 0 */
    CHECK(px[4 * 4] == 0 && px[4 * 4 + 3] == 0);   /* (4,0): no frame */
    const char *mpp_x = sp_slide_property_value(s, SP_PROPERTY_MPP_X);
    const char *mpp_y = sp_slide_property_value(s, SP_PROPERTY_MPP_Y);
    CHECK(mpp_x != NULL && fabs(strtod(mpp_x, NULL) - 0.5) < 1e-12);
    CHECK(mpp_y != NULL && fabs(strtod(mpp_y, NULL) - 0.25) < 1e-12);
    const char *power = sp_slide_property_value(s, SP_PROPERTY_OBJECTIVE_POWER);
    CHECK(power != NULL && strcmp(power, "40") == 0);
    sp_slide_close(s);
}

void unit_run(void) {
    test_explicit_and_implicit();
    test_nested_sequences();
    test_basic_offset_table();
    test_extended_offset_table();
    test_frames_without_table();
    test_fragment_walk_off_the_end();
    test_truncation_everywhere();
    test_limits();
    test_hostile_structures();
    test_native_slide();
    test_sparse_slide();
}
