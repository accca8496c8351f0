/* cmd_thumbnail.c — `slidepipe thumbnail SLIDE --max-size N -o OUT.png`: the whole slide
 * scaled so its longer side is N pixels, in one sp_slide_read_region_scaled call: the best
 * level, DCT-scaled decoding where the tiles are JPEG, an area average for the rest; memory is
 * one band of tile rows and each stored tile is decoded once. With --icc the pixels are
 * converted from the slide's embedded ICC profile to sRGB (as stored when it has none);
 * --z/--c/--t show another focal plane, channel or time point (OME-TIFF). */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char USAGE[] =
    "slidepipe thumbnail SLIDE --max-size N -o OUT.png [--icc] [--z Z] [--c C] [--t T]";

int cmd_thumbnail(int argc, char **argv) {
    static const struct option opts[] = {{"max-size", required_argument, NULL, 'm'},
                                         {"output", required_argument, NULL, 'o'},
                                         {"icc", no_argument, NULL, 'i'},
                                         {"z", required_argument, NULL, 'Z'},
                                         {"c", required_argument, NULL, 'C'},
                                         {"t", required_argument, NULL, 'T'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    int64_t max_size = -1;
    const char *out = NULL;
    bool icc = false;
    int64_t plane[3] = {0, 0, 0}; /* --z, --c, --t */
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
        case 'i': icc = true; break;
        case 'Z':
        case 'C':
        case 'T':
            if (cli_plane_option(c, optarg, plane, USAGE) != CLI_OK) {
                return CLI_USAGE_ERROR;
            }
            break;
        default: return cli_option_other(USAGE, c, argv);
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
    sp_slide *slide = cli_open_slide_plane(argv[optind], plane);
    if (slide == NULL) {
        return CLI_RUNTIME_ERROR;
    }
    if (icc && !cli_slide_icc(slide)) {
        sp_slide_close(slide);
        return CLI_RUNTIME_ERROR;
    }
    int64_t w0, h0;
    sp_slide_level_dimensions(slide, 0, &w0, &h0);
    /* The longer side is max_size pixels; the shorter is rounded down, so that every thumbnail
     * pixel lies wholly inside the slide (an opaque slide gives an opaque thumbnail). */
    double downsample = (double)(w0 > h0 ? w0 : h0) / (double)max_size;
    downsample = downsample > 1 ? downsample : 1;
    int64_t out_w = w0 >= h0 ? (int64_t)llround((double)w0 / downsample)
                             : (int64_t)floor((double)w0 / downsample + 1e-9);
    int64_t out_h = h0 >= w0 ? (int64_t)llround((double)h0 / downsample)
                             : (int64_t)floor((double)h0 / downsample + 1e-9);
    out_w = out_w < 1 ? 1 : out_w;
    out_h = out_h < 1 ? 1 : out_h;
    uint8_t *image = malloc((size_t)(out_w * out_h * 4));
    int rc = CLI_OK;
    if (image == NULL) {
        rc = cli_fail("out of memory making a thumbnail");
    } else {
        sp_status st = sp_slide_read_region_scaled(slide, SP_PIXEL_RGBA8, image, out_w * 4,
                                                   downsample, 0, 0, out_w, out_h);
        if (st != SP_OK) {
            const char *msg = sp_slide_error(slide);
            rc = cli_fail("%s: %s", argv[optind], msg && *msg ? msg : sp_status_str(st));
        } else if (!cli_write_image(out, image, out_w, out_h, out_w * 4, false)) {
            rc = CLI_RUNTIME_ERROR;
        }
    }
    free(image);
    sp_slide_close(slide);
    return rc;
}
