/* convert_run.c — the conversion front end shared by `slidepipe convert` and
 * `slidepipe-mpi convert` (see convert_run.h): argument parsing, the cohort's slide list and store
 * names, converting one slide, the report lines and the summary.
 */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "convert_run.h"
#include "slide_list.h"

int convert_parse_args(int argc, char **argv, const char *prog, convert_args *a) {
    static const struct option opts[] = {{"format", required_argument, NULL, 'f'},
                                         {"chunk", required_argument, NULL, 'c'},
                                         {"codec", required_argument, NULL, 'C'},
                                         {"level", required_argument, NULL, 'l'},
                                         {"shard", required_argument, NULL, 's'},
                                         {"levels", required_argument, NULL, 'L'},
                                         {"layout", required_argument, NULL, 'y'},
                                         {"threads", required_argument, NULL, 't'},
                                         {"resume", no_argument, NULL, 'r'},
                                         {"json", no_argument, NULL, 'j'},
                                         {"list", required_argument, NULL, 'i'},
                                         {"out-dir", required_argument, NULL, 'o'},
                                         {"icc", no_argument, NULL, 'I'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    static const char *const formats[] = {"ome-zarr-0.4", "ome-zarr-0.5"};
    static const char *const layouts[] = {"cyx", "yxc"};
    char usage[768];
    snprintf(usage, sizeof usage, "%s %s", prog, CONVERT_USAGE);
    memset(a, 0, sizeof *a);
    for (size_t i = 0; i < sizeof a->value / sizeof a->value[0]; i++) {
        a->value[i] = -1;
    }
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
                return cli_usage_error(usage, "bad --format '%s' (ome-zarr-0.4 or ome-zarr-0.5)",
                                       optarg);
            }
            a->value[SP_CONVERT_FORMAT] = i == 0 ? SP_ZARR_OME_04 : SP_ZARR_OME_05;
            continue;
        }
        case 'C': {
            int rc = cli_parse_codec(usage, optarg, &a->value[SP_CONVERT_CODEC]);
            if (rc != CLI_OK) {
                return rc;
            }
            continue;
        }
        case 'y': {
            int i;
            if (!cli_parse_name(optarg, layouts, 2, &i)) {
                return cli_usage_error(usage, "bad --layout '%s' (cyx or yxc)", optarg);
            }
            a->value[SP_CONVERT_LAYOUT] = i == 0 ? SP_ZARR_LAYOUT_CYX : SP_ZARR_LAYOUT_YXC;
            continue;
        }
        case 'c': which = SP_CONVERT_CHUNK; what = "chunk"; break;
        case 'l': which = SP_CONVERT_LEVEL; what = "level"; break;
        case 's': which = SP_CONVERT_SHARD; what = "shard"; break;
        case 'L': which = SP_CONVERT_LEVELS; what = "levels"; break;
        case 't': which = SP_CONVERT_THREADS; what = "threads"; break;
        case 'r': a->value[SP_CONVERT_RESUME] = 1; continue;
        case 'j': a->json = true; continue;
        case 'I': a->icc = true; continue;
        case 'i': a->list_path = optarg; continue;
        case 'o': a->out_dir = optarg; continue;
        case 'h': printf("usage: %s\n", usage); return CLI_OK;
        case ':': return cli_usage_error(usage, "option '%s' needs a value", argv[optind - 1]);
        default: return cli_usage_error(usage, "unknown option '%s'", argv[optind - 1]);
        }
        /* The library's range; a level given is 1 or more (0, the codec's default, is what leaving
         * the option out means). */
        sp_convert_option_range((sp_convert_option)which, NULL, &lo, &hi);
        lo = which == SP_CONVERT_LEVEL ? 1 : lo;
        if (!cli_parse_int(optarg, lo, hi, &a->value[which])) {
            return cli_usage_error(usage, "bad value '%s' for --%s (an integer in %lld..%lld)",
                                   optarg, what, (long long)lo, (long long)hi);
        }
    }
    a->cohort = a->out_dir != NULL || a->list_path != NULL;
    if (a->cohort && a->out_dir == NULL) {
        return cli_usage_error(usage, "--list needs --out-dir, the folder or s3:// or gs:// "
                                      "prefix the stores go to");
    }
    if (!a->cohort && optind != argc - 2) {
        return cli_usage_error(usage, "expected SLIDE and OUT.zarr, or slides and --out-dir");
    }
    if (a->value[SP_CONVERT_SHARD] > 0 && a->value[SP_CONVERT_FORMAT] != SP_ZARR_OME_05) {
        return cli_usage_error(usage, "--shard needs --format ome-zarr-0.5 (Zarr v3)");
    }
    int codec = a->value[SP_CONVERT_CODEC] >= 0 ? (int)a->value[SP_CONVERT_CODEC]
                                                : SP_ZARR_CODEC_ZSTD;
    int rc = cli_check_codec_level(usage, codec, a->value[SP_CONVERT_LEVEL], "--level");
    if (rc != CLI_OK) {
        return rc;
    }
    int last = a->cohort ? argc : optind + 1; /* the one-slide form's OUT is not a slide */
    for (int i = optind; i < last; i++) {
        if (!slide_list_add(&a->slides, &a->n_slides, argv[i])) {
            return cli_fail("out of memory");
        }
    }
    if (!a->cohort && (a->outs = calloc(1, sizeof *a->outs)) != NULL) {
        a->outs[0] = strdup(argv[optind + 1]);
    }
    if (!a->cohort && (a->outs == NULL || a->outs[0] == NULL)) {
        return cli_fail("out of memory");
    }
    return -1;
}

/* The store name of a slide: its last path component (a URL's too, before any query), without a
 * trailing '/' and without its extension, then ".zarr". NULL when out of memory or empty. */
static char *store_name(const char *slide) {
    size_t end = strcspn(slide, "?#");
    while (end > 0 && slide[end - 1] == '/') {
        end--;
    }
    size_t start = end;
    while (start > 0 && slide[start - 1] != '/') {
        start--;
    }
    size_t stop = end;
    for (size_t i = end; i > start + 1; i--) {
        if (slide[i - 1] == '.') {
            stop = i - 1;
            break;
        }
    }
    if (stop == start) {
        return NULL;
    }
    char *name = malloc(stop - start + sizeof ".zarr");
    if (name != NULL) {
        memcpy(name, slide + start, stop - start);
        memcpy(name + (stop - start), ".zarr", sizeof ".zarr");
    }
    return name;
}

bool convert_load_list(convert_args *a, const char *prog, bool *usage) {
    *usage = false;
    char text[768];
    snprintf(text, sizeof text, "%s %s", prog, CONVERT_USAGE);
    if (!a->cohort) {
        return true; /* named by the command line */
    }
    if (a->list_path != NULL && !slide_list_load(&a->slides, &a->n_slides, a->list_path)) {
        return false;
    }
    if (a->n_slides == 0) {
        cli_usage_error(text, a->list_path ? "the list %s names no slide" : "no slides given",
                        a->list_path);
        *usage = true;
        return false;
    }
    a->outs = calloc((size_t)a->n_slides, sizeof *a->outs);
    if (a->outs == NULL) {
        cli_fail("out of memory");
        return false;
    }
    for (int64_t i = 0; i < a->n_slides; i++) {
        char *name = store_name(a->slides[i]);
        if (name == NULL) {
            cli_usage_error(text, "cannot name a store after '%s'", a->slides[i]);
            *usage = true;
            return false;
        }
        size_t n = strlen(a->out_dir);
        a->outs[i] = malloc(n + strlen(name) + 2);
        if (a->outs[i] == NULL) {
            free(name);
            cli_fail("out of memory");
            return false;
        }
        sprintf(a->outs[i], "%s%s%s", a->out_dir, n > 0 && a->out_dir[n - 1] == '/' ? "" : "/",
                name);
        free(name);
        for (int64_t j = 0; j < i; j++) {
            if (strcmp(a->outs[j], a->outs[i]) == 0) {
                cli_usage_error(text, "'%s' and '%s' would both be written to %s", a->slides[j],
                                a->slides[i], a->outs[i]);
                *usage = true;
                return false;
            }
        }
    }
    return true;
}

void convert_args_free(convert_args *a) {
    if (a->outs != NULL) {
        for (int64_t i = 0; i < (a->cohort ? a->n_slides : 1); i++) {
            free(a->outs[i]);
        }
    }
    free(a->outs);
    a->outs = NULL;
    slide_list_free(&a->slides, &a->n_slides);
}

sp_convert_options *convert_options(const convert_args *a) {
    sp_convert_options *options = NULL;
    if (sp_convert_options_create(&options) != SP_OK) {
        cli_fail("out of memory");
        return NULL;
    }
    for (int i = 0; i <= SP_CONVERT_RESUME; i++) {
        if (a->value[i] >= 0 &&
            sp_convert_options_set(options, (sp_convert_option)i, a->value[i]) != SP_OK) {
            /* The parser checked every range; only a library that disagrees gets here. */
            cli_fail("option value %lld is out of range", (long long)a->value[i]);
            sp_convert_options_destroy(options);
            return NULL;
        }
    }
    return options;
}

/* The number of levels of the written store, read back as a slide (0 when it cannot be): the
 * same for a folder and an object-store prefix. */
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

void convert_run_slide(const convert_args *a, const sp_convert_options *options, int64_t index,
                       bool show_progress, convert_result *r) {
    memset(r, 0, sizeof *r);
    double start = cli_now();
    const char *in = a->slides[index], *out = a->outs[index];
    sp_slide *slide = NULL;
    if (sp_slide_open(in, &slide, r->error, sizeof r->error) != SP_OK) {
        r->seconds = cli_now() - start;
        return;
    }
    /* --icc: a slide without a profile is converted as stored, as `region --icc` reads it. */
    if (a->icc) {
        sp_status icc = sp_slide_set_icc_transform(slide, 1, r->error, sizeof r->error);
        if (icc != SP_OK && icc != SP_E_NOT_FOUND) {
            sp_slide_close(slide);
            r->seconds = cli_now() - start;
            return;
        }
        r->error[0] = '\0';
    }
    char label[64];
    snprintf(label, sizeof label, "converting %lld/%lld", (long long)index + 1,
             (long long)a->n_slides);
    cli_progress ps = {0};
    ps.label = a->cohort ? label : "converting";
    ps.unit = "chunks";
    ps.start = start;
    int64_t w = 0, h = 0;
    sp_slide_level_dimensions(slide, 0, &w, &h);
    ps.pixels = (double)w * (double)h;
    sp_status st = sp_convert_to_zarr(slide, out, options, show_progress ? cli_progress_show : NULL,
                                      &ps, r->hash, r->error, sizeof r->error);
    if (ps.shown) {
        fputc('\n', stderr);
    }
    sp_slide_close(slide);
    r->ok = st == SP_OK;
    if (r->ok) {
        r->error[0] = '\0';
        r->levels = a->json ? count_levels(out) : 0;
    }
    r->seconds = cli_now() - start;
}

void convert_report_slide(const convert_args *a, int64_t index, const convert_result *r) {
    if (!a->cohort) {
        return;
    }
    const char *slide = a->slides[index];
    if (!r->ok) {
        /* Messages from opening the slide start with its path already. */
        bool named = strncmp(r->error, slide, strlen(slide)) == 0;
        fprintf(stderr, "slidepipe: %s%s%s\n", named ? "" : slide, named ? "" : ": ", r->error);
    } else if (!a->json) {
        printf("%s  %s\n", r->hash, a->outs[index]);
        fflush(stdout);
    }
}

/* The cohort's JSON document: every slide in list order, then the counts. */
static int print_cohort_json(const convert_args *a, const convert_result *results,
                             int64_t failed) {
    cJSON *root = cJSON_CreateObject();
    cJSON *list = cJSON_AddArrayToObject(root, "slides");
    for (int64_t i = 0; list != NULL && i < a->n_slides; i++) {
        const convert_result *r = &results[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "slide", a->slides[i]);
        cJSON_AddStringToObject(o, "out", a->outs[i]);
        if (r->ok) {
            cJSON_AddStringToObject(o, "dataset_hash", r->hash);
            cJSON_AddNumberToObject(o, "levels", r->levels);
        } else {
            cJSON_AddStringToObject(o, "error", r->error);
        }
        cJSON_AddNumberToObject(o, "seconds", round(r->seconds * 1000) / 1000);
        cJSON_AddItemToArray(list, o);
    }
    cJSON_AddNumberToObject(root, "converted", (double)(a->n_slides - failed));
    cJSON_AddNumberToObject(root, "failed", (double)failed);
    return cli_print_json(root, false);
}

int convert_finish(const convert_args *a, const convert_result *results) {
    if (!a->cohort) {
        const convert_result *r = &results[0];
        if (!r->ok) {
            return cli_fail("%s", r->error);
        }
        if (a->json) {
            printf("{\"dataset_hash\": \"%s\", \"levels\": %d, \"seconds\": %.3f}\n", r->hash,
                   r->levels, r->seconds);
        } else {
            printf("dataset_hash %s\n", r->hash);
        }
        return CLI_OK;
    }
    int64_t failed = 0;
    for (int64_t i = 0; i < a->n_slides; i++) {
        failed += !results[i].ok;
    }
    if (a->json && print_cohort_json(a, results, failed) != CLI_OK) {
        return CLI_RUNTIME_ERROR;
    }
    return cli_batch_status(failed, a->n_slides);
}
