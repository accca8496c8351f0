/* cmd_synth.c — `slidepipe synth OUT.tif [--size N] [--seed S]`: write the built-in synthetic
 * H&E example slide (a pyramidal, JPEG-tiled TIFF). */
#include <getopt.h>
#include <stdio.h>

#include "cli.h"

static const char USAGE[] = "slidepipe synth OUT.tif [--size N (default 4096)] [--seed S]";

int cmd_synth(int argc, char **argv) {
    static const struct option opts[] = {{"size", required_argument, NULL, 's'},
                                         {"seed", required_argument, NULL, 'S'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    int64_t size = 4096, seed = 1;
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        switch (c) {
        case 's':
            if (!cli_parse_int(optarg, 1, 1 << 20, &size)) {
                return cli_usage_error(USAGE, "bad --size '%s' (an integer in 1..1048576)", optarg);
            }
            break;
        case 'S':
            if (!cli_parse_int(optarg, 0, INT64_MAX, &seed)) {
                return cli_usage_error(USAGE, "bad --seed '%s' (a non-negative integer)", optarg);
            }
            break;
        case 'h': printf("usage: %s\n", USAGE); return CLI_OK;
        case ':': return cli_usage_error(USAGE, "option '%s' needs a value", argv[optind - 1]);
        default: return cli_usage_error(USAGE, "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind != argc - 1) {
        return cli_usage_error(USAGE, "expected exactly one OUT.tif");
    }
    char err[1024];
    if (sp_synth_write(argv[optind], size, (uint64_t)seed, err, sizeof err) != SP_OK) {
        return cli_fail("%s", err);
    }
    return CLI_OK;
}
