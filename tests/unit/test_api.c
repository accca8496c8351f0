/* test_api.c — the public API on a real Aperio slide (../shared/testdata): options and limits,
 * status names, properties and normalised keys, best level, RGB against RGBA, caller strides,
 * associated images, and concurrent reads from many threads on one handle giving the same bytes
 * as a single-threaded read. Uses only slidepipe.h. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "slidepipe.h"
#include "unit.h"

static char path[4096];

static void test_options_and_names(void) {
    sp_options *o = NULL;
    CHECK_EQ_INT(sp_options_create(&o), SP_OK);
    CHECK_EQ_INT(sp_options_get_limit(o, SP_LIMIT_MAX_DIRECTORIES), 4096);
    CHECK_EQ_INT(sp_options_set_limit(o, SP_LIMIT_MAX_DIRECTORIES, 0), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_options_set_limit(o, (sp_limit)99, 5), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_options_set_limit(o, SP_LIMIT_MAX_TILE_PIXELS, 1000), SP_OK);
    sp_slide *s = NULL;
    char err[256] = "";
    /* CMU-1-Small-Region has 240x240 tiles: over a 1000-pixel tile limit. */
    CHECK_EQ_INT(sp_slide_open_with(path, o, &s, err, sizeof err), SP_E_LIMIT);
    CHECK(s == NULL && strstr(err, "tile limit") != NULL);
    sp_options_destroy(o);
    sp_options_destroy(NULL);
    sp_slide_close(NULL);
    CHECK(strcmp(sp_status_str(SP_E_CORRUPT), "corrupt data") == 0);
    CHECK(strcmp(sp_version(), "0.1.0") == 0);
    CHECK_EQ_INT(sp_slide_open("/nonexistent/slide.svs", &s, err, sizeof err), SP_E_IO);
    CHECK(strstr(err, "No such file") != NULL);
    CHECK_EQ_INT(sp_slide_open(path, NULL, err, sizeof err), SP_E_INVALID_ARG);
}

static void test_facts(sp_slide *s) {
    CHECK(strcmp(sp_slide_format(s), "aperio") == 0);
    CHECK_EQ_INT(sp_slide_level_count(s), 1);
    CHECK(strcmp(sp_slide_property_value(s, SP_PROPERTY_MPP_X), "0.499") == 0);
    CHECK(strcmp(sp_slide_property_value(s, SP_PROPERTY_OBJECTIVE_POWER), "20") == 0);
    CHECK(strcmp(sp_slide_property_value(s, "aperio.AppMag"), "20") == 0);
    CHECK(sp_slide_property_value(s, "no.such.key") == NULL);
    /* Names are sorted and each name's value is found. */
    int sorted = 1;
    for (int32_t i = 0; i < sp_slide_property_count(s); i++) {
        const char *k = sp_slide_property_name(s, i);
        sorted &= sp_slide_property_value(s, k) != NULL;
        if (i > 0) {
            sorted &= strcmp(sp_slide_property_name(s, i - 1), k) < 0;
        }
    }
    CHECK(sorted);
    CHECK(sp_slide_property_name(s, -1) == NULL);
    CHECK_EQ_INT(sp_slide_best_level_for_downsample(s, 100.0), 0);
    CHECK_EQ_INT(sp_slide_associated_count(s), 3);
    CHECK(strcmp(sp_slide_associated_name(s, 0), "label") == 0);
    int64_t w, h;
    CHECK_EQ_INT(sp_slide_associated_dimensions(s, "macro", &w, &h), SP_OK);
    CHECK(w == 1280 && h == 431);
    CHECK_EQ_INT(sp_slide_associated_dimensions(s, "nope", &w, &h), SP_E_NOT_FOUND);
    CHECK(sp_slide_level_compression(s, 0) && strcmp(sp_slide_level_compression(s, 0), "jpeg") == 0);
    CHECK(sp_slide_level_compression(s, 1) == NULL);
}

static void test_formats_and_strides(sp_slide *s) {
    enum { W = 300, H = 200, PAD = 17 };
    int64_t stride4 = W * 4 + PAD, stride3 = W * 3 + PAD;
    uint8_t *rgba = malloc((size_t)(stride4 * H)), *rgb = malloc((size_t)(stride3 * H));
    memset(rgba, 0xEE, (size_t)(stride4 * H));
    memset(rgb, 0xEE, (size_t)(stride3 * H));
    /* Crosses the right edge (width 2220) so both inside and outside pixels are present. */
    CHECK_EQ_INT(sp_slide_read_region(s, SP_PIXEL_RGBA8, rgba, stride4, 0, 2100, 230, W, H), SP_OK);
    CHECK_EQ_INT(sp_slide_read_region(s, SP_PIXEL_RGB8, rgb, stride3, 0, 2100, 230, W, H), SP_OK);
    int mismatch = 0, pad_touched = 0;
    for (int y = 0; y < H; y++) {
        for (int x = 0; x < W; x++) {
            const uint8_t *a = rgba + y * stride4 + x * 4, *b = rgb + y * stride3 + x * 3;
            if (x < 120) {
                mismatch += a[3] != 255 || memcmp(a, b, 3) != 0;
            } else {
                mismatch += a[0] | a[1] | a[2] | a[3];
                mismatch += b[0] != 255 || b[1] != 255 || b[2] != 255;
            }
        }
        for (int p = 0; p < PAD; p++) {
            pad_touched += rgba[y * stride4 + W * 4 + p] != 0xEE;
            pad_touched += rgb[y * stride3 + W * 3 + p] != 0xEE;
        }
    }
    CHECK_EQ_INT(mismatch, 0);
    CHECK_EQ_INT(pad_touched, 0);
    free(rgba);
    free(rgb);
}

typedef struct job {
    sp_slide *slide;
    int64_t x, y;
    uint8_t *out;
    sp_status st;
} job;

static void *read_job(void *arg) {
    job *j = arg;
    j->st = sp_slide_read_region(j->slide, SP_PIXEL_RGBA8, j->out, 256 * 4, 0, j->x, j->y, 256, 256);
    return NULL;
}

static void test_concurrent_reads(sp_slide *s) {
    enum { N = 8 };
    job jobs[N];
    pthread_t threads[N];
    for (int i = 0; i < N; i++) {
        jobs[i] = (job){s, 113 * i, 307 * i, malloc(256 * 256 * 4), SP_E_IO};
        pthread_create(&threads[i], NULL, read_job, &jobs[i]);
    }
    uint8_t *serial = malloc(256 * 256 * 4);
    int same = 1;
    for (int i = 0; i < N; i++) {
        pthread_join(threads[i], NULL);
        CHECK_EQ_INT(jobs[i].st, SP_OK);
        sp_slide_read_region(s, SP_PIXEL_RGBA8, serial, 256 * 4, 0, jobs[i].x, jobs[i].y, 256, 256);
        same &= memcmp(serial, jobs[i].out, 256 * 256 * 4) == 0;
        free(jobs[i].out);
    }
    CHECK(same);
    free(serial);
}

static void test_associated(sp_slide *s) {
    int64_t w, h;
    sp_slide_associated_dimensions(s, "label", &w, &h);
    uint8_t *img = malloc((size_t)(w * h * 4));
    CHECK_EQ_INT(sp_slide_read_associated(s, "label", SP_PIXEL_RGBA8, img, w * 4), SP_OK);
    int64_t opaque = 0, varied = 0;
    for (int64_t i = 0; i < w * h; i++) {
        opaque += img[i * 4 + 3] == 255;
        varied += img[i * 4] != img[0];
    }
    CHECK_EQ_INT(opaque, w * h);
    CHECK(varied > w * h / 10); /* a real picture, not a flat fill */
    CHECK_EQ_INT(sp_slide_read_associated(s, "label", SP_PIXEL_RGBA8, img, w * 4 - 1),
                 SP_E_INVALID_ARG);
    free(img);
}

/* RGB8 is RGBA composited over the background (white here), rounded to nearest, also where alpha
 * is partial: a 16-bit tiff with associated alpha, read from odd offsets so that groups of four
 * pixels mix opaque, partial and transparent ones at every position. */
static void test_rgb_composites(const char *data) {
    char file[600];
    snprintf(file, sizeof file, "%s/robustness/tiff_tiled_planar_16bit_RGBa.tiff", data);
    sp_slide *s = NULL;
    char err[512];
    CHECK_EQ_INT(sp_slide_open(file, &s, err, sizeof err), SP_OK);
    if (s == NULL) {
        return;
    }
    enum { W = 99, H = 40 };
    uint8_t rgba[W * H * 4], rgb[W * H * 3];
    int partial = 0, wrong = 0;
    for (int x0 = 0; x0 < 4; x0++) {
        int w = W - x0;
        CHECK_EQ_INT(sp_slide_read_region(s, SP_PIXEL_RGBA8, rgba, w * 4, 0, x0, 0, w, H), SP_OK);
        CHECK_EQ_INT(sp_slide_read_region(s, SP_PIXEL_RGB8, rgb, w * 3, 0, x0, 0, w, H), SP_OK);
        for (int i = 0; i < w * H; i++) {
            unsigned a = rgba[4 * i + 3];
            partial += a != 0 && a != 255;
            for (int c = 0; c < 3; c++) {
                unsigned want = (rgba[4 * i + c] * a + 255 * (255 - a) + 127) / 255;
                wrong += rgb[3 * i + c] != want;
            }
        }
    }
    CHECK(partial > W * H);
    CHECK_EQ_INT(wrong, 0);
    sp_slide_close(s);
}

void unit_run(void) {
    const char *data = unit_testdata();
    if (data == NULL) {
        unit_skip("shared testdata not found (set SP_TESTDATA or put ../shared/testdata beside "
                  "the repository)");
        return;
    }
    snprintf(path, sizeof path, "%s/aperio/CMU-1-Small-Region.svs", data);
    test_options_and_names();
    test_rgb_composites(data);
    sp_slide *s = NULL;
    char err[512];
    CHECK_EQ_INT(sp_slide_open(path, &s, err, sizeof err), SP_OK);
    if (s == NULL) {
        fprintf(stderr, "open failed: %s\n", err);
        return;
    }
    test_facts(s);
    test_formats_and_strides(s);
    test_concurrent_reads(s);
    test_associated(s);
    CHECK(sp_slide_error(s) == NULL);
    sp_slide_close(s);
}
