/* cmd_spectrum.c — `slidepipe spectrum SLIDE... | --list FILE [options]`: log-magnitude spectral
 * statistics per slide and over the corpus (docs/ops.md, "spectrum"). Slides run one after
 * another, each over all threads; one that fails is reported and the run goes on (exit 3).
 * The work shared with the MPI runner is in spectrum_run.c. */
#include <stdlib.h>
#include <unistd.h>

#include "cli.h"
#include "spectrum_run.h"

int cmd_spectrum(int argc, char **argv) {
    spectrum_args a;
    int code = spectrum_parse_args(argc, argv, "slidepipe", &a);
    if (code >= 0) {
        spectrum_args_free(&a);
        return code;
    }
    bool usage;
    if (!spectrum_load_list(&a, "slidepipe", &usage)) {
        spectrum_args_free(&a);
        return usage ? CLI_USAGE_ERROR : CLI_RUNTIME_ERROR;
    }
    sp_spectrum_options *options = spectrum_options(&a);
    spectrum_result *results = calloc((size_t)a.n_slides, sizeof *results);
    if (options == NULL || results == NULL) {
        sp_spectrum_options_destroy(options);
        free(results);
        spectrum_args_free(&a);
        return options == NULL ? CLI_RUNTIME_ERROR : cli_fail("out of memory");
    }
    bool tty = isatty(STDERR_FILENO);
    for (int64_t i = 0; i < a.n_slides; i++) {
        spectrum_run_slide(a.slides[i], options, i, a.n_slides, tty, &results[i]);
        spectrum_report_slide(&a, a.slides[i], &results[i]);
    }
    code = spectrum_finish(&a, results);
    sp_spectrum_options_destroy(options);
    free(results);
    spectrum_args_free(&a);
    return code;
}
