/* convert_run.h — what `slidepipe convert` and the MPI runner `slidepipe-mpi convert` share: the
 * options, the slide list and where each slide's store goes, one slide's conversion, the report
 * lines and the final summary, so both front ends print the same thing for the same results.
 *
 * Two forms: `convert SLIDE OUT.zarr` (one slide, one store), and a cohort,
 * `convert SLIDE... | --list FILE --out-dir DIR`, where each slide's store is DIR/NAME.zarr, NAME
 * being the slide's file name without its extension. DIR may be a folder or an s3://, gs://,
 * az:// or abfs(s):// prefix. With --icc each slide's pixels are converted from its embedded ICC
 * profile to sRGB as they are read (as `region --icc` reads them); a slide without a profile is
 * written as stored.
 */
#ifndef SP_CLI_CONVERT_RUN_H
#define SP_CLI_CONVERT_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include "slidepipe.h"

#define CONVERT_USAGE                                                                            \
    "convert SLIDE OUT.zarr | SLIDE... --out-dir DIR | --list FILE --out-dir DIR\n"              \
    "         [--format ome-zarr-0.4|ome-zarr-0.5] [--chunk N]\n"                                \
    "         [--codec zstd|blosc-lz4|blosc-zstd|gzip|none] [--level L] [--shard N] [--levels N]\n" \
    "         [--layout cyx|yxc] [--threads N] [--icc] [--resume] [--json]"

typedef struct convert_args {
    char **slides; /* positional slides, then the list file's lines */
    int64_t n_slides;
    char **outs; /* each slide's store, filled by convert_load_list */
    const char *list_path, *out_dir;
    int64_t value[SP_CONVERT_RESUME + 1]; /* sp_convert_option order; -1 = not given */
    bool json;
    bool icc;    /* --icc: convert from the slide's embedded ICC profile to sRGB while writing */
    bool cohort; /* --out-dir (or --list) given: the second form */
} convert_args;

/* One slide's outcome: a plain record, so an MPI rank can send it as bytes. */
typedef struct convert_result {
    int32_t ok; /* 1: hash and levels are valid; 0: error says why */
    int32_t levels;
    double seconds;
    char hash[65];
    char error[512];
} convert_result;

/* Parse `convert ARGS...` (argv[0] is the command's name; `prog` names the program in the usage
 * line). Returns -1 to go on, or the exit code to return: 0 after --help, 2 for a usage error
 * (printed). */
int convert_parse_args(int argc, char **argv, const char *prog, convert_args *a);

/* Read --list, and name each slide's store; prints the error and returns false when the list
 * cannot be read, and a usage error (setting *usage) when there is no slide or two slides would
 * be written to the same store. */
bool convert_load_list(convert_args *a, const char *prog, bool *usage);

void convert_args_free(convert_args *a);

/* The library options for these arguments, or NULL (printed) when out of memory. */
sp_convert_options *convert_options(const convert_args *a);

/* Open, convert and close slide `index`. With `show_progress`, a progress line is kept on stderr
 * (for terminals). */
void convert_run_slide(const convert_args *a, const sp_convert_options *options, int64_t index,
                       bool show_progress, convert_result *r);

/* Report one finished slide of a cohort: "HASH  STORE" on stdout (not with --json), or the error
 * on stderr as "slidepipe: SLIDE: MESSAGE". Nothing for the one-slide form. */
void convert_report_slide(const convert_args *a, int64_t index, const convert_result *r);

/* Print the result and return the exit code. One slide: "dataset_hash HEX" or its JSON object,
 * exit 0, or the error and exit 1. A cohort: with --json one document listing every slide; a
 * count of failures on stderr; exit 0 when every slide was converted, 3 when any failed (as
 * `slidepipe spectrum`). */
int convert_finish(const convert_args *a, const convert_result *results);

#endif
