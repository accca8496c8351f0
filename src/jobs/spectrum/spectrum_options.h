/* spectrum_options.h — the layout of sp_spectrum_options, private to the library. */
#ifndef SP_JOBS_SPECTRUM_SPECTRUM_OPTIONS_H
#define SP_JOBS_SPECTRUM_SPECTRUM_OPTIONS_H

#include "slidepipe.h"

#define SP_SPECTRUM_OPTION_COUNT 5

struct sp_spectrum_options {
    int64_t value[SP_SPECTRUM_OPTION_COUNT]; /* indexed by sp_spectrum_option */
};

#endif
