/* int_options.c — defaults and range checks of the public options objects (see int_options.h). */
#include "base/int_options.h"

void sp_int_options_reset(const sp_int_option *table, int n, int64_t *values) {
    for (int i = 0; i < n; i++) {
        values[i] = table[i].def;
    }
}

bool sp_int_option_ok(const sp_int_option *table, int n, int option, int64_t value) {
    return option >= 0 && option < n && value >= table[option].lo && value <= table[option].hi;
}
