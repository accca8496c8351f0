/* test_tissue.c — tissue masks and foreground tiles (src/jobs/train/tissue*.c, docs/tissue.md).
 *
 * Otsu's threshold is checked on hand-made histograms whose answer is worked out by hand (ties
 * to the smallest t, empty classes) and on random histograms against a second, direct
 * evaluation of the definition. The clean-up is checked on hand masks (specks go, pinholes fill,
 * the outermost ring is background because outside pixels count as 0) and on random masks
 * against a non-separable 3x3 min/max written out here. The tile rule is checked on small
 * hand masks through sp_tissue_grid (centres inside the rectangle, the containing pixel for a
 * tile smaller than a mask pixel, level-0 origins at a fractional downsample). A synthetic
 * slide exercises the public calls and their error paths; scipy and numpy are the oracle on real
 * slides in tests/cli/test_tissue.py.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jobs/train/tissue_internal.h"
#include "unit.h"

static uint64_t rng_state = 0x243f6a8885a308d3ull;
static uint32_t rng(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}

/* Otsu from the definition, each class's sums taken afresh for every t. */
static int otsu_direct(const uint64_t hist[256]) {
    double best = -1;
    int best_t = 0;
    for (int t = 0; t < 255; t++) {
        double n0 = 0, n1 = 0, s0 = 0, s1 = 0;
        for (int c = 0; c < 256; c++) {
            if (c <= t) {
                n0 += (double)hist[c];
                s0 += (double)c * (double)hist[c];
            } else {
                n1 += (double)hist[c];
                s1 += (double)c * (double)hist[c];
            }
        }
        double v = 0;
        if (n0 > 0 && n1 > 0) {
            double d = s0 / n0 - s1 / n1;
            v = n0 / (n0 + n1) * (n1 / (n0 + n1)) * (d * d);
        }
        if (v > best) {
            best = v;
            best_t = t;
        }
    }
    return best_t;
}

static void test_otsu(void) {
    uint64_t h[256] = {0};
    CHECK_EQ_INT(sp_tissue_otsu(h), 0); /* empty */
    h[77] = 1000;
    CHECK_EQ_INT(sp_tissue_otsu(h), 0); /* one value: every split has an empty class */
    h[255] = 5;
    CHECK_EQ_INT(sp_tissue_otsu(h), 77); /* the split 77 | 255 scores the same up to 254 */
    memset(h, 0, sizeof h);
    h[10] = 3;
    h[200] = 3;
    CHECK_EQ_INT(sp_tissue_otsu(h), 10); /* t = 10..199 tie; the smallest wins */
    /* {0, 1, 3}: t = 0 scores 2/9 * 2^2 = 8/9, t = 1 and 2 score 2/9 * 2.5^2 = 12.5/9. */
    memset(h, 0, sizeof h);
    h[0] = h[1] = h[3] = 1;
    CHECK_EQ_INT(sp_tissue_otsu(h), 1);
    /* A background spike at 2 and a tissue mode 60..79: every split between them scores the
     * same, so the answer is 2. */
    memset(h, 0, sizeof h);
    h[2] = 100000;
    for (int c = 60; c < 80; c++) {
        h[c] = 5000;
    }
    int t = sp_tissue_otsu(h);
    CHECK_EQ_INT(t, 2);
    CHECK_EQ_INT(t, otsu_direct(h));
    for (int trial = 0; trial < 200; trial++) {
        memset(h, 0, sizeof h);
        int bins = 1 + (int)(rng() % 40);
        for (int i = 0; i < bins; i++) {
            h[rng() % 256] += 1 + rng() % (trial % 2 ? 1000000 : 20);
        }
        CHECK_EQ_INT(sp_tissue_otsu(h), otsu_direct(h));
    }
}

/* 3x3 min (erode) or max of src, outside pixels 0, without separating the square. */
static void morph_direct(const uint8_t *src, uint8_t *dst, int w, int h, int erode) {
    for (int y = 0; y < h; y++) {
        for (int x = 0; x < w; x++) {
            int v = erode ? 1 : 0;
            for (int dy = -1; dy <= 1; dy++) {
                for (int dx = -1; dx <= 1; dx++) {
                    int yy = y + dy, xx = x + dx;
                    int p = yy >= 0 && yy < h && xx >= 0 && xx < w ? src[yy * w + xx] : 0;
                    v = erode ? v & p : v | p;
                }
            }
            dst[y * w + x] = (uint8_t)v;
        }
    }
}

static void clean_direct(uint8_t *m, int w, int h) {
    uint8_t *t = malloc((size_t)(w * h));
    morph_direct(m, t, w, h, 1);
    morph_direct(t, m, w, h, 0);
    morph_direct(m, t, w, h, 0);
    morph_direct(t, m, w, h, 1);
    free(t);
}

static int count_ones(const uint8_t *m, int n) {
    int s = 0;
    for (int i = 0; i < n; i++) {
        s += m[i];
    }
    return s;
}

static void test_clean(void) {
    /* An isolated pixel and a 2-pixel line go (opening); a 3x3 block survives. */
    uint8_t m[9 * 9] = {0};
    m[1 * 9 + 1] = 1;
    m[7 * 9 + 2] = m[7 * 9 + 3] = 1;
    CHECK(sp_tissue_clean(m, 9, 9) == SP_OK);
    CHECK_EQ_INT(count_ones(m, 81), 0);
    memset(m, 0, sizeof m);
    for (int y = 3; y < 6; y++) {
        for (int x = 4; x < 7; x++) {
            m[y * 9 + x] = 1;
        }
    }
    CHECK(sp_tissue_clean(m, 9, 9) == SP_OK);
    CHECK_EQ_INT(count_ones(m, 81), 9);
    CHECK_EQ_INT(m[4 * 9 + 5], 1);
    /* A 7x7 block with a pinhole: the opening keeps it, the closing fills the hole. */
    memset(m, 0, sizeof m);
    for (int y = 1; y < 8; y++) {
        for (int x = 1; x < 8; x++) {
            m[y * 9 + x] = 1;
        }
    }
    m[4 * 9 + 4] = 0;
    CHECK(sp_tissue_clean(m, 9, 9) == SP_OK);
    CHECK_EQ_INT(count_ones(m, 81), 49);
    CHECK_EQ_INT(m[4 * 9 + 4], 1);
    /* All tissue: the closing's erosion sees 0 beyond the edge, so the outer ring goes. */
    memset(m, 1, 5 * 5);
    CHECK(sp_tissue_clean(m, 5, 5) == SP_OK);
    CHECK_EQ_INT(count_ones(m, 25), 9);
    CHECK_EQ_INT(m[0], 0);
    CHECK_EQ_INT(m[2 * 5 + 2], 1);
    /* Thin images: nothing survives an erosion that always touches the border. */
    memset(m, 1, 9);
    CHECK(sp_tissue_clean(m, 9, 1) == SP_OK);
    CHECK_EQ_INT(count_ones(m, 9), 0);
    memset(m, 1, 18);
    CHECK(sp_tissue_clean(m, 2, 9) == SP_OK);
    CHECK_EQ_INT(count_ones(m, 18), 0);
    /* Random masks of several densities and shapes against the direct evaluation. */
    for (int trial = 0; trial < 60; trial++) {
        int w = 1 + (int)(rng() % 40), h = 1 + (int)(rng() % 40);
        uint32_t density = 1 + rng() % 9;
        uint8_t *a = malloc((size_t)(w * h)), *b = malloc((size_t)(w * h));
        for (int i = 0; i < w * h; i++) {
            a[i] = b[i] = rng() % 10 < density;
        }
        CHECK(sp_tissue_clean(a, w, h) == SP_OK);
        clean_direct(b, w, h);
        CHECK(memcmp(a, b, (size_t)(w * h)) == 0);
        free(a);
        free(b);
    }
}

/* A mask over pixels given as a string of '0'/'1' rows. */
static sp_tissue_mask hand_mask(const char *rows, int64_t w, int64_t h, double ds) {
    sp_tissue_mask m = {.width = w, .height = h, .downsample = ds};
    m.pixels = malloc((size_t)(w * h));
    for (int64_t i = 0; i < w * h; i++) {
        m.pixels[i] = rows[i] == '1';
    }
    return m;
}

static void test_tile_rule(void) {
    /* 4x4 mask pixels of 2x2 level-0 pixels; the left half is tissue. */
    sp_tissue_mask m = hand_mask("1100"
                                 "1100"
                                 "1100"
                                 "1100",
                                 4, 4, 2.0);
    sp_tile *t = NULL;
    size_t n = 0;
    CHECK(sp_tissue_grid(&m, 1.0, 8, 8, 4, 4, 0.0, &t, &n) == SP_OK);
    CHECK_EQ_INT(n, 4);
    if (n == 4) {
        CHECK(t[0].x == 0 && t[0].y == 0 && t[0].tissue == 1.0);
        CHECK(t[1].x == 4 && t[1].y == 0 && t[1].tissue == 0.0);
        CHECK(t[2].x == 0 && t[2].y == 4 && t[2].tissue == 1.0);
        CHECK(t[3].x == 4 && t[3].y == 4 && t[3].tissue == 0.0);
    }
    sp_tiles_free(t);
    CHECK(sp_tissue_grid(&m, 1.0, 8, 8, 4, 4, 0.5, &t, &n) == SP_OK);
    CHECK_EQ_INT(n, 2);
    sp_tiles_free(t);
    /* Size 3, stride 1: [3, 6) holds the centres 3 (tissue) and 5 (not); [1, 4) holds 1 and 3;
     * 6 positions fit across (0..5) and down. */
    CHECK(sp_tissue_grid(&m, 1.0, 8, 8, 3, 1, 0.0, &t, &n) == SP_OK);
    CHECK_EQ_INT(n, 36);
    if (n == 36) {
        CHECK(t[1].x == 1 && t[1].tissue == 1.0);
        CHECK(t[3].x == 3 && t[3].tissue == 0.5);
        CHECK(t[5].x == 5 && t[5].tissue == 0.0);
        CHECK(t[6].x == 0 && t[6].y == 1);
    }
    sp_tiles_free(t);
    /* min_tissue 1 keeps the whole-tissue tiles only. */
    CHECK(sp_tissue_grid(&m, 1.0, 8, 8, 3, 1, 1.0, &t, &n) == SP_OK);
    CHECK_EQ_INT(n, 18); /* x = 0, 1, 2 in each of 6 rows */
    sp_tiles_free(t);
    CHECK(sp_tissue_grid(&m, 1.0, 8, 8, 2, 2, 1.0, &t, &n) == SP_OK);
    CHECK_EQ_INT(n, 8);
    sp_tiles_free(t);
    /* A tile larger than the level: no tiles, and a NULL list. */
    t = (sp_tile *)&m;
    CHECK(sp_tissue_grid(&m, 1.0, 8, 8, 9, 1, 0.0, &t, &n) == SP_OK);
    CHECK(n == 0 && t == NULL);
    sp_tissue_mask_free(&m);
    CHECK(m.pixels == NULL && m.width == 0);

    /* Tiles smaller than a mask pixel (4x4 level-0 pixels each): [5, 6) holds no centre (2, 6,
     * 10, 14), so the pixel holding 5.5, column 1, decides. */
    m = hand_mask("0100"
                  "0000"
                  "0000"
                  "0000",
                  4, 4, 4.0);
    CHECK(sp_tissue_grid(&m, 1.0, 16, 16, 1, 1, 1.0, &t, &n) == SP_OK);
    CHECK_EQ_INT(n, 4 * 4);
    if (n == 16) {
        CHECK(t[0].x == 4 && t[0].y == 0 && t[0].tissue == 1.0);
        CHECK(t[15].x == 7 && t[15].y == 3);
    }
    sp_tiles_free(t);
    /* Size 2: rows [0, 2) hold no centre (2 is outside), so every tile of the first row falls
     * back on the pixel holding its centre. */
    CHECK(sp_tissue_grid(&m, 1.0, 16, 16, 2, 1, 0.0, &t, &n) == SP_OK);
    CHECK_EQ_INT(n, 15 * 15);
    if (n == 225) {
        CHECK(t[5].x == 5 && t[5].y == 0 && t[5].tissue == 1.0);
        CHECK(t[3].x == 3 && t[3].tissue == 1.0);                   /* centre 4.0 is in column 1 */
        CHECK(t[2].x == 2 && t[2].tissue == 0.0);                   /* centre 3.0 is in column 0 */
        CHECK(t[17].x == 2 && t[17].y == 1 && t[17].tissue == 0.0); /* holds centre (2, 2) */
        CHECK(t[21].x == 6 && t[21].y == 1 && t[21].tissue == 1.0); /* holds (6, 2) */
    }
    sp_tiles_free(t);
    sp_tissue_mask_free(&m);

    /* A level with a fractional downsample: level x 3 starts at level-0 8 (floor(8 / 2.5) = 3),
     * and its rectangle [8, 8 + 2 * 2.5) = [8, 13) holds the centres 9 and 11 of 2-pixel mask
     * columns 4 and 5. */
    m = hand_mask("0000100000", 10, 1, 2.0);
    CHECK(sp_tissue_grid(&m, 2.5, 8, 1, 2, 3, 0.0, &t, &n) == SP_OK);
    CHECK_EQ_INT(n, 0); /* height 1 < size 2 */
    sp_tiles_free(t);
    sp_tissue_mask_free(&m);
    m = hand_mask("0000100000"
                  "0000000000"
                  "0000000000",
                  10, 3, 2.0);
    CHECK(sp_tissue_grid(&m, 2.5, 8, 2, 2, 3, 0.0, &t, &n) == SP_OK);
    CHECK_EQ_INT(n, 3);
    if (n == 3) {
        CHECK(t[0].x == 0 && t[1].x == 8 && t[2].x == 15);
        /* tile 1 covers rows [0, 5): centres 1 and 3 (rows 0, 1); columns 4, 5: one of four */
        CHECK(t[1].tissue == 0.25);
    }
    sp_tiles_free(t);
    sp_tissue_mask_free(&m);
}

/* A large random mask: every tile's fraction equals a direct count over the mask. */
static void test_tile_fraction_random(void) {
    int64_t w = 97, h = 61;
    sp_tissue_mask m = {.width = w, .height = h, .downsample = 3.3};
    m.pixels = malloc((size_t)(w * h));
    for (int64_t i = 0; i < w * h; i++) {
        m.pixels[i] = rng() % 3 == 0;
    }
    const double lds = 1.7;
    int64_t lw = 185, lh = 117; /* about w * 3.3 / 1.7 */
    sp_tile *t = NULL;
    size_t n = 0;
    CHECK(sp_tissue_grid(&m, lds, lw, lh, 7, 5, 0.0, &t, &n) == SP_OK);
    CHECK_EQ_INT(n, (size_t)(((lw - 7) / 5 + 1) * ((lh - 7) / 5 + 1)));
    int bad = 0;
    for (size_t k = 0; k < n; k++) {
        double x0 = (double)t[k].x, y0 = (double)t[k].y, span = 7 * lds;
        int64_t in = 0, all = 0;
        for (int64_t j = 0; j < h; j++) {
            double cy = ((double)j + 0.5) * m.downsample;
            for (int64_t i = 0; i < w; i++) {
                double cx = ((double)i + 0.5) * m.downsample;
                if (cx >= x0 && cx < x0 + span && cy >= y0 && cy < y0 + span) {
                    all++;
                    in += m.pixels[j * w + i];
                }
            }
        }
        double want = all ? (double)in / (double)all : -1;
        bad += all == 0 || t[k].tissue != want || floor(x0 / lds) != (double)(k % 36) * 5;
    }
    CHECK_EQ_INT(bad, 0);
    sp_tiles_free(t);
    sp_tissue_mask_free(&m);
}

static void test_slide(void) {
    char path[] = "/tmp/sp-test-tissue-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    char err[256];
    CHECK(sp_synth_write(path, 600, 5, err, sizeof err) == SP_OK);
    sp_slide *s = NULL;
    CHECK(sp_slide_open(path, &s, err, sizeof err) == SP_OK);
    if (s == NULL) {
        unlink(path);
        return;
    }
    sp_tissue_mask m;
    CHECK(sp_tissue_mask_compute(s, 128, &m, err, sizeof err) == SP_OK);
    CHECK_EQ_INT(m.width, 128);
    CHECK_EQ_INT(m.height, 128);
    CHECK(m.downsample == 600.0 / 128);
    CHECK(m.threshold >= SP_TISSUE_MIN_CHROMA && m.threshold < 255);
    CHECK(m.tissue_fraction > 0.05 && m.tissue_fraction < 0.95);
    int64_t ones = 0;
    for (int64_t i = 0; i < m.width * m.height; i++) {
        ones += m.pixels[i];
        CHECK(m.pixels[i] <= 1);
    }
    CHECK(m.tissue_fraction == (double)ones / (double)(m.width * m.height));

    /* A mask larger than the slide is read at downsample 1 (never upsampled). */
    sp_tissue_mask big;
    CHECK(sp_tissue_mask_compute(s, 4000, &big, err, sizeof err) == SP_OK);
    CHECK(big.width == 600 && big.height == 600 && big.downsample == 1.0);
    sp_tissue_mask_free(&big);
    sp_tissue_mask_free(NULL);

    sp_tile *t = NULL;
    size_t n = 0;
    CHECK(sp_tissue_tiles(s, &m, 0, 64, 0, 0.0, &t, &n) == SP_OK);
    CHECK_EQ_INT(n, 9 * 9); /* stride 0 means size: positions 0, 64, .., 512 */
    sp_tiles_free(t);
    sp_tiles_free(NULL);
    int32_t last = sp_slide_level_count(s) - 1;
    double ds;
    sp_slide_level_downsample(s, last, &ds);
    CHECK(sp_tissue_tiles(s, &m, last, 16, 8, 0.5, &t, &n) == SP_OK);
    for (size_t k = 0; k < n; k++) {
        CHECK(t[k].tissue >= 0.5 && t[k].tissue <= 1.0);
    }
    sp_tiles_free(t);

    /* Error paths: the arguments are checked and the outputs cleared. */
    t = (sp_tile *)&m;
    n = 7;
    CHECK(sp_tissue_tiles(s, &m, last + 1, 16, 0, 0.5, &t, &n) == SP_E_INVALID_ARG);
    CHECK(t == NULL && n == 0);
    CHECK(sp_tissue_tiles(s, &m, -1, 16, 0, 0.5, &t, &n) == SP_E_INVALID_ARG);
    CHECK(sp_tissue_tiles(s, &m, 0, 0, 0, 0.5, &t, &n) == SP_E_INVALID_ARG);
    CHECK(sp_tissue_tiles(s, &m, 0, 16, -1, 0.5, &t, &n) == SP_E_INVALID_ARG);
    CHECK(sp_tissue_tiles(s, &m, 0, 16, 0, -0.01, &t, &n) == SP_E_INVALID_ARG);
    CHECK(sp_tissue_tiles(s, &m, 0, 16, 0, 1.01, &t, &n) == SP_E_INVALID_ARG);
    CHECK(sp_tissue_tiles(s, &m, 0, 16, 0, NAN, &t, &n) == SP_E_INVALID_ARG);
    CHECK(sp_tissue_tiles(NULL, &m, 0, 16, 0, 0.5, &t, &n) == SP_E_INVALID_ARG);
    CHECK(sp_tissue_tiles(s, NULL, 0, 16, 0, 0.5, &t, &n) == SP_E_INVALID_ARG);
    CHECK(sp_tissue_tiles(s, &m, 0, 16, 0, 0.5, NULL, &n) == SP_E_INVALID_ARG);
    CHECK(sp_tissue_tiles(s, &m, 0, 16, 0, 0.5, &t, NULL) == SP_E_INVALID_ARG);
    sp_tissue_mask empty = {0};
    CHECK(sp_tissue_tiles(s, &empty, 0, 16, 0, 0.5, &t, &n) == SP_E_INVALID_ARG);

    sp_tissue_mask_free(&m);
    memset(&m, 0xff, sizeof m);
    CHECK(sp_tissue_mask_compute(s, -1, &m, err, sizeof err) == SP_E_INVALID_ARG);
    CHECK(m.pixels == NULL && m.width == 0 && m.threshold == 0);
    CHECK(strstr(err, "max_side") != NULL);
    CHECK(sp_tissue_mask_compute(s, 16385, &m, err, sizeof err) == SP_E_INVALID_ARG);
    CHECK(sp_tissue_mask_compute(NULL, 0, &m, err, sizeof err) == SP_E_INVALID_ARG);
    CHECK(sp_tissue_mask_compute(s, 0, NULL, err, sizeof err) == SP_E_INVALID_ARG);
    /* 0 means 2048, which is more than the slide: downsample 1. */
    CHECK(sp_tissue_mask_compute(s, 0, &m, NULL, 0) == SP_OK);
    CHECK(m.width == 600 && m.downsample == 1.0);
    sp_tissue_mask_free(&m);

    sp_slide_close(s);
    unlink(path);
}

void unit_run(void) {
    test_otsu();
    test_clean();
    test_tile_rule();
    test_tile_fraction_random();
    test_slide();
}
