/* cmd_synth.c — `slidepipe synth OUT.tif [--size N] [--seed S] [--artifacts]`: write the
 * built-in synthetic H&E example slide (a pyramidal, JPEG-tiled TIFF); with --artifacts, pen
 * strokes, a blurred region and a fold are painted in (sp_synth_write_with) and their
 * ground-truth rectangles go to the JSON sidecar OUT.tif.artifacts.json, whose path is printed
 * (docs/qc.md). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char USAGE[] =
    "slidepipe synth OUT.tif [--size N (default 4096)] [--seed S] [--artifacts]";

static const char *const KIND_NAMES[SP_SYNTH_ARTIFACT_COUNT] = {"pen_blue", "pen_green",
                                                                "pen_black", "blur", "fold"};

/* The sidecar: {"slide", "size", "seed", "artifacts": [{"kind", "x", "y", "width", "height"}]},
 * rectangles in level-0 pixels. */
static int write_sidecar(const char *slide, int64_t size, int64_t seed) {
    sp_synth_artifact a[SP_SYNTH_ARTIFACT_COUNT];
    if (sp_synth_artifacts(size, a) != SP_OK) {
        return cli_fail("no artefacts for a %lld-pixel slide", (long long)size);
    }
    size_t n = strlen(slide) + sizeof ".artifacts.json";
    char *path = malloc(n);
    if (path == NULL) {
        return cli_fail("out of memory");
    }
    snprintf(path, n, "%s.artifacts.json", slide);
    char *tmp;
    FILE *f = cli_create_temp(path, &tmp);
    if (f == NULL) {
        free(path);
        return CLI_RUNTIME_ERROR;
    }
    fputs("{\"slide\": ", f);
    cli_json_string(f, slide);
    fprintf(f, ", \"size\": %lld, \"seed\": %lld, \"artifacts\": [", (long long)size,
            (long long)seed);
    for (int i = 0; i < SP_SYNTH_ARTIFACT_COUNT; i++) {
        fprintf(f,
                "%s\n  {\"kind\": \"%s\", \"x\": %lld, \"y\": %lld, \"width\": %lld, "
                "\"height\": %lld}",
                i ? "," : "", KIND_NAMES[a[i].kind], (long long)a[i].x, (long long)a[i].y,
                (long long)a[i].width, (long long)a[i].height);
    }
    fputs("\n]}\n", f);
    bool ok = cli_commit_temp(f, tmp, path, true);
    if (ok) {
        printf("artifacts: %s\n", path);
    }
    free(path);
    return ok ? CLI_OK : CLI_RUNTIME_ERROR;
}

int cmd_synth(int argc, char **argv) {
    static const struct option opts[] = {{"size", required_argument, NULL, 's'},
                                         {"seed", required_argument, NULL, 'S'},
                                         {"artifacts", no_argument, NULL, 'a'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    int64_t size = 4096, seed = 1;
    bool artifacts = false;
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
        case 'a': artifacts = true; break;
        default: return cli_option_other(USAGE, c, argv);
        }
    }
    if (optind != argc - 1) {
        return cli_usage_error(USAGE, "expected exactly one OUT.tif");
    }
    if (artifacts && size < 1024) {
        return cli_usage_error(USAGE, "--artifacts needs --size of at least 1024");
    }
    char err[1024];
    if (sp_synth_write_with(argv[optind], size, (uint64_t)seed,
                            artifacts ? SP_SYNTH_ARTIFACTS : 0, err, sizeof err) != SP_OK) {
        return cli_fail("%s", err);
    }
    return artifacts ? write_sidecar(argv[optind], size, seed) : CLI_OK;
}
