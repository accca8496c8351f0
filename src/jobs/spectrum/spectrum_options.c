/* spectrum_options.c — the options object of sp_spectrum_compute: defaults, range checks,
 * getters (public API). The block's relation to the patch (a multiple) is checked when the job
 * starts, since the two may be set in either order. */
#include <stdlib.h>

#include "base/int_options.h"
#include "jobs/spectrum/spectrum_options.h"

/* Defaults and valid ranges, in sp_spectrum_option order. */
static const sp_int_option SPECTRUM_OPTIONS[SP_SPECTRUM_OPTION_COUNT] = {
    [SP_SPECTRUM_LEVEL] = {0, 0, 1024},
    [SP_SPECTRUM_PATCH] = {256, 4, 4096},
    [SP_SPECTRUM_BLOCK] = {1024, 4, 16384},
    [SP_SPECTRUM_THREADS] = {0, 0, 1024},
    [SP_SPECTRUM_DEVICE] = {SP_DEVICE_CPU, SP_DEVICE_CPU, SP_DEVICE_CUDA},
};

sp_status sp_spectrum_options_create(sp_spectrum_options **out) {
    if (out == NULL) {
        return SP_E_INVALID_ARG;
    }
    /* the struct is just that array */
    *out = (sp_spectrum_options *)sp_int_options_new(SPECTRUM_OPTIONS, SP_SPECTRUM_OPTION_COUNT);
    return *out != NULL ? SP_OK : SP_E_NOMEM;
}

sp_status sp_spectrum_option_range(sp_spectrum_option option, int64_t *def, int64_t *lo,
                                   int64_t *hi) {
    return sp_int_option_range(SPECTRUM_OPTIONS, SP_SPECTRUM_OPTION_COUNT, option, def, lo, hi)
               ? SP_OK
               : SP_E_INVALID_ARG;
}

void sp_spectrum_options_destroy(sp_spectrum_options *options) {
    free(options);
}

sp_status sp_spectrum_options_set(sp_spectrum_options *options, sp_spectrum_option option,
                                  int64_t value) {
    return sp_int_options_set(SPECTRUM_OPTIONS, SP_SPECTRUM_OPTION_COUNT,
                              options ? options->value : NULL, option, value);
}

int64_t sp_spectrum_options_get(const sp_spectrum_options *options, sp_spectrum_option option) {
    if (options == NULL || (unsigned)option >= SP_SPECTRUM_OPTION_COUNT) {
        return -1;
    }
    return options->value[option];
}
