/* test_batch.c — sp_read_regions against sp_slide_read_region: many regions of several slides of
 * different formats (Aperio JPEG and JPEG 2000, generic TIFF with Deflate and 4:2:0 JPEG, DICOM
 * JPEG frames, a strip TIFF), RGBA and RGB, odd strides, regions straddling the slide's edge
 * and lying outside it, on 1, 2 and 5 threads, must give the same bytes as one read at a time;
 * bad requests (a level that does not exist, a NULL buffer, a short stride) fail alone with
 * their own status while the others succeed. Uses only slidepipe.h. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "slidepipe.h"
#include "unit.h"

#define N_SLIDES 6
#define N_REQS 60

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static int64_t rand_in(int64_t lo, int64_t hi) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return lo + (int64_t)(rng % (uint64_t)(hi - lo + 1));
}

void unit_run(void) {
    const char *data = unit_testdata();
    if (data == NULL) {
        unit_skip("../shared/testdata is absent");
        return;
    }
    const char *names[N_SLIDES] = {
        "aperio/CMU-1-Small-Region.svs", "aperio/tcga-cr-7395-01a-01-ts1.svs",
        "generic-tiff/boxes.tiff",       "generic-tiff/tiff_tiled_ycbcr_jpeg_2x2_sampling.tif",
        "dicom/cmu-1-small-region",      "strip-tiff/kidney-48-5.tif",
    };
    sp_slide *slides[N_SLIDES];
    for (int i = 0; i < N_SLIDES; i++) {
        char path[4096], err[512];
        snprintf(path, sizeof path, "%s/%s", data, names[i]);
        CHECK_EQ_INT(sp_slide_open(path, &slides[i], err, sizeof err), SP_OK);
        if (slides[i] == NULL) {
            fprintf(stderr, "%s: %s\n", path, err);
            return;
        }
    }
    /* The single reads run with the cache off (tiles decoded in part, straight into the
     * buffer); the batches with it on, so they also go through second-touch whole decodes and
     * cache hits: all must agree. */
    sp_cache_set_capacity(0);
    sp_region_request reqs[N_REQS];
    uint8_t *want[N_REQS], *got[N_REQS];
    sp_status want_st[N_REQS];
    for (int k = 0; k < N_REQS; k++) {
        sp_slide *s = slides[k % N_SLIDES];
        int32_t level = (int32_t)rand_in(0, sp_slide_level_count(s) - 1);
        int64_t lw, lh;
        double ds;
        sp_slide_level_dimensions(s, level, &lw, &lh);
        sp_slide_level_downsample(s, level, &ds);
        int64_t w = rand_in(1, 300), h = rand_in(1, 300);
        int64_t x = rand_in(-w / 2, lw), y = rand_in(-h / 2, lh); /* some straddle the edge */
        sp_pixel_format fmt = k % 3 == 0 ? SP_PIXEL_RGB8 : SP_PIXEL_RGBA8;
        int64_t stride = w * sp_pixel_format_bytes(fmt) + (k % 4) * 3; /* odd strides too */
        reqs[k] = (sp_region_request){s, level, (int64_t)((double)x * ds), (int64_t)((double)y * ds),
                                      w, h, fmt, NULL, stride};
        if (k == 7) {
            reqs[k].level = 99; /* no such level */
        }
        if (k == 13) {
            reqs[k].stride = 1; /* shorter than a row */
        }
        want[k] = malloc((size_t)(stride * h));
        got[k] = malloc((size_t)(stride * h));
        memset(want[k], 0xa5, (size_t)(stride * h));
        want_st[k] = sp_slide_read_region(s, fmt, want[k], reqs[k].stride, reqs[k].level,
                                          reqs[k].x, reqs[k].y, w, h);
    }
    CHECK_EQ_INT(want_st[7], SP_E_INVALID_ARG);
    CHECK_EQ_INT(want_st[13], SP_E_INVALID_ARG);
    sp_cache_set_capacity(INT64_C(64) << 20);
    int threads[] = {1, 2, 5, 0};
    for (int t = 0; t < 4; t++) {
        sp_status statuses[N_REQS + 1];
        sp_region_request batch[N_REQS + 1];
        memcpy(batch, reqs, sizeof reqs);
        for (int k = 0; k < N_REQS; k++) {
            memset(got[k], 0xa5, (size_t)(reqs[k].stride * reqs[k].height));
            batch[k].dst = got[k];
        }
        batch[N_REQS] = reqs[0];
        batch[N_REQS].dst = NULL; /* no buffer */
        sp_status st = sp_read_regions(batch, N_REQS + 1, threads[t], statuses);
        CHECK_EQ_INT(st, SP_E_INVALID_ARG); /* the first failure in request order: #7 */
        CHECK_EQ_INT(statuses[N_REQS], SP_E_INVALID_ARG);
        int same = 0;
        for (int k = 0; k < N_REQS; k++) {
            CHECK_EQ_INT(statuses[k], want_st[k]);
            size_t bytes = (size_t)(reqs[k].stride * reqs[k].height);
            same += memcmp(got[k], want[k], bytes) == 0;
        }
        CHECK_EQ_INT(same, N_REQS);
        /* without a status array, the verdict alone */
        CHECK_EQ_INT(sp_read_regions(batch, 7, threads[t], NULL), SP_OK);
    }
    CHECK_EQ_INT(sp_read_regions(NULL, 3, 1, NULL), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_read_regions(NULL, 0, 1, NULL), SP_OK);
    for (int k = 0; k < N_REQS; k++) {
        free(want[k]);
        free(got[k]);
    }
    for (int i = 0; i < N_SLIDES; i++) {
        sp_slide_close(slides[i]);
    }
}
