/* test_mirax_index.c — the MIRAX description readers (src/formats/mirax_index.c) on inputs built
 * here: Slidedat.ini through libinih (byte order mark, CR LF, repeated keys, a line longer than
 * libinih's buffer, a line that is no pair), the layout OpenSlide reads from it (defaults, the
 * record numbers of positions and associated images, the refusals), and Index.dat from memory
 * (records and non-hierarchical records found, a foreign slide identifier, a page list that
 * never ends, and the file cut at every byte, which must fail cleanly). tests/data/test_mirax.py
 * checks whole slides against OpenSlide. */
#include <stdlib.h>
#include <string.h>

#include "formats/mirax_index.h"
#include "unit.h"

static const char SLIDEDAT[] =
    "\xEF\xBB\xBF[GENERAL]\r\n"
    "SLIDE_VERSION = 01.03\r\n"
    "SLIDE_ID = abcd\r\n"
    "IMAGENUMBER_X = 4\r\n"
    "IMAGENUMBER_Y = 2\r\n"
    "OBJECTIVE_MAGNIFICATION = 20\r\n"
    "OBJECTIVE_MAGNIFICATION = 40\r\n"
    "[HIERARCHICAL]\r\n"
    "HIER_COUNT = 1\r\n"
    "NONHIER_COUNT = 2\r\n"
    "INDEXFILE = Index.dat\r\n"
    "HIER_0_NAME = Slide zoom level\r\n"
    "HIER_0_COUNT = 2\r\n"
    "HIER_0_VAL_0_SECTION = L0\r\n"
    "HIER_0_VAL_1_SECTION = L1\r\n"
    "NONHIER_0_NAME = Scan data layer\r\n"
    "NONHIER_0_COUNT = 2\r\n"
    "NONHIER_0_VAL_0 = ScanDataLayer_SlideBarcode\r\n"
    "NONHIER_0_VAL_0_SECTION = B\r\n"
    "NONHIER_0_VAL_1 = ScanDataLayer_SlideThumbnail\r\n"
    "NONHIER_0_VAL_1_SECTION = T\r\n"
    "NONHIER_1_NAME = VIMSLIDE_POSITION_BUFFER\r\n"
    "NONHIER_1_COUNT = 1\r\n"
    "[DATAFILE]\r\n"
    "FILE_COUNT = 1\r\n"
    "FILE_0 = Data0000.dat\r\n"
    "[L0]\r\n"
    "OVERLAP_X = 2.5\r\nOVERLAP_Y = 0\r\nMICROMETER_PER_PIXEL_X = 0.25\r\n"
    "MICROMETER_PER_PIXEL_Y = 0.26\r\nIMAGE_FORMAT = JPEG\r\nIMAGE_FILL_COLOR_BGR = 16777215\r\n"
    "DIGITIZER_WIDTH = 8\r\nDIGITIZER_HEIGHT = 8\r\nIMAGE_CONCAT_FACTOR = 0\r\n"
    "[L1]\r\n"
    "OVERLAP_X = 1\r\nOVERLAP_Y = 0\r\nMICROMETER_PER_PIXEL_X = 0.5\r\n"
    "MICROMETER_PER_PIXEL_Y = 0.52\r\nIMAGE_FORMAT = JPEG\r\nIMAGE_FILL_COLOR_BGR = 0\r\n"
    "DIGITIZER_WIDTH = 8\r\nDIGITIZER_HEIGHT = 8\r\nIMAGE_CONCAT_FACTOR = 1\r\n"
    "[B]\r\nBARCODE_IMAGE_TYPE = JPEG\r\n"
    "[T]\r\nTHUMBNAIL_IMAGE_TYPE = JPEG\r\n";

/* Parse `text` and read its layout; the status of whichever step failed. */
static sp_status layout_of(const char *text, sp_mirax_layout *L, char *msg, size_t msg_len) {
    sp_mirax_ini ini;
    sp_err err = {0};
    memset(L, 0, sizeof *L);
    sp_status st = sp_mirax_ini_parse(text, &ini, &err);
    if (st == SP_OK) {
        st = sp_mirax_layout_read(&ini, L, &err);
        sp_mirax_ini_free(&ini);
    }
    snprintf(msg, msg_len, "%s", err.msg);
    return st;
}

/* SLIDEDAT with `from` (its first occurrence) replaced by `to`. */
static char *edited(const char *from, const char *to) {
    const char *at = strstr(SLIDEDAT, from);
    CHECK(at != NULL);
    size_t n = strlen(SLIDEDAT) - strlen(from) + strlen(to) + 1;
    char *out = malloc(n);
    size_t head = (size_t)(at - SLIDEDAT);
    memcpy(out, SLIDEDAT, head);
    strcpy(out + head, to);
    strcat(out, at + strlen(from));
    return out;
}

static void test_ini(void) {
    sp_mirax_ini ini;
    sp_err err = {0};
    CHECK_EQ_INT(sp_mirax_ini_parse(SLIDEDAT, &ini, &err), SP_OK);
    CHECK(strcmp(sp_mirax_ini_get(&ini, "GENERAL", "SLIDE_VERSION"), "01.03") == 0);
    CHECK(strcmp(sp_mirax_ini_get(&ini, "GENERAL", "OBJECTIVE_MAGNIFICATION"), "40") == 0);
    CHECK(strcmp(sp_mirax_ini_get(&ini, "HIERARCHICAL", "HIER_0_NAME"), "Slide zoom level") == 0);
    CHECK(sp_mirax_ini_get(&ini, "GENERAL", "NO_SUCH_KEY") == NULL);
    sp_mirax_ini_free(&ini);

    /* A line longer than libinih's buffer is cut, and its rest does not become a line. */
    char long_line[600];
    memset(long_line, 'v', sizeof long_line);
    memcpy(long_line, "[S]\nK = ", 8);
    strcpy(long_line + 500, "\nL = after\n");
    CHECK_EQ_INT(sp_mirax_ini_parse(long_line, &ini, &err), SP_OK);
    const char *k = sp_mirax_ini_get(&ini, "S", "K");
    CHECK(k != NULL && strlen(k) > 150 && strlen(k) < 200);
    CHECK(sp_mirax_ini_get(&ini, "S", "L") != NULL);
    CHECK_EQ_INT(ini.n, 2);
    sp_mirax_ini_free(&ini);

    sp_err_clear(&err);
    CHECK_EQ_INT(sp_mirax_ini_parse("[S]\nK = 1\nno pair here\n", &ini, &err), SP_E_CORRUPT);
    CHECK(strstr(err.msg, "line 3") != NULL);
}

static void test_layout(void) {
    sp_mirax_layout L;
    char msg[SP_ERR_MSG_MAX];
    CHECK_EQ_INT(layout_of(SLIDEDAT, &L, msg, sizeof msg), SP_OK);
    CHECK_EQ_INT(L.images_x, 4);
    CHECK_EQ_INT(L.divisions, 1); /* CameraImageDivisionsPerSide absent */
    CHECK_EQ_INT(L.objective, 40);
    CHECK_EQ_INT(L.n_zoom, 2);
    CHECK(L.zoom[0].overlap_x == 2.5 && L.zoom[1].concat_exponent == 1);
    CHECK_EQ_INT(L.zoom[0].fill_bgr, 16777215);
    CHECK_EQ_INT(L.label_record, 0);
    CHECK_EQ_INT(L.macro_record, 1);
    CHECK_EQ_INT(L.thumbnail_record, -1);
    CHECK_EQ_INT(L.position_record, 2);
    CHECK(!L.positions_compressed);
    CHECK(strcmp(L.files[0], "Data0000.dat") == 0 && strcmp(L.slide_id, "abcd") == 0);
    sp_mirax_layout_free(&L);

    static const struct {
        const char *from, *to;
        sp_status want;
        const char *msg;
    } cases[] = {
        {"[GENERAL]", "[GENERAL2]", SP_E_CORRUPT, "[GENERAL]"},
        {"IMAGENUMBER_X = 4", "IMAGENUMBER_X = 4x", SP_E_CORRUPT, "not an integer"},
        {"IMAGENUMBER_X = 4", "IMAGENUMBER_X = 0", SP_E_CORRUPT, "IMAGENUMBER_X is 0"},
        {"HIER_0_NAME = Slide zoom level", "HIER_0_NAME = Slide filter level", SP_E_UNSUPPORTED,
         "Slide zoom level"},
        {"NONHIER_0_COUNT = 2", "NONHIER_0_COUNT = 0", SP_E_CORRUPT, "NONHIER_0_COUNT is 0"},
        {"BARCODE_IMAGE_TYPE = JPEG", "BARCODE_IMAGE_TYPE = PNG", SP_E_UNSUPPORTED, "JPEG is read"},
        {"IMAGE_FORMAT = JPEG", "IMAGE_FORMAT = GIF", SP_E_CORRUPT, "IMAGE_FORMAT"},
        {"IMAGE_CONCAT_FACTOR = 1", "IMAGE_CONCAT_FACTOR = 0", SP_E_CORRUPT, "IMAGE_CONCAT_FACTOR"},
        {"MICROMETER_PER_PIXEL_X = 0.25", "MICROMETER_PER_PIXEL_X = 0.25um", SP_E_CORRUPT,
         "not a number"},
        {"FILE_COUNT = 1", "FILE_COUNT = 100000", SP_E_LIMIT, "data files"},
        {"HIER_0_COUNT = 2", "HIER_0_COUNT = 99", SP_E_LIMIT, "zoom levels"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *text = edited(cases[i].from, cases[i].to);
        sp_status st = layout_of(text, &L, msg, sizeof msg);
        CHECK_EQ_INT(st, cases[i].want);
        if (strstr(msg, cases[i].msg) == NULL) {
            fprintf(stderr, "  case %zu: message \"%s\" lacks \"%s\"\n", i, msg, cases[i].msg);
            CHECK(0);
        }
        sp_mirax_layout_free(&L);
        free(text);
    }
    /* The compressed position layer, when the plain one is absent. */
    char *text = edited("VIMSLIDE_POSITION_BUFFER", "StitchingIntensityLayer");
    CHECK_EQ_INT(layout_of(text, &L, msg, sizeof msg), SP_OK);
    CHECK(L.positions_compressed && L.position_record == 2);
    sp_mirax_layout_free(&L);
    free(text);
}

/* ---- Index.dat ------------------------------------------------------------------------------ */

typedef struct buf {
    uint8_t b[1024];
    size_t n;
} buf;

static size_t put32(buf *o, int32_t v) {
    size_t at = o->n;
    for (int i = 0; i < 4; i++) {
        o->b[o->n++] = (uint8_t)((uint32_t)v >> (8 * i));
    }
    return at;
}

static void set32(buf *o, size_t at, int32_t v) {
    for (int i = 0; i < 4; i++) {
        o->b[at + (size_t)i] = (uint8_t)((uint32_t)v >> (8 * i));
    }
}

/* An Index.dat for SLIDEDAT: level 0 holds images 0 and 2 over two pages, level 1 image 0;
 * non-hierarchical records 0 (label), 1 (macro), 2 (positions). */
static void build_index(buf *o) {
    memset(o, 0, sizeof *o);
    memcpy(o->b, "01.02abcd", 9);
    o->n = 9;
    size_t roots = put32(o, 0);
    put32(o, 0);
    size_t hier = o->n;
    put32(o, 0);
    put32(o, 0);
    for (int level = 0; level < 2; level++) {
        set32(o, hier + 4 * (size_t)level, (int32_t)o->n);
        put32(o, 0);
        put32(o, (int32_t)o->n + 4);
        int pages = level == 0 ? 2 : 1;
        for (int p = 0; p < pages; p++) {
            put32(o, 1);
            size_t next = put32(o, 0);
            put32(o, level == 0 ? 2 * p : 0); /* image index */
            put32(o, 100 + 10 * p + level);   /* offset */
            put32(o, 50);                     /* length */
            put32(o, 0);                      /* file */
            if (p + 1 < pages) {
                set32(o, next, (int32_t)o->n);
            }
        }
    }
    size_t nonhier = o->n;
    for (int r = 0; r < 3; r++) {
        put32(o, 0);
    }
    for (int r = 0; r < 3; r++) {
        set32(o, nonhier + 4 * (size_t)r, (int32_t)o->n);
        put32(o, 0);
        put32(o, (int32_t)o->n + 4);
        int32_t page[7] = {1, 0, 0, 0, 1000 + r, r == 2 ? 72 : 40, 0};
        for (int i = 0; i < 7; i++) {
            put32(o, page[i]);
        }
    }
    set32(o, roots, (int32_t)hier);
    set32(o, roots + 4, (int32_t)nonhier);
}

static sp_status read_index(const uint8_t *data, size_t len, const sp_mirax_layout *L,
                            sp_mirax_index *out, char *msg, size_t msg_len) {
    sp_limits limits;
    sp_limits_default(&limits);
    sp_err err = {0};
    sp_source *src = NULL;
    sp_status st = sp_source_open_memory(data, len, "Index.dat", &src, &err);
    if (st == SP_OK) {
        st = sp_mirax_index_read(src, "Index.dat", L, &limits, out, &err);
        sp_source_close(src);
    }
    snprintf(msg, msg_len, "%s", err.msg);
    return st;
}

static void test_index(void) {
    sp_mirax_layout L;
    char msg[SP_ERR_MSG_MAX];
    CHECK_EQ_INT(layout_of(SLIDEDAT, &L, msg, sizeof msg), SP_OK);
    buf o;
    build_index(&o);
    sp_mirax_index idx;
    CHECK_EQ_INT(read_index(o.b, o.n, &L, &idx, msg, sizeof msg), SP_OK);
    CHECK_EQ_INT(idx.n_records[0], 2);
    CHECK_EQ_INT(idx.n_records[1], 1);
    CHECK(idx.records[0] != NULL && idx.records[0][1].image_index == 2 &&
          idx.records[0][1].offset == 110);
    CHECK(idx.has_label && idx.label.offset == 1000 && idx.has_macro && idx.macro.offset == 1001);
    CHECK(idx.has_position && idx.position.length == 72 && !idx.has_thumbnail);
    sp_mirax_index_free(&idx);

    /* Another slide's index. */
    buf other = o;
    other.b[6] = 'X';
    CHECK_EQ_INT(read_index(other.b, other.n, &L, &idx, msg, sizeof msg), SP_E_CORRUPT);
    CHECK(strstr(msg, "slide identifier") != NULL);

    /* A page list whose "next" pointer never ends it (empty pages all the way). */
    buf loop = o;
    int32_t head = 0;
    memcpy(&head, loop.b + 9 + 8, 4); /* level 0's list head (little-endian host) */
    int32_t first = 0;
    memcpy(&first, loop.b + head + 4, 4);
    for (size_t at = (size_t)first; at + 8 <= loop.n; at += 8) {
        set32(&loop, at, 0);
        set32(&loop, at + 4, 1);
    }
    CHECK(read_index(loop.b, loop.n, &L, &idx, msg, sizeof msg) != SP_OK);

    /* Cut at every byte: never a crash, and an error unless nothing needed was cut. */
    for (size_t n = 0; n < o.n; n++) {
        uint8_t *copy = malloc(n > 0 ? n : 1);
        memcpy(copy, o.b, n);
        sp_status st = read_index(copy, n, &L, &idx, msg, sizeof msg);
        if (st == SP_OK) {
            sp_mirax_index_free(&idx);
        } else {
            CHECK(msg[0] != '\0');
        }
        free(copy);
    }
    sp_mirax_layout_free(&L);
}

void unit_run(void) {
    test_ini();
    test_layout();
    test_index();
}
