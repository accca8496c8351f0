/* test_ops.c — the ops and the tile engine.
 *
 * Each op's CPU function is checked against a direct double-precision evaluation of its
 * definition (docs/ops.md) on random blocks, with the border built by scipy's 'reflect' rule
 * written out independently here; sobel, od and grey must match to float32 rounding, gaussian
 * within 1e-3. The engine runs a synthetic slide (sp_synth_write) through every op, tile-wise
 * with chunk sizes that put tile corners and the level's edges in awkward places, several
 * thread and in-flight counts, in row mode (bands of whole tile rows: halos wider than the level
 * included), and globally: every result must equal the global one bit for bit.
 * Op specs are parsed strictly. Float results narrowed to uint8 round half up and clip, NaN and
 * infinities included. (scipy itself is the oracle in tests/cli/test_process.py.)
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "ops/op.h"
#include "ops/to_uint8.h"
#include "unit.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rng(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}

/* scipy.ndimage 'reflect' written from its description: d c b a | a b c d | d c b a. */
static int64_t mirror(int64_t i, int64_t n) {
    while (i < 0 || i >= n) {
        i = i < 0 ? -i - 1 : 2 * n - 1 - i;
    }
    return i;
}

/* An image W x H, and the padded block an op sees (halo r each side, reflected). */
static uint8_t *padded(const uint8_t *img, int64_t w, int64_t h, int r) {
    int64_t pw = w + 2 * r, ph = h + 2 * r;
    uint8_t *p = malloc((size_t)(pw * ph * 3));
    for (int64_t y = 0; y < ph; y++) {
        for (int64_t x = 0; x < pw; x++) {
            memcpy(p + (y * pw + x) * 3, img + (mirror(y - r, h) * w + mirror(x - r, w)) * 3, 3);
        }
    }
    return p;
}

static float *run_op(const sp_op *op, const sp_op_params *prm, const uint8_t *img, int64_t w,
                     int64_t h) {
    int r = op->halo(prm);
    uint8_t *p = padded(img, w, h, r);
    size_t ns = op->scratch_floats ? op->scratch_floats(prm, w, h) : 0;
    float *scratch = malloc((ns + 1) * sizeof(float));
    float *out = calloc((size_t)(3 * w * h), sizeof(float));
    sp_op_block b = {.src = p + (r * (w + 2 * r) + r) * 3,
                     .src_stride = (w + 2 * r) * 3,
                     .width = w,
                     .height = h,
                     .dst = out,
                     .dst_stride = w,
                     .dst_plane = w * h,
                     .scratch = scratch};
    CHECK(op->cpu(prm, &b) == SP_OK);
    free(p);
    free(scratch);
    return out;
}

static double px(const uint8_t *img, int64_t w, int64_t h, int64_t x, int64_t y, int c) {
    return img[(mirror(y, h) * w + mirror(x, w)) * 3 + c];
}

static void test_sobel_definition(void) {
    int64_t w = 37, h = 23;
    uint8_t *img = malloc((size_t)(w * h * 3));
    for (int64_t i = 0; i < w * h * 3; i++) {
        img[i] = (uint8_t)rng();
    }
    sp_op_params prm = {0};
    float *out = run_op(&sp_op_sobel, &prm, img, w, h);
    int bad = 0;
    for (int c = 0; c < 3; c++) {
        for (int64_t y = 0; y < h; y++) {
            for (int64_t x = 0; x < w; x++) {
                double gy = 0, gx = 0;
                for (int k = -1; k <= 1; k++) {
                    double wk = k == 0 ? 2 : 1;
                    gy += wk * (px(img, w, h, x + k, y + 1, c) - px(img, w, h, x + k, y - 1, c));
                    gx += wk * (px(img, w, h, x + 1, y + k, c) - px(img, w, h, x - 1, y + k, c));
                }
                bad += out[(c * h + y) * w + x] != (float)hypot(gx, gy);
            }
        }
    }
    CHECK_EQ_INT(bad, 0);
    free(out);
    free(img);
}

static void test_gaussian_definition(void) {
    static const double sigmas[] = {0.3, 1.0, 1.7, 4.0, 12.5};
    int64_t w = 29, h = 18;
    uint8_t *img = malloc((size_t)(w * h * 3));
    for (int64_t i = 0; i < w * h * 3; i++) {
        img[i] = (uint8_t)rng();
    }
    for (size_t s = 0; s < sizeof sigmas / sizeof sigmas[0]; s++) {
        sp_op_params prm = {.sigma = sigmas[s]};
        int r = (int)(4.0 * prm.sigma + 0.5);
        CHECK_EQ_INT(sp_op_gaussian.halo(&prm), r);
        double *k = malloc((size_t)(2 * r + 1) * sizeof(double)), sum = 0;
        for (int i = -r; i <= r; i++) {
            sum += k[i + r] = exp(-0.5 * i * i / (prm.sigma * prm.sigma));
        }
        float *out = run_op(&sp_op_gaussian, &prm, img, w, h);
        double worst = 0;
        for (int c = 0; c < 3; c++) {
            for (int64_t y = 0; y < h; y++) {
                for (int64_t x = 0; x < w; x++) {
                    double v = 0;
                    for (int i = -r; i <= r; i++) {
                        for (int j = -r; j <= r; j++) {
                            v += k[i + r] * k[j + r] * px(img, w, h, x + j, y + i, c);
                        }
                    }
                    double d = fabs(out[(c * h + y) * w + x] - v / (sum * sum));
                    worst = d > worst ? d : worst;
                }
            }
        }
        if (worst >= 1e-3) {
            fprintf(stderr, "gaussian sigma %g: max error %g\n", prm.sigma, worst);
        }
        CHECK(worst < 1e-3);
        free(k);
        free(out);
    }
    free(img);
}

static void test_pixel_ops(void) {
    int64_t w = 256, h = 3;
    uint8_t *img = malloc((size_t)(w * h * 3));
    for (int64_t i = 0; i < w * h * 3; i++) {
        img[i] = (uint8_t)(i < w * 3 ? i / 3 : rng()); /* first row: every value */
    }
    sp_op_params prm = {0};
    float *od = run_op(&sp_op_od, &prm, img, w, h);
    uint8_t grey[256 * 3];
    sp_op_block b = {.src = img,
                     .src_stride = w * 3,
                     .width = w,
                     .height = h,
                     .dst = grey,
                     .dst_stride = w,
                     .dst_plane = w * h};
    CHECK(sp_op_grey.cpu(&prm, &b) == SP_OK);
    int bad_od = 0, bad_grey = 0;
    for (int64_t y = 0; y < h; y++) {
        for (int64_t x = 0; x < w; x++) {
            const uint8_t *p = img + (y * w + x) * 3;
            for (int c = 0; c < 3; c++) {
                double v = p[c] < 1 ? 1 : p[c];
                bad_od += od[(c * h + y) * w + x] != (float)-log(v / 255.0);
            }
            double luma = 0.299 * p[0] + 0.587 * p[1] + 0.114 * p[2];
            /* Half up: the integer formula and the real one differ only at exact ties. */
            bad_grey += fabs(grey[y * w + x] - luma) > 0.5 + 1e-9;
        }
    }
    CHECK_EQ_INT(bad_od, 0);
    CHECK_EQ_INT(bad_grey, 0);
    CHECK(od[0] == (float)log(255.0)); /* I = 0 clamps to 1 */
    CHECK(od[255] == 0.0f);
    free(od);
    free(img);
}

static void test_parse(void) {
    const sp_op *op;
    sp_op_params p;
    sp_err err = {0};
    CHECK(sp_op_parse("sobel", &op, &p, &err) == SP_OK && op == &sp_op_sobel);
    CHECK(sp_op_parse("gaussian:2.5", &op, &p, &err) == SP_OK && op == &sp_op_gaussian &&
          p.sigma == 2.5);
    static const char *const bad[] = {"",
                                      "blur",
                                      "sobel:1",
                                      "gaussian",
                                      "gaussian:",
                                      "gaussian:0",
                                      "gaussian:-1",
                                      "gaussian:x",
                                      "gaussian:1x",
                                      "gaussian:nan",
                                      "gaussian:1e9",
                                      "Sobel",
                                      "grey:"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sp_err e = {0};
        CHECK(sp_op_parse(bad[i], &op, &p, &e) == SP_E_INVALID_ARG && e.msg[0] != '\0');
    }
}

/* ---- the engine on a real (synthetic) slide ---------------------------------------------- */

typedef struct mem_sink {
    const sp_op *op;
    int64_t width, height, chunk;
    size_t elem;
    uint8_t *img; /* channels planes of width x height */
    int64_t calls;
} mem_sink;

static sp_status to_memory(void *ctx, int64_t row, int64_t col, const void *chunk, sp_err *err) {
    (void)err;
    mem_sink *m = ctx;
    __atomic_add_fetch(&m->calls, 1, __ATOMIC_RELAXED);
    for (int c = 0; c < m->op->channels; c++) {
        for (int64_t y = 0; y < m->chunk && row * m->chunk + y < m->height; y++) {
            int64_t x0 = col * m->chunk, n = m->width - x0 < m->chunk ? m->width - x0 : m->chunk;
            memcpy(m->img + ((size_t)c * (size_t)(m->width * m->height) +
                             (size_t)((row * m->chunk + y) * m->width + x0)) *
                                m->elem,
                   (const uint8_t *)chunk +
                       ((size_t)c * (size_t)(m->chunk * m->chunk) + (size_t)(y * m->chunk)) *
                           m->elem,
                   (size_t)n * m->elem);
        }
    }
    return SP_OK;
}

enum { TILES, GLOBAL, ROWS }; /* the engine's modes */

static uint8_t *engine_result(sp_slide *s, int32_t level, const sp_op *op, double sigma,
                              int64_t chunk, int threads, int in_flight, int mode) {
    mem_sink m = {.op = op, .chunk = chunk, .elem = op->output == SP_ZARR_F32 ? 4 : 1};
    sp_slide_level_dimensions(s, level, &m.width, &m.height);
    m.img = calloc((size_t)(op->channels * m.width * m.height), m.elem);
    sp_engine_job job = {.slide = s,
                         .level = level,
                         .op = op,
                         .params = {.sigma = sigma},
                         .chunk = chunk,
                         .threads = threads,
                         .in_flight = in_flight,
                         .global = mode == GLOBAL,
                         .rows = mode == ROWS,
                         .sink = to_memory,
                         .sink_ctx = &m};
    sp_engine_stats stats;
    sp_err err = {0};
    sp_status st = sp_engine_run(&job, &stats, &err);
    if (st != SP_OK) {
        fprintf(stderr, "engine: %s\n", err.msg);
    }
    CHECK(st == SP_OK);
    int64_t tiles = ((m.width + chunk - 1) / chunk) * ((m.height + chunk - 1) / chunk);
    CHECK_EQ_INT(m.calls, tiles);
    CHECK_EQ_INT(stats.tiles, tiles);
    if (mode == TILES) {
        int limit = in_flight > 0 ? in_flight : 2 * threads;
        CHECK(stats.max_in_flight >= 1 && stats.max_in_flight <= limit);
    }
    return m.img;
}

static void test_engine_tiled_equals_global(void) {
    char path[] = "/tmp/sp-test-ops-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    char err[256];
    CHECK(sp_synth_write(path, 700, 3, err, sizeof err) == SP_OK);
    sp_slide *s = NULL;
    CHECK(sp_slide_open(path, &s, err, sizeof err) == SP_OK);
    if (s == NULL) {
        unlink(path);
        return;
    }
    struct {
        const sp_op *op;
        double sigma;
        int32_t level;
    } cases[] = {{&sp_op_sobel, 0, 0},    {&sp_op_gaussian, 1.3, 0}, {&sp_op_gaussian, 9.6, 1},
                 {&sp_op_od, 0, 0},       {&sp_op_grey, 0, 1},       {&sp_op_sobel, 0, 2},
                 {&sp_op_gaussian, 50, 2}};
    static const int64_t chunks[] = {64, 100, 333, 1024};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const sp_op *op = cases[i].op;
        int64_t w, h;
        if (sp_slide_level_dimensions(s, cases[i].level, &w, &h) != SP_OK) {
            continue;
        }
        size_t bytes = (size_t)(op->channels * w * h) * (op->output == SP_ZARR_F32 ? 4 : 1);
        uint8_t *ref = engine_result(s, cases[i].level, op, cases[i].sigma, 128, 2, 0, GLOBAL);
        for (size_t k = 0; k < sizeof chunks / sizeof chunks[0]; k++) {
            int threads = 1 + (int)(k % 3), in_flight = (int)k; /* 0 = the default */
            static const int modes[] = {TILES, ROWS};
            for (int j = 0; j < 2; j++) {
                int mode = modes[j];
                uint8_t *t = engine_result(s, cases[i].level, op, cases[i].sigma, chunks[k],
                                           threads, in_flight, mode);
                bool same = memcmp(t, ref, bytes) == 0;
                if (!same) {
                    fprintf(stderr, "%s sigma %g level %d chunk %lld: %s != global\n", op->name,
                            cases[i].sigma, (int)cases[i].level, (long long)chunks[k],
                            mode == ROWS ? "rows" : "tiled");
                }
                CHECK(same);
                free(t);
            }
        }
        free(ref);
    }
    /* A level that does not exist is an argument error, not a crash. */
    sp_engine_job job = {
        .slide = s, .level = 99, .op = &sp_op_sobel, .chunk = 64, .threads = 1, .sink = to_memory};
    sp_err e = {0};
    CHECK(sp_engine_run(&job, NULL, &e) == SP_E_INVALID_ARG);
    sp_slide_close(s);
    unlink(path);
}

/* sp_float_to_uint8 on chosen values (edges of rounding and clipping), and on odd lengths so that
 * the vector loop's remainder runs too. */
static void test_to_uint8(void) {
    const float in[] = {-1e30f, -1.0f, -0.5f, -0.0f, 0.0f, 0.49f, 0.5f, 1.5f, 2.5f, 127.4999f,
                        254.5f, 254.49f, 255.0f, 255.5f, 300.0f, 1e30f, INFINITY, -INFINITY, NAN};
    const uint8_t want[] = {0, 0, 0, 0, 0, 0, 1, 2, 3, 127, 255, 254, 255, 255, 255, 255, 255, 0, 0};
    enum { N = sizeof in / sizeof in[0] };
    _Static_assert(N == sizeof want, "one answer per value");
    for (size_t n = 1; n <= N; n++) {
        uint8_t out[N + 1];
        memset(out, 0xAA, sizeof out);
        sp_float_to_uint8(in, out, n);
        CHECK(memcmp(out, want, n) == 0);
        CHECK(out[n] == 0xAA); /* nothing written past n */
    }
    float big[1000];
    uint8_t got[1000];
    for (int i = 0; i < 1000; i++) {
        big[i] = (float)(rng() % 70000) / 256.0f - 10.0f; /* -10 .. 263, many halves */
    }
    sp_float_to_uint8(big, got, 1000);
    int bad = 0;
    for (int i = 0; i < 1000; i++) {
        double r = floor((double)big[i] + 0.5); /* exact here: big[i] has few bits */
        bad += got[i] != (uint8_t)(r < 0 ? 0 : r > 255 ? 255 : r);
    }
    CHECK_EQ_INT(bad, 0);
}

void unit_run(void) {
    test_to_uint8();
    test_sobel_definition();
    test_gaussian_definition();
    test_pixel_ops();
    test_parse();
    test_engine_tiled_equals_global();
}
