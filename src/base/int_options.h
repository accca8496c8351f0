/* int_options.h — the options objects of the public API (convert, process, spectrum) hold a
 * fixed set of integers, each with a default and an inclusive valid range. A table of those
 * describes each set once; these helpers fill the defaults and check a value. */
#ifndef SP_BASE_INT_OPTIONS_H
#define SP_BASE_INT_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "base/err.h"

typedef struct sp_int_option {
    int64_t def, lo, hi;
} sp_int_option;

/* values[i] = table[i].def for the n options. */
void sp_int_options_reset(const sp_int_option *table, int n, int64_t *values);

/* A new array of the n options at their defaults (free() frees it), or NULL when out of memory.
 * Each public options object is a struct holding just this array. */
int64_t *sp_int_options_new(const sp_int_option *table, int n);

/* values[option] = value; SP_E_INVALID_ARG when values is NULL, the option is not one of the n
 * or the value is out of its range. */
sp_status sp_int_options_set(const sp_int_option *table, int n, int64_t *values, int option,
                             int64_t value);

/* Whether `option` is one of the n and `value` lies in its range. */
bool sp_int_option_ok(const sp_int_option *table, int n, int option, int64_t value);

/* Option `option`'s default and range into the pointers that are not NULL; false when it is not
 * one of the n. */
bool sp_int_option_range(const sp_int_option *table, int n, int option, int64_t *def, int64_t *lo,
                         int64_t *hi);

/* The four public calls of an options object whose struct holds just the array of `count`
 * values described by `table` (sp_<name>_options_create, _destroy, _set, sp_<name>_option_range),
 * written once here for convert, process and spectrum. */
#define SP_INT_OPTIONS_API(name, table, count)                                                     \
    sp_status sp_##name##_options_create(sp_##name##_options **out) {                              \
        if (out == NULL) {                                                                         \
            return SP_E_INVALID_ARG;                                                               \
        }                                                                                          \
        *out = (sp_##name##_options *)sp_int_options_new(table, count);                           \
        return *out != NULL ? SP_OK : SP_E_NOMEM;                                                  \
    }                                                                                              \
    sp_status sp_##name##_option_range(sp_##name##_option option, int64_t *def, int64_t *lo,       \
                                       int64_t *hi) {                                              \
        return sp_int_option_range(table, count, option, def, lo, hi) ? SP_OK : SP_E_INVALID_ARG; \
    }                                                                                              \
    void sp_##name##_options_destroy(sp_##name##_options *options) { free(options); }              \
    sp_status sp_##name##_options_set(sp_##name##_options *options, sp_##name##_option option,     \
                                      int64_t value) {                                             \
        return sp_int_options_set(table, count, options ? options->value : NULL, option, value);   \
    }

#endif
