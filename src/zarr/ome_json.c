/* ome_json.c — small JSON pieces shared by the writers of OME-Zarr metadata (sp_convert_to_zarr
 * and sp_process_to_zarr): UTF-8 cleaning (slide properties are untrusted bytes, JSON must be
 * valid UTF-8), the slide's pixel size and file name as the metadata records them, and OME axis
 * objects. Moved out of convert.c unchanged so both writers produce the same metadata.
 */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/numbers.h"
#include "zarr/ome_json.h"

/* A copy of `s` that is valid UTF-8 (JSON must be): invalid bytes become U+FFFD. */
char *sp_json_utf8_clean(const char *s) {
    size_t n = strlen(s);
    char *out = malloc(n * 3 + 1);
    if (out == NULL) {
        return NULL;
    }
    const unsigned char *p = (const unsigned char *)s;
    size_t o = 0;
    while (*p) {
        int len = 0;
        uint32_t cp = 0;
        if (p[0] < 0x80) {
            len = 1;
            cp = p[0];
        } else if ((p[0] & 0xe0) == 0xc0) {
            len = 2;
            cp = p[0] & 0x1f;
        } else if ((p[0] & 0xf0) == 0xe0) {
            len = 3;
            cp = p[0] & 0x0f;
        } else if ((p[0] & 0xf8) == 0xf0) {
            len = 4;
            cp = p[0] & 0x07;
        }
        bool valid = len > 0;
        for (int i = 1; valid && i < len; i++) {
            valid = (p[i] & 0xc0) == 0x80;
            cp = (cp << 6) | (p[i] & 0x3f);
        }
        if (valid) {
            static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
            valid = cp >= min_cp[len] && cp <= 0x10ffff && !(cp >= 0xd800 && cp <= 0xdfff);
        }
        if (valid) {
            memcpy(out + o, p, (size_t)len);
            o += (size_t)len;
            p += len;
        } else {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
            p += 1;
        }
    }
    out[o] = '\0';
    return out;
}

bool sp_json_add_string(cJSON *obj, const char *key, const char *value) {
    char *k = sp_json_utf8_clean(key), *v = sp_json_utf8_clean(value);
    bool ok = k != NULL && v != NULL && cJSON_AddStringToObject(obj, k, v) != NULL;
    free(k);
    free(v);
    return ok;
}

cJSON *sp_ome_axis(const char *name, const char *type, const char *unit) {
    cJSON *a = cJSON_CreateObject();
    cJSON_AddStringToObject(a, "name", name);
    cJSON_AddStringToObject(a, "type", type);
    if (unit != NULL) {
        cJSON_AddStringToObject(a, "unit", unit);
    }
    return a;
}
