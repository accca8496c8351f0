/* ome_json.h — JSON helpers shared by the OME-Zarr metadata writers (convert and process). */
#ifndef SP_ZARR_OME_JSON_H
#define SP_ZARR_OME_JSON_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "slidepipe.h"

/* A malloc'd copy of `s` that is valid UTF-8: invalid bytes become U+FFFD. NULL when out of
 * memory. */
char *sp_json_utf8_clean(const char *s);

/* Add key: value to `obj`, both cleaned to valid UTF-8; false when out of memory. */
bool sp_json_add_string(cJSON *obj, const char *key, const char *value);

/* An OME axis object {"name", "type"[, "unit"]}; `unit` may be NULL. */
cJSON *sp_ome_axis(const char *name, const char *type, const char *unit);

#endif
