/* cmd_associated.c — `slidepipe associated SLIDE NAME -o OUT.png`: write one associated image
 * (label, macro, thumbnail, ...) as an RGBA PNG. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"

static const char USAGE[] = "slidepipe associated SLIDE NAME -o OUT.png";

int cmd_associated(int argc, char **argv) {
    static const struct option opts[] = {{"output", required_argument, NULL, 'o'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    const char *out = NULL;
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":o:", opts, NULL)) != -1) {
        switch (c) {
        case 'o': out = optarg; break;
        default: return cli_option_other(USAGE, c, argv);
        }
    }
    if (optind != argc - 2) {
        return cli_usage_error(USAGE, "expected SLIDE and NAME");
    }
    if (out == NULL || !cli_has_extension(out, ".png")) {
        return cli_usage_error(USAGE, "-o OUT.png is required");
    }
    const char *path = argv[optind], *name = argv[optind + 1];
    sp_slide *slide = cli_open_slide(path);
    if (slide == NULL) {
        return CLI_RUNTIME_ERROR;
    }
    int64_t w, h;
    int rc = CLI_OK;
    if (sp_slide_associated_dimensions(slide, name, &w, &h) != SP_OK) {
        rc = cli_fail("%s has no associated image '%s' (it has %d)", path, name,
                      sp_slide_associated_count(slide));
        sp_slide_close(slide);
        return rc;
    }
    uint8_t *buf = malloc((size_t)(w * h * 4));
    if (buf == NULL) {
        sp_slide_close(slide);
        return cli_fail("out of memory");
    }
    sp_status st = sp_slide_read_associated(slide, name, SP_PIXEL_RGBA8, buf, w * 4);
    if (st != SP_OK) {
        const char *msg = sp_slide_error(slide);
        rc = cli_fail("%s: %s", path, msg ? msg : sp_status_str(st));
    } else if (!cli_write_image(out, buf, w, h, w * 4, false)) {
        rc = CLI_RUNTIME_ERROR;
    }
    free(buf);
    sp_slide_close(slide);
    return rc;
}
