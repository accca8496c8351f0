/* test_cuda_loader.c — a CUDA loader (cuda = 1: the steps after the read on the GPU, JPEG patches
 * read there by nvJPEG; src/cuda/cuda_batch.c) against sp_patches_read on the CPU, through the
 * public API, on a real slide: with the CPU's decode (SLIDEPIPE_NVJPEG=0) the batches equal the
 * CPU's byte for byte, with Macenko, the geometric augmentation, flips and HED jitter and the
 * photometric augmentation, in float16 NCHW and uint8 NHWC, at a patch size that is no multiple
 * of any kernel's block, with reads at a downsample among them; with nvJPEG (where it is found)
 * every value is within docs/gpu.md's one level. Small enough for compute-sanitizer
 * (bench/bench_gpu.sh runs it under memcheck). Skipped where no CUDA device is present. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "slidepipe.h"
#include "unit.h"

enum { SIZE = 45, N_REQS = 19, BATCH = 8 };

static void make_requests(sp_patch_request *r, int64_t w, int64_t h) {
    uint64_t s = 777;
    for (int i = 0; i < N_REQS; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        r[i] = (sp_patch_request){.slide = 0,
                                  .level = i % 4 == 3 ? -1 : 0,
                                  .downsample = 1.5,
                                  .x = (int64_t)((s >> 20) % (uint64_t)(w - 2 * SIZE)),
                                  .y = (int64_t)((s >> 40) % (uint64_t)(h - 2 * SIZE)),
                                  .seed = s};
    }
}

/* Every batch of a CUDA loader, copied back to the host into out; the patches read on the
 * device into *on_device. */
static void gpu_batches(sp_slide *slide, const sp_patch_request *reqs, const sp_loader_config *c,
                        uint8_t *out, size_t patch_bytes, int64_t *on_device) {
    sp_loader_config g = *c;
    g.cuda = 1;
    g.cuda_device = 0;
    sp_loader *l = NULL;
    char err[512] = "";
    CHECK_EQ_INT(sp_loader_create(&slide, 1, reqs, N_REQS, &g, &l, err, sizeof err), SP_OK);
    if (l == NULL) {
        fprintf(stderr, "loader: %s\n", err);
        return;
    }
    sp_cuda_context *ctx = NULL;
    CHECK_EQ_INT(sp_cuda_context_create(0, &ctx, err, sizeof err), SP_OK);
    sp_batch *b;
    int64_t done = 0;
    while (ctx != NULL && sp_loader_next(l, &b) == SP_OK && b != NULL) {
        CHECK_EQ_INT(b->device, 0);
        CHECK_EQ_INT(b->first, done);
        CHECK_EQ_INT(sp_cuda_copy_to_host(ctx, out + done * patch_bytes, b->data, b->bytes), SP_OK);
        done += b->count;
        sp_batch_free(b);
    }
    CHECK_EQ_INT(done, N_REQS);
    CHECK(strcmp(sp_loader_error(l), "") == 0);
    sp_loader_stats st = {.struct_size = sizeof st};
    CHECK_EQ_INT(sp_loader_get_stats(l, &st), SP_OK);
    CHECK_EQ_INT(st.patches_failed, 0);
    *on_device = st.patches_read_on_device;
    sp_loader_destroy(l);
    sp_cuda_context_destroy(ctx);
}

static void compare(sp_slide *slide, const sp_patch_request *reqs, sp_loader_config *c) {
    size_t patch_bytes = (size_t)SIZE * SIZE * 3 * (size_t)sp_batch_dtype_bytes(c->format.dtype);
    uint8_t *want = calloc(N_REQS, patch_bytes), *got = calloc(N_REQS, patch_bytes);
    sp_status statuses[N_REQS];
    char err[512] = "";
    CHECK_EQ_INT(sp_patches_read(&slide, 1, reqs, N_REQS, c, want, statuses, err, sizeof err),
                 SP_OK);
    int64_t on_device = -1;
    setenv("SLIDEPIPE_NVJPEG", "0", 1); /* the CPU's decode: the steps alone are compared */
    gpu_batches(slide, reqs, c, got, patch_bytes, &on_device);
    CHECK_EQ_INT(on_device, 0);
    CHECK(memcmp(got, want, N_REQS * patch_bytes) == 0);
    unsetenv("SLIDEPIPE_NVJPEG");
    if (c->format.dtype == SP_BATCH_UINT8 && sp_cuda_library_found(SP_CUDA_LIB_NVJPEG, NULL, 0)) {
        gpu_batches(slide, reqs, c, got, patch_bytes, &on_device);
        CHECK(on_device > 0); /* the level-0 ones */
        int worst = 0;
        for (size_t i = 0; i < N_REQS * patch_bytes; i++) {
            int d = abs((int)got[i] - (int)want[i]);
            worst = d > worst ? d : worst;
        }
        printf("nvJPEG reads: %lld patches on the device, largest difference %d\n",
               (long long)on_device, worst);
        CHECK(worst <= 1);
    }
    free(want);
    free(got);
}

void unit_run(void) {
    char why[256] = "";
    if (sp_cuda_device_count(why, sizeof why) < 1) {
        char msg[400];
        snprintf(msg, sizeof msg, "no CUDA device: %s", why);
        unit_skip(msg);
        return;
    }
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
        return;
    }
    int64_t w, h;
    sp_slide_level_dimensions(slide, 0, &w, &h);
    sp_patch_request reqs[N_REQS];
    make_requests(reqs, w, h);
    sp_stains stains;
    CHECK_EQ_INT(sp_stains_estimate(slide, 512, &stains, err, sizeof err), SP_OK);
    sp_geometry_params geometry;
    sp_geometry_params_default(&geometry);
    geometry.rotation[0] = -30;
    geometry.rotation[1] = 30;
    geometry.elastic = 1;
    geometry.elastic_sigma = 4;
    sp_photometric_params photometric = {.struct_size = sizeof photometric,
                                         .jitter_p = 1,
                                         .brightness = 0.2,
                                         .contrast = 0.2,
                                         .saturation = 0.2,
                                         .hue = 0.05,
                                         .blur_p = 0.5,
                                         .blur_sigma_min = 0.5,
                                         .blur_sigma_max = 1,
                                         .noise_p = 0.5,
                                         .noise_sigma_min = 1,
                                         .noise_sigma_max = 5};
    sp_loader_config c = {.struct_size = sizeof c,
                          .size = SIZE,
                          .batch_size = BATCH,
                          .prefetch = 2,
                          .threads = 2,
                          .normalize = SP_NORMALIZE_MACENKO,
                          .source_stains = &stains,
                          .dihedral = 1,
                          .hed_sigma = 0.05,
                          .geometry = &geometry,
                          .photometric = &photometric};
    sp_stains_reference(&c.target);
    c.format = (sp_batch_format){
        SP_BATCH_FLOAT16, SP_BATCH_NCHW, {0.5f, 0.5f, 0.5f}, {0.25f, 0.25f, 0.25f}};
    compare(slide, reqs, &c);
    /* the read alone, in bytes: what nvJPEG's decode is held against */
    sp_loader_config plain = {.struct_size = sizeof plain,
                              .size = SIZE,
                              .batch_size = BATCH,
                              .prefetch = 2,
                              .threads = 2};
    plain.format = (sp_batch_format){SP_BATCH_UINT8, SP_BATCH_NHWC, {0, 0, 0}, {1, 1, 1}};
    compare(slide, reqs, &plain);
    sp_slide_close(slide);
}
