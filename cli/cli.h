/* cli.h — what the slidepipe subcommands share: the exit-code contract, strict argument
 * parsing, opening a slide with a one-line error, and atomic output files (PNG or raw RGBA). */
#ifndef SP_CLI_H
#define SP_CLI_H

#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>

#include "slidepipe.h"

enum { CLI_OK = 0, CLI_RUNTIME_ERROR = 1, CLI_USAGE_ERROR = 2, CLI_PARTIAL_FAILURE = 3 };

/* Print "slidepipe: MESSAGE" as one line on stderr (newlines in MESSAGE become spaces) and
 * return CLI_RUNTIME_ERROR. */
int cli_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Print "slidepipe: MESSAGE" and the command's usage on stderr; return CLI_USAGE_ERROR. */
int cli_usage_error(const char *usage, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The getopt_long codes a command does not handle itself: 'h' prints the usage on stdout and
 * returns CLI_OK; ':' (a missing value) and anything else are usage errors naming the option. */
int cli_option_other(const char *usage, int code, char **argv);

/* Parse a whole decimal integer within [min, max]; false on anything else. */
bool cli_parse_int(const char *text, int64_t min, int64_t max, int64_t *out);

/* Option --z, --c or --t (getopt code 'Z', 'C' or 'T') into plane[0], [1] or [2]: CLI_OK, or the
 * usage error's code after printing it. */
int cli_plane_option(int code, const char *arg, int64_t plane[3], const char *usage);

/* Open a slide, or print the one-line error and return NULL. */
sp_slide *cli_open_slide(const char *path);

/* cli_open_slide showing plane (z, c, t) = plane[0..2] (--z, --c, --t). */
sp_slide *cli_open_slide_plane(const char *path, const int64_t plane[3]);

/* --icc: have the slide's reads convert from its embedded ICC profile to sRGB. A slide with no
 * profile is read as stored (true); a profile that cannot be used is reported (false). */
bool cli_slide_icc(sp_slide *slide);

/* Whether `path` ends with `ext` (case-insensitive, e.g. ".png"). */
bool cli_has_extension(const char *path, const char *ext);

/* The index of `text` among `count` names, in *out; false when it is none of them. */
bool cli_parse_name(const char *text, const char *const *names, int count, int *out);

/* The Zarr codecs' names on the command line, in sp_zarr_codec order. */
/* --codec NAME through the library's list into *codec; a usage error (exit 2) otherwise. */
int cli_parse_codec(const char *usage, const char *text, int64_t *codec);

/* CLI_OK when `level` (0 = the codec's default) suits `codec`, else the usage error naming
 * `option` ("--level", "--codec-level") and the codec's range. */
int cli_check_codec_level(const char *usage, int codec, int64_t level, const char *option);

/* Print a cJSON document on stdout (indented, or on one line when `compact`) and free it; a
 * NULL root or a failed print is "out of memory". Returns CLI_OK or CLI_RUNTIME_ERROR. */
typedef struct cJSON cJSON;
int cli_print_json(struct cJSON *root, bool compact);

/* Parse a --max-side value (1..16384: the longer side of the low-resolution image that tissue
 * masks and stains are computed from). CLI_OK, or the usage error's exit code. */
int cli_parse_max_side(const char *usage, const char *text, int64_t *out);

/* Print `s` as a JSON string literal (quotes, escapes). */
void cli_json_string(FILE *f, const char *s);

/* Open a temporary file "PATH.tmp-XXXXXX" beside `path` for writing, with the mode a plain
 * create would give under the umask; *tmp receives its name. Prints the error and returns NULL
 * on failure. */
FILE *cli_create_temp(const char *path, char **tmp);

/* Finish a file from cli_create_temp: flush, close and rename it over `path` when `ok` and every
 * step succeeds, else remove it and print why. Frees `tmp`; returns whether `path` was written. */
bool cli_commit_temp(FILE *f, char *tmp, const char *path, bool ok);

/* Parse the options of a command that has only --json and --help, and check that `nargs`
 * arguments follow (`what` names them in the usage error). Returns CLI_OK with *json set, -1
 * after printing the usage for --help, or the usage error's exit code. */
int cli_parse_json_only(int argc, char **argv, const char *usage, int nargs, const char *what,
                        bool *json);

/* The document `slidepipe info --json` prints for an open slide (NULL when out of memory);
 * the caller frees it with cJSON_Delete. `slidepipe serve` answers it too. */
cJSON *cli_info_json(const sp_slide *slide);

/* Allocator settings for slidepipe's programs (called first thing in main). */
void cli_tune_allocator(void);

/* Write width x height straight RGBA8 pixels (rows of `stride` bytes) as an RGBA PNG, or raw
 * bytes when `raw`; written to a temporary file and renamed into place. Prints the error and
 * returns false on failure. */
bool cli_write_image(const char *path, const uint8_t *rgba, int64_t width, int64_t height,
                     int64_t stride, bool raw);

/* A monotonic clock in seconds. */
double cli_now(void);

/* A single progress line on stderr for long jobs (only used when stderr is a terminal):
 * "LABEL:  42.0%  10/24 UNIT  310 MP/s  ETA 0:03", redrawn at most five times a second. */
typedef struct cli_progress {
    const char *label; /* "converting", "processing" */
    const char *unit;  /* what done/total count: "chunks" */
    double start;      /* cli_now() at the start */
    double last_print;
    double pixels;     /* pixels of the whole job, for the MP/s figure */
    bool shown;        /* a line was drawn: end it with a newline */
} cli_progress;

/* An sp_progress_fn; `user` is a cli_progress. */
void cli_progress_show(void *user, int64_t done, int64_t total);

/* The exit code of a run over many slides: 0 when none failed, else 3 after "slidepipe: N of M
 * slides failed" on stderr. */
int cli_batch_status(int64_t failed, int64_t total);

/* Subcommands: each takes argv from its own name on. */
int cmd_info(int argc, char **argv);
int cmd_region(int argc, char **argv);
int cmd_thumbnail(int argc, char **argv);
int cmd_associated(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_hash(int argc, char **argv);
int cmd_process(int argc, char **argv);
int cmd_gpu(int argc, char **argv);
int cmd_spectrum(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_tissue(int argc, char **argv);
int cmd_tiles(int argc, char **argv);
int cmd_stains(int argc, char **argv);
int cmd_serve(int argc, char **argv); /* serve/cmd_serve.c */

#endif
