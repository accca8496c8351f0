/* int_options.c — defaults and range checks of the public options objects (see int_options.h). */
#include "base/int_options.h"

#include <stddef.h>

void sp_int_options_reset(const sp_int_option *table, int n, int64_t *values) {
    for (int i = 0; i < n; i++) {
        values[i] = table[i].def;
    }
}

bool sp_int_option_ok(const sp_int_option *table, int n, int option, int64_t value) {
    return option >= 0 && option < n && value >= table[option].lo && value <= table[option].hi;
}

bool sp_int_option_range(const sp_int_option *table, int n, int option, int64_t *def, int64_t *lo,
                         int64_t *hi) {
    if (option < 0 || option >= n) {
        return false;
    }
    if (def != NULL) {
        *def = table[option].def;
    }
    if (lo != NULL) {
        *lo = table[option].lo;
    }
    if (hi != NULL) {
        *hi = table[option].hi;
    }
    return true;
}
