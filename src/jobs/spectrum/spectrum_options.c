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

SP_INT_OPTIONS_API(spectrum, SPECTRUM_OPTIONS, SP_SPECTRUM_OPTION_COUNT)

int64_t sp_spectrum_options_get(const sp_spectrum_options *options, sp_spectrum_option option) {
    if (options == NULL || (unsigned)option >= SP_SPECTRUM_OPTION_COUNT) {
        return -1;
    }
    return options->value[option];
}
