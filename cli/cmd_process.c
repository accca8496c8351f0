/* cmd_process.c — `slidepipe process SLIDE OUT.zarr --op OP [options]`: run an op over one level
 * of a slide, tile by tile with halos (sp_process_to_zarr), into an OME-Zarr store, and print its
 * dataset hash. Progress on a terminal as for convert; elsewhere quiet until the result on
 * stdout: "dataset_hash HEX", or with --json {"dataset_hash", "op", "level", "seconds"}.
 * --mode global runs the whole-level baseline (same output, memory of the whole level);
 * --dtype uint8 stores a float op's values rounded and clipped to 0..255. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static const char USAGE[] =
    "slidepipe process SLIDE OUT.zarr --op grey|od|sobel|gaussian:SIGMA|macenko|reinhard [--level L]\n"
    "         [--chunk N] [--codec zstd|blosc-lz4|blosc-zstd|gzip|none] [--codec-level L]\n"
    "         [--format ome-zarr-0.4|ome-zarr-0.5] [--threads N] [--in-flight N]\n"
    "         [--mode tiled|global] [--device cpu|cuda] [--dtype op|uint8] [--json]";

int cmd_process(int argc, char **argv) {
    static const struct option opts[] = {{"op", required_argument, NULL, 'o'},
                                         {"level", required_argument, NULL, 'l'},
                                         {"chunk", required_argument, NULL, 'c'},
                                         {"codec", required_argument, NULL, 'C'},
                                         {"codec-level", required_argument, NULL, 'L'},
                                         {"format", required_argument, NULL, 'f'},
                                         {"threads", required_argument, NULL, 't'},
                                         {"in-flight", required_argument, NULL, 'i'},
                                         {"mode", required_argument, NULL, 'm'},
                                         {"device", required_argument, NULL, 'd'},
                                         {"dtype", required_argument, NULL, 'D'},
                                         {"json", no_argument, NULL, 'j'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    static const char *const formats[] = {"ome-zarr-0.4", "ome-zarr-0.5"};
    static const char *const modes[] = {"tiled", "global"};
    static const char *const dtypes[] = {"op", "uint8"};
    /* Option values in sp_process_option order; -1 = not given. */
    int64_t value[SP_PROCESS_DTYPE + 1];
    for (size_t i = 0; i < sizeof value / sizeof value[0]; i++) {
        value[i] = -1;
    }
    const char *op = NULL;
    bool json = false;
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        int which = -1, i;
        int64_t lo = 0, hi = 0;
        const char *what = NULL;
        switch (c) {
        case 'o': op = optarg; continue;
        case 'f':
            if (!cli_parse_name(optarg, formats, 2, &i)) {
                return cli_usage_error(USAGE, "bad --format '%s' (ome-zarr-0.4 or ome-zarr-0.5)",
                                       optarg);
            }
            value[SP_PROCESS_FORMAT] = i == 0 ? SP_ZARR_OME_04 : SP_ZARR_OME_05;
            continue;
        case 'C': {
            int rc = cli_parse_codec(USAGE, optarg, &value[SP_PROCESS_CODEC]);
            if (rc != CLI_OK) {
                return rc;
            }
            continue;
        }
        case 'm':
            if (!cli_parse_name(optarg, modes, 2, &i)) {
                return cli_usage_error(USAGE, "bad --mode '%s' (tiled or global)", optarg);
            }
            value[SP_PROCESS_MODE] = i == 0 ? SP_PROCESS_TILED : SP_PROCESS_GLOBAL;
            continue;
        case 'd':
            if (strcmp(optarg, "cpu") != 0 && strcmp(optarg, "cuda") != 0) {
                return cli_usage_error(USAGE, "bad --device '%s' (cpu or cuda)", optarg);
            }
            value[SP_PROCESS_DEVICE] = strcmp(optarg, "cuda") == 0 ? SP_DEVICE_CUDA : SP_DEVICE_CPU;
            continue;
        case 'D':
            if (!cli_parse_name(optarg, dtypes, 2, &i)) {
                return cli_usage_error(USAGE, "bad --dtype '%s' (op or uint8)", optarg);
            }
            value[SP_PROCESS_DTYPE] = i == 0 ? SP_PROCESS_DTYPE_OP : SP_PROCESS_DTYPE_UINT8;
            continue;
        case 'l':
            which = SP_PROCESS_LEVEL;
            what = "level";
            break;
        case 'c':
            which = SP_PROCESS_CHUNK;
            what = "chunk";
            break;
        case 'L':
            which = SP_PROCESS_CODEC_LEVEL;
            what = "codec-level";
            break;
        case 't':
            which = SP_PROCESS_THREADS;
            what = "threads";
            break;
        case 'i':
            which = SP_PROCESS_IN_FLIGHT;
            what = "in-flight";
            break;
        case 'j': json = true; continue;
        default: return cli_option_other(USAGE, c, argv);
        }
        /* The library's range; a codec level given is 1 or more (0, the codec's default, is
         * what leaving the option out means). */
        sp_process_option_range((sp_process_option)which, NULL, &lo, &hi);
        lo = which == SP_PROCESS_CODEC_LEVEL ? 1 : lo;
        if (!cli_parse_int(optarg, lo, hi, &value[which])) {
            return cli_usage_error(USAGE, "bad value '%s' for --%s (an integer in %lld..%lld)",
                                   optarg, what, (long long)lo, (long long)hi);
        }
    }
    if (optind != argc - 2) {
        return cli_usage_error(USAGE, "expected SLIDE and OUT.zarr");
    }
    if (value[SP_PROCESS_DEVICE] == SP_DEVICE_CUDA && value[SP_PROCESS_MODE] == SP_PROCESS_GLOBAL) {
        return cli_usage_error(USAGE, "--mode global runs on the CPU only (--device cpu)");
    }
    if (op == NULL) {
        return cli_usage_error(USAGE, "--op is required");
    }
    char err[1024];
    if (sp_op_check(op, err, sizeof err) != SP_OK) {
        return cli_usage_error(USAGE, "%s", err);
    }
    int codec =
        value[SP_PROCESS_CODEC] >= 0 ? (int)value[SP_PROCESS_CODEC] : SP_ZARR_CODEC_BLOSC_LZ4;
    int rc = cli_check_codec_level(USAGE, codec, value[SP_PROCESS_CODEC_LEVEL], "--codec-level");
    if (rc != CLI_OK) {
        return rc;
    }
    sp_process_options *options = NULL;
    if (sp_process_options_create(&options) != SP_OK) {
        return cli_fail("out of memory");
    }
    for (int i = 0; i <= SP_PROCESS_DTYPE; i++) {
        if (value[i] >= 0 &&
            sp_process_options_set(options, (sp_process_option)i, value[i]) != SP_OK) {
            sp_process_options_destroy(options);
            return cli_usage_error(USAGE, "option value %lld is out of range", (long long)value[i]);
        }
    }
    const char *in = argv[optind], *out = argv[optind + 1];
    sp_slide *slide = cli_open_slide(in);
    if (slide == NULL) {
        sp_process_options_destroy(options);
        return CLI_RUNTIME_ERROR;
    }
    int32_t level = value[SP_PROCESS_LEVEL] > 0 ? (int32_t)value[SP_PROCESS_LEVEL] : 0;
    int64_t w = 0, h = 0;
    if (sp_slide_level_dimensions(slide, level, &w, &h) != SP_OK) {
        int levels = (int)sp_slide_level_count(slide);
        sp_slide_close(slide);
        sp_process_options_destroy(options);
        return cli_usage_error(USAGE, "level %d does not exist (the slide has %d)", (int)level,
                               levels);
    }
    cli_progress ps = {0};
    ps.label = "processing";
    ps.unit = "chunks";
    ps.start = cli_now();
    ps.pixels = (double)w * (double)h;
    bool tty = isatty(STDERR_FILENO);
    char hash[65] = "";
    sp_status st = sp_process_to_zarr(slide, op, out, options, tty ? cli_progress_show : NULL, &ps,
                                      hash, err, sizeof err);
    double seconds = cli_now() - ps.start;
    if (ps.shown) {
        fputc('\n', stderr);
    }
    sp_slide_close(slide);
    sp_process_options_destroy(options);
    if (st != SP_OK) {
        return cli_fail("%s", err);
    }
    if (json) {
        printf("{\"dataset_hash\": \"%s\", \"op\": \"%s\", \"level\": %d, \"seconds\": %.3f}\n",
               hash, op, (int)level, seconds);
    } else {
        printf("dataset_hash %s\n", hash);
    }
    return CLI_OK;
}
