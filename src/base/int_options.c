/* int_options.c — defaults and range checks of the public options objects (see int_options.h). */
#include "base/int_options.h"

#include <stddef.h>
#include <stdlib.h>

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

int64_t *sp_int_options_new(const sp_int_option *table, int n) {
    int64_t *values = malloc((size_t)n * sizeof *values);
    if (values != NULL) {
        sp_int_options_reset(table, n, values);
    }
    return values;
}

sp_status sp_int_options_set(const sp_int_option *table, int n, int64_t *values, int option,
                             int64_t value) {
    if (values == NULL || !sp_int_option_ok(table, n, option, value)) {
        return SP_E_INVALID_ARG;
    }
    values[option] = value;
    return SP_OK;
}
