/* test_tile_cache.c — the process-wide tile cache through the public API: overlapping sliding
 * windows hit it and read the same bytes as with no cache; memory stays within the capacity
 * while evicting; closing a slide frees its entries; and under concurrent use (threads reading
 * overlapping regions of JPEG and JPEG 2000 slides through a cache small enough to evict all
 * the time, while another thread opens, reads and closes slides) every region is still exactly
 * what a cache-less read gives. Blocks read with a shared band, as the tile engine reads them,
 * find their neighbours' edge tiles in the cache. Built under ThreadSanitizer too (make tsan). */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "slide/slide.h"
#include "slidepipe.h"
#include "unit.h"

#define WIN 200
#define REGIONS 32
#define THREADS 4

static char paths[2][4096];

static sp_cache_stats stats(void) {
    sp_cache_stats s = {.struct_size = sizeof s};
    CHECK_EQ_INT(sp_cache_get_stats(&s), SP_OK);
    return s;
}

static uint8_t *read_rgba(sp_slide *s, int32_t level, int64_t x, int64_t y, int64_t w, int64_t h) {
    uint8_t *buf = malloc((size_t)(w * h * 4));
    CHECK_EQ_INT(sp_slide_read_region(s, SP_PIXEL_RGBA8, buf, w * 4, level, x, y, w, h), SP_OK);
    return buf;
}

static void test_api_checks(void) {
    CHECK_EQ_INT(sp_cache_set_capacity(-1), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_cache_get_stats(NULL), SP_E_INVALID_ARG);
    sp_cache_stats small = {.struct_size = 4};
    CHECK_EQ_INT(sp_cache_get_stats(&small), SP_E_INVALID_ARG);
}

/* Windows of WIN pixels moving by WIN / 2: each tile is wanted by several windows. */
static void test_sliding_windows(void) {
    sp_slide *s = NULL;
    char err[512];
    CHECK_EQ_INT(sp_slide_open(paths[0], &s, err, sizeof err), SP_OK);
    uint8_t *plain[16];
    sp_cache_set_capacity(0);
    for (int i = 0; i < 16; i++) {
        plain[i] = read_rgba(s, 0, 300 + i * WIN / 2, 500, WIN, WIN);
    }
    sp_cache_set_capacity(INT64_C(32) << 20);
    sp_cache_stats before = stats();
    int same = 0;
    for (int i = 0; i < 16; i++) {
        uint8_t *cached = read_rgba(s, 0, 300 + i * WIN / 2, 500, WIN, WIN);
        same += memcmp(cached, plain[i], WIN * WIN * 4) == 0;
        free(cached);
        free(plain[i]);
    }
    CHECK_EQ_INT(same, 16);
    sp_cache_stats after = stats();
    CHECK(after.hits - before.hits >= 8); /* later windows reuse earlier windows' tiles */
    CHECK(after.entries > 0 && after.used_bytes <= after.capacity_bytes);
    sp_slide_close(s);
    CHECK_EQ_INT(stats().entries, 0); /* closing frees the slide's entries */
    CHECK_EQ_INT(stats().used_bytes, 0);
}

/* A capacity of a few tiles: the cache evicts all the time and never holds more. */
static void test_bounded(void) {
    sp_slide *s = NULL;
    char err[512];
    CHECK_EQ_INT(sp_slide_open(paths[0], &s, err, sizeof err), SP_OK);
    sp_cache_set_capacity(INT64_C(4) << 20); /* 256 KiB per shard: one 240x240 tile each */
    sp_cache_stats before = stats();
    int within = 1;
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < 30; i++) {
            free(read_rgba(s, 0, (i * 97) % 1800, (i * 131) % 2600, 300, 300));
            sp_cache_stats now = stats();
            within &= now.used_bytes <= now.capacity_bytes;
        }
    }
    CHECK(within);
    CHECK(stats().evictions > before.evictions);
    sp_cache_set_capacity(0); /* shrinking evicts at once */
    CHECK_EQ_INT(stats().used_bytes, 0);
    sp_slide_close(s);
}

typedef struct job {
    sp_slide *slides[2];
    int64_t xs[REGIONS], ys[REGIONS];
    uint8_t *want[REGIONS];
    int mismatches;
    int index;
} job;

static job shared;

static void *reader(void *arg) {
    long id = (long)arg;
    uint8_t *buf = malloc(WIN * WIN * 4);
    for (int round = 0; round < 2; round++) {
        for (int k = 0; k < REGIONS; k++) {
            int r = (int)((k * 7 + id * 13 + round * 5) % REGIONS);
            sp_slide *s = shared.slides[r % 2];
            if (sp_slide_read_region(s, SP_PIXEL_RGBA8, buf, WIN * 4, 0, shared.xs[r], shared.ys[r],
                                     WIN, WIN) != SP_OK ||
                memcmp(buf, shared.want[r], WIN * WIN * 4) != 0) {
                __atomic_add_fetch(&shared.mismatches, 1, __ATOMIC_RELAXED);
            }
        }
    }
    free(buf);
    return NULL;
}

/* Opens, reads and closes slides while the readers run: its entries come and go. */
static void *churner(void *arg) {
    (void)arg;
    uint8_t *buf = malloc(WIN * WIN * 4);
    for (int i = 0; i < 4; i++) {
        sp_slide *s = NULL;
        char err[512];
        if (sp_slide_open(paths[i % 2], &s, err, sizeof err) == SP_OK) {
            for (int k = 0; k < 4; k++) {
                int r = (i * 4 + k) * 2 % REGIONS + i % 2;
                if (sp_slide_read_region(s, SP_PIXEL_RGBA8, buf, WIN * 4, 0, shared.xs[r],
                                         shared.ys[r], WIN, WIN) != SP_OK ||
                    memcmp(buf, shared.want[r], WIN * WIN * 4) != 0) {
                    __atomic_add_fetch(&shared.mismatches, 1, __ATOMIC_RELAXED);
                }
            }
            sp_slide_close(s);
        }
    }
    free(buf);
    return NULL;
}

static void test_concurrent(void) {
    char err[512];
    for (int i = 0; i < 2; i++) {
        CHECK_EQ_INT(sp_slide_open(paths[i], &shared.slides[i], err, sizeof err), SP_OK);
    }
    sp_cache_set_capacity(0);
    /* Regions clustered so that threads want the same tiles at the same time. */
    for (int r = 0; r < REGIONS; r++) {
        shared.xs[r] = 400 + (r * 37) % 600;
        shared.ys[r] = 600 + (r * 53) % 700;
        shared.want[r] = read_rgba(shared.slides[r % 2], 0, shared.xs[r], shared.ys[r], WIN, WIN);
    }
    sp_cache_set_capacity(INT64_C(6) << 20); /* one tile per shard: constant eviction */
    sp_cache_stats before = stats();
    pthread_t th[THREADS + 1];
    for (long t = 0; t < THREADS; t++) {
        pthread_create(&th[t], NULL, reader, (void *)t);
    }
    pthread_create(&th[THREADS], NULL, churner, NULL);
    for (int t = 0; t <= THREADS; t++) {
        pthread_join(th[t], NULL);
    }
    CHECK_EQ_INT(shared.mismatches, 0);
    sp_cache_stats st = stats();
    CHECK(st.hits > before.hits && st.evictions > before.evictions);
    CHECK(st.used_bytes <= st.capacity_bytes);
    for (int r = 0; r < REGIONS; r++) {
        free(shared.want[r]);
    }
    for (int i = 0; i < 2; i++) {
        sp_slide_close(shared.slides[i]);
    }
    CHECK_EQ_INT(stats().entries, 0);
}

/* Blocks that overlap by 2 pixels, read with that shared band as the tile engine reads them
 * (sp_slide_read_level_area): the first block admits the tiles along its edges at once, so the
 * second finds the three it shares with the first in the cache, where plain reads (no band) find
 * none; the bytes equal cache-less reads either way. */
static int64_t second_block_hits(sp_slide *s, int64_t band, uint8_t *const plain[2]) {
    enum { B = 482 };
    sp_cache_set_capacity(0); /* empty */
    sp_cache_set_capacity(INT64_C(32) << 20);
    uint8_t *buf = malloc(B * B * 4);
    int64_t hits = 0;
    for (int i = 0; i < 2; i++) {
        sp_cache_stats before = stats();
        CHECK_EQ_INT(sp_slide_read_level_area(s, SP_PIXEL_RGBA8, buf, B * 4, 0, 1,
                                              100 + i * (B - 2), 100, B, B, band),
                     SP_OK);
        CHECK(memcmp(buf, plain[i], B * B * 4) == 0);
        hits = stats().hits - before.hits;
    }
    free(buf);
    return hits;
}

static void test_shared_band(void) {
    enum { B = 482 };
    sp_slide *s = NULL;
    char err[512];
    CHECK_EQ_INT(sp_slide_open(paths[0], &s, err, sizeof err), SP_OK);
    if (s == NULL) {
        return;
    }
    sp_cache_set_capacity(0);
    uint8_t *plain[2] = {read_rgba(s, 0, 100, 100, B, B), read_rgba(s, 0, 100 + B - 2, 100, B, B)};
    CHECK_EQ_INT(second_block_hits(s, 0, plain), 0);
    CHECK(second_block_hits(s, 2, plain) >= 3); /* 240² tiles: one column of three is shared */
    free(plain[0]);
    free(plain[1]);
    sp_slide_close(s);
}

void unit_run(void) {
    const char *data = unit_testdata();
    if (data == NULL) {
        unit_skip("../shared/testdata is absent");
        return;
    }
    snprintf(paths[0], sizeof paths[0], "%s/aperio/CMU-1-Small-Region.svs", data);
    snprintf(paths[1], sizeof paths[1], "%s/aperio/tcga-cr-7395-01a-01-ts1.svs", data);
    test_api_checks();
    test_sliding_windows();
    test_shared_band();
    test_bounded();
    test_concurrent();
}
