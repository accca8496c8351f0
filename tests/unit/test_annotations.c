/* test_annotations.c — annotation files into label maps (src/jobs/train/annotations*.c,
 * docs/labels.md).
 *
 * The parsers are fed hand-written documents from memory: the three GeoJSON shapes, the class
 * rule, skipped points and lines, closed and open rings, ASAP's Order sorting, comma decimals,
 * entities, comments and CDATA; then every kind of malformation, and every prefix of a valid
 * document of each format, which must fail cleanly (never crash or leak; the ASan build runs
 * this). The rasteriser is checked on hand shapes whose pixels are worked out by hand (a square,
 * a hole, a later feature over an earlier one, a window offset, a stride wider than the row)
 * and on random polygons against a direct even-odd test at every pixel centre written here.
 * The public load goes through a temporary file. scikit-image is the oracle in
 * python/tests/test_labels.py. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jobs/train/annotations_internal.h"
#include "unit.h"

static sp_status parse(const char *text, sp_annotations **out, sp_err *err) {
    sp_err_clear(err);
    return sp_ann_parse(text, strlen(text), "mem.txt", out, err);
}

/* Parse text that must fail with `status` and a message holding `words`. */
static void expect_fail(const char *text, sp_status status, const char *words) {
    sp_annotations *a = NULL;
    sp_err err = {0};
    sp_status st = parse(text, &a, &err);
    CHECK_EQ_INT(st, status);
    CHECK(a == NULL);
    CHECK(strstr(err.msg, "mem.txt") != NULL);
    if (strstr(err.msg, words) == NULL) {
        fprintf(stderr, "  message \"%s\" lacks \"%s\"\n", err.msg, words);
        CHECK(0);
    }
}

static void test_decimal(void) {
    double v = 0;
    CHECK(sp_ann_parse_decimal("123,45", 6, &v) && v == 123.45);
    CHECK(sp_ann_parse_decimal(" 1.5 ", 5, &v) && v == 1.5);
    CHECK(sp_ann_parse_decimal("-1e3", 4, &v) && v == -1000);
    CHECK(sp_ann_parse_decimal("7", 1, &v) && v == 7);
    CHECK(!sp_ann_parse_decimal("1,2,3", 5, &v));
    CHECK(!sp_ann_parse_decimal("1.5,2", 5, &v));
    CHECK(!sp_ann_parse_decimal("abc", 3, &v));
    CHECK(!sp_ann_parse_decimal("", 0, &v));
    CHECK(!sp_ann_parse_decimal("  ", 2, &v));
    CHECK(!sp_ann_parse_decimal("nan", 3, &v));
    CHECK(!sp_ann_parse_decimal("0x10", 4, &v));
    CHECK(!sp_ann_parse_decimal("1.5", 2, &v) || v == 1); /* only len bytes are read */
}

static void test_geojson_forms(void) {
    sp_annotations *a = NULL;
    sp_err err = {0};
    const char *collection =
        "{\"type\":\"FeatureCollection\",\"features\":["
        "{\"type\":\"Feature\",\"properties\":{\"classification\":{\"name\":\"Tumor\"}},"
        "\"geometry\":{\"type\":\"Polygon\",\"coordinates\":[[[0,0],[4,0],[4,4],[0,0]]]}},"
        "{\"type\":\"Feature\",\"properties\":{\"name\":\"n\"},"
        "\"geometry\":{\"type\":\"LineString\",\"coordinates\":[[0,0],[4,4]]}},"
        "{\"type\":\"Feature\",\"properties\":null,\"geometry\":null},"
        "{\"type\":\"Feature\",\"properties\":{\"name\":\"Named\"},"
        "\"geometry\":{\"type\":\"MultiPolygon\",\"coordinates\":["
        "[[[10,10],[14,10],[14,14]]],[[[20,20],[24,20],[24,24],[20,24]],[[21,21],[22,21],[22,22]]]"
        "]}},"
        "{\"type\":\"Feature\",\"geometry\":{\"type\":\"Polygon\",\"coordinates\":"
        "[[[-1.5,2,7],[3,2,7],[3,9.25,7]]]}}"
        "]}";
    CHECK_EQ_INT(parse(collection, &a, &err), SP_OK);
    if (a != NULL) {
        CHECK_EQ_INT(sp_annotations_feature_count(a), 3);
        CHECK_EQ_INT(sp_annotations_skipped(a), 2);
        CHECK_EQ_INT(sp_annotations_class_count(a), 3);
        CHECK(strcmp(sp_annotations_class_name(a, 0), "background") == 0);
        CHECK(strcmp(sp_annotations_class_name(a, 1), "Tumor") == 0);
        CHECK(strcmp(sp_annotations_class_name(a, 2), "Named") == 0);
        CHECK(strcmp(sp_annotations_class_name(a, 3), "unclassified") == 0);
        CHECK(sp_annotations_class_name(a, 4) == NULL);
        CHECK(sp_annotations_class_name(a, -1) == NULL);
        CHECK_EQ_INT(sp_annotations_feature_class(a, 2), 3);
        CHECK_EQ_INT(sp_annotations_feature_class(a, 3), -1);
        CHECK_EQ_INT(a->features[0].polys[0].rings[0].n, 3); /* closing vertex dropped */
        CHECK_EQ_INT(a->features[1].n_polys, 2);
        CHECK_EQ_INT(a->features[1].polys[1].n_rings, 2);
        CHECK_EQ_INT(a->features[1].polys[1].rings[0].n, 4); /* open ring kept whole */
        CHECK_EQ_INT(a->features[1].file_index, 3);
        double b[4];
        CHECK_EQ_INT(sp_annotations_bounds(a, &b[0], &b[1], &b[2], &b[3]), SP_OK);
        CHECK(b[0] == -1.5 && b[1] == 0 && b[2] == 24 && b[3] == 24);
    }
    sp_annotations_free(a);

    /* A bare array, and one Feature, with a BOM and white space before. */
    CHECK_EQ_INT(parse("[]", &a, &err), SP_OK);
    double b[4] = {1, 1, 1, 1};
    CHECK_EQ_INT(sp_annotations_bounds(a, &b[0], &b[1], &b[2], &b[3]), SP_E_NOT_FOUND);
    CHECK(b[0] == 0 && b[3] == 0);
    CHECK_EQ_INT(sp_annotations_feature_count(a), 0);
    sp_annotations_free(a);
    CHECK_EQ_INT(parse("\xEF\xBB\xBF \n{\"type\":\"Feature\",\"properties\":{},\"geometry\":"
                       "{\"type\":\"Polygon\",\"coordinates\":[[[0,0],[1,0],[0,1]]]}}\n",
                       &a, &err),
                 SP_OK);
    CHECK_EQ_INT(sp_annotations_feature_count(a), 1);
    sp_annotations_free(a);
    /* A GeometryCollection of points only is skipped. */
    CHECK_EQ_INT(parse("[{\"type\":\"Feature\",\"geometry\":{\"type\":\"GeometryCollection\","
                       "\"geometries\":[{\"type\":\"Point\",\"coordinates\":[1,1]}]}}]",
                       &a, &err),
                 SP_OK);
    CHECK_EQ_INT(sp_annotations_feature_count(a), 0);
    CHECK_EQ_INT(sp_annotations_skipped(a), 1);
    sp_annotations_free(a);
}

#define OK_FEATURE                                                                                 \
    "{\"type\":\"Feature\",\"properties\":{\"name\":\"good\"},\"geometry\":{\"type\":"             \
    "\"Polygon\",\"coordinates\":[[[0,0],[1,0],[0,1]]]}}"
#define BAD_POLY(coords)                                                                           \
    "[" OK_FEATURE ",{\"type\":\"Feature\",\"properties\":{\"name\":\"bad\",\"classification\":"   \
    "{\"name\":\"T\"}},\"geometry\":{\"type\":\"Polygon\",\"coordinates\":" coords "}}]"

static void test_geojson_errors(void) {
    const char *feat1 = "feature 1 (\"bad\", class \"T\")";
    expect_fail(BAD_POLY("[[[0,0],[1,1],[0,0],[1,1]]]"), SP_E_CORRUPT, feat1);
    expect_fail(BAD_POLY("[[[0,0],[1,1],[0,0],[1,1]]]"), SP_E_CORRUPT, "3 distinct");
    expect_fail(BAD_POLY("[[[0,0],[1,1]]]"), SP_E_CORRUPT, "3 distinct");
    expect_fail(BAD_POLY("[[]]"), SP_E_CORRUPT, "3 distinct");
    expect_fail(BAD_POLY("[]"), SP_E_CORRUPT, "empty");
    expect_fail(BAD_POLY("[[[0,0],[1,0],[0,1]],[[0,0],[0,0],[0,0]]]"), SP_E_CORRUPT, "hole");
    expect_fail(BAD_POLY("[[[0,0],[1e999,0],[0,1]]]"), SP_E_CORRUPT, "finite");
    expect_fail(BAD_POLY("[[[0,0],[-2e12,0],[0,1]]]"), SP_E_CORRUPT, "2^40");
    expect_fail(BAD_POLY("[[[0,0],[1],[0,1]]]"), SP_E_CORRUPT, "position 1");
    expect_fail(BAD_POLY("[[[0,0],[true,1],[0,1]]]"), SP_E_CORRUPT, "position 1");
    expect_fail(BAD_POLY("[[[0,0],{},[0,1]]]"), SP_E_CORRUPT, feat1);
    expect_fail(BAD_POLY("[{}]"), SP_E_CORRUPT, "not an array of positions");
    expect_fail(BAD_POLY("\"x\""), SP_E_CORRUPT, "a string");
    expect_fail("[" OK_FEATURE ",{\"type\":\"Feature\",\"geometry\":{\"type\":\"Polygon\"}}]",
                SP_E_CORRUPT, "feature 1 (\"\", class \"unclassified\"): the Polygon has no");
    expect_fail("[" OK_FEATURE ",{\"type\":\"Feature\"}]", SP_E_CORRUPT, "no \"geometry\"");
    expect_fail("[{\"type\":\"Feature\",\"geometry\":{\"type\":\"Hexagon\",\"coordinates\":[]}}]",
                SP_E_UNSUPPORTED, "Hexagon");
    expect_fail("[{\"type\":\"Feature\",\"geometry\":{\"type\":7}}]", SP_E_CORRUPT, "\"type\"");
    expect_fail("[{\"type\":\"Feature\",\"geometry\":null,\"properties\":{\"name\":3}}]",
                SP_E_CORRUPT, "properties.name is a number");
    expect_fail("[{\"type\":\"Feature\",\"geometry\":null,\"properties\":{\"classification\":{}}}]",
                SP_E_CORRUPT, "feature 0");
    expect_fail("[{\"type\":\"Feat\"}]", SP_E_CORRUPT, "feature 0");
    expect_fail("[1, 2]", SP_E_CORRUPT, "a number, not a GeoJSON Feature");
    expect_fail("{\"type\":\"FeatureCollection\"}", SP_E_CORRUPT, "\"features\" array");
    expect_fail("{\"type\":\"FeatureCollection\",\"features\":[]} x", SP_E_CORRUPT, "after");
    expect_fail("{\"type\":\"Topology\"}", SP_E_UNSUPPORTED, "not a GeoJSON");
    expect_fail("{\"a\":", SP_E_CORRUPT, "invalid JSON");
    expect_fail("", SP_E_CORRUPT, "empty");
    expect_fail("  \n", SP_E_CORRUPT, "empty");
    expect_fail("GIF89a", SP_E_UNSUPPORTED, "neither");
    /* A control byte in a name is not copied into the message. */
    sp_annotations *a = NULL;
    sp_err err = {0};
    CHECK(parse("[{\"type\":\"Feature\",\"properties\":{\"name\":\"a\\u0007b\"},\"geometry\":"
                "{\"type\":\"Polygon\",\"coordinates\":[[[0,0],[0,0],[0,0]]]}}]",
                &a, &err) == SP_E_CORRUPT);
    CHECK(strstr(err.msg, "\"a?b\"") != NULL);
}

static const char ASAP[] =
    "<?xml version=\"1.0\"?>\n"
    "<!-- written by hand -->\n"
    "<ASAP_Annotations>\n"
    "  <Annotations>\n"
    "    <Annotation Name=\"A &amp; B\" Type=\"Polygon\" PartOfGroup=\"tumor\" Color=\"#F4FA58\">\n"
    "      <Coordinates>\n"
    "        <Coordinate Order=\"2\" X=\"5,5\" Y=\"9\" />\n"
    "        <Coordinate Order=\"0\" X=\"1\" Y=\"1,25\" />\n"
    "        <Coordinate Order='1' X='9.5' Y='1' />\n"
    "      </Coordinates>\n"
    "    </Annotation>\n"
    "    <Annotation Name=\"dot\" Type=\"Dot\" PartOfGroup=\"tumor\"><Coordinates>"
    "<Coordinate Order=\"0\" X=\"1\" Y=\"1\"/></Coordinates></Annotation>\n"
    "    <Annotation Name=\"r\" Type=\"Rectangle\" PartOfGroup=\"None\"><![CDATA[ <x> ]]>"
    "<Coordinates><Coordinate Order=\"0\" X=\"20\" Y=\"20\"/><Coordinate Order=\"1\" X=\"30\" "
    "Y=\"20\"/><Coordinate Order=\"2\" X=\"30\" Y=\"30\"/><Coordinate Order=\"3\" X=\"20\" "
    "Y=\"30\"/></Coordinates></Annotation>\n"
    "    <Annotation Name=\"s\" Type=\"Spline\"><Coordinates><Coordinate X=\"0\" Y=\"0\"/>"
    "<Coordinate X=\"&#52;\" Y=\"0\"/><Coordinate X=\"0\" Y=\"&#x34;\"/></Coordinates>"
    "</Annotation>\n"
    "  </Annotations>\n"
    "  <AnnotationGroups><Group Name=\"tumor\" PartOfGroup=\"None\"><Attributes/></Group>"
    "</AnnotationGroups>\n"
    "</ASAP_Annotations>\n";

static void test_asap(void) {
    sp_annotations *a = NULL;
    sp_err err = {0};
    CHECK_EQ_INT(parse(ASAP, &a, &err), SP_OK);
    if (a == NULL) {
        fprintf(stderr, "  %s\n", err.msg);
        return;
    }
    CHECK_EQ_INT(sp_annotations_feature_count(a), 3);
    CHECK_EQ_INT(sp_annotations_skipped(a), 1);
    CHECK_EQ_INT(sp_annotations_class_count(a), 2);
    CHECK(strcmp(sp_annotations_class_name(a, 1), "tumor") == 0);
    CHECK(strcmp(sp_annotations_class_name(a, 2), "unclassified") == 0);
    CHECK(strcmp(a->features[0].name, "A & B") == 0);
    const sp_ann_ring *r = &a->features[0].polys[0].rings[0];
    CHECK_EQ_INT(r->n, 3);
    CHECK(r->xy[0] == 1 && r->xy[1] == 1.25 && r->xy[2] == 9.5 && r->xy[3] == 1 &&
          r->xy[4] == 5.5 && r->xy[5] == 9);
    const sp_ann_ring *s = &a->features[2].polys[0].rings[0];
    CHECK(s->n == 3 && s->xy[2] == 4 && s->xy[5] == 4);
    CHECK_EQ_INT(a->features[2].file_index, 3);
    sp_annotations_free(a);
    /* An empty root is a valid, empty file. */
    CHECK_EQ_INT(parse("<ASAP_Annotations/>", &a, &err), SP_OK);
    CHECK_EQ_INT(sp_annotations_feature_count(a), 0);
    sp_annotations_free(a);
}

#define ASAP_BAD(type, coords)                                                                     \
    "<ASAP_Annotations><Annotations><Annotation Name=\"bad\" Type=\"" type                         \
    "\" PartOfGroup=\"g\"><Coordinates>" coords "</Coordinates></Annotation></Annotations>"        \
    "</ASAP_Annotations>"

static void test_asap_errors(void) {
    const char *feat0 = "feature 0 (\"bad\", class \"g\")";
    expect_fail(ASAP_BAD("Polygon", "<Coordinate X=\"1\" Y=\"1\"/><Coordinate X=\"2\" Y=\"1\"/>"),
                SP_E_CORRUPT, feat0);
    expect_fail(ASAP_BAD("Polygon", ""), SP_E_CORRUPT, "no coordinates");
    expect_fail(ASAP_BAD("Polygon", "<Coordinate X=\"1\"/>"), SP_E_CORRUPT, "no Y");
    expect_fail(ASAP_BAD("Polygon", "<Coordinate X=\"1;\" Y=\"1\"/>"), SP_E_CORRUPT,
                "X=\"1;\" is not a number");
    expect_fail(ASAP_BAD("Polygon", "<Coordinate X=\"1\" Y=\"1\" Order=\"x\"/>"), SP_E_CORRUPT,
                "Order");
    expect_fail(ASAP_BAD("Polygon", "<Coordinate X=\"&bogus;\" Y=\"1\"/>"), SP_E_CORRUPT,
                "not a number");
    expect_fail(ASAP_BAD("Circle", ""), SP_E_UNSUPPORTED, "unsupported Type \"Circle\"");
    expect_fail("<ASAP_Annotations><Annotation Name=\"n\"/></ASAP_Annotations>", SP_E_CORRUPT,
                "no Type");
    expect_fail("<ASAP_Annotations><Annotation Type=\"Polygon\"/></ASAP_Annotations>", SP_E_CORRUPT,
                "no coordinates");
    expect_fail("<ASAP_Annotations><Annotation Type=\"Dot\"><Annotation Type=\"Dot\"/>"
                "</Annotation></ASAP_Annotations>",
                SP_E_CORRUPT, "inside an Annotation");
    expect_fail("<ASAP_Annotations><a></b></ASAP_Annotations>", SP_E_CORRUPT, "does not match");
    expect_fail("<ASAP_Annotations><a x=1/></ASAP_Annotations>", SP_E_CORRUPT, "quotes");
    expect_fail("<ASAP_Annotations><a x=\"1/></ASAP_Annotations>", SP_E_CORRUPT, "unterminated");
    expect_fail("<ASAP_Annotations><a x=\"1\"y=\"2\"/></ASAP_Annotations>", SP_E_CORRUPT,
                "white space");
    expect_fail("<ASAP_Annotations><a x/></ASAP_Annotations>", SP_E_CORRUPT, "'='");
    expect_fail("<ASAP_Annotations><a>", SP_E_CORRUPT, "ends inside");
    expect_fail("<ASAP_Annotations/><ASAP_Annotations/>", SP_E_CORRUPT, "second root");
    expect_fail("<ASAP_Annotations/>junk", SP_E_CORRUPT, "outside the root");
    expect_fail("<!DOCTYPE d><ASAP_Annotations/>", SP_E_UNSUPPORTED, "DOCTYPE");
    expect_fail("<svg/>", SP_E_UNSUPPORTED, "root element");
    expect_fail("<ASAP_Annotations><!-- open", SP_E_CORRUPT, "comment");
    expect_fail("<?xml", SP_E_CORRUPT, "processing instruction");
    expect_fail("<ASAP_Annotations>\n\n<>", SP_E_CORRUPT, "line 3");
    /* Nesting past the bound. */
    char deep[64 * 3 + 64] = "<ASAP_Annotations>";
    for (int i = 0; i < 64; i++) {
        strcat(deep, "<a>");
    }
    expect_fail(deep, SP_E_CORRUPT, "nested too deep");
}

/* Every proper prefix of a valid document fails cleanly; the whole one parses. */
static void test_prefixes(const char *doc) {
    size_t n = strlen(doc);
    int failures = 0;
    for (size_t len = 0; len < n; len++) {
        char *copy = malloc(len ? len : 1); /* exact size: a read past it is ASan's to catch */
        memcpy(copy, doc, len);
        sp_annotations *a = NULL;
        sp_err err = {0};
        sp_status st = sp_ann_parse(copy, len, "prefix", &a, &err);
        /* A prefix may be a complete document of its own (up to the root's end); never OK with
         * a NULL set, never a failure without a message. */
        failures += st != SP_OK && (a != NULL || err.msg[0] == '\0');
        failures += st == SP_OK && a == NULL;
        sp_annotations_free(a);
        free(copy);
    }
    CHECK_EQ_INT(failures, 0);
}

/* ---- rasterisation ----------------------------------------------------------------------- */

/* The even-odd rule at a point over the rings of one polygon, written directly. */
static bool inside(const sp_ann_polygon *p, double px, double py) {
    bool in = false;
    for (uint32_t r = 0; r < p->n_rings; r++) {
        const sp_ann_ring *ring = &p->rings[r];
        for (uint32_t k = 0; k < ring->n; k++) {
            uint32_t k2 = (k + 1) % ring->n;
            double xa = ring->xy[2 * k], ya = ring->xy[2 * k + 1];
            double xb = ring->xy[2 * k2], yb = ring->xy[2 * k2 + 1];
            if (ya > yb) {
                double t = xa;
                xa = xb;
                xb = t;
                t = ya;
                ya = yb;
                yb = t;
            }
            if (ya <= py && py < yb && px < xa + (py - ya) * (xb - xa) / (yb - ya)) {
                in = !in;
            }
        }
    }
    return in;
}

static uint8_t label_at(const sp_annotations *a, double px, double py) {
    uint8_t v = 0;
    for (size_t f = 0; f < a->n_features; f++) {
        for (uint32_t k = 0; k < a->features[f].n_polys; k++) {
            if (inside(&a->features[f].polys[k], px, py)) {
                v = (uint8_t)a->features[f].cls;
            }
        }
    }
    return v;
}

static void test_raster_hand(void) {
    /* A square [0.2, 3.8]^2 covers centres 0.5..3.5; a hole [1.2, 2.8]^2 covers 1.5, 2.5; a
     * later triangle of class 2 over the square's top-right. */
    const char *doc = "[{\"type\":\"Feature\",\"properties\":{\"name\":\"sq\"},\"geometry\":{"
                      "\"type\":\"Polygon\","
                      "\"coordinates\":[[[0.2,0.2],[3.8,0.2],[3.8,3.8],[0.2,3.8]],"
                      "[[1.2,1.2],[2.8,1.2],[2.8,2.8],[1.2,2.8]]]}},"
                      "{\"type\":\"Feature\",\"properties\":{\"name\":\"tri\"},\"geometry\":{"
                      "\"type\":\"Polygon\","
                      "\"coordinates\":[[[3.1,0.1],[5.9,0.1],[5.9,1.9]]]}}]";
    sp_annotations *a = NULL;
    sp_err err = {0};
    CHECK_EQ_INT(parse(doc, &a, &err), SP_OK);
    if (a == NULL) {
        return;
    }
    static const uint8_t want[5][7] = {{1, 1, 1, 1, 2, 2, 0},
                                       {1, 0, 0, 1, 0, 2, 0},
                                       {1, 0, 0, 1, 0, 0, 0},
                                       {1, 1, 1, 1, 0, 0, 0},
                                       {0, 0, 0, 0, 0, 0, 0}};
    uint8_t out[5][9];
    memset(out, 0xEE, sizeof out);
    CHECK_EQ_INT(sp_annotations_rasterize(a, 1.0, 0, 0, 7, 5, &out[0][0], 9), SP_OK);
    int bad = 0;
    for (int j = 0; j < 5; j++) {
        bad += memcmp(out[j], want[j], 7) != 0;
        bad += out[j][7] != 0xEE || out[j][8] != 0xEE; /* past the width: untouched */
    }
    CHECK_EQ_INT(bad, 0);
    /* A window at downsample 2 from (-1, -1): centres -1 + 2i + 1 = 0, 2, 4 across and down. */
    uint8_t w2[3][3];
    CHECK_EQ_INT(sp_annotations_rasterize(a, 2.0, -1, -1, 3, 3, &w2[0][0], 3), SP_OK);
    /* Every one of those centres misses: x or y = 0 lies before the square (0.2) and the
     * triangle (0.1), (2, 2) is in the hole, 4 is past the square and below the triangle. */
    static const uint8_t want2[3][3] = {{0, 0, 0}, {0, 0, 0}, {0, 0, 0}};
    CHECK(memcmp(w2, want2, sizeof w2) == 0);
    CHECK_EQ_INT(sp_annotations_rasterize(a, 2.0, -0.5, -0.5, 3, 3, &w2[0][0], 3), SP_OK);
    /* centres 0.5, 2.5, 4.5: (0.5,0.5)=1, (2.5,0.5)=1, (4.5,0.5)=2, (0.5,2.5)=1, (2.5,2.5)=0
     * (hole), (4.5,2.5)=0, row 4.5 = 0 */
    static const uint8_t want3[3][3] = {{1, 1, 2}, {1, 0, 0}, {0, 0, 0}};
    CHECK(memcmp(w2, want3, sizeof w2) == 0);
    /* Arguments. */
    CHECK_EQ_INT(sp_annotations_rasterize(a, 0, 0, 0, 1, 1, &w2[0][0], 1), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_annotations_rasterize(a, NAN, 0, 0, 1, 1, &w2[0][0], 1), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_annotations_rasterize(a, 1, INFINITY, 0, 1, 1, &w2[0][0], 1), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_annotations_rasterize(a, 1, 0, 0, 2, 1, &w2[0][0], 1), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_annotations_rasterize(a, 1, 0, 0, 1, 1, NULL, 1), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_annotations_rasterize(a, 1, 0, 0, 1, INT64_MAX, &w2[0][0], INT64_MAX),
                 SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_annotations_rasterize(NULL, 1, 0, 0, 1, 1, &w2[0][0], 1), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_annotations_rasterize(a, 1, 0, 0, 0, 0, NULL, 0), SP_OK);
    /* A window far away and a huge downsample: no pixel painted, no crash. */
    CHECK_EQ_INT(sp_annotations_rasterize(a, 1e-300, 1e15, -1e15, 3, 3, &w2[0][0], 3), SP_OK);
    CHECK_EQ_INT(w2[1][1], 0);
    CHECK_EQ_INT(sp_annotations_rasterize(a, 1e300, -1e300, -1e300, 3, 3, &w2[0][0], 3), SP_OK);
    sp_annotations_free(a);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static double rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

static void test_raster_random(void) {
    int bad = 0;
    for (int trial = 0; trial < 40; trial++) {
        sp_annotations *a = NULL;
        sp_err err = {0};
        CHECK_EQ_INT(sp_ann_create("random", &a, &err), SP_OK);
        int nf = 1 + trial % 5;
        for (int f = 0; f < nf; f++) {
            char cls[8];
            snprintf(cls, sizeof cls, "c%d", f % 3);
            sp_ann_begin_feature(a, cls, NULL, &err);
            int np = 1 + f % 2;
            for (int p = 0; p < np; p++) {
                sp_ann_add_polygon(a, &err);
                int nr = 1 + (trial + p) % 3;
                for (int r = 0; r < nr; r++) {
                    double xy[2 * 40];
                    int n = 3 + (int)(rnd() * 37);
                    double cx = rnd() * 60, cy = rnd() * 60, rad = 2 + rnd() * 25;
                    for (int k = 0; k < n; k++) {
                        xy[2 * k] = cx + rad * (rnd() * 2 - 1);
                        xy[2 * k + 1] = cy + rad * (rnd() * 2 - 1);
                    }
                    CHECK_EQ_INT(sp_ann_add_ring(a, xy, (size_t)n, &err), SP_OK);
                }
            }
            CHECK_EQ_INT(sp_ann_end_feature(a, &err), SP_OK);
        }
        double d = 0.3 + rnd() * 2, x0 = rnd() * 20 - 10, y0 = rnd() * 20 - 10;
        enum { W = 61, H = 47, S = 64 };
        uint8_t out[H * S];
        CHECK_EQ_INT(sp_annotations_rasterize(a, d, x0, y0, W, H, out, S), SP_OK);
        for (int j = 0; j < H; j++) {
            for (int i = 0; i < W; i++) {
                double px = x0 + ((double)i + 0.5) * d, py = y0 + ((double)j + 0.5) * d;
                bad += out[j * S + i] != label_at(a, px, py);
            }
        }
        sp_annotations_free(a);
    }
    CHECK_EQ_INT(bad, 0);
}

static void test_load(void) {
    sp_annotations *a = NULL;
    char err[256];
    CHECK_EQ_INT(sp_annotations_load("/nonexistent/a.geojson", &a, err, sizeof err), SP_E_IO);
    CHECK(a == NULL && err[0] != '\0');
    CHECK_EQ_INT(sp_annotations_load(NULL, &a, err, sizeof err), SP_E_INVALID_ARG);
    char path[] = "/tmp/sp-annotations-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) {
        return;
    }
    CHECK(write(fd, ASAP, sizeof ASAP - 1) == (ssize_t)(sizeof ASAP - 1));
    close(fd);
    CHECK_EQ_INT(sp_annotations_load(path, &a, err, sizeof err), SP_OK);
    CHECK(err[0] == '\0');
    CHECK_EQ_INT(sp_annotations_feature_count(a), 3);
    sp_annotations_free(a);
    sp_annotations_free(NULL);
    unlink(path);
    CHECK_EQ_INT(sp_annotations_class_count(NULL), -1);
    CHECK_EQ_INT(sp_annotations_skipped(NULL), -1);
    CHECK(sp_annotations_class_name(NULL, 0) == NULL);
}

void unit_run(void) {
    test_decimal();
    test_geojson_forms();
    test_geojson_errors();
    test_asap();
    test_asap_errors();
    test_prefixes(ASAP);
    test_prefixes(BAD_POLY("[[[0,0],[1,0],[0,1]]]"));
    test_raster_hand();
    test_raster_random();
    test_load();
}
