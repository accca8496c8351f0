/* test_cuda_stains.c — the GPU's Reinhard normalization and stain augmentation
 * (src/cuda/stain_kernels.cu) against the CPU reference (src/ops/reinhard.c,
 * src/ops/stain_augment.c). Everywhere: the `reinhard` op has a kernel registered by name and the
 * calls refuse bad arguments. With a GPU: random pixels and real-looking stains, the device
 * results within one level of the CPU's with at least 99.9% of the bytes equal (the GPU's pow,
 * cbrt and exp are not correctly rounded, so a value within an ulp of a half-integer may round
 * the other way), the `reinhard` op through the engine's runner likewise. Without a device the
 * binary reports itself skipped. */
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_ops.h"
#include "cuda/cuda_stains.h"
#include "ops/op.h"
#include "ops/reinhard.h"
#include "ops/stains.h"
#include "slidepipe.h"
#include "unit.h"

static uint8_t *random_pixels(int64_t n, uint64_t seed) {
    uint8_t *p = malloc((size_t)n * 3);
    for (int64_t i = 0; i < n * 3; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = (uint8_t)(seed >> 56);
    }
    return p;
}

/* Bytes that differ by more than one, and the fraction equal. */
static void compare(const uint8_t *a, const uint8_t *b, size_t n, const char *what) {
    size_t far = 0, equal = 0;
    for (size_t i = 0; i < n; i++) {
        int d = abs((int)a[i] - (int)b[i]);
        far += d > 1;
        equal += d == 0;
    }
    printf("%s: %zu of %zu bytes equal, %zu off by more than one\n", what, equal, n, far);
    CHECK_EQ_INT(far, 0);
    CHECK((double)equal >= 0.999 * (double)n);
}

static void test_everywhere(void) {
    CHECK(sp_cuda_op_kernel("reinhard") == sp_cuda_op_reinhard);
    CHECK(sp_cuda_op_kernel("macenko") == sp_cuda_op_macenko);
    sp_reinhard_stats ref, bad;
    sp_reinhard_reference(&ref);
    bad = ref;
    bad.std[0] = 0;
    uint8_t dummy[3] = {1, 2, 3};
    sp_status st = sp_cuda_reinhard_normalize(&bad, &ref, dummy, 1);
    CHECK(st == SP_E_INVALID_ARG || st == SP_E_UNSUPPORTED);
    sp_stains s;
    sp_stains_reference(&s);
    uint64_t seed = 1;
    st = sp_cuda_stains_augment_patches(&s, dummy, 1, 1, &seed, 2.0);
    CHECK(st == SP_E_INVALID_ARG || st == SP_E_UNSUPPORTED);
    /* the two Macenko maps the device test compares: tabled, and past the table's range */
    sp_stains slide = {{0.65, 0.70, 0.29}, {0.07, 0.99, 0.11}, 1.9, 1.0, 0};
    sp_stains_map map;
    CHECK_EQ_INT(sp_stains_map_init(&slide, &s, &map, NULL), SP_OK);
    CHECK_EQ_INT(map.tabled, 1);
    slide.max_h = 0.02;
    CHECK_EQ_INT(sp_stains_map_init(&slide, &s, &map, NULL), SP_OK);
    CHECK_EQ_INT(map.tabled, 0);
}

static void test_device(void) {
    char why[256] = "";
    if (sp_cuda_device_count(why, sizeof why) <= 0) {
        char msg[320];
        snprintf(msg, sizeof msg, "no CUDA device: %s", why);
        unit_skip(msg);
        return;
    }
    sp_cuda_context *ctx = NULL;
    CHECK_EQ_INT(sp_cuda_context_create(0, &ctx, why, sizeof why), SP_OK);
    if (ctx == NULL) {
        return;
    }
    const int64_t count = 16, patch = 96 * 96, n = count * patch;
    uint8_t *px = random_pixels(n, 5), *cpu = malloc((size_t)n * 3), *gpu = malloc((size_t)n * 3);
    void *dev = NULL;
    CHECK_EQ_INT(sp_cuda_alloc(ctx, (size_t)n * 3, &dev), SP_OK);

    /* Reinhard: from the pixels' own statistics to the reference. */
    sp_reinhard_stats src, ref;
    CHECK_EQ_INT(sp_reinhard_stats_compute(px, n, 0, &src), SP_OK);
    sp_reinhard_reference(&ref);
    memcpy(cpu, px, (size_t)n * 3);
    CHECK_EQ_INT(sp_reinhard_normalize(&src, &ref, cpu, n), SP_OK);
    CHECK_EQ_INT(sp_cuda_upload_sync(dev, px, (size_t)n * 3), SP_OK);
    CHECK_EQ_INT(sp_cuda_reinhard_normalize(&src, &ref, dev, n), SP_OK);
    CHECK_EQ_INT(sp_cuda_copy_to_host(ctx, gpu, dev, (size_t)n * 3), SP_OK);
    compare(cpu, gpu, (size_t)n * 3, "reinhard");

    /* Stain augmentation, one seed per patch. */
    sp_stains s = {{0.65, 0.70, 0.29}, {0.07, 0.99, 0.11}, 1.9, 1.0, 0};
    uint64_t seeds[16];
    for (int i = 0; i < 16; i++) {
        seeds[i] = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
    }
    memcpy(cpu, px, (size_t)n * 3);
    CHECK_EQ_INT(sp_stains_augment_patches(&s, cpu, count, patch, seeds, 0.2, 1), SP_OK);
    CHECK_EQ_INT(sp_cuda_upload_sync(dev, px, (size_t)n * 3), SP_OK);
    CHECK_EQ_INT(sp_cuda_stains_augment_patches(&s, dev, count, patch, seeds, 0.2), SP_OK);
    CHECK_EQ_INT(sp_cuda_copy_to_host(ctx, gpu, dev, (size_t)n * 3), SP_OK);
    compare(cpu, gpu, (size_t)n * 3, "stain augmentation");
    sp_cuda_free(ctx, dev);

    /* The op through the engine's runner: planar output. */
    const int64_t w = 123, h = 77;
    sp_op_params p;
    memset(&p, 0, sizeof p);
    p.colour_source = src;
    p.colour_target = ref;
    sp_op_block b = {.src = px,
                     .src_stride = w * 3,
                     .width = w,
                     .height = h,
                     .dst = cpu,
                     .dst_stride = w,
                     .dst_plane = w * h,
                     .scratch = NULL};
    CHECK_EQ_INT(sp_op_reinhard.cpu(&p, &b), SP_OK);
    sp_cuda_op_runner *runner = NULL;
    sp_err err = {0};
    CHECK_EQ_INT(sp_cuda_op_runner_create(&sp_op_reinhard, &p, 128, &runner, &err), SP_OK);
    if (runner != NULL) {
        b.dst = gpu;
        CHECK_EQ_INT(sp_cuda_op_runner_run(runner, &b, &err), SP_OK);
        compare(cpu, gpu, (size_t)(w * h * 3), "reinhard op");
        sp_cuda_op_runner_destroy(runner);
    }
    /* The macenko op, tabled (the usual case: bit for bit) and not (exp per pixel: within one),
     * from a slide's stains s to the reference. */
    for (int tabled = 1; tabled >= 0; tabled--) {
        memset(&p, 0, sizeof p);
        p.source = s;
        if (!tabled) {
            p.source.max_h = 0.02; /* so faint a source scales past the table's range */
        }
        sp_stains_reference(&p.target);
        sp_stains_map map;
        CHECK_EQ_INT(sp_stains_map_init(&p.source, &p.target, &map, NULL), SP_OK);
        CHECK_EQ_INT(map.tabled, tabled);
        b.dst = cpu;
        CHECK_EQ_INT(sp_op_macenko.cpu(&p, &b), SP_OK);
        runner = NULL;
        CHECK_EQ_INT(sp_cuda_op_runner_create(&sp_op_macenko, &p, 128, &runner, &err), SP_OK);
        if (runner != NULL) {
            b.dst = gpu;
            CHECK_EQ_INT(sp_cuda_op_runner_run(runner, &b, &err), SP_OK);
            compare(cpu, gpu, (size_t)(w * h * 3), tabled ? "macenko op" : "macenko op, untabled");
            if (tabled) {
                CHECK(memcmp(cpu, gpu, (size_t)(w * h * 3)) == 0);
            }
            sp_cuda_op_runner_destroy(runner);
        }
    }
    sp_cuda_context_destroy(ctx);
    free(px);
    free(cpu);
    free(gpu);
}

void unit_run(void) {
    test_everywhere();
    test_device();
}
