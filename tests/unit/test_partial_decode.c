/* test_partial_decode.c — partial and DCT-scaled tile decoding against its definition, on real
 * slides: for JPEG (Aperio 4:4:4 RGB, YCbCr 4:2:0 tiles, a synthetic 4:2:0 pyramid, DICOM
 * frames) and JPEG 2000 (Aperio) levels, decoding a sub-rectangle of a tile (odd offsets and sizes, first and
 * edge tiles, RGBA and RGB) must give exactly the pixels of a whole-tile decode followed by a
 * crop; at 1/2, 1/4 and 1/8 the sub-rectangle must equal the crop of libjpeg's whole-tile
 * scaled decode. Also measures (and prints, for docs/reading.md) how far the DCT-scaled
 * decode is from a box average of the full decode. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "slide/slide.h"
#include "slide/tile_cache.h"
#include "unit.h"

static uint64_t rng = 88172645463325252ull;
static uint64_t next_rand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
static int64_t rand_in(int64_t lo, int64_t hi) { /* [lo, hi] */
    return lo + (int64_t)(next_rand() % (uint64_t)(hi - lo + 1));
}

/* One tile, whole, at 1/scale as RGBA: read_tile at scale 1, else the op's whole-tile area. */
static uint8_t *whole_tile(sp_slide *s, const sp_level *l, int64_t col, int64_t row,
                           unsigned scale) {
    int64_t tw = l->tile_width / scale, th = l->tile_height / scale;
    uint8_t *px = calloc((size_t)(tw * th), 4);
    static const uint8_t transparent[4] = {0, 0, 0, 0};
    sp_err err = {0};
    sp_status st = scale == 1
                       ? s->ops->read_tile(s, l, col, row, px, (uint64_t)tw * 4, &err)
                       : s->ops->read_tile_area(s, l, col, row, scale, 0, 0, tw, th,
                                                SP_PIXEL_RGBA8, px, tw * 4, transparent, &err);
    CHECK_EQ_INT(st, SP_OK);
    return px;
}

/* Compare random sub-rectangles of tile (col, row) at 1/scale with the crop of `ref`. */
static int check_areas(sp_slide *s, const sp_level *l, int64_t col, int64_t row, unsigned scale,
                       const uint8_t *ref, bool opaque, int n) {
    int64_t tw = l->tile_width / scale, th = l->tile_height / scale;
    int bad = 0;
    uint8_t *out = malloc((size_t)(tw * th * 4));
    for (int k = 0; k < n; k++) {
        int64_t x = k == 0 ? 0 : rand_in(0, tw - 1), y = k == 0 ? 0 : rand_in(0, th - 1);
        int64_t w = k == 0 ? tw : rand_in(1, tw - x), h = k == 0 ? th : rand_in(1, th - y);
        for (int f = 0; f < (opaque ? 2 : 1); f++) {
            sp_pixel_format fmt = f == 0 ? SP_PIXEL_RGBA8 : SP_PIXEL_RGB8;
            int bpp = f == 0 ? 4 : 3;
            static const uint8_t empty[4] = {0, 0, 0, 0};
            memset(out, 0x5a, (size_t)(tw * th * 4));
            sp_err err = {0};
            sp_status st = s->ops->read_tile_area(s, l, col, row, scale, x, y, w, h, fmt, out,
                                                  w * bpp, empty, &err);
            if (st != SP_OK) {
                fprintf(stderr, "area decode failed: %s\n", err.msg);
                bad++;
                continue;
            }
            for (int64_t yy = 0; yy < h; yy++) {
                for (int64_t xx = 0; xx < w; xx++) {
                    const uint8_t *r = ref + ((y + yy) * tw + x + xx) * 4;
                    const uint8_t *o = out + (yy * w + xx) * bpp;
                    if (memcmp(r, o, (size_t)bpp) != 0) {
                        if (bad < 3) {
                            fprintf(stderr,
                                    "tile %lld,%lld scale %u area %lld,%lld %lldx%lld bpp %d: "
                                    "pixel %lld,%lld differs\n",
                                    (long long)col, (long long)row, scale, (long long)x,
                                    (long long)y, (long long)w, (long long)h, bpp,
                                    (long long)xx, (long long)yy);
                        }
                        bad++;
                        yy = h;
                        break;
                    }
                }
            }
        }
    }
    free(out);
    return bad;
}

/* Mean and max absolute difference between the DCT-scaled tile and the scale x scale box
 * average (rounded half up) of the full decode, over the tile's colour samples. */
static void dct_vs_box(const uint8_t *full, const uint8_t *scaled, int64_t tw, int64_t th,
                       unsigned scale, double *sum, double *count, int *max) {
    int64_t sw = tw / scale, sh = th / scale;
    for (int64_t y = 0; y < sh; y++) {
        for (int64_t x = 0; x < sw; x++) {
            for (int c = 0; c < 3; c++) {
                unsigned acc = 0;
                for (unsigned j = 0; j < scale; j++) {
                    for (unsigned i = 0; i < scale; i++) {
                        acc += full[((y * scale + j) * tw + x * scale + i) * 4 + c];
                    }
                }
                int box = (int)((acc + scale * scale / 2) / (scale * scale));
                int d = abs(box - scaled[(y * sw + x) * 4 + c]);
                *sum += d;
                *count += 1;
                *max = d > *max ? d : *max;
            }
        }
    }
}

static void check_slide(const char *path, int tiles_per_level) {
    sp_slide *s = NULL;
    char msg[512];
    if (sp_slide_open(path, &s, msg, sizeof msg) != SP_OK) {
        printf("skipping %s: %s\n", path, msg);
        return;
    }
    int checked = 0;
    for (int32_t li = 0; li < s->n_levels; li++) {
        const sp_level *l = &s->levels[li];
        unsigned scales = s->ops->area_scales ? s->ops->area_scales(s, l) : 0;
        if ((scales & 1) == 0) {
            continue;
        }
        bool opaque = (scales & SP_AREA_OPAQUE) != 0;
        for (int t = 0; t < tiles_per_level; t++) {
            /* the first tile, the last (edge) tile, then random ones */
            int64_t col = t == 0 ? 0 : t == 1 ? l->tiles_across - 1 : rand_in(0, l->tiles_across - 1);
            int64_t row = t == 0 ? 0 : t == 1 ? l->tiles_down - 1 : rand_in(0, l->tiles_down - 1);
            uint8_t *full = whole_tile(s, l, col, row, 1);
            CHECK_EQ_INT(check_areas(s, l, col, row, 1, full, opaque, 12), 0);
            for (unsigned scale = 2; scale <= 8; scale *= 2) {
                if ((scales & scale) == 0 || l->tile_width % scale || l->tile_height % scale) {
                    continue;
                }
                uint8_t *scaled = whole_tile(s, l, col, row, scale);
                CHECK_EQ_INT(check_areas(s, l, col, row, scale, scaled, opaque, 6), 0);
                double sum = 0, count = 0;
                int max = 0;
                dct_vs_box(full, scaled, l->tile_width, l->tile_height, scale, &sum, &count, &max);
                if (t == 0 || t == 2) {
                    printf("%s level %d tile %lld,%lld: DCT 1/%u vs box average: mean |d| %.3f, "
                           "max %d\n",
                           strrchr(path, '/') + 1, li, (long long)col, (long long)row, scale,
                           sum / count, max);
                }
                CHECK(sum / count < 4.0); /* scaled output is an image of the same tile */
                free(scaled);
            }
            free(full);
            checked++;
        }
    }
    printf("%s: %d tiles checked\n", strrchr(path, '/') + 1, checked);
    sp_slide_close(s);
}

void unit_run(void) {
    const char *data = unit_testdata();
    if (data == NULL) {
        unit_skip("../shared/testdata is absent");
        return;
    }
    sp_cache_set_capacity(0); /* these compare decodes, not the cache */
    char path[4096];
    const char *slides[] = {
        "aperio/CMU-1-Small-Region.svs",                     /* JPEG, RGB components, 4:4:4 */
        "generic-tiff/tiff_tiled_ycbcr_jpeg_2x2_sampling.tif", /* JPEG YCbCr 4:2:0, edge tiles */
        "aperio/tcga-cr-7395-01a-01-ts1.svs",                /* JPEG 2000, YCbCr 33003 */
        "dicom/cmu-1-small-region",                          /* DICOM JPEG frames, 500x500 */
    };
    for (size_t i = 0; i < sizeof slides / sizeof slides[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", data, slides[i]);
        check_slide(path, 5);
    }
    /* A synthetic pyramid (libjpeg-written 4:2:0 YCbCr tiles), an odd size for edge tiles. */
    char tmp[] = "/tmp/sp-partial-XXXXXX";
    int fd = mkstemp(tmp);
    if (fd >= 0) {
        close(fd);
        char err[256];
        CHECK_EQ_INT(sp_synth_write(tmp, 1500, 7, err, sizeof err), SP_OK);
        check_slide(tmp, 6);
        unlink(tmp);
    }
}
