/* cmd_tissue.c — `slidepipe tissue SLIDE [-o MASK.png] [--image IMAGE.png] [--max-side N]
 * [--json]`: compute the slide's tissue mask (sp_tissue_mask_compute, docs/tissue.md) and print
 * its size, downsample, threshold and tissue fraction. -o writes the mask as a PNG (tissue
 * white, background black), --image the RGB image it was computed from, read again with the
 * same call, for looking at the two side by side and for the tests' oracle. Both PNGs are RGBA
 * with alpha 255 (cli_write_image's format) and written atomically. */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"

static const char USAGE[] =
    "slidepipe tissue SLIDE [-o MASK.png] [--image IMAGE.png] [--max-side N (default 2048)] "
    "[--json]";

/* The mask as RGBA: 255 for tissue, 0 for background, opaque. */
static bool write_mask(const char *path, const sp_tissue_mask *m) {
    uint8_t *rgba = malloc((size_t)(m->width * m->height * 4));
    if (rgba == NULL) {
        cli_fail("out of memory writing %s", path);
        return false;
    }
    for (int64_t i = 0; i < m->width * m->height; i++) {
        uint8_t v = m->pixels[i] ? 255 : 0;
        rgba[i * 4] = rgba[i * 4 + 1] = rgba[i * 4 + 2] = v;
        rgba[i * 4 + 3] = 255;
    }
    bool ok = cli_write_image(path, rgba, m->width, m->height, m->width * 4, false);
    free(rgba);
    return ok;
}

/* The image the mask was computed from: the same RGB8 read, written opaque. */
static bool write_source(const char *path, sp_slide *slide, const char *slide_path,
                         const sp_tissue_mask *m) {
    size_t n = (size_t)(m->width * m->height);
    uint8_t *rgba = malloc(n * 4);
    if (rgba == NULL) {
        cli_fail("out of memory writing %s", path);
        return false;
    }
    /* RGB8 into the last three quarters of the buffer, then spread forwards into RGBA (each
     * pixel's source lies at or after its destination, so nothing is overwritten unread). */
    uint8_t *rgb = rgba + n;
    sp_status st = sp_slide_read_region_scaled(slide, SP_PIXEL_RGB8, rgb, m->width * 3,
                                               m->downsample, 0, 0, m->width, m->height);
    if (st != SP_OK) {
        const char *msg = sp_slide_error(slide);
        cli_fail("%s: %s", slide_path, msg ? msg : sp_status_str(st));
        free(rgba);
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        uint8_t r = rgb[i * 3], g = rgb[i * 3 + 1], b = rgb[i * 3 + 2];
        rgba[i * 4] = r;
        rgba[i * 4 + 1] = g;
        rgba[i * 4 + 2] = b;
        rgba[i * 4 + 3] = 255;
    }
    bool ok = cli_write_image(path, rgba, m->width, m->height, m->width * 4, false);
    free(rgba);
    return ok;
}

static int print_json(const sp_tissue_mask *m) {
    cJSON *root = cJSON_CreateObject();
    if (root == NULL) {
        return cli_fail("out of memory formatting JSON");
    }
    cJSON_AddNumberToObject(root, "width", (double)m->width);
    cJSON_AddNumberToObject(root, "height", (double)m->height);
    cJSON_AddNumberToObject(root, "downsample", m->downsample);
    cJSON_AddNumberToObject(root, "threshold", m->threshold);
    cJSON_AddNumberToObject(root, "tissue_fraction", m->tissue_fraction);
    return cli_print_json(root, false);
}

int cmd_tissue(int argc, char **argv) {
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'},   {"image", required_argument, NULL, 'i'},
        {"max-side", required_argument, NULL, 'm'}, {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},           {NULL, 0, NULL, 0}};
    const char *mask_path = NULL, *image_path = NULL;
    int64_t max_side = 2048;
    bool json = false;
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":o:", opts, NULL)) != -1) {
        switch (c) {
        case 'o': mask_path = optarg; break;
        case 'i': image_path = optarg; break;
        case 'm':
            if (cli_parse_max_side(USAGE, optarg, &max_side) != CLI_OK) {
                return CLI_USAGE_ERROR;
            }
            break;
        case 'j': json = true; break;
        default: return cli_option_other(USAGE, c, argv);
        }
    }
    if (mask_path != NULL && !cli_has_extension(mask_path, ".png")) {
        return cli_usage_error(USAGE, "-o needs a .png path, not '%s'", mask_path);
    }
    if (image_path != NULL && !cli_has_extension(image_path, ".png")) {
        return cli_usage_error(USAGE, "--image needs a .png path, not '%s'", image_path);
    }
    if (optind != argc - 1) {
        return cli_usage_error(USAGE, "expected exactly one SLIDE");
    }
    const char *slide_path = argv[optind];
    sp_slide *slide = cli_open_slide(slide_path);
    if (slide == NULL) {
        return CLI_RUNTIME_ERROR;
    }
    sp_tissue_mask mask;
    char err[1024];
    int rc = CLI_OK;
    if (sp_tissue_mask_compute(slide, max_side, &mask, err, sizeof err) != SP_OK) {
        rc = cli_fail("%s: %s", slide_path, err);
    } else if (mask_path != NULL && !write_mask(mask_path, &mask)) {
        rc = CLI_RUNTIME_ERROR;
    } else if (image_path != NULL && !write_source(image_path, slide, slide_path, &mask)) {
        rc = CLI_RUNTIME_ERROR;
    } else if (json) {
        rc = print_json(&mask);
    } else {
        printf("mask %lldx%lld, downsample %.4f, threshold %d, tissue fraction %.4f\n",
               (long long)mask.width, (long long)mask.height, mask.downsample, mask.threshold,
               mask.tissue_fraction);
    }
    sp_tissue_mask_free(&mask);
    sp_slide_close(slide);
    return rc;
}
