/* test_tile_qc.c — tile QC scores (src/jobs/train/tile_qc*.c, docs/qc.md).
 *
 * Hand-made tiles whose scores follow from the rules by hand: a uniform tile has no Laplacian
 * (blur 0), pure blue ink is all pen_blue, white glass all background, a checkerboard of two
 * tissue colours has the variance worked out below, a dark saturated tile is all fold. Each
 * pixel class is checked on colours just inside and just outside its rule. A synthetic slide
 * with artefacts exercises sp_tile_qc_compute: its result equals sp_tile_qc_pixels on the same
 * pixels, does not depend on the thread count, and bad arguments are refused with a zeroed
 * output.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jobs/train/tile_qc_internal.h"
#include "unit.h"

static void fill(uint8_t *rgb, int64_t size, uint8_t r, uint8_t g, uint8_t b) {
    for (int64_t i = 0; i < size * size; i++) {
        rgb[3 * i] = r, rgb[3 * i + 1] = g, rgb[3 * i + 2] = b;
    }
}

static void test_hand_tiles(void) {
    enum { S = 32 };
    uint8_t *rgb = malloc(S * S * 3);
    sp_tile_qc q;
    fill(rgb, S, 220, 150, 200); /* uniform pink tissue */
    CHECK(sp_tile_qc_pixels(rgb, S * 3, S, &q) == SP_OK);
    CHECK(q.blur == 0 && q.pen == 0 && q.fold == 0 && q.background == 0);

    fill(rgb, S, 0, 0, 255); /* pure blue ink */
    CHECK(sp_tile_qc_pixels(rgb, S * 3, S, &q) == SP_OK);
    CHECK(q.pen_blue == 1 && q.pen == 1 && q.pen_green == 0 && q.pen_black == 0);
    CHECK(q.fold == 0 && q.blur == 0);

    fill(rgb, S, 20, 200, 40); /* green ink */
    CHECK(sp_tile_qc_pixels(rgb, S * 3, S, &q) == SP_OK);
    CHECK(q.pen_green == 1 && q.pen == 1);

    fill(rgb, S, 20, 20, 25); /* black ink */
    CHECK(sp_tile_qc_pixels(rgb, S * 3, S, &q) == SP_OK);
    CHECK(q.pen_black == 1 && q.pen == 1);

    fill(rgb, S, 242, 242, 240); /* glass */
    CHECK(sp_tile_qc_pixels(rgb, S * 3, S, &q) == SP_OK);
    CHECK(q.background == 1 && q.pen == 0 && q.blur == 0);

    fill(rgb, S, 150, 40, 120); /* dark saturated: a fold */
    CHECK(sp_tile_qc_pixels(rgb, S * 3, S, &q) == SP_OK);
    CHECK(q.fold == 1 && q.pen == 0);

    /* Checkerboard of two tissue colours with lumas a and b: every interior Laplacian is
     * +-4 (b - a), so the variance is 16 (b - a)^2 (the mean is ~0 but not exactly: count). */
    uint8_t la = sp_qc_luma(220, 150, 200), lb = sp_qc_luma(200, 120, 180);
    for (int y = 0; y < S; y++) {
        for (int x = 0; x < S; x++) {
            uint8_t *p = rgb + (y * S + x) * 3;
            bool odd = (x + y) & 1;
            p[0] = odd ? 200 : 220, p[1] = odd ? 120 : 150, p[2] = odd ? 180 : 200;
        }
    }
    CHECK(sp_tile_qc_pixels(rgb, S * 3, S, &q) == SP_OK);
    double d = 4.0 * ((double)lb - (double)la);
    int64_t n = (S - 2) * (S - 2), pos = 0; /* interior pixels where the centre is odd */
    for (int y = 1; y < S - 1; y++) {
        for (int x = 1; x < S - 1; x++) {
            pos += (x + y) & 1;
        }
    }
    /* odd centres (luma lb) get 4 (la - lb) = -d, even centres +d */
    double s = d * (double)(n - pos) - d * (double)pos, s2 = d * d * (double)n;
    CHECK(q.blur == (s2 - s * s / (double)n) / (double)n);
    CHECK(q.blur > 0);

    /* A size of 1 or 2 has no interior: blur 0. */
    CHECK(sp_tile_qc_pixels(rgb, S * 3, 2, &q) == SP_OK && q.blur == 0);
    free(rgb);
}

static void test_rules(void) {
    CHECK_EQ_INT(sp_qc_classify(200, 200, 224), SP_QC_BACKGROUND);
    CHECK_EQ_INT(sp_qc_classify(199, 200, 205), SP_QC_OTHER);  /* grey, too dark for glass */
    CHECK_EQ_INT(sp_qc_classify(200, 200, 225), SP_QC_TISSUE); /* too coloured for glass */
    CHECK_EQ_INT(sp_qc_classify(40, 40, 80), SP_QC_PEN_BLACK);
    CHECK_EQ_INT(sp_qc_classify(40, 40, 81), SP_QC_PEN_BLUE); /* max 81: not black */
    CHECK_EQ_INT(sp_qc_classify(60, 60, 90), SP_QC_PEN_BLUE); /* B = G + 30, G = R */
    CHECK_EQ_INT(sp_qc_classify(60, 60, 89), SP_QC_TISSUE);   /* B < G + 30 */
    CHECK_EQ_INT(sp_qc_classify(61, 60, 120), SP_QC_FOLD);    /* G < R: haematoxylin */
    CHECK_EQ_INT(sp_qc_classify(100, 120, 100), SP_QC_PEN_GREEN);
    CHECK_EQ_INT(sp_qc_classify(100, 119, 100), SP_QC_TISSUE); /* G < R + 20: not green ink */
    CHECK_EQ_INT(sp_qc_classify(100, 108, 100), SP_QC_OTHER);  /* chroma 8: grey */
    CHECK_EQ_INT(sp_qc_classify(230, 150, 210), SP_QC_TISSUE); /* eosin pink */
    CHECK_EQ_INT(sp_qc_classify(57, 51, 130), SP_QC_FOLD);     /* dark saturated */
}

static void test_slide(void) {
    char path[] = "/tmp/sp-test-tile-qc-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) {
        return;
    }
    close(fd);
    char err[256];
    CHECK(sp_synth_write_with(path, 1024, 3, SP_SYNTH_ARTIFACTS, err, sizeof err) == SP_OK);
    CHECK(sp_synth_write_with(path, 1000, 3, SP_SYNTH_ARTIFACTS, err, sizeof err) ==
          SP_E_INVALID_ARG);
    CHECK(sp_synth_write_with(path, 1024, 3, 2u, err, sizeof err) == SP_E_INVALID_ARG);
    sp_slide *slide = NULL;
    CHECK(sp_slide_open(path, &slide, err, sizeof err) == SP_OK);
    if (slide == NULL) {
        unlink(path);
        return;
    }
    enum { S = 64, N = 16 * 16 };
    sp_tile *tiles = calloc(N, sizeof *tiles);
    sp_tile_qc *one = calloc(N, sizeof *one), *four = calloc(N, sizeof *four);
    for (int i = 0; i < N; i++) {
        tiles[i].x = (i % 16) * S, tiles[i].y = (i / 16) * S;
    }
    CHECK(sp_tile_qc_compute(slide, 0, S, tiles, N, 1, one, err, sizeof err) == SP_OK);
    CHECK(sp_tile_qc_compute(slide, 0, S, tiles, N, 4, four, err, sizeof err) == SP_OK);
    CHECK(memcmp(one, four, N * sizeof *one) == 0);
    uint8_t *rgb = malloc(S * S * 3);
    bool same = true, any_pen = false, any_blur_low = false;
    for (int i = 0; i < N; i += 7) {
        sp_tile_qc q;
        CHECK(sp_slide_read_region(slide, SP_PIXEL_RGB8, rgb, S * 3, 0, tiles[i].x, tiles[i].y, S,
                                   S) == SP_OK);
        CHECK(sp_tile_qc_pixels(rgb, S * 3, S, &q) == SP_OK);
        same = same && memcmp(&q, &one[i], sizeof q) == 0;
    }
    for (int i = 0; i < N; i++) {
        any_pen = any_pen || one[i].pen > 0.2;
        any_blur_low = any_blur_low || (one[i].background < 0.5 && one[i].blur < 50);
    }
    CHECK(same);
    CHECK(any_pen);
    CHECK(any_blur_low);

    /* level 1: 32 x 32 tiles of it */
    CHECK(sp_tile_qc_compute(slide, 1, 32, tiles, 4, 2, one, err, sizeof err) == SP_OK);

    /* refusals: output zeroed */
    memset(four, 0xff, N * sizeof *four);
    CHECK(sp_tile_qc_compute(slide, 0, 0, tiles, N, 1, four, err, sizeof err) == SP_E_INVALID_ARG);
    CHECK(four[0].blur == 0 && four[N - 1].background == 0 && strstr(err, "size") != NULL);
    CHECK(sp_tile_qc_compute(slide, 0, SP_TILE_QC_MAX_SIZE + 1, tiles, N, 1, four, err,
                             sizeof err) == SP_E_INVALID_ARG);
    CHECK(sp_tile_qc_compute(slide, 99, S, tiles, N, 1, four, err, sizeof err) == SP_E_INVALID_ARG);
    CHECK(sp_tile_qc_compute(NULL, 0, S, tiles, N, 1, four, err, sizeof err) == SP_E_INVALID_ARG);
    CHECK(sp_tile_qc_compute(slide, 0, S, NULL, N, 1, four, err, sizeof err) == SP_E_INVALID_ARG);
    CHECK(sp_tile_qc_compute(slide, 0, S, tiles, N, 1, NULL, err, sizeof err) == SP_E_INVALID_ARG);
    CHECK(sp_tile_qc_compute(slide, 0, S, NULL, 0, 1, NULL, err, sizeof err) == SP_OK);
    sp_tile_qc q;
    CHECK(sp_tile_qc_pixels(NULL, 3, 1, &q) == SP_E_INVALID_ARG);
    CHECK(sp_tile_qc_pixels(rgb, S * 3 - 1, S, &q) == SP_E_INVALID_ARG);
    CHECK(sp_tile_qc_pixels(rgb, S * 3, 0, &q) == SP_E_INVALID_ARG);
    CHECK(sp_tile_qc_pixels(rgb, S * 3, S, NULL) == SP_E_INVALID_ARG);

    sp_synth_artifact a[SP_SYNTH_ARTIFACT_COUNT];
    CHECK(sp_synth_artifacts(1023, a) == SP_E_INVALID_ARG);
    CHECK(sp_synth_artifacts(4096, NULL) == SP_E_INVALID_ARG);
    CHECK(sp_synth_artifacts(4096, a) == SP_OK);
    for (int k = 0; k < SP_SYNTH_ARTIFACT_COUNT; k++) {
        CHECK_EQ_INT(a[k].kind, k);
        CHECK(a[k].x >= 0 && a[k].y >= 0 && a[k].x + a[k].width <= 4096 &&
              a[k].y + a[k].height <= 4096 && a[k].width > 0 && a[k].height > 0);
    }
    CHECK(a[SP_ARTIFACT_BLUR].x % 256 == 0 && a[SP_ARTIFACT_BLUR].width % 256 == 0);
    free(rgb);
    free(tiles);
    free(one);
    free(four);
    sp_slide_close(slide);
    unlink(path);
}

void unit_run(void) {
    test_hand_tiles();
    test_rules();
    test_slide();
}
