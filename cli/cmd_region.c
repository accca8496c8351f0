/* cmd_region.c — `slidepipe region SLIDE --level L --x X --y Y --width W --height H -o OUT`:
 * read one region (x, y in level-0 pixels; width, height in pixels of the level) and write it
 * as an RGBA PNG (.png) or raw straight RGBA8 bytes, row-major with no header (.rgba). With
 * --device cuda the region is read into GPU memory (sp_cuda_read_region) and copied back to be
 * written, which shows the GPU path gives the same pixels. With --icc the pixels are converted
 * from the slide's embedded ICC profile to sRGB (as stored when it has none); --z/--c/--t read
 * another focal plane, channel or time point (OME-TIFF). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char USAGE[] =
    "slidepipe region SLIDE --level L --x X --y Y --width W --height H -o OUT.png|OUT.rgba "
    "[--device cpu|cuda] [--icc] [--z Z] [--c C] [--t T]";

/* The largest region one call writes: 4 GiB of RGBA. */
#define MAX_REGION_BYTES (INT64_C(4) << 30)

/* Read the region into device memory and copy it back into `buf`. A failure of the GPU itself
 * is reported here (and *rc set); a failure of the slide is left to the caller. */
static sp_status read_on_gpu(sp_slide *slide, uint8_t *buf, int32_t level, int64_t x, int64_t y,
                             int64_t w, int64_t h, int *rc) {
    char err[300];
    sp_cuda_context *ctx = NULL;
    sp_status st = sp_cuda_context_create(-1, &ctx, err, sizeof err);
    if (st != SP_OK) {
        *rc = cli_fail("--device cuda: %s", err);
        return st;
    }
    size_t bytes = (size_t)(w * h * 4);
    void *dev = NULL;
    st = sp_cuda_alloc(ctx, bytes, &dev);
    if (st == SP_OK) {
        st = sp_cuda_read_region(ctx, slide, SP_PIXEL_RGBA8, dev, w * 4, level, x, y, w, h);
        if (st == SP_OK) {
            st = sp_cuda_copy_to_host(ctx, buf, dev, bytes);
        }
    }
    if (st != SP_OK && sp_slide_error(slide) == NULL) {
        *rc = cli_fail("--device cuda: %s", sp_cuda_context_error(ctx));
    }
    sp_cuda_free(ctx, dev);
    sp_cuda_context_destroy(ctx);
    return st;
}

int cmd_region(int argc, char **argv) {
    static const struct option opts[] = {{"level", required_argument, NULL, 'l'},
                                         {"x", required_argument, NULL, 'x'},
                                         {"y", required_argument, NULL, 'y'},
                                         {"width", required_argument, NULL, 'w'},
                                         {"height", required_argument, NULL, 'H'},
                                         {"output", required_argument, NULL, 'o'},
                                         {"device", required_argument, NULL, 'd'},
                                         {"icc", no_argument, NULL, 'i'},
                                         {"z", required_argument, NULL, 'Z'},
                                         {"c", required_argument, NULL, 'C'},
                                         {"t", required_argument, NULL, 'T'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    int64_t v[5] = {0, -1, -1, -1, -1}; /* level, x, y, width, height */
    bool seen[5] = {false};
    const char *out = NULL;
    bool cuda = false, icc = false;
    int64_t plane[3] = {0, 0, 0}; /* --z, --c, --t */
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":o:", opts, NULL)) != -1) {
        int i;
        int64_t lo = 0, hi = INT64_C(1) << 40;
        switch (c) {
        case 'l':
            i = 0;
            hi = 1 << 20;
            break;
        case 'x':
            i = 1;
            lo = -(INT64_C(1) << 40);
            break;
        case 'y':
            i = 2;
            lo = -(INT64_C(1) << 40);
            break;
        case 'w':
            i = 3;
            lo = 1;
            hi = 1 << 20;
            break;
        case 'H':
            i = 4;
            lo = 1;
            hi = 1 << 20;
            break;
        case 'o': out = optarg; continue;
        case 'd':
            if (strcmp(optarg, "cpu") != 0 && strcmp(optarg, "cuda") != 0) {
                return cli_usage_error(USAGE, "--device is cpu or cuda, not '%s'", optarg);
            }
            cuda = strcmp(optarg, "cuda") == 0;
            continue;
        case 'i': icc = true; continue;
        case 'Z':
        case 'C':
        case 'T':
            if (cli_plane_option(c, optarg, plane, USAGE) != CLI_OK) {
                return CLI_USAGE_ERROR;
            }
            continue;
        default: return cli_option_other(USAGE, c, argv);
        }
        if (!cli_parse_int(optarg, lo, hi, &v[i])) {
            return cli_usage_error(USAGE, "bad value '%s' for --%s (an integer in %lld..%lld)",
                                   optarg, opts[i].name, (long long)lo, (long long)hi);
        }
        seen[i] = true;
    }
    for (int i = 0; i < 5; i++) {
        if (!seen[i]) {
            return cli_usage_error(USAGE, "--%s is required", opts[i].name);
        }
    }
    if (out == NULL) {
        return cli_usage_error(USAGE, "-o OUT is required");
    }
    bool raw = cli_has_extension(out, ".rgba");
    if (!raw && !cli_has_extension(out, ".png")) {
        return cli_usage_error(USAGE, "OUT must end in .png or .rgba: '%s'", out);
    }
    if (optind != argc - 1) {
        return cli_usage_error(USAGE, "expected exactly one SLIDE");
    }
    int64_t w = v[3], h = v[4];
    if (w * h * 4 > MAX_REGION_BYTES) {
        return cli_usage_error(USAGE, "a %lldx%lld region is over the 4 GiB limit of one read",
                               (long long)w, (long long)h);
    }
    sp_slide *slide = cli_open_slide_plane(argv[optind], plane);
    if (slide == NULL) {
        return CLI_RUNTIME_ERROR;
    }
    if (icc && !cli_slide_icc(slide)) {
        sp_slide_close(slide);
        return CLI_RUNTIME_ERROR;
    }
    int rc = CLI_OK;
    if (v[0] >= sp_slide_level_count(slide)) {
        rc = cli_usage_error(USAGE, "level %lld does not exist (the slide has %d levels)",
                             (long long)v[0], sp_slide_level_count(slide));
        sp_slide_close(slide);
        return rc;
    }
    uint8_t *buf = malloc((size_t)(w * h * 4));
    if (buf == NULL) {
        sp_slide_close(slide);
        return cli_fail("out of memory for a %lldx%lld region", (long long)w, (long long)h);
    }
    sp_status st = cuda ? read_on_gpu(slide, buf, (int32_t)v[0], v[1], v[2], w, h, &rc)
                        : sp_slide_read_region(slide, SP_PIXEL_RGBA8, buf, w * 4, (int32_t)v[0],
                                               v[1], v[2], w, h);
    if (st != SP_OK && rc == CLI_OK) {
        const char *msg = sp_slide_error(slide);
        rc = cli_fail("%s: %s", argv[optind], msg ? msg : sp_status_str(st));
    } else if (st == SP_OK && !cli_write_image(out, buf, w, h, w * 4, raw)) {
        rc = CLI_RUNTIME_ERROR;
    }
    free(buf);
    sp_slide_close(slide);
    return rc;
}
