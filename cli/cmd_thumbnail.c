/* cmd_thumbnail.c — `slidepipe thumbnail SLIDE --max-size N -o OUT.png`: the whole slide
 * scaled so its longer side is N pixels. It reads the best level for the downsample in bands
 * of rows and column chunks, so memory stays small whatever the slide size, and averages each
 * output pixel's source area with alpha weighting (premultiplied), so transparent outside
 * pixels do not darken the edges. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char USAGE[] = "slidepipe thumbnail SLIDE --max-size N -o OUT.png";

/* Source pixels read per call at most: bounds the scratch buffer. */
#define CHUNK_COLUMNS 4096

typedef struct scaler {
    sp_slide *slide;
    int32_t level;
    int64_t src_w, src_h, out_w, out_h;
    double level_ds;
    uint64_t *acc; /* out_w x 4 sums (premultiplied colour, alpha) for the current band */
    uint64_t *count;
} scaler;

static int64_t src_edge(int64_t out_index, int64_t out_size, int64_t src_size) {
    return (int64_t)((double)out_index * (double)src_size / (double)out_size);
}

/* Produce output rows [oy0, oy1) into out (RGBA rows of out_w * 4 bytes). */
static sp_status scale_rows(scaler *sc, int64_t oy0, int64_t oy1, uint8_t *out, uint8_t *scratch) {
    for (int64_t oy = oy0; oy < oy1; oy++) {
        int64_t sy0 = src_edge(oy, sc->out_h, sc->src_h);
        int64_t sy1 = src_edge(oy + 1, sc->out_h, sc->src_h);
        if (sy1 <= sy0) {
            sy1 = sy0 + 1;
        }
        memset(sc->acc, 0, (size_t)sc->out_w * 4 * sizeof *sc->acc);
        memset(sc->count, 0, (size_t)sc->out_w * sizeof *sc->count);
        for (int64_t cx = 0; cx < sc->src_w; cx += CHUNK_COLUMNS) {
            int64_t cw = sc->src_w - cx < CHUNK_COLUMNS ? sc->src_w - cx : CHUNK_COLUMNS;
            int64_t x0 = (int64_t)ceil((double)cx * sc->level_ds);
            int64_t y0 = (int64_t)ceil((double)sy0 * sc->level_ds);
            sp_status st = sp_slide_read_region(sc->slide, SP_PIXEL_RGBA8, scratch, cw * 4,
                                                sc->level, x0, y0, cw, sy1 - sy0);
            if (st != SP_OK) {
                return st;
            }
            for (int64_t y = 0; y < sy1 - sy0; y++) {
                const uint8_t *p = scratch + y * cw * 4;
                for (int64_t x = 0; x < cw; x++, p += 4) {
                    int64_t ox = (int64_t)((double)(cx + x) * (double)sc->out_w / (double)sc->src_w);
                    uint64_t *a = sc->acc + ox * 4;
                    a[0] += (uint64_t)p[0] * p[3];
                    a[1] += (uint64_t)p[1] * p[3];
                    a[2] += (uint64_t)p[2] * p[3];
                    a[3] += p[3];
                    sc->count[ox]++;
                }
            }
        }
        uint8_t *row = out + (oy - oy0) * sc->out_w * 4;
        for (int64_t ox = 0; ox < sc->out_w; ox++) {
            const uint64_t *a = sc->acc + ox * 4;
            uint64_t n = sc->count[ox] ? sc->count[ox] : 1;
            for (int c = 0; c < 3; c++) {
                row[ox * 4 + c] = a[3] ? (uint8_t)((a[c] + a[3] / 2) / a[3]) : 0;
            }
            row[ox * 4 + 3] = (uint8_t)((a[3] + n / 2) / n);
        }
    }
    return SP_OK;
}

int cmd_thumbnail(int argc, char **argv) {
    static const struct option opts[] = {{"max-size", required_argument, NULL, 'm'},
                                         {"output", required_argument, NULL, 'o'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    int64_t max_size = -1;
    const char *out = NULL;
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":o:", opts, NULL)) != -1) {
        switch (c) {
        case 'm':
            if (!cli_parse_int(optarg, 1, 1 << 16, &max_size)) {
                return cli_usage_error(USAGE, "bad --max-size '%s' (an integer in 1..65536)",
                                       optarg);
            }
            break;
        case 'o': out = optarg; break;
        case 'h': printf("usage: %s\n", USAGE); return CLI_OK;
        case ':': return cli_usage_error(USAGE, "option '%s' needs a value", argv[optind - 1]);
        default: return cli_usage_error(USAGE, "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (max_size < 0) {
        return cli_usage_error(USAGE, "--max-size is required");
    }
    if (out == NULL || !cli_has_extension(out, ".png")) {
        return cli_usage_error(USAGE, "-o OUT.png is required");
    }
    if (optind != argc - 1) {
        return cli_usage_error(USAGE, "expected exactly one SLIDE");
    }
    sp_slide *slide = cli_open_slide(argv[optind]);
    if (slide == NULL) {
        return CLI_RUNTIME_ERROR;
    }
    int64_t w0, h0;
    sp_slide_level_dimensions(slide, 0, &w0, &h0);
    double scale = (double)(w0 > h0 ? w0 : h0) / (double)max_size;
    scaler sc = {.slide = slide};
    sc.out_w = w0 >= h0 ? max_size : (int64_t)llround((double)w0 / scale);
    sc.out_h = h0 >= w0 ? max_size : (int64_t)llround((double)h0 / scale);
    sc.out_w = sc.out_w < 1 ? 1 : sc.out_w;
    sc.out_h = sc.out_h < 1 ? 1 : sc.out_h;
    sc.level = sp_slide_best_level_for_downsample(slide, scale);
    sp_slide_level_dimensions(slide, sc.level, &sc.src_w, &sc.src_h);
    sp_slide_level_downsample(slide, sc.level, &sc.level_ds);
    int64_t rows_per_out = sc.src_h / sc.out_h + 2;
    uint8_t *image = malloc((size_t)(sc.out_w * sc.out_h * 4));
    uint8_t *scratch = malloc((size_t)(CHUNK_COLUMNS * rows_per_out * 4));
    sc.acc = malloc((size_t)sc.out_w * 4 * sizeof *sc.acc);
    sc.count = malloc((size_t)sc.out_w * sizeof *sc.count);
    int rc = CLI_OK;
    if (image == NULL || scratch == NULL || sc.acc == NULL || sc.count == NULL) {
        rc = cli_fail("out of memory making a thumbnail");
    } else {
        sp_status st = scale_rows(&sc, 0, sc.out_h, image, scratch);
        if (st != SP_OK) {
            const char *msg = sp_slide_error(slide);
            rc = cli_fail("%s: %s", argv[optind], msg ? msg : sp_status_str(st));
        } else if (!cli_write_image(out, image, sc.out_w, sc.out_h, sc.out_w * 4, false)) {
            rc = CLI_RUNTIME_ERROR;
        }
    }
    free(image);
    free(scratch);
    free(sc.acc);
    free(sc.count);
    sp_slide_close(slide);
    return rc;
}
