/* cmd_hash.c — `slidepipe hash SLIDE [--json] [--threads N]`: the pixel hash of any slide or
 * store (sp_pixel_hash, docs/pixel-hash.md), which depends on the decoded pixels of its levels
 * alone. Text output is one line "pixel_hash HEX"; --json prints {"pixel_hash", "definition",
 * "levels", "seconds"}. On a terminal stderr shows one updating progress line (blocks of
 * 256 x 256 hashed of the total), ended by a newline. */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdio.h>
#include <unistd.h>

#include "cli.h"

static const char USAGE[] = "slidepipe hash SLIDE [--json] [--threads N]";

int cmd_hash(int argc, char **argv) {
    static const struct option opts[] = {{"threads", required_argument, NULL, 't'},
                                         {"json", no_argument, NULL, 'j'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    int64_t threads = 0;
    bool json = false;
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        switch (c) {
        case 't':
            if (!cli_parse_int(optarg, 0, 1024, &threads)) {
                return cli_usage_error(USAGE, "--threads takes 0 (all cores) to 1024");
            }
            break;
        case 'j': json = true; break;
        default: return cli_option_other(USAGE, c, argv);
        }
    }
    if (optind != argc - 1) {
        return cli_usage_error(USAGE, "expected exactly one SLIDE");
    }
    double start = cli_now();
    sp_slide *slide = cli_open_slide(argv[optind]);
    if (slide == NULL) {
        return CLI_RUNTIME_ERROR;
    }
    cli_progress ps = {.label = "hashing", .unit = "blocks", .start = start};
    for (int32_t k = 0; k < sp_slide_level_count(slide); k++) {
        int64_t w = 0, h = 0;
        sp_slide_level_dimensions(slide, k, &w, &h);
        ps.pixels += (double)w * (double)h;
    }
    bool tty = isatty(STDERR_FILENO);
    char hex[65], err[1024];
    sp_status st = sp_pixel_hash(slide, (int)threads, hex, tty ? cli_progress_show : NULL, &ps, err,
                                 sizeof err);
    if (ps.shown) {
        fputc('\n', stderr);
    }
    int32_t levels = sp_slide_level_count(slide);
    sp_slide_close(slide);
    if (st != SP_OK) {
        return cli_fail("%s", err);
    }
    if (!json) {
        printf("pixel_hash %s\n", hex);
        return CLI_OK;
    }
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "pixel_hash", hex);
    cJSON_AddStringToObject(root, "definition", SP_PIXEL_HASH_DEFINITION);
    cJSON_AddNumberToObject(root, "levels", levels);
    cJSON_AddNumberToObject(root, "seconds", cli_now() - start);
    return cli_print_json(root, false);
}
