/* int_options.h — the options objects of the public API (convert, process, spectrum) hold a
 * fixed set of integers, each with a default and an inclusive valid range. A table of those
 * describes each set once; these helpers fill the defaults and check a value. */
#ifndef SP_BASE_INT_OPTIONS_H
#define SP_BASE_INT_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

typedef struct sp_int_option {
    int64_t def, lo, hi;
} sp_int_option;

/* values[i] = table[i].def for the n options. */
void sp_int_options_reset(const sp_int_option *table, int n, int64_t *values);

/* Whether `option` is one of the n and `value` lies in its range. */
bool sp_int_option_ok(const sp_int_option *table, int n, int option, int64_t value);

/* Option `option`'s default and range into the pointers that are not NULL; false when it is not
 * one of the n. */
bool sp_int_option_range(const sp_int_option *table, int n, int option, int64_t *def, int64_t *lo,
                         int64_t *hi);

#endif
