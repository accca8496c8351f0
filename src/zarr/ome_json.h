/* ome_json.h — the OME-Zarr metadata that convert and process both write: the multiscales entry,
 * the omero channels of an RGB image, and the group documents (.zgroup + .zattrs for Zarr v2,
 * zarr.json for v3), plus the JSON helpers they use. */
#ifndef SP_ZARR_OME_JSON_H
#define SP_ZARR_OME_JSON_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "slidepipe.h"
#include "zarr/zarr_store.h"

/* A malloc'd copy of `s` that is valid UTF-8: invalid bytes become U+FFFD. NULL when out of
 * memory. */
char *sp_json_utf8_clean(const char *s);

/* Add key: value to `obj`, both cleaned to valid UTF-8; false when out of memory. */
bool sp_json_add_string(cJSON *obj, const char *key, const char *value);

/* An OME axis object {"name", "type"[, "unit"]}; `unit` may be NULL. */
cJSON *sp_ome_axis(const char *name, const char *type, const char *unit);

/* What one multiscales entry describes. Level k's scale is (mpp_y, mpp_x) x first_scale x 2^k. */
typedef struct sp_ome_multiscales_spec {
    const char *name;        /* the "name" field; NULL for none */
    double mpp_x, mpp_y;     /* the slide's pixel size in micrometres, 0 where unknown */
    bool channels_last;      /* axes y, x, c instead of c, y, x */
    int levels;              /* datasets "0" .. levels - 1 */
    double first_scale;      /* level 0's downsample from the slide's full resolution */
    const char *type;        /* the downsampling "type"; NULL for none */
    const char *description; /* metadata.description; NULL for none */
    const char *method;      /* metadata.method */
} sp_ome_multiscales_spec;

/* The "multiscales" list with one entry; OME-Zarr 0.4 carries "version" inside it
 * (with_version), 0.5 in attributes.ome. *ok becomes false when a string could not be added. */
cJSON *sp_ome_multiscales(const sp_ome_multiscales_spec *spec, bool with_version, bool *ok);

/* The "omero" object of an RGB image: channels R, G, B, windows 0..255. */
cJSON *sp_ome_omero_rgb(void);

/* Write `doc` (freed here) as `relpath` in the store; `complete` false (a part could not be
 * built) is out of memory, never a file with a part missing. */
sp_status sp_ome_write_json(sp_zarr_store *store, const char *relpath, cJSON *doc, bool complete,
                            sp_err *err);

/* Write the group's metadata: for Zarr v2 .zgroup and .zattrs {multiscales, omero, slidepipe},
 * for v3 zarr.json with attributes {ome: {version 0.5, multiscales, omero}, slidepipe}. Takes
 * (and frees) the three documents; `omero` may be NULL; `complete` as for sp_ome_write_json. */
sp_status sp_ome_write_group(sp_zarr_store *store, int zarr_version, cJSON *multiscales,
                             cJSON *omero, cJSON *slidepipe, bool complete, sp_err *err);

#endif
