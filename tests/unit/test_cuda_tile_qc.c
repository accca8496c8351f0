/* test_cuda_tile_qc.c — the tile QC kernel (src/cuda/tile_qc_kernels.cu) against the CPU
 * reference (sp_tile_qc_pixels): the tiles of a synthetic slide with artefacts, and hand tiles
 * (uniform, pure blue ink, sizes 1 and 2 with no interior, an odd size), must score the same to
 * the bit. Skipped where there is no CUDA device; without the backend the entry answers
 * SP_E_UNSUPPORTED and zeroes its output, which is checked instead.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda/cuda_tile_qc.h"
#include "unit.h"

static void compare(const uint8_t *rgb, int64_t size, size_t count) {
    sp_tile_qc *gpu = calloc(count, sizeof *gpu), *cpu = calloc(count, sizeof *cpu);
    sp_err e = {0};
    CHECK(sp_cuda_tile_qc(rgb, size, count, gpu, &e) == SP_OK);
    size_t tile = (size_t)size * (size_t)size * 3, same = 0;
    for (size_t i = 0; i < count; i++) {
        CHECK(sp_tile_qc_pixels(rgb + i * tile, size * 3, size, &cpu[i]) == SP_OK);
        same += memcmp(&gpu[i], &cpu[i], sizeof cpu[i]) == 0;
    }
    CHECK_EQ_INT(same, count);
    free(gpu);
    free(cpu);
}

static void test_hand_tiles(void) {
    uint8_t *rgb = malloc(3 * 37 * 37 * 3);
    for (int i = 0; i < 37 * 37; i++) {
        uint8_t *a = rgb + i * 3, *b = a + 37 * 37 * 3, *c = b + 37 * 37 * 3;
        a[0] = 220, a[1] = 150, a[2] = 200; /* uniform tissue */
        b[0] = 0, b[1] = 0, b[2] = 255;     /* pure blue ink */
        c[0] = (uint8_t)(i * 7), c[1] = (uint8_t)(i * 13), c[2] = (uint8_t)(i * 29); /* mixed */
    }
    compare(rgb, 37, 3);
    compare(rgb, 1, 3);
    compare(rgb, 2, 3);
    free(rgb);
}

static void test_slide_tiles(void) {
    char path[] = "/tmp/sp-test-cuda-tile-qc-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) {
        return;
    }
    close(fd);
    char err[256];
    sp_slide *slide = NULL;
    CHECK(sp_synth_write_with(path, 2048, 7, SP_SYNTH_ARTIFACTS, err, sizeof err) == SP_OK);
    CHECK(sp_slide_open(path, &slide, err, sizeof err) == SP_OK);
    enum { S = 128, N = 16 * 16 };
    uint8_t *rgb = malloc((size_t)N * S * S * 3);
    for (int i = 0; slide != NULL && i < N; i++) {
        CHECK(sp_slide_read_region(slide, SP_PIXEL_RGB8, rgb + (size_t)i * S * S * 3, S * 3, 0,
                                   (i % 16) * S, (i / 16) * S, S, S) == SP_OK);
    }
    compare(rgb, S, N);
    free(rgb);
    sp_slide_close(slide);
    unlink(path);
}

void unit_run(void) {
    char why[256];
    if (sp_cuda_device_count(why, sizeof why) <= 0) {
        sp_tile_qc q = {.blur = 1};
        uint8_t px[3] = {0};
        sp_err e = {0};
        sp_status st = sp_cuda_tile_qc(px, 1, 1, &q, &e);
        CHECK(st == SP_E_UNSUPPORTED || st == SP_OK || st == SP_E_IO);
        CHECK(st == SP_OK || q.blur == 0);
        char msg[300];
        snprintf(msg, sizeof msg, "no CUDA device: %s", why);
        unit_skip(msg);
        return;
    }
    test_hand_tiles();
    test_slide_tiles();
}
