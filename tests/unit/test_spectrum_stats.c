/* test_spectrum_stats.c — the spectral statistics' pieces: the statistics record and its merge
 * (exact counts, order-fixed sums, mean and std), the binning of one dB value against the
 * definition at and next to every bin edge, the vectorised dB function against double-precision
 * log10, the options' ranges, and sp_spectrum_compute on a synthetic slide giving the same bits
 * for any thread count and block height (and the full spectrum of a constant patch: zeros), and
 * the grey op the engine runs for the job giving the kernel's own grey values and statistics. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ops/spectrum_grey.h"
#include "ops/spectrum_kernel.h"
#include "slidepipe.h"
#include "unit.h"

/* The definition: numpy.histogram's bin of a value with edges -40 + i/4, the last bin closed. */
static int reference_slot(double db) {
    if (db < -40.0) {
        return 0;
    }
    if (db > 160.0) {
        return SP_SPECTRUM_SLOTS - 1;
    }
    /* Like numpy: a first guess from (db + 40) * 4, which rounding can push over an edge (as for
     * -1e-45), then settled by comparing with the exact edges. */
    int b = (int)floor((db + 40.0) * 4.0);
    b = b > 799 ? 799 : b;
    if (db < -40.0 + 0.25 * b) {
        b--;
    } else if (b < 799 && db >= -40.0 + 0.25 * (b + 1)) {
        b++;
    }
    return b + 1;
}

static void test_slots(void) {
    int bad = 0;
    for (int i = 0; i <= 800; i++) {
        float edge = -40.0f + 0.25f * (float)i;
        float probes[3] = {nextafterf(edge, -1e9f), edge, nextafterf(edge, 1e9f)};
        for (int p = 0; p < 3; p++) {
            bad += sp_spectrum_slot(probes[p]) != reference_slot(probes[p]);
        }
    }
    for (float v = -130.0f; v < 200.0f; v += 0.0137f) {
        bad += sp_spectrum_slot(v) != reference_slot(v);
    }
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(sp_spectrum_slot(-120.0f), 0);
    CHECK_EQ_INT(sp_spectrum_slot(160.0f), 800);
    CHECK_EQ_INT(sp_spectrum_slot(nextafterf(160.0f, 1e9f)), 801);
}

static void test_db(void) {
    double worst = 0;
    for (double p = 0; p < 1e16; p = p * 1.0007 + 1e-15) {
        float pf = (float)p;
        double ref = 20.0 * log10(sqrt((double)pf) + 1e-6);
        double e = fabs(sp_spectrum_db(pf) - ref);
        worst = e > worst ? e : worst;
    }
    printf("dB function: largest error %.3g dB\n", worst);
    CHECK(worst < 5e-5); /* a few float ulps of values up to 160 dB */
    CHECK(fabs(sp_spectrum_db(0.0f) + 120.0) < 1e-4);
}

static void fill(sp_spectrum_stats *s, int64_t seed) {
    sp_spectrum_stats_init(s);
    s->patches = seed;
    s->values = seed * 16;
    for (int i = 0; i < SP_SPECTRUM_BINS; i++) {
        s->histogram[i] = (seed * 31 + i) % 7;
    }
    s->sum = 0.1 * (double)seed + 1e-9;
    s->sum_squares = 3.3 * (double)seed;
}

static void test_stats_and_merge(void) {
    sp_spectrum_stats a, b, c, total;
    fill(&a, 3);
    fill(&b, 5);
    fill(&c, 11);
    CHECK_EQ_INT(a.size, sizeof a);
    sp_spectrum_stats_init(&total);
    CHECK(isnan(sp_spectrum_stats_mean(&total)) && isnan(sp_spectrum_stats_std(&total)));
    CHECK_EQ_INT(sp_spectrum_stats_merge(&total, &a), SP_OK);
    CHECK_EQ_INT(sp_spectrum_stats_merge(&total, &b), SP_OK);
    CHECK_EQ_INT(sp_spectrum_stats_merge(&total, &c), SP_OK);
    CHECK_EQ_INT(total.patches, 19);
    CHECK_EQ_INT(total.values, 19 * 16);
    CHECK_EQ_INT(total.histogram[5], a.histogram[5] + b.histogram[5] + c.histogram[5]);
    /* The same merges in the same order give the same bits. */
    sp_spectrum_stats again;
    sp_spectrum_stats_init(&again);
    sp_spectrum_stats_merge(&again, &a);
    sp_spectrum_stats_merge(&again, &b);
    sp_spectrum_stats_merge(&again, &c);
    CHECK(memcmp(&again, &total, sizeof again) == 0);
    CHECK(sp_spectrum_stats_mean(&total) == total.sum / 304.0);
    /* Mean and std of four values 1, 2, 3, 4 (sum 10, squares 30): 2.5 and sqrt(1.25). */
    sp_spectrum_stats s;
    sp_spectrum_stats_init(&s);
    s.values = 4;
    s.sum = 10;
    s.sum_squares = 30;
    CHECK(sp_spectrum_stats_mean(&s) == 2.5);
    CHECK(fabs(sp_spectrum_stats_std(&s) - sqrt(1.25)) < 1e-15);
    s.sum_squares = 24.9999999; /* a variance that rounding made negative */
    CHECK(sp_spectrum_stats_std(&s) == 0.0);
    sp_spectrum_stats junk;
    memset(&junk, 0, sizeof junk);
    CHECK_EQ_INT(sp_spectrum_stats_merge(&total, &junk), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_spectrum_stats_merge(NULL, &a), SP_E_INVALID_ARG);
}

static void test_options(void) {
    sp_spectrum_options *o = NULL;
    CHECK_EQ_INT(sp_spectrum_options_create(&o), SP_OK);
    CHECK_EQ_INT(sp_spectrum_options_get(o, SP_SPECTRUM_PATCH), 256);
    CHECK_EQ_INT(sp_spectrum_options_get(o, SP_SPECTRUM_BLOCK), 1024);
    CHECK_EQ_INT(sp_spectrum_options_set(o, SP_SPECTRUM_PATCH, 3), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_spectrum_options_set(o, SP_SPECTRUM_PATCH, 4097), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_spectrum_options_set(o, SP_SPECTRUM_THREADS, -1), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_spectrum_options_set(o, (sp_spectrum_option)9, 1), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_spectrum_options_get(o, (sp_spectrum_option)9), -1);
    sp_spectrum_options_destroy(o);
    sp_spectrum_options_destroy(NULL);
}

/* A constant patch has a spectrum of zeros but for F[0][0]: P*P - 1 values of -120 dB. */
static void test_constant_patch(void) {
    enum { P = 16 };
    uint8_t rgb[P * P * 3];
    memset(rgb, 200, sizeof rgb);
    fftwf_plan plan = sp_spectrum_plan_create(P);
    sp_spectrum_kernel k;
    CHECK(plan != NULL);
    CHECK_EQ_INT(sp_spectrum_kernel_init(&k, P, plan), SP_OK);
    sp_spectrum_sums sums = {0, 0};
    sp_spectrum_patch(&k, rgb, P * 3, &sums);
    CHECK_EQ_INT(k.hist[0], P * P - 1);
    float grey = (200.0f * 0.299f + 200.0f * 0.587f) + 200.0f * 0.114f;
    double dc = 20.0 * log10((double)grey * P * P + 1e-6);
    double expect = (P * P - 1) * -120.0 + dc;
    CHECK(fabs(sums.sum - expect) < 1e-3);
    sp_spectrum_kernel_free(&k);
    sp_spectrum_plan_destroy(plan);
}

/* The spectrum-grey op gives, for every colour, the grey value the kernel computes from its
 * tables; and a patch through the op and sp_spectrum_patch_grey gives the same histogram and the
 * same sums, bit for bit, as sp_spectrum_patch on the RGB8 pixels. */
static void test_grey_op_matches_kernel(void) {
    enum { P = 32 };
    fftwf_plan plan = sp_spectrum_plan_create(P);
    CHECK(plan != NULL);
    sp_spectrum_kernel a, b;
    CHECK_EQ_INT(sp_spectrum_kernel_init(&a, P, plan), SP_OK);
    CHECK_EQ_INT(sp_spectrum_kernel_init(&b, P, plan), SP_OK);
    /* All 2^24 colours, one row of 65536 pixels per (red, green-high) pair at a time. */
    uint8_t *row = malloc(65536 * 3);
    float *grey = malloc(65536 * sizeof(float));
    CHECK(row != NULL && grey != NULL);
    int64_t mismatches = 0;
    for (int r = 0; row != NULL && grey != NULL && r < 256; r++) {
        for (int i = 0; i < 65536; i++) {
            row[3 * i] = (uint8_t)r;
            row[3 * i + 1] = (uint8_t)(i >> 8);
            row[3 * i + 2] = (uint8_t)i;
        }
        sp_op_block blk = {.src = row,
                           .src_stride = 65536 * 3,
                           .width = 65536,
                           .height = 1,
                           .dst = grey,
                           .dst_stride = 65536,
                           .dst_plane = 65536};
        CHECK_EQ_INT(sp_op_spectrum_grey.cpu(NULL, &blk), SP_OK);
        for (int i = 0; i < 65536; i++) {
            float want = (a.red[r] + a.green[i >> 8]) + a.blue[i & 255];
            mismatches += memcmp(&want, &grey[i], sizeof want) != 0;
        }
    }
    CHECK_EQ_INT(mismatches, 0);
    /* A patch of pseudo-random pixels (a fixed LCG), inside a wider block so strides matter. */
    enum { W = 3 * P };
    uint8_t *rgb = malloc(W * P * 3);
    float *g = malloc(W * P * sizeof(float));
    CHECK(rgb != NULL && g != NULL);
    if (rgb != NULL && g != NULL) {
        uint32_t seed = 12345;
        for (int i = 0; i < W * P * 3; i++) {
            seed = seed * 1664525u + 1013904223u;
            rgb[i] = (uint8_t)(seed >> 24);
        }
        sp_op_block blk = {.src = rgb,
                           .src_stride = W * 3,
                           .width = W,
                           .height = P,
                           .dst = g,
                           .dst_stride = W,
                           .dst_plane = W * P};
        CHECK_EQ_INT(sp_op_spectrum_grey.cpu(NULL, &blk), SP_OK);
        sp_spectrum_sums sa = {0, 0}, sb = {0, 0};
        sp_spectrum_patch(&a, rgb + P * 3, W * 3, &sa);
        sp_spectrum_patch_grey(&b, g + P, W, &sb);
        CHECK(memcmp(&sa, &sb, sizeof sa) == 0);
        CHECK(memcmp(a.hist, b.hist, sizeof a.hist) == 0);
        CHECK(sa.sum != 0.0);
    }
    free(rgb);
    free(g);
    free(row);
    free(grey);
    sp_spectrum_kernel_free(&a);
    sp_spectrum_kernel_free(&b);
    sp_spectrum_plan_destroy(plan);
}

static bool run_compute(sp_slide *s, int64_t threads, int64_t block, int64_t patch,
                        sp_spectrum_stats *out) {
    sp_spectrum_options *o = NULL;
    sp_spectrum_options_create(&o);
    sp_spectrum_options_set(o, SP_SPECTRUM_THREADS, threads);
    sp_spectrum_options_set(o, SP_SPECTRUM_BLOCK, block);
    sp_spectrum_options_set(o, SP_SPECTRUM_PATCH, patch);
    char err[256];
    sp_status st = sp_spectrum_compute(s, o, NULL, NULL, out, err, sizeof err);
    if (st != SP_OK) {
        fprintf(stderr, "compute: %s\n", err);
    }
    sp_spectrum_options_destroy(o);
    return st == SP_OK;
}

/* The last progress call and whether done ever went down. */
typedef struct progress_seen {
    int64_t calls, done, total;
    bool backwards;
} progress_seen;

static void record_progress(void *user, int64_t done, int64_t total) {
    progress_seen *p = user;
    p->backwards |= done < p->done;
    p->calls++;
    p->done = done;
    p->total = total;
}

static void test_compute_is_deterministic(void) {
    char path[] = "/tmp/sp-spectrum-unit-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    char err[256];
    CHECK_EQ_INT(sp_synth_write(path, 1500, 7, err, sizeof err), SP_OK);
    sp_slide *s = NULL;
    CHECK_EQ_INT(sp_slide_open(path, &s, err, sizeof err), SP_OK);
    if (s == NULL) {
        unlink(path);
        return;
    }
    sp_spectrum_stats one, four, other_block;
    CHECK(run_compute(s, 1, 128, 64, &one));
    CHECK(run_compute(s, 4, 128, 64, &four));
    CHECK(run_compute(s, 3, 1024, 64, &other_block));
    CHECK_EQ_INT(one.patches, (1500 / 64) * (1500 / 64));
    CHECK(one.sum == four.sum && one.sum_squares == four.sum_squares);
    CHECK(one.sum == other_block.sum && one.sum_squares == other_block.sum_squares);
    CHECK(memcmp(one.histogram, four.histogram, sizeof one.histogram) == 0);
    CHECK(memcmp(one.histogram, other_block.histogram, sizeof one.histogram) == 0);
    int64_t binned = one.below + one.above;
    for (int i = 0; i < SP_SPECTRUM_BINS; i++) {
        binned += one.histogram[i];
    }
    CHECK_EQ_INT(binned, one.values);
    /* Progress: calls in order, ending with all chunks done. */
    progress_seen seen = {0};
    sp_spectrum_stats with_progress;
    sp_spectrum_options *po = NULL;
    sp_spectrum_options_create(&po);
    sp_spectrum_options_set(po, SP_SPECTRUM_THREADS, 2);
    sp_spectrum_options_set(po, SP_SPECTRUM_PATCH, 64);
    CHECK_EQ_INT(
        sp_spectrum_compute(s, po, record_progress, &seen, &with_progress, err, sizeof err), SP_OK);
    CHECK(seen.calls > 0 && !seen.backwards);
    CHECK(seen.total > 1 && seen.done == seen.total);
    CHECK(with_progress.sum == one.sum && with_progress.sum_squares == one.sum_squares);
    sp_spectrum_options_destroy(po);
    /* Errors: a block that is not a multiple of the patch, a level that does not exist. */
    sp_spectrum_options *o = NULL;
    sp_spectrum_options_create(&o);
    sp_spectrum_options_set(o, SP_SPECTRUM_BLOCK, 100);
    sp_spectrum_stats bad;
    CHECK_EQ_INT(sp_spectrum_compute(s, o, NULL, NULL, &bad, err, sizeof err), SP_E_INVALID_ARG);
    CHECK(strstr(err, "multiple") != NULL);
    sp_spectrum_options_set(o, SP_SPECTRUM_BLOCK, 1024);
    sp_spectrum_options_set(o, SP_SPECTRUM_LEVEL, 40);
    CHECK_EQ_INT(sp_spectrum_compute(s, o, NULL, NULL, &bad, err, sizeof err), SP_E_INVALID_ARG);
    CHECK(strstr(err, "level 40") != NULL);
    CHECK_EQ_INT(sp_spectrum_compute(NULL, o, NULL, NULL, &bad, err, sizeof err), SP_E_INVALID_ARG);
    sp_spectrum_options_destroy(o);
    sp_slide_close(s);
    unlink(path);
}

void unit_run(void) {
    test_slots();
    test_db();
    test_stats_and_merge();
    test_options();
    test_constant_patch();
    test_grey_op_matches_kernel();
    test_compute_is_deterministic();
}
