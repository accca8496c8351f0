/* cmd_convert.c — `slidepipe convert SLIDE OUT.zarr [options]`: write a slide as an OME-Zarr
 * pyramid (sp_convert_to_zarr) and print its dataset hash; or `slidepipe convert SLIDE... |
 * --list FILE --out-dir DIR`: a cohort, one store per slide in DIR (a folder or an s3:// or
 * gs:// prefix), one after another, each line "HASH  STORE" as it is done. On a terminal a single
 * progress line (percent, chunks, megapixels per second, time left) updates on stderr; elsewhere
 * the command is quiet until it prints results on stdout. The options, reports and summary are
 * convert_run.c's, which the MPI runner shares. */
#include <stdlib.h>
#include <unistd.h>

#include "cli.h"
#include "convert_run.h"

int cmd_convert(int argc, char **argv) {
    convert_args a;
    int code = convert_parse_args(argc, argv, "slidepipe", &a);
    bool usage = false;
    if (code < 0 && !convert_load_list(&a, "slidepipe", &usage)) {
        code = usage ? CLI_USAGE_ERROR : CLI_RUNTIME_ERROR;
    }
    sp_convert_options *options = code < 0 ? convert_options(&a) : NULL;
    if (code < 0 && options == NULL) {
        code = CLI_RUNTIME_ERROR;
    }
    convert_result *results = NULL;
    if (code < 0 && (results = calloc((size_t)a.n_slides, sizeof *results)) == NULL) {
        code = cli_fail("out of memory");
    }
    if (code < 0) {
        bool tty = isatty(STDERR_FILENO);
        for (int64_t i = 0; i < a.n_slides; i++) {
            convert_run_slide(&a, options, i, tty, &results[i]);
            convert_report_slide(&a, i, &results[i]);
        }
        code = convert_finish(&a, results);
    }
    free(results);
    sp_convert_options_destroy(options);
    convert_args_free(&a);
    return code;
}
