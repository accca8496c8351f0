/* cmd_convert.c — `slidepipe convert SLIDE OUT.zarr [options]`: write a slide as an OME-Zarr
 * pyramid (sp_convert_to_zarr) and print its dataset hash. On a terminal a single progress line
 * (percent, chunks, megapixels per second, time left) updates on stderr; elsewhere the command is
 * quiet until it prints the result on stdout: "dataset_hash HEX", or with --json
 * {"dataset_hash": HEX, "levels": N, "seconds": S}. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static const char USAGE[] =
    "slidepipe convert SLIDE OUT.zarr [--format ome-zarr-0.4|ome-zarr-0.5] [--chunk N]\n"
    "         [--codec zstd|blosc-lz4|blosc-zstd|gzip|none] [--level L] [--shard N] [--levels N]\n"
    "         [--layout cyx|yxc] [--threads N] [--resume] [--json]";

/* The number of levels of the written store, read back as a slide (0 when it cannot be): the
 * same for a folder and an s3:// prefix. */
static int count_levels(const char *out) {
    sp_slide *written = NULL;
    char err[256];
    if (sp_slide_open(out, &written, err, sizeof err) != SP_OK) {
        return 0;
    }
    int levels = sp_slide_level_count(written);
    sp_slide_close(written);
    return levels;
}

int cmd_convert(int argc, char **argv) {
    static const struct option opts[] = {
        {"format", required_argument, NULL, 'f'}, {"chunk", required_argument, NULL, 'c'},
        {"codec", required_argument, NULL, 'C'},  {"level", required_argument, NULL, 'l'},
        {"shard", required_argument, NULL, 's'},  {"levels", required_argument, NULL, 'L'},
        {"layout", required_argument, NULL, 'y'}, {"threads", required_argument, NULL, 't'},
        {"resume", no_argument, NULL, 'r'},       {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0}};
    static const char *const formats[] = {"ome-zarr-0.4", "ome-zarr-0.5"};
    static const char *const layouts[] = {"cyx", "yxc"};
    /* Option values in sp_convert_option order; -1 = not given. */
    int64_t value[SP_CONVERT_RESUME + 1];
    for (size_t i = 0; i < sizeof value / sizeof value[0]; i++) {
        value[i] = -1;
    }
    bool json = false;
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        int which = -1;
        int64_t lo = 0, hi = 0;
        const char *what = NULL;
        switch (c) {
        case 'f': {
            int i;
            if (!cli_parse_name(optarg, formats, 2, &i)) {
                return cli_usage_error(USAGE, "bad --format '%s' (ome-zarr-0.4 or ome-zarr-0.5)",
                                       optarg);
            }
            value[SP_CONVERT_FORMAT] = i == 0 ? SP_ZARR_OME_04 : SP_ZARR_OME_05;
            continue;
        }
        case 'C': {
            int i;
            if (!cli_parse_name(optarg, cli_codec_names, CLI_CODECS, &i)) {
                return cli_usage_error(
                    USAGE, "bad --codec '%s' (zstd, blosc-lz4, blosc-zstd, gzip or none)", optarg);
            }
            value[SP_CONVERT_CODEC] = i;
            continue;
        }
        case 'y': {
            int i;
            if (!cli_parse_name(optarg, layouts, 2, &i)) {
                return cli_usage_error(USAGE, "bad --layout '%s' (cyx or yxc)", optarg);
            }
            value[SP_CONVERT_LAYOUT] = i == 0 ? SP_ZARR_LAYOUT_CYX : SP_ZARR_LAYOUT_YXC;
            continue;
        }
        case 'c': which = SP_CONVERT_CHUNK; lo = 256; hi = 4096; what = "chunk"; break;
        case 'l': which = SP_CONVERT_LEVEL; lo = 1; hi = 22; what = "level"; break;
        case 's': which = SP_CONVERT_SHARD; lo = 0; hi = 256; what = "shard"; break;
        case 'L': which = SP_CONVERT_LEVELS; lo = 0; hi = 64; what = "levels"; break;
        case 't': which = SP_CONVERT_THREADS; lo = 0; hi = 1024; what = "threads"; break;
        case 'r': value[SP_CONVERT_RESUME] = 1; continue;
        case 'j': json = true; continue;
        case 'h': printf("usage: %s\n", USAGE); return CLI_OK;
        case ':': return cli_usage_error(USAGE, "option '%s' needs a value", argv[optind - 1]);
        default: return cli_usage_error(USAGE, "unknown option '%s'", argv[optind - 1]);
        }
        if (!cli_parse_int(optarg, lo, hi, &value[which])) {
            return cli_usage_error(USAGE, "bad value '%s' for --%s (an integer in %lld..%lld)",
                                   optarg, what, (long long)lo, (long long)hi);
        }
    }
    if (optind != argc - 2) {
        return cli_usage_error(USAGE, "expected SLIDE and OUT.zarr");
    }
    if (value[SP_CONVERT_SHARD] > 0 && value[SP_CONVERT_FORMAT] != SP_ZARR_OME_05) {
        return cli_usage_error(USAGE, "--shard needs --format ome-zarr-0.5 (Zarr v3)");
    }
    int codec = value[SP_CONVERT_CODEC] >= 0 ? (int)value[SP_CONVERT_CODEC] : SP_ZARR_CODEC_ZSTD;
    int rc = cli_check_codec_level(USAGE, codec, value[SP_CONVERT_LEVEL], "--level");
    if (rc != CLI_OK) {
        return rc;
    }
    sp_convert_options *options = NULL;
    if (sp_convert_options_create(&options) != SP_OK) {
        return cli_fail("out of memory");
    }
    for (int i = 0; i <= SP_CONVERT_RESUME; i++) {
        if (value[i] >= 0 &&
            sp_convert_options_set(options, (sp_convert_option)i, value[i]) != SP_OK) {
            sp_convert_options_destroy(options);
            return cli_usage_error(USAGE, "option value %lld is out of range", (long long)value[i]);
        }
    }
    const char *in = argv[optind], *out = argv[optind + 1];
    sp_slide *slide = cli_open_slide(in);
    if (slide == NULL) {
        sp_convert_options_destroy(options);
        return CLI_RUNTIME_ERROR;
    }
    cli_progress ps = {0};
    ps.label = "converting";
    ps.unit = "chunks";
    ps.start = cli_now();
    int64_t w = 0, h = 0;
    sp_slide_level_dimensions(slide, 0, &w, &h);
    ps.pixels = (double)w * (double)h;
    bool tty = isatty(STDERR_FILENO);
    char hash[65] = "";
    char err[1024];
    sp_status st = sp_convert_to_zarr(slide, out, options, tty ? cli_progress_show : NULL, &ps, hash,
                                      err, sizeof err);
    double seconds = cli_now() - ps.start;
    if (ps.shown) {
        fputc('\n', stderr);
    }
    sp_slide_close(slide);
    sp_convert_options_destroy(options);
    if (st != SP_OK) {
        return cli_fail("%s", err);
    }
    if (json) {
        printf("{\"dataset_hash\": \"%s\", \"levels\": %d, \"seconds\": %.3f}\n", hash,
               count_levels(out), seconds);
    } else {
        printf("dataset_hash %s\n", hash);
    }
    return CLI_OK;
}
