/* numbers.c — locale-independent number parsing and formatting (see numbers.h). */
#define _GNU_SOURCE
#include "base/numbers.h"

#include <locale.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static locale_t c_locale;
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;

static void make_c_locale(void) { c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0); }

static locale_t get_c_locale(void) {
    pthread_once(&c_locale_once, make_c_locale);
    return c_locale;
}

double sp_strtod(const char *text, char **end) {
    locale_t loc = get_c_locale();
    return loc ? strtod_l(text, end, loc) : strtod(text, end);
}

void sp_format_double(double value, char *buf, size_t len) {
    /* The range first: converting a double outside int64_t's range is undefined. */
    if (value > -1e15 && value < 1e15 && value == (double)(int64_t)value) {
        snprintf(buf, len, "%lld", (long long)value);
        return;
    }
    locale_t loc = get_c_locale();
    locale_t previous = loc ? uselocale(loc) : (locale_t)0;
    for (int precision = 1; precision <= 17; precision++) {
        snprintf(buf, len, "%.*g", precision, value);
        if (sp_strtod(buf, NULL) == value) {
            break;
        }
    }
    if (loc) {
        uselocale(previous);
    }
}
