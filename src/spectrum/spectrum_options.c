/* spectrum_options.c — the options object of sp_spectrum_compute: defaults, range checks,
 * getters (public API). The block's relation to the patch (a multiple) is checked when the job
 * starts, since the two may be set in either order. */
#include <stdlib.h>

#include "spectrum/spectrum_options.h"

sp_status sp_spectrum_options_create(sp_spectrum_options **out) {
    if (out == NULL) {
        return SP_E_INVALID_ARG;
    }
    *out = malloc(sizeof **out);
    if (*out == NULL) {
        return SP_E_NOMEM;
    }
    (*out)->value[SP_SPECTRUM_LEVEL] = 0;
    (*out)->value[SP_SPECTRUM_PATCH] = 256;
    (*out)->value[SP_SPECTRUM_BLOCK] = 1024;
    (*out)->value[SP_SPECTRUM_THREADS] = 0;
    (*out)->value[SP_SPECTRUM_DEVICE] = SP_DEVICE_CPU;
    return SP_OK;
}

void sp_spectrum_options_destroy(sp_spectrum_options *options) {
    free(options);
}

sp_status sp_spectrum_options_set(sp_spectrum_options *options, sp_spectrum_option option,
                                  int64_t value) {
    static const int64_t lo[SP_SPECTRUM_OPTION_COUNT] = {0, 4, 4, 0, SP_DEVICE_CPU};
    static const int64_t hi[SP_SPECTRUM_OPTION_COUNT] = {1024, 4096, 16384, 1024, SP_DEVICE_CUDA};
    if (options == NULL || (unsigned)option >= SP_SPECTRUM_OPTION_COUNT || value < lo[option] ||
        value > hi[option]) {
        return SP_E_INVALID_ARG;
    }
    options->value[option] = value;
    return SP_OK;
}

int64_t sp_spectrum_options_get(const sp_spectrum_options *options, sp_spectrum_option option) {
    if (options == NULL || (unsigned)option >= SP_SPECTRUM_OPTION_COUNT) {
        return -1;
    }
    return options->value[option];
}
