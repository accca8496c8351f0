/* cmd_stains.c — `slidepipe stains SLIDE [--max-side N] [--json]`: a slide's H&E stain vectors
 * and 99th-percentile concentrations by Macenko's method (sp_stains_estimate, docs/stains.md),
 * with the number of stained pixels they come from; as text for people or as one JSON object
 * {"h", "e", "max_h", "max_e", "pixels"} for programs. A slide with too few stained pixels is a
 * runtime error (exit 1). */
#include <getopt.h>
#include <stdio.h>

#include "cli.h"

static const char USAGE[] = "slidepipe stains SLIDE [--max-side N] [--json]";

static void print_vector(const char *name, const double v[3]) {
    printf("\"%s\": [%.17g, %.17g, %.17g]", name, v[0], v[1], v[2]);
}

int cmd_stains(int argc, char **argv) {
    static const struct option opts[] = {{"max-side", required_argument, NULL, 'm'},
                                         {"json", no_argument, NULL, 'j'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    int64_t max_side = 0;
    bool json = false;
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        switch (c) {
        case 'm':
            if (cli_parse_max_side(USAGE, optarg, &max_side) != CLI_OK) {
                return CLI_USAGE_ERROR;
            }
            break;
        case 'j': json = true; break;
        default: return cli_option_other(USAGE, c, argv);
        }
    }
    if (optind != argc - 1) {
        return cli_usage_error(USAGE, "expected exactly one SLIDE");
    }
    sp_slide *slide = cli_open_slide(argv[optind]);
    if (slide == NULL) {
        return CLI_RUNTIME_ERROR;
    }
    sp_stains s;
    char err[1024];
    sp_status st = sp_stains_estimate(slide, max_side, &s, err, sizeof err);
    sp_slide_close(slide);
    if (st != SP_OK) {
        return cli_fail("%s", err);
    }
    if (json) {
        /* %.17g: every double round-trips, so programs see the estimate itself. */
        printf("{");
        print_vector("h", s.h);
        printf(", ");
        print_vector("e", s.e);
        printf(", \"max_h\": %.17g, \"max_e\": %.17g, \"pixels\": %lld}\n", s.max_h, s.max_e,
               (long long)s.pixels);
    } else {
        printf("%s\n", argv[optind]);
        printf("  haematoxylin: %.6f %.6f %.6f  max %.6f\n", s.h[0], s.h[1], s.h[2], s.max_h);
        printf("  eosin:        %.6f %.6f %.6f  max %.6f\n", s.e[0], s.e[1], s.e[2], s.max_e);
        printf("  stained pixels: %lld\n", (long long)s.pixels);
    }
    return CLI_OK;
}
