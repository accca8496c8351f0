/* props.h — a slide's properties: a set of string keys with string values, sorted once the
 * format has opened so that lookups are binary searches and enumeration is in key order. */
#ifndef SP_BASE_PROPS_H
#define SP_BASE_PROPS_H

#include <stdint.h>

#include "base/err.h"

typedef struct sp_prop {
    char *key;
    char *value;
} sp_prop;

typedef struct sp_props {
    sp_prop *items;
    int32_t count, capacity;
    int sorted;
} sp_props;

/* Set key to value (both copied); a later set of the same key replaces the value. */
sp_status sp_props_set(sp_props *props, const char *key, const char *value, sp_err *err);
/* Sort for lookup; call after the last set. */
void sp_props_finish(sp_props *props);
const char *sp_props_get(const sp_props *props, const char *key);
void sp_props_free(sp_props *props);
/* Remove `key` if set (a format that keeps a raw blob, such as an XML description, out of the
 * properties); call before sp_props_finish. */
void sp_props_remove(sp_props *props, const char *key);

#endif
