/* test_colour_lanes.c — the HED jitter (sp_augment_patch) and the tabled Macenko map
 * (sp_stains_map_apply) compute a pixel's three channels in the lanes of one vector; this holds
 * their bytes against the scalar definition, written out here from the same tables (the plan's
 * factor[k][c][v], the map's factor[c][k][v]), on all 2^24 colours: for HED jitter at several
 * seeds and sigmas up to 1 (where the products pass 255 and clamp), for Macenko from stains that
 * brighten, darken past 255 and map a slide onto itself. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/augment_hed.h"
#include "ops/stains.h"
#include "slidepipe.h"
#include "unit.h"

enum { SIDE = 4096 }; /* SIDE * SIDE = 2^24 pixels: every colour once */

static uint8_t *every_colour(void) {
    uint8_t *rgb = malloc((size_t)SIDE * SIDE * 3);
    for (uint32_t i = 0; rgb != NULL && i < (uint32_t)SIDE * SIDE; i++) {
        rgb[3 * i] = (uint8_t)(i >> 16);
        rgb[3 * i + 1] = (uint8_t)(i >> 8);
        rgb[3 * i + 2] = (uint8_t)i;
    }
    return rgb;
}

/* Pixels of `got` that differ from the scalar definition of the jitter on `orig`. */
static int64_t hed_mismatches(const uint8_t *orig, const uint8_t *got, const sp_hed_plan *p) {
    int64_t bad = 0;
    for (int64_t i = 0; i < (int64_t)SIDE * SIDE; i++) {
        const uint8_t *px = orig + 3 * i;
        for (int c = 0; c < 3; c++) {
            float v = p->scale[c] * p->factor[0][c][px[0]] * p->factor[1][c][px[1]] *
                      p->factor[2][c][px[2]];
            uint8_t want = (uint8_t)((v > 255.0f ? 255.0f : v) + 0.5f);
            bad += got[3 * i + c] != want;
        }
    }
    return bad;
}

static void test_hed(const uint8_t *orig) {
    const struct {
        uint64_t seed;
        double sigma;
    } cases[] = {{1, 0.05}, {0x9E3779B97F4A7C15ull, 0.3}, {42, 1.0}, {7, 1.0}};
    uint8_t *got = malloc((size_t)SIDE * SIDE * 3);
    for (size_t k = 0; got != NULL && k < sizeof cases / sizeof cases[0]; k++) {
        sp_hed_plan plan;
        sp_hed_plan_make(cases[k].seed, 0, cases[k].sigma, &plan);
        CHECK(plan.jitter && plan.flip == -1);
        memcpy(got, orig, (size_t)SIDE * SIDE * 3);
        CHECK_EQ_INT(sp_augment_patch(got, SIDE, cases[k].seed, 0, cases[k].sigma), SP_OK);
        CHECK_EQ_INT(hed_mismatches(orig, got, &plan), 0);
    }
    free(got);
}

static void test_macenko(const uint8_t *orig) {
    sp_stains ref, slide = {{0.65, 0.70, 0.29}, {0.07, 0.99, 0.11}, 1.9, 1.0, 0};
    sp_stains_reference(&ref);
    sp_stains pale = slide, dark = slide;
    pale.max_h = pale.max_e = 6.0; /* concentrations shrink: brighter */
    dark.max_h = dark.max_e = 0.3; /* grow: darker, and bright pixels past 255 */
    const sp_stains *sources[] = {&slide, &pale, &dark, &ref};
    uint8_t *got = malloc((size_t)SIDE * SIDE * 3);
    for (size_t k = 0; got != NULL && k < sizeof sources / sizeof sources[0]; k++) {
        sp_stains_map map;
        CHECK_EQ_INT(sp_stains_map_init(sources[k], &ref, &map, NULL), SP_OK);
        CHECK(map.tabled);
        sp_stains_map_apply(&map, orig, (int64_t)SIDE * SIDE, got, 3, 1);
        int64_t bad = 0;
        const double(*f)[3][256] = map.factor;
        for (int64_t i = 0; i < (int64_t)SIDE * SIDE; i++) {
            const uint8_t *px = orig + 3 * i;
            for (int c = 0; c < 3; c++) {
                double x = 255.0 * f[c][0][px[0]] * f[c][1][px[1]] * f[c][2][px[2]];
                uint8_t want = x < 255.0 ? (uint8_t)(x + 0.5) : 255;
                bad += got[3 * i + c] != want;
            }
        }
        CHECK_EQ_INT(bad, 0);
    }
    free(got);
}

void unit_run(void) {
    uint8_t *orig = every_colour();
    CHECK(orig != NULL);
    if (orig != NULL) {
        test_hed(orig);
        test_macenko(orig);
    }
    free(orig);
}
