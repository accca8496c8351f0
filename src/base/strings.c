/* strings.c — shared string helpers (see strings.h). */
#include "base/strings.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *sp_strdup_printf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        return NULL;
    }
    char *s = malloc((size_t)n + 1);
    if (s == NULL) {
        return NULL;
    }
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

char *sp_path_join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (p == NULL) {
        return NULL;
    }
    memcpy(p, dir, a);
    size_t at = a;
    if (a > 0 && dir[a - 1] != '/') {
        p[at++] = '/';
    }
    memcpy(p + at, name, b + 1);
    return p;
}

size_t sp_utf8_char_len(const uint8_t *p, size_t n) {
    if (n == 0) {
        return 0;
    }
    uint8_t c = p[0];
    if (c < 0x80) {
        return 1;
    }
    size_t need = c >= 0xC2 && c <= 0xDF   ? 2
                  : c >= 0xE0 && c <= 0xEF ? 3
                  : c >= 0xF0 && c <= 0xF4 ? 4
                                           : 0;
    if (need == 0 || need > n) {
        return 0;
    }
    /* The second byte's range: narrower after E0, ED, F0 and F4. */
    uint8_t lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
    uint8_t hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
    if (p[1] < lo || p[1] > hi) {
        return 0;
    }
    for (size_t i = 2; i < need; i++) {
        if ((p[i] & 0xC0) != 0x80) {
            return 0;
        }
    }
    return need;
}

char *sp_strdup_utf8(const char *text) {
    size_t n = strlen(text);
    char *out = malloc(n + 1);
    if (out == NULL) {
        return NULL;
    }
    const uint8_t *p = (const uint8_t *)text;
    for (size_t i = 0; i < n;) {
        size_t k = sp_utf8_char_len(p + i, n - i);
        if (k == 0) {
            out[i++] = '?';
            continue;
        }
        memcpy(out + i, p + i, k);
        i += k;
    }
    out[n] = '\0';
    return out;
}
