/* spectrum_run.c — the spectral-statistics front end shared by `slidepipe spectrum` and
 * `slidepipe-mpi spectrum` (see spectrum_run.h): argument parsing, the slide list, running one
 * slide, the summary lines, the JSON document and the plot.
 *
 * The corpus is the merge of the successful slides' statistics in list order, whoever computed
 * them, so both front ends write the same JSON for the same slides (timings aside).
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "plot_png.h"
#include "slide_list.h"
#include "spectrum_run.h"

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int spectrum_parse_args(int argc, char **argv, const char *prog, spectrum_args *a) {
    static const struct option opts[] = {
        {"list", required_argument, NULL, 'L'},    {"level", required_argument, NULL, 'l'},
        {"patch", required_argument, NULL, 'p'},   {"block", required_argument, NULL, 'b'},
        {"json", required_argument, NULL, 'j'},    {"plot", required_argument, NULL, 'P'},
        {"threads", required_argument, NULL, 't'}, {"device", required_argument, NULL, 'd'},
        {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0}};
    char usage[512];
    snprintf(usage, sizeof usage, "%s %s", prog, SPECTRUM_USAGE);
    memset(a, 0, sizeof *a);
    /* The integer options: their targets, and their defaults and ranges from the library. */
    struct int_option {
        int opt;
        sp_spectrum_option which;
        int64_t *target;
        int64_t lo, hi;
        const char *name;
    } numbers[] = {{'l', SP_SPECTRUM_LEVEL, &a->level, 0, 0, "level"},
                   {'p', SP_SPECTRUM_PATCH, &a->patch, 0, 0, "patch"},
                   {'b', SP_SPECTRUM_BLOCK, &a->block, 0, 0, "block"},
                   {'t', SP_SPECTRUM_THREADS, &a->threads, 0, 0, "threads"}};
    for (size_t i = 0; i < sizeof numbers / sizeof numbers[0]; i++) {
        sp_spectrum_option_range(numbers[i].which, numbers[i].target, &numbers[i].lo,
                                 &numbers[i].hi);
    }
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        const struct int_option *n = NULL;
        switch (c) {
        case 'L': a->list_path = optarg; continue;
        case 'd':
            if (strcmp(optarg, "cpu") != 0 && strcmp(optarg, "cuda") != 0) {
                return cli_usage_error(usage, "bad --device '%s' (cpu or cuda)", optarg);
            }
            a->cuda = strcmp(optarg, "cuda") == 0;
            continue;
        case 'j': a->json_path = optarg; continue;
        case 'P':
            if (!cli_has_extension(optarg, ".png")) {
                return cli_usage_error(usage, "--plot wants a .png file, not '%s'", optarg);
            }
            a->plot_path = optarg;
            continue;
        case 'h': printf("usage: %s\n", usage); return CLI_OK;
        case ':': return cli_usage_error(usage, "option '%s' needs a value", argv[optind - 1]);
        default:
            for (size_t i = 0; i < sizeof numbers / sizeof numbers[0]; i++) {
                n = numbers[i].opt == c ? &numbers[i] : n;
            }
            if (n == NULL) {
                return cli_usage_error(usage, "unknown option '%s'", argv[optind - 1]);
            }
        }
        if (!cli_parse_int(optarg, n->lo, n->hi, n->target)) {
            return cli_usage_error(usage, "bad value '%s' for --%s (an integer in %lld..%lld)",
                                   optarg, n->name, (long long)n->lo, (long long)n->hi);
        }
    }
    if (a->block % a->patch != 0) {
        return cli_usage_error(usage, "--block %lld is not a multiple of --patch %lld",
                               (long long)a->block, (long long)a->patch);
    }
    char why[300];
    if (a->cuda && sp_cuda_device_count(why, sizeof why) == 0) {
        return cli_fail("--device cuda: %s", why);
    }
    for (int i = optind; i < argc; i++) {
        if (!slide_list_add(&a->slides, &a->n_slides, argv[i])) {
            return cli_fail("out of memory");
        }
    }
    return -1;
}

bool spectrum_load_list(spectrum_args *a, const char *prog, bool *usage) {
    *usage = false;
    if (a->list_path != NULL && !slide_list_load(&a->slides, &a->n_slides, a->list_path)) {
        return false;
    }
    if (a->n_slides == 0) {
        char text[512];
        snprintf(text, sizeof text, "%s %s", prog, SPECTRUM_USAGE);
        cli_usage_error(text, a->list_path ? "the list %s names no slide" : "no slides given",
                        a->list_path);
        *usage = true;
        return false;
    }
    return true;
}

void spectrum_args_free(spectrum_args *a) {
    slide_list_free(&a->slides, &a->n_slides);
}

sp_spectrum_options *spectrum_options(const spectrum_args *a) {
    sp_spectrum_options *o = NULL;
    if (sp_spectrum_options_create(&o) != SP_OK ||
        sp_spectrum_options_set(o, SP_SPECTRUM_LEVEL, a->level) != SP_OK ||
        sp_spectrum_options_set(o, SP_SPECTRUM_PATCH, a->patch) != SP_OK ||
        sp_spectrum_options_set(o, SP_SPECTRUM_BLOCK, a->block) != SP_OK ||
        sp_spectrum_options_set(o, SP_SPECTRUM_THREADS, a->threads) != SP_OK ||
        sp_spectrum_options_set(o, SP_SPECTRUM_DEVICE, a->cuda ? SP_DEVICE_CUDA : SP_DEVICE_CPU) !=
            SP_OK) {
        sp_spectrum_options_destroy(o);
        cli_fail("out of memory");
        return NULL;
    }
    return o;
}

typedef struct progress_line {
    const char *name;
    int64_t index, count;
    double last;
    bool shown;
} progress_line;

static void show_progress(void *user, int64_t done, int64_t total) {
    progress_line *p = user;
    double t = now_seconds();
    if (done < total && t - p->last < 0.2) {
        return;
    }
    p->last = t;
    fprintf(stderr, "\rspectrum: slide %lld/%lld %5.1f%%  %.50s   ", (long long)p->index + 1,
            (long long)p->count, total > 0 ? 100.0 * (double)done / (double)total : 100.0, p->name);
    fflush(stderr);
    p->shown = true;
}

void spectrum_run_slide(const char *path, const sp_spectrum_options *options, int64_t index,
                        int64_t count, bool show, spectrum_result *r) {
    memset(r, 0, sizeof *r);
    sp_spectrum_stats_init(&r->stats);
    double t0 = now_seconds();
    sp_slide *slide = NULL;
    if (sp_slide_open(path, &slide, r->error, sizeof r->error) != SP_OK) {
        r->seconds = now_seconds() - t0;
        return;
    }
    int64_t level = sp_spectrum_options_get(options, SP_SPECTRUM_LEVEL);
    if (level < sp_slide_level_count(slide)) {
        sp_slide_level_dimensions(slide, (int32_t)level, &r->width, &r->height);
    }
    const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    progress_line p = {name, index, count, 0, false};
    sp_status st = sp_spectrum_compute(slide, options, show ? show_progress : NULL, &p, &r->stats,
                                       r->error, sizeof r->error);
    if (p.shown) {
        fprintf(stderr, "\r%*s\r", 80, "");
    }
    sp_slide_close(slide);
    r->ok = st == SP_OK;
    if (r->ok) {
        r->error[0] = '\0';
    }
    r->seconds = now_seconds() - t0;
}

static bool json_to_stdout(const spectrum_args *a) {
    return a->json_path != NULL && strcmp(a->json_path, "-") == 0;
}

void spectrum_report_slide(const spectrum_args *a, const char *path, const spectrum_result *r) {
    if (!r->ok) {
        /* Open errors already name the file; others get it in front. */
        if (strncmp(r->error, path, strlen(path)) == 0) {
            cli_fail("%s", r->error);
        } else {
            cli_fail("%s: %s", path, r->error);
        }
        return;
    }
    if (json_to_stdout(a)) {
        return;
    }
    printf("%s: %lldx%lld, %lld patches, mean %.3f dB, std %.3f dB, %.2f s (read %.2f s, FFT "
           "%.2f s over threads)\n",
           path, (long long)r->width, (long long)r->height, (long long)r->stats.patches,
           sp_spectrum_stats_mean(&r->stats), sp_spectrum_stats_std(&r->stats), r->seconds,
           r->stats.read_seconds, r->stats.compute_seconds);
    fflush(stdout);
}

/* ---- JSON -------------------------------------------------------------------------------- */

/* A double that reads back to the same bits, or null for NaN. */
static void json_number(FILE *f, double v) {
    if (isnan(v) || isinf(v)) {
        fputs("null", f);
    } else {
        fprintf(f, "%.17g", v);
    }
}

static void json_stats(FILE *f, const sp_spectrum_stats *s) {
    fputs("\"histogram\": [", f);
    for (int i = 0; i < SP_SPECTRUM_BINS; i++) {
        fprintf(f, i ? ", %lld" : "%lld", (long long)s->histogram[i]);
    }
    fputs("], \"mean\": ", f);
    json_number(f, sp_spectrum_stats_mean(s));
    fputs(", \"std\": ", f);
    json_number(f, sp_spectrum_stats_std(s));
    fprintf(f, ", \"patches\": %lld, \"values\": %lld, \"below\": %lld, \"above\": %lld",
            (long long)s->patches, (long long)s->values, (long long)s->below, (long long)s->above);
}

static void write_json(FILE *f, const spectrum_args *a, const spectrum_result *results,
                       const sp_spectrum_stats *corpus) {
    fprintf(f, "{\"level\": %lld, \"patch\": %lld, \"block\": %lld, ", (long long)a->level,
            (long long)a->patch, (long long)a->block);
    fprintf(f, "\"db_min\": %g, \"db_max\": %g, \"bins\": %d,\n", SP_SPECTRUM_DB_MIN,
            SP_SPECTRUM_DB_MAX, SP_SPECTRUM_BINS);
    fputs("\"corpus\": {", f);
    json_stats(f, corpus);
    fputs("},\n\"slides\": [", f);
    for (int64_t i = 0; i < a->n_slides; i++) {
        const spectrum_result *r = &results[i];
        fputs(i ? ",\n{\"path\": " : "\n{\"path\": ", f);
        cli_json_string(f, a->slides[i]);
        if (!r->ok) {
            fputs(", \"error\": ", f);
            cli_json_string(f, r->error);
        } else {
            fprintf(f, ", \"width\": %lld, \"height\": %lld, ", (long long)r->width,
                    (long long)r->height);
            json_stats(f, &r->stats);
            fprintf(f, ", \"seconds\": %.3f, \"read_seconds\": %.3f, \"fft_seconds\": %.3f",
                    r->seconds, r->stats.read_seconds, r->stats.compute_seconds);
        }
        fputc('}', f);
    }
    fputs("\n]}\n", f);
}

/* Write the JSON document to a temporary file renamed into place, or to stdout for "-". */
static bool save_json(const spectrum_args *a, const spectrum_result *results,
                      const sp_spectrum_stats *corpus) {
    if (json_to_stdout(a)) {
        write_json(stdout, a, results, corpus);
        if (fflush(stdout) != 0) {
            cli_fail("cannot write the JSON to stdout: %s", strerror(errno));
            return false;
        }
        return true;
    }
    char *tmp = NULL;
    FILE *f = cli_create_temp(a->json_path, &tmp);
    if (f == NULL) {
        return false;
    }
    write_json(f, a, results, corpus);
    return cli_commit_temp(f, tmp, a->json_path, true);
}

/* The plot: the corpus and the first few successful slides. */
static bool save_plot(const spectrum_args *a, const spectrum_result *results,
                      const sp_spectrum_stats *corpus) {
    enum { MAX_SLIDES = 5 };
    plot_series series[MAX_SLIDES + 1];
    int n = 0;
    series[n++] = (plot_series){"corpus", corpus->histogram, corpus->values};
    for (int64_t i = 0; i < a->n_slides && n < MAX_SLIDES + 1; i++) {
        if (results[i].ok) {
            const char *name = strrchr(a->slides[i], '/');
            series[n++] = (plot_series){name ? name + 1 : a->slides[i], results[i].stats.histogram,
                                        results[i].stats.values};
        }
    }
    return plot_histograms(a->plot_path, series, n, SP_SPECTRUM_BINS, SP_SPECTRUM_DB_MIN,
                           SP_SPECTRUM_DB_MAX);
}

int spectrum_finish(const spectrum_args *a, const spectrum_result *results) {
    sp_spectrum_stats corpus;
    sp_spectrum_stats_init(&corpus);
    int64_t failed = 0;
    for (int64_t i = 0; i < a->n_slides; i++) {
        if (results[i].ok) {
            sp_spectrum_stats_merge(&corpus, &results[i].stats);
        } else {
            failed++;
        }
    }
    if (!json_to_stdout(a)) {
        printf("corpus: %lld of %lld slides, %lld patches, mean %.3f dB, std %.3f dB\n",
               (long long)(a->n_slides - failed), (long long)a->n_slides, (long long)corpus.patches,
               sp_spectrum_stats_mean(&corpus), sp_spectrum_stats_std(&corpus));
        fflush(stdout);
    }
    bool ok = true;
    if (a->json_path != NULL) {
        ok = save_json(a, results, &corpus) && ok;
    }
    if (a->plot_path != NULL) {
        ok = save_plot(a, results, &corpus) && ok;
    }
    if (!ok) {
        return CLI_RUNTIME_ERROR;
    }
    return cli_batch_status(failed, a->n_slides);
}
