/* ome_json.c — the OME-Zarr metadata shared by the writers (sp_convert_to_zarr and
 * sp_process_to_zarr): UTF-8 cleaning (slide properties are untrusted bytes, JSON must be valid
 * UTF-8), OME axis objects, the multiscales entry, the omero channels and the group documents,
 * written once here so that both writers produce the same metadata the same way.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
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

cJSON *sp_ome_multiscales(const sp_ome_multiscales_spec *spec, bool with_version, bool *ok) {
    cJSON *list = cJSON_CreateArray();
    cJSON *ms = cJSON_CreateObject();
    cJSON_AddItemToArray(list, ms);
    if (with_version) {
        cJSON_AddStringToObject(ms, "version", "0.4");
    }
    if (spec->name != NULL) {
        *ok &= sp_json_add_string(ms, "name", spec->name);
    }
    /* One known axis stands for both; with neither, the scale is in pixels and has no unit. */
    double mx = spec->mpp_x != 0 ? spec->mpp_x : spec->mpp_y;
    double my = spec->mpp_y != 0 ? spec->mpp_y : spec->mpp_x;
    const char *unit = mx > 0 ? "micrometer" : NULL;
    if (mx == 0) {
        mx = my = 1.0;
    }
    cJSON *axes = cJSON_AddArrayToObject(ms, "axes");
    if (!spec->channels_last) {
        cJSON_AddItemToArray(axes, sp_ome_axis("c", "channel", NULL));
    }
    cJSON_AddItemToArray(axes, sp_ome_axis("y", "space", unit));
    cJSON_AddItemToArray(axes, sp_ome_axis("x", "space", unit));
    if (spec->channels_last) {
        cJSON_AddItemToArray(axes, sp_ome_axis("c", "channel", NULL));
    }
    cJSON *datasets = cJSON_AddArrayToObject(ms, "datasets");
    for (int k = 0; k < spec->levels; k++) {
        cJSON *d = cJSON_CreateObject();
        char path[16];
        snprintf(path, sizeof path, "%d", k);
        cJSON_AddStringToObject(d, "path", path);
        cJSON *cts = cJSON_AddArrayToObject(d, "coordinateTransformations");
        cJSON *scale = cJSON_CreateObject();
        cJSON_AddStringToObject(scale, "type", "scale");
        double f = spec->first_scale * ldexp(1.0, k);
        double v[3] = {1, my * f, mx * f};
        if (spec->channels_last) {
            v[0] = my * f;
            v[1] = mx * f;
            v[2] = 1;
        }
        cJSON_AddItemToObject(scale, "scale", cJSON_CreateDoubleArray(v, 3));
        cJSON_AddItemToArray(cts, scale);
        cJSON_AddItemToArray(datasets, d);
    }
    if (spec->type != NULL) {
        cJSON_AddStringToObject(ms, "type", spec->type);
    }
    cJSON *meta = cJSON_AddObjectToObject(ms, "metadata");
    if (spec->description != NULL) {
        cJSON_AddStringToObject(meta, "description", spec->description);
    }
    cJSON_AddStringToObject(meta, "method", spec->method);
    cJSON_AddStringToObject(meta, "version", sp_version());
    return list;
}

cJSON *sp_ome_omero_rgb(void) {
    static const char *labels[3] = {"R", "G", "B"};
    static const char *colors[3] = {"FF0000", "00FF00", "0000FF"};
    cJSON *omero = cJSON_CreateObject();
    cJSON *channels = cJSON_AddArrayToObject(omero, "channels");
    for (int i = 0; i < 3; i++) {
        cJSON *ch = cJSON_CreateObject();
        cJSON_AddStringToObject(ch, "label", labels[i]);
        cJSON_AddStringToObject(ch, "color", colors[i]);
        cJSON_AddBoolToObject(ch, "active", 1);
        cJSON *win = cJSON_AddObjectToObject(ch, "window");
        cJSON_AddNumberToObject(win, "start", 0);
        cJSON_AddNumberToObject(win, "end", 255);
        cJSON_AddNumberToObject(win, "min", 0);
        cJSON_AddNumberToObject(win, "max", 255);
        cJSON_AddItemToArray(channels, ch);
    }
    cJSON *rdefs = cJSON_AddObjectToObject(omero, "rdefs");
    cJSON_AddStringToObject(rdefs, "model", "color");
    return omero;
}

sp_status sp_ome_write_json(sp_zarr_store *store, const char *relpath, cJSON *doc, bool complete,
                            sp_err *err) {
    char *text = doc && complete ? cJSON_Print(doc) : NULL;
    cJSON_Delete(doc);
    if (text == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory formatting %s", relpath);
    }
    sp_status st = sp_zarr_store_write_json(store, relpath, text, err);
    free(text);
    return st;
}

sp_status sp_ome_write_group(sp_zarr_store *store, int zarr_version, cJSON *multiscales,
                             cJSON *omero, cJSON *slidepipe, bool complete, sp_err *err) {
    if (zarr_version == 2) {
        cJSON *g = cJSON_CreateObject();
        cJSON_AddNumberToObject(g, "zarr_format", 2);
        sp_status st = sp_ome_write_json(store, ".zgroup", g, true, err);
        cJSON *attrs = cJSON_CreateObject();
        cJSON_AddItemToObject(attrs, "multiscales", multiscales);
        if (omero != NULL) {
            cJSON_AddItemToObject(attrs, "omero", omero);
        }
        cJSON_AddItemToObject(attrs, "slidepipe", slidepipe);
        if (st != SP_OK) {
            cJSON_Delete(attrs);
            return st;
        }
        return sp_ome_write_json(store, ".zattrs", attrs, complete, err);
    }
    cJSON *g = cJSON_CreateObject();
    cJSON_AddNumberToObject(g, "zarr_format", 3);
    cJSON_AddStringToObject(g, "node_type", "group");
    cJSON *attrs = cJSON_AddObjectToObject(g, "attributes");
    cJSON *ome = cJSON_AddObjectToObject(attrs, "ome");
    cJSON_AddStringToObject(ome, "version", "0.5");
    cJSON_AddItemToObject(ome, "multiscales", multiscales);
    if (omero != NULL) {
        cJSON_AddItemToObject(ome, "omero", omero);
    }
    cJSON_AddItemToObject(attrs, "slidepipe", slidepipe);
    return sp_ome_write_json(store, "zarr.json", g, complete, err);
}
