/* test_jpeg_planes.c — the CPU-checkable half of the GPU JPEG path (src/cuda/cuda_nvjpeg.c),
 * which cannot run without a GPU:
 *   - the per-pixel arithmetic its kernel uses (src/cuda/jpeg_planes_math.h: fancy chroma
 *     upsampling and YCbCr conversion) gives libjpeg-turbo's pixels bit for bit from the same
 *     decoded component planes (libjpeg's raw-data output), for 4:4:4, 4:2:2 and 4:2:0, YCbCr and
 *     RGB streams, odd sizes, streams libjpeg encodes here and the tiles of real slides;
 *   - the complete streams of TIFF JPEG tiles (src/formats/tiff_jpeg_tiles.c: JPEGTables spliced
 *     in) decode, with no tables given, to the tiles the slide reader gives; levels that are not
 *     TIFF JPEG are refused, tiles outside the grid are an error.
 * So on a GPU only nvJPEG's inverse DCT can differ from the CPU path. */
#include <setjmp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#include "codecs/codec.h"
#include "cuda/jpeg_planes_math.h"
#include "slide/slide.h"
#include "slidepipe.h"
#include "unit.h"

static unsigned seed = 12345;
static unsigned rng(void) {
    seed = seed * 1103515245u + 12345u;
    return seed >> 16;
}

/* ---- libjpeg: encode with chosen sampling, decode to raw planes --------------------------- */

static uint8_t *encode(unsigned w, unsigned h, int hs, int vs, int rgb, size_t *len) {
    uint8_t *pix = malloc((size_t)w * h * 3);
    for (unsigned y = 0; y < h; y++) {
        for (unsigned x = 0; x < w; x++) {
            for (int c = 0; c < 3; c++) {
                unsigned v = (x * (2 + c) + y * (4 - c) + (rng() & 31)) & 255;
                pix[((size_t)y * w + x) * 3 + c] = (uint8_t)(((x / 7) ^ (y / 5)) & 1 ? 255 - v : v);
            }
        }
    }
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr jerr;
    c.err = jpeg_std_error(&jerr);
    jpeg_create_compress(&c);
    c.image_width = w;
    c.image_height = h;
    c.input_components = 3;
    c.in_color_space = JCS_RGB;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, 80, TRUE);
    if (rgb) {
        jpeg_set_colorspace(&c, JCS_RGB);
    }
    c.comp_info[0].h_samp_factor = hs;
    c.comp_info[0].v_samp_factor = vs;
    for (int i = 1; i < 3; i++) {
        c.comp_info[i].h_samp_factor = 1;
        c.comp_info[i].v_samp_factor = 1;
    }
    unsigned char *buf = NULL;
    unsigned long blen = 0;
    jpeg_mem_dest(&c, &buf, &blen);
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < h) {
        JSAMPROW r = (JSAMPROW)(pix + (size_t)c.next_scanline * w * 3);
        jpeg_write_scanlines(&c, &r, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    free(pix);
    *len = blen;
    return buf;
}

typedef struct raw_planes {
    uint8_t *plane[3];
    int width[3], height[3], pitch[3];
    int h_factor, v_factor;
} raw_planes;

typedef struct jerr_jump {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
} jerr_jump;

static void on_error(j_common_ptr c) {
    longjmp(((jerr_jump *)c->err)->jump, 1);
}

/* The stream's components as libjpeg decodes them before upsampling and colour conversion. */
static int decode_raw(const uint8_t *data, size_t len, raw_planes *out) {
    struct jpeg_decompress_struct d;
    jerr_jump jerr;
    memset(out, 0, sizeof *out);
    d.err = jpeg_std_error(&jerr.pub);
    jerr.pub.error_exit = on_error;
    JSAMPARRAY rows[3] = {NULL, NULL, NULL};
    if (setjmp(jerr.jump)) {
        jpeg_destroy_decompress(&d);
        for (int c = 0; c < 3; c++) {
            free(rows[c]);
            free(out->plane[c]);
            out->plane[c] = NULL;
        }
        return 0;
    }
    jpeg_create_decompress(&d);
    jpeg_mem_src(&d, data, (unsigned long)len);
    jpeg_read_header(&d, TRUE);
    if (d.num_components != 3) {
        jpeg_destroy_decompress(&d);
        return 0;
    }
    d.raw_data_out = TRUE;
    d.out_color_space = d.jpeg_color_space; /* no conversion */
    jpeg_start_decompress(&d);
    int max_v = d.max_v_samp_factor;
    for (int c = 0; c < 3; c++) {
        jpeg_component_info *ci = &d.comp_info[c];
        out->pitch[c] = (int)ci->width_in_blocks * DCTSIZE;
        out->width[c] = (int)ci->downsampled_width;
        out->height[c] = (int)ci->downsampled_height;
        int alloc_rows = (int)ci->height_in_blocks * DCTSIZE + max_v * DCTSIZE;
        out->plane[c] = calloc((size_t)alloc_rows, (size_t)out->pitch[c]);
        rows[c] = malloc(sizeof(JSAMPROW) * (size_t)(ci->v_samp_factor * DCTSIZE));
    }
    out->h_factor = d.max_h_samp_factor / d.comp_info[1].h_samp_factor;
    out->v_factor = d.max_v_samp_factor / d.comp_info[1].v_samp_factor;
    int done[3] = {0, 0, 0};
    while (d.output_scanline < d.output_height) {
        for (int c = 0; c < 3; c++) {
            int n = d.comp_info[c].v_samp_factor * DCTSIZE;
            for (int i = 0; i < n; i++) {
                rows[c][i] = out->plane[c] + (size_t)(done[c] + i) * out->pitch[c];
            }
        }
        JSAMPIMAGE image = rows;
        JDIMENSION got = jpeg_read_raw_data(&d, image, (JDIMENSION)(max_v * DCTSIZE));
        if (got == 0) {
            break;
        }
        for (int c = 0; c < 3; c++) {
            done[c] += d.comp_info[c].v_samp_factor * DCTSIZE;
        }
    }
    jpeg_abort_decompress(&d);
    jpeg_destroy_decompress(&d);
    for (int c = 0; c < 3; c++) {
        free(rows[c]);
    }
    return 1;
}

/* Compare the planes' pixels (jpeg_planes_math.h) with slidepipe's CPU decode of the stream;
 * returns the number of differing pixels, or -1 when the stream has no three components. */
static long compare_stream(const uint8_t *data, size_t len, int ycbcr) {
    raw_planes raw;
    if (!decode_raw(data, len, &raw)) {
        return -1;
    }
    int w = raw.width[0], h = raw.height[0];
    uint8_t *cpu = calloc((size_t)w * h, 4);
    sp_err err = {0};
    long bad = 0;
    if (sp_jpeg_decode_rgba(data, len, NULL, 0, ycbcr ? SP_JPEG_SPACE_YCBCR : SP_JPEG_SPACE_RGB,
                            (uint64_t)w, (uint64_t)h, cpu, (size_t)w * 4, &err) != SP_OK) {
        fprintf(stderr, "CPU decode failed: %s\n", err.msg);
        bad = (long)w * h;
    }
    sp_jpeg_planes p = {.width = w,
                        .height = h,
                        .chroma_width = raw.width[1],
                        .chroma_height = raw.height[1],
                        .h_factor = raw.h_factor,
                        .v_factor = raw.v_factor,
                        .ycbcr = ycbcr};
    for (int c = 0; c < 3; c++) {
        p.plane[c] = raw.plane[c];
        p.pitch[c] = raw.pitch[c];
    }
    for (int y = 0; bad == 0 && y < h; y++) {
        for (int x = 0; x < w; x++) {
            uint8_t rgb[3];
            sp_jpeg_pixel(&p, x, y, rgb);
            const uint8_t *o = cpu + ((size_t)y * w + x) * 4;
            bad += memcmp(rgb, o, 3) != 0;
        }
    }
    free(cpu);
    for (int c = 0; c < 3; c++) {
        free(raw.plane[c]);
    }
    return bad;
}

static void test_encoded_streams(void) {
    static const int SAMPLING[][2] = {{1, 1}, {2, 1}, {2, 2}};
    static const int SIZES[][2] = {{256, 256}, {37, 29}, {240, 240}, {17, 64}, {100, 7}};
    for (size_t s = 0; s < 3; s++) {
        for (size_t z = 0; z < sizeof SIZES / sizeof SIZES[0]; z++) {
            for (int rgb = 0; rgb < 2; rgb++) {
                size_t len = 0;
                uint8_t *jpg = encode((unsigned)SIZES[z][0], (unsigned)SIZES[z][1], SAMPLING[s][0],
                                      SAMPLING[s][1], rgb, &len);
                long bad = compare_stream(jpg, len, !rgb);
                if (bad != 0) {
                    fprintf(stderr, "%dx%d sampling %dx%d %s: %ld pixels differ\n", SIZES[z][0],
                            SIZES[z][1], SAMPLING[s][0], SAMPLING[s][1], rgb ? "RGB" : "YCbCr",
                            bad);
                }
                CHECK_EQ_INT(bad, 0);
                free(jpg);
            }
        }
    }
}

/* ---- real slides: spliced streams ---------------------------------------------------------- */

static void test_slide(const char *path, int want_jpeg_level0) {
    sp_slide *slide = NULL;
    char msg[512];
    if (sp_slide_open(path, &slide, msg, sizeof msg) != SP_OK) {
        fprintf(stderr, "cannot open %s: %s\n", path, msg);
        CHECK(0);
        return;
    }
    sp_raw_level raw;
    int is_jpeg = sp_slide_raw_level(slide, 0, &raw) && raw.kind == SP_RAW_JPEG;
    CHECK_EQ_INT(is_jpeg, want_jpeg_level0);
    CHECK(!sp_slide_raw_level(slide, -1, &raw) &&
          !sp_slide_raw_level(slide, sp_slide_level_count(slide), &raw));
    for (int32_t level = 0; level < sp_slide_level_count(slide); level++) {
        if (!sp_slide_raw_level(slide, level, &raw) || raw.kind != SP_RAW_JPEG) {
            continue;
        }
        uint64_t tw = (uint64_t)raw.tile_width, th = (uint64_t)raw.tile_height;
        int64_t across = (slide->levels[level].width + raw.tile_width - 1) / raw.tile_width;
        int64_t down = (slide->levels[level].height + raw.tile_height - 1) / raw.tile_height;
        uint8_t *ref = calloc(tw * th, 4), *mine = calloc(tw * th, 4);
        /* a few tiles of each level: corners and the middle */
        int64_t cols[3] = {0, across / 2, across - 1};
        int64_t rows[3] = {0, down / 2, down - 1};
        for (int i = 0; i < 3; i++) {
            uint8_t *stream = NULL;
            size_t len = 0;
            sp_err err = {0};
            CHECK_EQ_INT(sp_slide_read_raw_tile(slide, level, cols[i], rows[i], &stream, &len, &err),
                         SP_OK);
            if (stream == NULL) {
                continue; /* a missing tile */
            }
            CHECK(len > 4 && stream[0] == 0xFF && stream[1] == 0xD8);
            memset(ref, 0, tw * th * 4);
            memset(mine, 0, tw * th * 4);
            CHECK_EQ_INT(slide->ops->read_tile(slide, &slide->levels[level], cols[i], rows[i], ref,
                                               tw * 4, &err),
                         SP_OK);
            CHECK_EQ_INT(sp_jpeg_decode_rgba(stream, len, NULL, 0,
                                             raw.ycbcr ? SP_JPEG_SPACE_YCBCR : SP_JPEG_SPACE_RGB,
                                             tw, th, mine, tw * 4, &err),
                         SP_OK);
            CHECK(memcmp(ref, mine, tw * th * 4) == 0);
            /* and the GPU kernel's arithmetic from the same stream's planes */
            CHECK_EQ_INT(compare_stream(stream, len, raw.ycbcr), 0);
            free(stream);
        }
        uint8_t *stream = (uint8_t *)1;
        size_t len = 1;
        sp_err err = {0};
        CHECK_EQ_INT(sp_slide_read_raw_tile(slide, level, across, 0, &stream, &len, &err),
                     SP_E_INVALID_ARG);
        CHECK(stream == NULL && len == 0);
        CHECK_EQ_INT(sp_slide_read_raw_tile(slide, level, 0, -1, &stream, &len, &err),
                     SP_E_INVALID_ARG);
        /* a JPEG level has no raw rows */
        uint8_t row[16];
        sp_err e2 = {0};
        CHECK_EQ_INT(sp_slide_read_raw_rows(slide, level, 0, 0, 0, 1, row, &e2), SP_E_INVALID_ARG);
        free(ref);
        free(mine);
    }
    sp_slide_close(slide);
}

void unit_run(void) {
    test_encoded_streams();
    const char *data = unit_testdata();
    if (data == NULL) {
        unit_skip("shared test data absent: slide tiles not tested");
        return;
    }
    static const struct {
        const char *rel;
        int jpeg;
    } SLIDES[] = {
        {"aperio/CMU-1-Small-Region.svs", 1},                       /* RGB, JPEGTables */
        {"generic-tiff/tiff_tiled_ycbcr_jpeg_2x2_sampling.tif", 1}, /* YCbCr 4:2:0 */
        {"aperio/tcga-cr-7395-01a-01-ts1.svs", 0},                  /* JPEG 2000 */
        {"generic-tiff/yb10kx5k.zstd.tiff", 0},
    };
    for (size_t i = 0; i < sizeof SLIDES / sizeof SLIDES[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", data, SLIDES[i].rel);
        test_slide(path, SLIDES[i].jpeg);
    }
}
