/* props.c — the property set (see props.h). Keys and values come from files: bytes that are not
 * well-formed UTF-8 are stored as '?', so that every consumer (JSON, Python) can take them. */
#include "base/props.h"

#include <stdlib.h>
#include <string.h>

#include "base/strings.h"

sp_status sp_props_set(sp_props *props, const char *key, const char *value, sp_err *err) {
    char *k = sp_strdup_utf8(key), *v = sp_strdup_utf8(value);
    if (k == NULL || v == NULL) {
        free(k);
        free(v);
        return sp_err_set(err, SP_E_NOMEM, "out of memory storing a property");
    }
    for (int32_t i = 0; i < props->count; i++) {
        if (strcmp(props->items[i].key, k) == 0) {
            free(k);
            free(props->items[i].value);
            props->items[i].value = v;
            return SP_OK;
        }
    }
    if (props->count == props->capacity) {
        int32_t cap = props->capacity ? props->capacity * 2 : 32;
        sp_prop *grown = realloc(props->items, (size_t)cap * sizeof *grown);
        if (grown == NULL) {
            free(k);
            free(v);
            return sp_err_set(err, SP_E_NOMEM, "out of memory storing a property");
        }
        props->items = grown;
        props->capacity = cap;
    }
    props->items[props->count++] = (sp_prop){k, v};
    props->sorted = 0;
    return SP_OK;
}

static int prop_cmp(const void *a, const void *b) {
    return strcmp(((const sp_prop *)a)->key, ((const sp_prop *)b)->key);
}

void sp_props_finish(sp_props *props) {
    if (props->count > 0) {
        qsort(props->items, (size_t)props->count, sizeof *props->items, prop_cmp);
    }
    props->sorted = 1;
}

const char *sp_props_get(const sp_props *props, const char *key) {
    if (!props->sorted) {
        for (int32_t i = 0; i < props->count; i++) {
            if (strcmp(props->items[i].key, key) == 0) {
                return props->items[i].value;
            }
        }
        return NULL;
    }
    int32_t lo = 0, hi = props->count;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        int c = strcmp(props->items[mid].key, key);
        if (c == 0) {
            return props->items[mid].value;
        }
        if (c < 0) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return NULL;
}

void sp_props_free(sp_props *props) {
    for (int32_t i = 0; i < props->count; i++) {
        free(props->items[i].key);
        free(props->items[i].value);
    }
    free(props->items);
    memset(props, 0, sizeof *props);
}

void sp_props_remove(sp_props *props, const char *key) {
    for (int32_t i = 0; i < props->count; i++) {
        if (strcmp(props->items[i].key, key) == 0) {
            free(props->items[i].key);
            free(props->items[i].value);
            memmove(&props->items[i], &props->items[i + 1],
                    (size_t)(props->count - i - 1) * sizeof *props->items);
            props->count--;
            return;
        }
    }
}
