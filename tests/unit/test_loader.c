/* test_loader.c — the prefetching loader through the public API, also run under ThreadSanitizer:
 * batches come in request order with the bytes sp_patches_read makes at once (any thread count,
 * any prefetch depth), the loader holds at most `prefetch` ready batches, batches outlive their
 * loader, a loader destroyed early (with batches queued, or while it waits for the consumer)
 * frees everything, failed patches are zeroed and counted, bad configs and requests are refused
 * with a message, and float16 rounds every value of chosen formats to nearest-even (against a
 * reference built from the bits here). Uses only slidepipe.h. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "slidepipe.h"
#include "unit.h"

#define N_REQS 23
#define SIZE 48

static sp_loader_config config(int64_t batch, int prefetch, int threads, sp_batch_dtype dtype,
                               sp_batch_layout layout) {
    sp_loader_config c = {.struct_size = sizeof c,
                          .size = SIZE,
                          .batch_size = batch,
                          .dihedral = 1,
                          .hed_sigma = 0.1,
                          .prefetch = prefetch,
                          .threads = threads};
    c.format.dtype = dtype;
    c.format.layout = layout;
    for (int k = 0; k < 3; k++) {
        c.format.mean[k] = 0.25f * (float)k;
        c.format.std[k] = 0.5f + 0.1f * (float)k;
    }
    return c;
}

static void make_requests(sp_patch_request *r, int n, int64_t w, int64_t h) {
    uint64_t s = 12345;
    for (int i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        r[i] = (sp_patch_request){.slide = 0,
                                  .level = i % 3 == 2 ? -1 : 0,
                                  .downsample = 1.5 + (double)(i % 4),
                                  .x = (int64_t)((s >> 20) % (uint64_t)(w - SIZE)),
                                  .y = (int64_t)((s >> 40) % (uint64_t)(h - SIZE)),
                                  .seed = s};
    }
}

/* Batches of the loader, in order, against `want` (all patches made at once). */
static void check_order(sp_slide *slide, const sp_patch_request *reqs, const uint8_t *want,
                        sp_loader_config c) {
    sp_loader *l = NULL;
    char err[256] = "";
    CHECK_EQ_INT(sp_loader_create(&slide, 1, reqs, N_REQS, &c, &l, err, sizeof err), SP_OK);
    if (l == NULL) {
        return;
    }
    size_t patch = SIZE * SIZE * 3 * (size_t)sp_batch_dtype_bytes(c.format.dtype);
    int64_t next_first = 0;
    sp_batch *b;
    while (sp_loader_next(l, &b) == SP_OK && b != NULL) {
        CHECK_EQ_INT(b->first, next_first);
        CHECK(b->count == (N_REQS - b->first < c.batch_size ? N_REQS - b->first : c.batch_size));
        CHECK(b->bytes == (size_t)b->count * patch);
        CHECK(memcmp(b->data, want + b->first * patch, b->bytes) == 0);
        for (int64_t i = 0; i < b->count; i++) {
            CHECK_EQ_INT(b->statuses[i], SP_OK);
        }
        next_first += b->count;
        sp_batch_free(b);
    }
    CHECK_EQ_INT(next_first, N_REQS);
    CHECK(sp_loader_next(l, &b) == SP_OK && b == NULL); /* stays at the end */
    CHECK(strcmp(sp_loader_error(l), "") == 0);         /* it did not fail */
    sp_loader_destroy(l);
}

static void test_order_and_bytes(sp_slide *slide, const sp_patch_request *reqs) {
    sp_batch_dtype dtypes[] = {SP_BATCH_UINT8, SP_BATCH_FLOAT16, SP_BATCH_FLOAT32};
    for (int d = 0; d < 3; d++) {
        for (int layout = 0; layout < 2; layout++) {
            sp_loader_config c = config(5, 2, 2, dtypes[d], (sp_batch_layout)layout);
            size_t bytes = N_REQS * SIZE * SIZE * 3 * (size_t)sp_batch_dtype_bytes(dtypes[d]);
            uint8_t *want = malloc(bytes);
            sp_status st[N_REQS];
            char err[256];
            CHECK_EQ_INT(sp_patches_read(&slide, 1, reqs, N_REQS, &c, want, st, err, sizeof err),
                         SP_OK);
            check_order(slide, reqs, want, c);
            check_order(slide, reqs, want, config(1, 1, 1, dtypes[d], (sp_batch_layout)layout));
            check_order(slide, reqs, want, config(7, 5, 3, dtypes[d], (sp_batch_layout)layout));
            free(want);
        }
    }
}

static void sleep_ms(int ms) {
    struct timespec t = {0, ms * 1000000L};
    nanosleep(&t, NULL);
}

static void test_bounded_and_early_destroy(sp_slide *slide, const sp_patch_request *reqs) {
    sp_loader_config c = config(2, 3, 1, SP_BATCH_FLOAT32, SP_BATCH_NCHW);
    sp_loader *l = NULL;
    char err[256];
    CHECK_EQ_INT(sp_loader_create(&slide, 1, reqs, N_REQS, &c, &l, err, sizeof err), SP_OK);
    sp_batch *kept = NULL;
    CHECK_EQ_INT(sp_loader_next(l, &kept), SP_OK);
    sp_loader_stats s = {.struct_size = sizeof s};
    for (int i = 0; i < 2000; i++) { /* wait until the loader has filled its queue */
        sp_loader_get_stats(l, &s);
        if (s.batches_made == 4) {
            break;
        }
        sleep_ms(5);
    }
    sleep_ms(50);
    sp_loader_get_stats(l, &s);
    size_t batch_bytes = 2 * SIZE * SIZE * 3 * 4;
    CHECK_EQ_INT(s.batches_made, 4); /* one taken, three ready: it stops there */
    CHECK_EQ_INT(s.bytes_held, 3 * (int64_t)batch_bytes);
    CHECK_EQ_INT(s.bytes_held_peak, 3 * (int64_t)batch_bytes);
    CHECK_EQ_INT(s.batches_taken, 1);
    CHECK(s.pinned == 0);
    sp_loader_destroy(l); /* three batches queued, the thread waiting: all freed (ASan) */
    float first = ((float *)kept->data)[0];
    CHECK(isfinite(first)); /* the batch outlives its loader */
    sp_batch_free(kept);
    /* Destroyed at once, while the first batch is being made. */
    CHECK_EQ_INT(sp_loader_create(&slide, 1, reqs, N_REQS, &c, &l, err, sizeof err), SP_OK);
    sp_loader_destroy(l);
    sp_loader_destroy(NULL);
    sp_batch_free(NULL);
}

static void test_failures_and_refusals(sp_slide *slide, const sp_patch_request *reqs) {
    sp_patch_request bad[3] = {reqs[0], reqs[1], reqs[2]};
    sp_loader_config c = config(3, 1, 2, SP_BATCH_UINT8, SP_BATCH_NHWC);
    /* A patch far outside the slide is transparent, not an error; a scaled read beyond the
     * limit fails alone. */
    bad[1].level = -1;
    bad[1].downsample = 1e6;
    bad[1].x = 0;
    sp_loader *l = NULL;
    char err[256] = "";
    CHECK_EQ_INT(sp_loader_create(&slide, 1, bad, 3, &c, &l, err, sizeof err), SP_OK);
    sp_batch *b = NULL;
    CHECK_EQ_INT(sp_loader_next(l, &b), SP_OK);
    if (b != NULL) {
        CHECK_EQ_INT(b->statuses[0], SP_OK);
        CHECK(b->statuses[1] != SP_OK);
        CHECK_EQ_INT(b->statuses[2], SP_OK);
        const uint8_t *p = (const uint8_t *)b->data + SIZE * SIZE * 3;
        int zero = 1;
        for (int i = 0; i < SIZE * SIZE * 3; i++) {
            zero &= p[i] == 0;
        }
        CHECK(zero);
        sp_batch_free(b);
    }
    sp_loader_stats s = {.struct_size = sizeof s};
    CHECK_EQ_INT(sp_loader_get_stats(l, &s), SP_OK);
    CHECK_EQ_INT(s.patches_failed, 1);
    sp_loader_destroy(l);

    bad[1] = reqs[1];
    bad[1].level = 7;
    err[0] = '\0';
    CHECK_EQ_INT(sp_loader_create(&slide, 1, bad, 3, &c, &l, err, sizeof err), SP_E_INVALID_ARG);
    CHECK(l == NULL && strstr(err, "request 1") != NULL && strstr(err, "1 levels") != NULL);
    bad[1].level = 0;
    bad[1].slide = 2;
    CHECK_EQ_INT(sp_loader_create(&slide, 1, bad, 3, &c, &l, err, sizeof err), SP_E_INVALID_ARG);
    CHECK(strstr(err, "slide 2 of 1") != NULL);
    bad[1].slide = 0;
    sp_loader_config z = c;
    z.prefetch = 0;
    CHECK_EQ_INT(sp_loader_create(&slide, 1, bad, 3, &z, &l, err, sizeof err), SP_E_INVALID_ARG);
    z = c;
    z.format.dtype = SP_BATCH_FLOAT32;
    z.format.std[1] = 0;
    CHECK_EQ_INT(sp_loader_create(&slide, 1, bad, 3, &z, &l, err, sizeof err), SP_E_INVALID_ARG);
    z = c;
    z.numa_place = 1;
    z.numa_node = 99;
    CHECK_EQ_INT(sp_loader_create(&slide, 1, bad, 3, &z, &l, err, sizeof err), SP_E_INVALID_ARG);
    CHECK(strstr(err, "no NUMA node 99") != NULL);
    z = c;
    z.struct_size = 8;
    CHECK_EQ_INT(sp_loader_create(&slide, 1, bad, 3, &z, &l, err, sizeof err), SP_E_INVALID_ARG);
    z = c;
    z.size = 65536;
    z.batch_size = 1 << 20;
    CHECK_EQ_INT(sp_loader_create(&slide, 1, bad, 3, &z, &l, err, sizeof err), SP_E_LIMIT);
    /* No requests: a loader with no batches. */
    CHECK_EQ_INT(sp_loader_create(&slide, 1, NULL, 0, &c, &l, err, sizeof err), SP_OK);
    CHECK(sp_loader_next(l, &b) == SP_OK && b == NULL);
    sp_loader_destroy(l);
}

/* IEEE half of a float, from its value: the nearest of the representable halves, ties to the
 * one whose last mantissa bit is 0. A slow reference, independent of the library's bit tricks. */
static uint16_t half_reference(float f) {
    if (isnan(f)) {
        return 0x7e00;
    }
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    double a = fabs((double)f);
    if (a >= 65520.0) {
        return sign | 0x7c00;
    }
    uint16_t best = 0;
    double best_d = INFINITY;
    for (uint32_t h = 0; h < 0x7c00; h++) {
        int e = (int)(h >> 10), m = (int)(h & 0x3ff);
        double v = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
        double d = fabs(v - a);
        if (d < best_d || (d == best_d && (h & 1) == 0)) {
            best_d = d;
            best = (uint16_t)h;
        }
        if (v > a) {
            break;
        }
    }
    return sign | best;
}

static void test_float16_rounding(void) {
    uint8_t rgb[256 * 3];
    for (int v = 0; v < 256; v++) {
        rgb[v * 3] = rgb[v * 3 + 1] = rgb[v * 3 + 2] = (uint8_t)v;
    }
    const float means[][3] = {{0.5f, 0.1f, 0.9f}, {0.5f, 0.5f, 0.5f}, {0.0f, 0.3f, 1.0f}};
    const float stds[][3] = {{0.229f, 1.0f, 3.0f}, {1e4f, 3e3f, 7e4f}, {1e-5f, 3e-6f, 2e-5f}};
    for (int k = 0; k < 3; k++) {
        sp_batch_format f = {.dtype = SP_BATCH_FLOAT16, .layout = SP_BATCH_NHWC};
        memcpy(f.mean, means[k], sizeof f.mean);
        memcpy(f.std, stds[k], sizeof f.std);
        uint16_t out[256 * 3];
        CHECK_EQ_INT(sp_batch_convert(rgb, 1, 256, 1, &f, out), SP_OK);
        int wrong = 0;
        for (int v = 0; v < 256; v++) {
            for (int c = 0; c < 3; c++) {
                float x = ((float)v / 255.0f - f.mean[c]) / f.std[c];
                wrong += out[v * 3 + c] != half_reference(x);
            }
        }
        CHECK_EQ_INT(wrong, 0);
    }
    sp_batch_format bad = {.dtype = (sp_batch_dtype)9};
    CHECK_EQ_INT(sp_batch_convert(rgb, 1, 256, 1, &bad, rgb), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_batch_dtype_bytes((sp_batch_dtype)9), 0);
}

void unit_run(void) {
    test_float16_rounding();
    const char *data = unit_testdata();
    if (data == NULL) {
        unit_skip("../shared/testdata is absent");
        return;
    }
    char path[4096], err[512];
    snprintf(path, sizeof path, "%s/aperio/CMU-1-Small-Region.svs", data);
    sp_slide *slide = NULL;
    CHECK_EQ_INT(sp_slide_open(path, &slide, err, sizeof err), SP_OK);
    if (slide == NULL) {
        fprintf(stderr, "%s: %s\n", path, err);
        return;
    }
    int64_t w, h;
    sp_slide_level_dimensions(slide, 0, &w, &h);
    sp_patch_request reqs[N_REQS];
    make_requests(reqs, N_REQS, w, h);
    test_order_and_bytes(slide, reqs);
    test_bounded_and_early_destroy(slide, reqs);
    test_failures_and_refusals(slide, reqs);
    sp_slide_close(slide);
}
