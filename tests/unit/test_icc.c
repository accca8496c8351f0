/* test_icc.c — the ICC calls of the slide layer (src/slide/icc.c) on slides built in memory: a
 * strip TIFF of varied RGB pixels carrying, as tag 34675, a profile LittleCMS itself writes
 * (a wide-gamut RGB with gamma 1.8 primaries far from sRGB's). The profile must come back byte
 * for byte; with conversion on, RGB8 and RGBA8 reads must equal LittleCMS's own transform of the
 * stored pixels to sRGB with the profile's intent (the oracle here is the library underneath,
 * called directly), alpha kept and the area outside the image still (0,0,0,0); four threads
 * reading at once get the same bytes; the raw-tile (GPU) path steps aside while it is on; off
 * again gives the stored pixels. Slides without a profile, with bytes LittleCMS refuses, or with
 * a Lab profile give SP_E_NOT_FOUND, SP_E_CORRUPT (naming the slide) and SP_E_UNSUPPORTED. */
#include <lcms2.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "icc_tiff.h"
#include "slide/slide.h"
#include "unit.h"

enum { W = 40, H = 24 };

static uint8_t stored[W * H * 3];

/* A strip TIFF of `stored` with `profile` as tag 34675, or none. */
static uint8_t *make_tiff(const uint8_t *profile, size_t len, size_t *total) {
    return icc_tiff_make(stored, W, H, profile, len, total);
}

static sp_slide *open_tiff(uint8_t *tiff, size_t total) {
    sp_limits limits;
    sp_limits_default(&limits);
    sp_source *src = NULL;
    sp_err err = {0};
    sp_slide *slide = NULL;
    if (sp_source_open_memory(tiff, total, "icc-test.tif", &src, &err) != SP_OK ||
        sp_slide_open_source(src, "icc-test.tif", &limits, &slide, &err) != SP_OK) {
        fprintf(stderr, "open: %s\n", err.msg);
        return NULL;
    }
    return slide;
}

/* A profile LittleCMS writes: `kind` 0 a wide-gamut gamma-1.8 RGB, 1 Lab. */
static uint8_t *make_profile(int kind, size_t *len) {
    cmsHPROFILE h;
    if (kind == 0) {
        cmsCIExyY white = {0.3457, 0.3585, 1.0};
        cmsCIExyYTRIPLE primaries = {
            {0.7347, 0.2653, 1.0}, {0.1152, 0.8264, 1.0}, {0.1566, 0.0177, 1.0}};
        cmsToneCurve *g = cmsBuildGamma(NULL, 1.8);
        cmsToneCurve *curves[3] = {g, g, g};
        h = cmsCreateRGBProfile(&white, &primaries, curves);
        cmsFreeToneCurve(g);
    } else {
        h = cmsCreateLab4Profile(NULL);
    }
    cmsUInt32Number n = 0;
    cmsSaveProfileToMem(h, NULL, &n);
    uint8_t *out = malloc(n);
    cmsSaveProfileToMem(h, out, &n);
    cmsCloseProfile(h);
    *len = n;
    return out;
}

typedef struct reader {
    sp_slide *slide;
    uint8_t rgb[W * H * 3];
    sp_status st;
} reader;

static void *read_all(void *arg) {
    reader *r = arg;
    for (int i = 0; i < 50 && r->st == SP_OK; i++) {
        r->st = sp_slide_read_region(r->slide, SP_PIXEL_RGB8, r->rgb, W * 3, 0, 0, 0, W, H);
    }
    return NULL;
}

static void test_conversion(void) {
    size_t len, total;
    uint8_t *profile = make_profile(0, &len);
    uint8_t *tiff = make_tiff(profile, len, &total);
    sp_slide *s = open_tiff(tiff, total);
    CHECK(s != NULL);
    if (s == NULL) {
        free(profile);
        free(tiff);
        return;
    }
    const uint8_t *got;
    size_t got_len;
    CHECK_EQ_INT(sp_slide_icc_profile(s, &got, &got_len), SP_OK);
    CHECK(got_len == len && memcmp(got, profile, len) == 0);

    /* The oracle: LittleCMS itself, same profiles and intent, on the stored pixels. */
    cmsHPROFILE in = cmsOpenProfileFromMem(profile, (cmsUInt32Number)len);
    cmsHPROFILE srgb = cmsCreate_sRGBProfile();
    cmsHTRANSFORM t =
        cmsCreateTransform(in, TYPE_RGB_8, srgb, TYPE_RGB_8, cmsGetHeaderRenderingIntent(in), 0);
    static uint8_t want[W * H * 3], rgb[W * H * 3], rgba[(W + 8) * H * 4];
    cmsDoTransform(t, stored, want, W * H);
    cmsDeleteTransform(t);
    cmsCloseProfile(in);
    cmsCloseProfile(srgb);
    int changed = 0;
    for (size_t i = 0; i < sizeof want; i++) {
        int d = abs((int)want[i] - (int)stored[i]);
        changed = d > changed ? d : changed;
    }
    CHECK(changed >= 20); /* the profile is far from sRGB: converting shows */

    sp_raw_level raw;
    bool raw_before = sp_slide_raw_level(s, 0, &raw);
    CHECK_EQ_INT(sp_slide_set_icc_transform(s, 1, NULL, 0), SP_OK);
    CHECK_EQ_INT(sp_slide_set_icc_transform(s, 1, NULL, 0), SP_OK); /* twice is harmless */
    CHECK(!sp_slide_raw_level(s, 0, &raw));
    CHECK_EQ_INT(sp_slide_read_region(s, SP_PIXEL_RGB8, rgb, W * 3, 0, 0, 0, W, H), SP_OK);
    CHECK(memcmp(rgb, want, sizeof want) == 0);
    /* RGBA, 8 columns past the right edge: converted inside, (0,0,0,0) outside. */
    CHECK_EQ_INT(sp_slide_read_region(s, SP_PIXEL_RGBA8, rgba, (W + 8) * 4, 0, 0, 0, W + 8, H),
                 SP_OK);
    bool same = true, clear = true;
    for (int y = 0; y < H; y++) {
        for (int x = 0; x < W + 8; x++) {
            const uint8_t *p = rgba + ((size_t)y * (W + 8) + (size_t)x) * 4;
            if (x < W) {
                same = same && memcmp(p, want + ((size_t)y * W + (size_t)x) * 3, 3) == 0 &&
                       p[3] == 255;
            } else {
                clear = clear && p[0] == 0 && p[1] == 0 && p[2] == 0 && p[3] == 0;
            }
        }
    }
    CHECK(same);
    CHECK(clear);

    reader readers[4];
    pthread_t threads[4];
    for (int i = 0; i < 4; i++) {
        readers[i].slide = s;
        readers[i].st = SP_OK;
        pthread_create(&threads[i], NULL, read_all, &readers[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(threads[i], NULL);
        CHECK_EQ_INT(readers[i].st, SP_OK);
        CHECK(memcmp(readers[i].rgb, want, sizeof want) == 0);
    }

    CHECK_EQ_INT(sp_slide_set_icc_transform(s, 0, NULL, 0), SP_OK);
    CHECK(sp_slide_raw_level(s, 0, &raw) == raw_before);
    CHECK_EQ_INT(sp_slide_read_region(s, SP_PIXEL_RGB8, rgb, W * 3, 0, 0, 0, W, H), SP_OK);
    CHECK(memcmp(rgb, stored, sizeof stored) == 0);
    sp_slide_close(s);
    free(tiff);
    free(profile);
}

static void test_refusals(void) {
    size_t total, len;
    char msg[512];
    uint8_t *tiff = make_tiff(NULL, 0, &total);
    sp_slide *s = open_tiff(tiff, total);
    CHECK(s != NULL);
    const uint8_t *got = (const uint8_t *)"x";
    size_t got_len = 7;
    CHECK_EQ_INT(sp_slide_icc_profile(s, &got, &got_len), SP_E_NOT_FOUND);
    CHECK(got == NULL && got_len == 0);
    CHECK_EQ_INT(sp_slide_set_icc_transform(s, 1, msg, sizeof msg), SP_E_NOT_FOUND);
    sp_slide_close(s);
    free(tiff);

    static const uint8_t junk[] = "\0\0\0\x60 this is not an ICC profile, only bytes in its place";
    tiff = make_tiff(junk, sizeof junk, &total);
    s = open_tiff(tiff, total);
    CHECK(s != NULL);
    CHECK_EQ_INT(sp_slide_set_icc_transform(s, 1, msg, sizeof msg), SP_E_CORRUPT);
    CHECK(strstr(msg, "icc-test.tif") != NULL && strstr(msg, "ICC profile") != NULL);
    CHECK(sp_slide_error(s) == NULL); /* a refused profile does not poison the slide */
    uint8_t px[3];
    CHECK_EQ_INT(sp_slide_read_region(s, SP_PIXEL_RGB8, px, 3, 0, 0, 0, 1, 1), SP_OK);
    CHECK(memcmp(px, stored, 3) == 0);
    sp_slide_close(s);
    free(tiff);

    uint8_t *lab = make_profile(1, &len);
    tiff = make_tiff(lab, len, &total);
    s = open_tiff(tiff, total);
    CHECK(s != NULL);
    CHECK_EQ_INT(sp_slide_set_icc_transform(s, 1, msg, sizeof msg), SP_E_UNSUPPORTED);
    CHECK(strstr(msg, "not RGB") != NULL);
    sp_slide_close(s);
    free(tiff);
    free(lab);

    CHECK_EQ_INT(sp_slide_icc_profile(NULL, &got, &got_len), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_slide_set_icc_transform(NULL, 1, NULL, 0), SP_E_INVALID_ARG);
}

void unit_run(void) {
    for (size_t i = 0; i < sizeof stored; i++) {
        stored[i] = (uint8_t)((i * 97u + (i / 3) * 13u) & 0xFF);
    }
    test_conversion();
    test_refusals();
}
