/* zarr_array_json.h — the metadata document of one Zarr array as the store writes it: ".zarray"
 * for Zarr v2, "zarr.json" for v3 (with the sharding_indexed codec when the spec shards). Its
 * bytes are part of the dataset hash, so the layout (key order, spacing, newlines) is fixed. */
#ifndef SP_ZARR_ZARR_ARRAY_JSON_H
#define SP_ZARR_ZARR_ARRAY_JSON_H

#include <stddef.h>

#include "zarr/zarr_store.h"

/* The document for `spec` (already checked by sp_zarr_array_create; its dimension names free of
 * '"', '\\' and control characters), malloc'd and NUL-terminated, its length in *len; NULL when
 * out of memory. */
char *sp_zarr_array_json(const sp_zarr_array_spec *spec, size_t *len);

#endif
