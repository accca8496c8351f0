/* spectrum_run.h — what `slidepipe spectrum` and the MPI runner `slidepipe-mpi spectrum` share:
 * their options, the slide list, one slide's run, the human summary, the JSON writer and the
 * plot, so the two front ends print and write exactly the same thing for the same results.
 */
#ifndef SP_CLI_SPECTRUM_RUN_H
#define SP_CLI_SPECTRUM_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include "slidepipe.h"

#define SPECTRUM_USAGE                                                                         \
    "spectrum SLIDE... | --list FILE [--level L] [--patch P] [--block B] [--json OUT|-]\n"   \
    "         [--plot OUT.png] [--threads T] [--device cpu|cuda]"

typedef struct spectrum_args {
    char **slides; /* positional slides, then the list file's lines */
    int64_t n_slides;
    const char *list_path, *json_path, *plot_path;
    int64_t level, patch, block, threads;
    bool cuda; /* --device cuda: cuFFT on the GPU */
} spectrum_args;

/* One slide's outcome: a plain record, so an MPI rank can send it as bytes. */
typedef struct spectrum_result {
    int32_t ok;                 /* 1: stats are valid; 0: error says why */
    int64_t width, height;      /* of the level analysed */
    double seconds;             /* wall time of the slide, open to close */
    char error[512];
    sp_spectrum_stats stats;
} spectrum_result;

/* Parse `spectrum ARGS...` (argv[0] is the command's name; `prog` names the program in the
 * usage line). Returns -1 to go on, or the exit code to return: 0 after --help, 2 for a usage
 * error (printed). Positional slides are kept; --list is read by spectrum_load_list. */
int spectrum_parse_args(int argc, char **argv, const char *prog, spectrum_args *a);

/* Append the lines of --list (blank lines and lines starting with '#' skipped). Prints the error
 * and returns false when the file cannot be read; prints a usage error and returns false (with
 * *usage set) when there are no slides at all. */
bool spectrum_load_list(spectrum_args *a, const char *prog, bool *usage);

void spectrum_args_free(spectrum_args *a);

/* The library options for these arguments, or NULL (printed) when out of memory. */
sp_spectrum_options *spectrum_options(const spectrum_args *a);

/* Open, analyse and close one slide. With `show_progress`, a progress line for slide `index` of
 * `count` is kept on stderr (for terminals). */
void spectrum_run_slide(const char *path, const sp_spectrum_options *options, int64_t index,
                        int64_t count, bool show_progress, spectrum_result *r);

/* Report one finished slide: a summary line on stdout (unless the JSON goes to stdout), or the
 * error on stderr as "slidepipe: PATH: MESSAGE". */
void spectrum_report_slide(const spectrum_args *a, const char *path, const spectrum_result *r);

/* Merge the results in list order, print the corpus summary, write --json and --plot. Returns
 * the exit code: 0 when every slide succeeded, 3 when some failed, 1 when an output could not be
 * written. */
int spectrum_finish(const spectrum_args *a, const spectrum_result *results);

#endif
