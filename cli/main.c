/* main.c — the slidepipe command: dispatches to one subcommand per file. Exit codes: 0 success,
 * 1 runtime error (one line on stderr starting "slidepipe: "), 2 usage error, 3 when a run over
 * many slides finished but some failed. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} COMMANDS[] = {
    {"info", cmd_info, "print a slide's levels, resolution, associated images, properties"},
    {"region", cmd_region, "read a region of a level into a PNG or raw RGBA file"},
    {"thumbnail", cmd_thumbnail, "write a thumbnail of the whole slide as PNG"},
    {"associated", cmd_associated, "write an associated image (label, macro, ...) as PNG"},
    {"synth", cmd_synth, "write a synthetic H&E example slide"},
    {"convert", cmd_convert, "convert a slide into an OME-Zarr pyramid with a dataset hash"},
    {"verify", cmd_verify, "re-hash a converted store against its manifest and pixel hash"},
    {"hash", cmd_hash, "print the pixel hash of a slide or store (decoded pixels only)"},
    {"process", cmd_process, "run an op (sobel, gaussian, od, grey, macenko, reinhard) over a level into OME-Zarr"},
    {"gpu", cmd_gpu, "show the CUDA devices and GPU libraries slidepipe can use"},
    {"spectrum", cmd_spectrum, "log-magnitude spectral statistics of slides (histogram, mean, std)"},
    {"bench", cmd_bench, "bench read: how fast random regions (or a level) can be read"},
    {"tissue", cmd_tissue, "compute a slide's tissue mask (PNG, coverage, threshold)"},
    {"tiles", cmd_tiles, "list the grid tiles of a level that hold enough tissue"},
    {"stains", cmd_stains, "estimate a slide's H&E stain vectors (Macenko)"},
    {"serve", cmd_serve, "serve slides and stores over HTTP: viewer, Deep Zoom, IIIF"},
};

static void usage(FILE *out) {
    fprintf(out, "usage: slidepipe COMMAND [ARGS]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++) {
        fprintf(out, "  %-11s %s\n", COMMANDS[i].name, COMMANDS[i].summary);
    }
    fprintf(out, "\n'slidepipe COMMAND --help' shows a command's options.\n");
}

int main(int argc, char **argv) {
    cli_tune_allocator();
    if (argc < 2) {
        fprintf(stderr, "slidepipe: no command given\n");
        usage(stderr);
        return CLI_USAGE_ERROR;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(stdout);
        return CLI_OK;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("slidepipe %s\n", sp_version());
        return CLI_OK;
    }
    for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++) {
        if (strcmp(argv[1], COMMANDS[i].name) == 0) {
            return COMMANDS[i].run(argc - 1, argv + 1);
        }
    }
    fprintf(stderr, "slidepipe: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return CLI_USAGE_ERROR;
}
