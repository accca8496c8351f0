/* annotations_geojson.c — GeoJSON annotations as QuPath exports them, into the builder of
 * annotations.c. The document is a FeatureCollection, a bare array of Features, or a single
 * Feature. A feature's class is properties.classification.name (QuPath's class), else
 * properties.name (an unclassified but named annotation), else "unclassified"; its name, for
 * messages, is properties.name. Polygon and MultiPolygon geometries become polygons (rings
 * closed or not; a third coordinate is ignored); a GeometryCollection contributes its Polygons
 * and MultiPolygons. Points and lines, and a null geometry, carry no area: the feature is
 * skipped and counted. Every member is checked for its JSON type; a wrong one is an error
 * naming the feature, never a guess. cJSON parses (its nesting limit bounds the depth). */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "jobs/train/annotations_internal.h"

typedef struct gj {
    sp_annotations *a;
    double *xy; /* scratch for one ring */
    size_t cap;
} gj;

static const cJSON *member(const cJSON *obj, const char *key) {
    return cJSON_GetObjectItemCaseSensitive(obj, key);
}

static bool absent(const cJSON *v) {
    return v == NULL || cJSON_IsNull(v);
}

static const char *type_name(const cJSON *v) {
    return cJSON_IsObject(v)   ? "an object"
           : cJSON_IsArray(v)  ? "an array"
           : cJSON_IsString(v) ? "a string"
           : cJSON_IsNumber(v) ? "a number"
           : cJSON_IsBool(v)   ? "a boolean"
                               : "null";
}

/* One ring: an array of at least one position, each an array of 2 or more numbers. */
static sp_status ring(gj *g, const cJSON *coords, unsigned poly, unsigned r, sp_err *err) {
    if (!cJSON_IsArray(coords)) {
        return sp_ann_fail(g->a, err, SP_E_CORRUPT,
                           "polygon %u, ring %u: coordinates are %s, not an array of positions",
                           poly, r, type_name(coords));
    }
    size_t n = 0;
    const cJSON *pos;
    cJSON_ArrayForEach(pos, coords) {
        if (n >= SP_ANN_MAX_POINTS) {
            return sp_ann_fail(g->a, err, SP_E_LIMIT, "polygon %u, ring %u: more than %llu points",
                               poly, r, (unsigned long long)SP_ANN_MAX_POINTS);
        }
        const cJSON *x = cJSON_IsArray(pos) ? pos->child : NULL;
        const cJSON *y = x != NULL ? x->next : NULL;
        if (!cJSON_IsNumber(x) || !cJSON_IsNumber(y)) {
            return sp_ann_fail(g->a, err, SP_E_CORRUPT,
                               "polygon %u, ring %u: position %zu is not an array of numbers "
                               "[x, y]",
                               poly, r, n);
        }
        if (n == g->cap) {
            size_t cap = g->cap ? g->cap * 2 : 64;
            double *p = realloc(g->xy, cap * 2 * sizeof *p);
            if (p == NULL) {
                return sp_err_set(err, SP_E_NOMEM, "out of memory");
            }
            g->xy = p;
            g->cap = cap;
        }
        g->xy[2 * n] = x->valuedouble;
        g->xy[2 * n + 1] = y->valuedouble;
        n++;
    }
    return sp_ann_add_ring(g->a, g->xy, n, err);
}

/* A Polygon's coordinates: an array of rings, the exterior first. */
static sp_status polygon(gj *g, const cJSON *rings, unsigned poly, sp_err *err) {
    if (!cJSON_IsArray(rings) || rings->child == NULL) {
        return sp_ann_fail(g->a, err, SP_E_CORRUPT,
                           "polygon %u: coordinates are %s, not a non-empty array of rings", poly,
                           cJSON_IsArray(rings) ? "empty" : type_name(rings));
    }
    sp_status st = sp_ann_add_polygon(g->a, err);
    unsigned r = 0;
    const cJSON *rc;
    cJSON_ArrayForEach(rc, rings) {
        if (st != SP_OK) {
            break;
        }
        st = ring(g, rc, poly, r++, err);
    }
    return st;
}

/* A geometry's polygons into the open feature; `nested` inside a GeometryCollection. */
static sp_status geometry(gj *g, const cJSON *geom, bool nested, unsigned *poly, sp_err *err) {
    const cJSON *type = cJSON_IsObject(geom) ? member(geom, "type") : NULL;
    if (!cJSON_IsString(type)) {
        return sp_ann_fail(g->a, err, SP_E_CORRUPT, "the geometry is %s without a string \"type\"",
                           type_name(geom));
    }
    const char *t = type->valuestring;
    if (strcmp(t, "Point") == 0 || strcmp(t, "MultiPoint") == 0 || strcmp(t, "LineString") == 0 ||
        strcmp(t, "MultiLineString") == 0) {
        return SP_OK; /* no area */
    }
    if (strcmp(t, "GeometryCollection") == 0 && !nested) {
        const cJSON *list = member(geom, "geometries");
        if (!cJSON_IsArray(list)) {
            return sp_ann_fail(g->a, err, SP_E_CORRUPT,
                               "GeometryCollection without a \"geometries\" array");
        }
        const cJSON *item;
        cJSON_ArrayForEach(item, list) {
            sp_status st = geometry(g, item, true, poly, err);
            if (st != SP_OK) {
                return st;
            }
        }
        return SP_OK;
    }
    const cJSON *coords = member(geom, "coordinates");
    bool multi = strcmp(t, "MultiPolygon") == 0;
    if (!multi && strcmp(t, "Polygon") != 0) {
        return sp_ann_fail(g->a, err, SP_E_UNSUPPORTED, "unsupported geometry type \"%.40s\"%s", t,
                           nested ? " in a GeometryCollection" : "");
    }
    if (coords == NULL) {
        return sp_ann_fail(g->a, err, SP_E_CORRUPT, "the %s has no \"coordinates\"", t);
    }
    if (!multi) {
        return polygon(g, coords, (*poly)++, err);
    }
    if (!cJSON_IsArray(coords) || coords->child == NULL) {
        return sp_ann_fail(g->a, err, SP_E_CORRUPT,
                           "MultiPolygon coordinates are %s, not a non-empty array of polygons",
                           cJSON_IsArray(coords) ? "empty" : type_name(coords));
    }
    const cJSON *pc;
    cJSON_ArrayForEach(pc, coords) {
        sp_status st = polygon(g, pc, (*poly)++, err);
        if (st != SP_OK) {
            return st;
        }
    }
    return SP_OK;
}

/* The feature at `index`: its class and name, then its geometry. */
static sp_status feature(gj *g, const cJSON *f, size_t index, sp_err *err) {
    sp_annotations *a = g->a;
    const cJSON *type = cJSON_IsObject(f) ? member(f, "type") : NULL;
    if (!cJSON_IsString(type) || strcmp(type->valuestring, "Feature") != 0) {
        return sp_ann_fail_at(a, err, SP_E_CORRUPT, index, "%s, not a GeoJSON Feature",
                              cJSON_IsObject(f) ? "an object without \"type\": \"Feature\""
                                                : type_name(f));
    }
    const cJSON *props = member(f, "properties");
    const char *name = NULL, *cls = NULL;
    if (!absent(props)) {
        if (!cJSON_IsObject(props)) {
            return sp_ann_fail_at(a, err, SP_E_CORRUPT, index,
                                  "\"properties\" is %s, not an object", type_name(props));
        }
        const cJSON *n = member(props, "name");
        if (!absent(n) && !cJSON_IsString(n)) {
            return sp_ann_fail_at(a, err, SP_E_CORRUPT, index,
                                  "properties.name is %s, not a string", type_name(n));
        }
        name = cJSON_IsString(n) ? n->valuestring : NULL;
        const cJSON *c = member(props, "classification");
        if (!absent(c)) {
            const cJSON *cn = cJSON_IsObject(c) ? member(c, "name") : NULL;
            if (!cJSON_IsString(cn)) {
                return sp_ann_fail_at(a, err, SP_E_CORRUPT, index,
                                      "properties.classification is %s without a string "
                                      "\"name\"",
                                      type_name(c));
            }
            cls = cn->valuestring;
        }
    }
    sp_status st = sp_ann_begin_feature(a, cls != NULL ? cls : name, name, err);
    if (st != SP_OK) {
        return st;
    }
    const cJSON *geom = member(f, "geometry");
    unsigned poly = 0;
    if (geom == NULL) {
        return sp_ann_fail(a, err, SP_E_CORRUPT, "no \"geometry\" member");
    }
    if (!cJSON_IsNull(geom)) {
        st = geometry(g, geom, false, &poly, err);
    }
    return st != SP_OK ? st : sp_ann_end_feature(a, err);
}

sp_status sp_ann_parse_geojson(sp_annotations *a, const char *data, size_t len, sp_err *err) {
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(data, len, &end, false);
    if (root == NULL) {
        size_t at = end != NULL && end >= data && end <= data + len ? (size_t)(end - data) : 0;
        return sp_ann_fail(a, err, SP_E_CORRUPT, "invalid JSON near byte %zu", at);
    }
    sp_status st = SP_OK;
    for (const char *p = end; p != NULL && p < data + len; p++) {
        if (*p != ' ' && *p != '\t' && *p != '\r' && *p != '\n' && *p != '\0') {
            st = sp_ann_fail(a, err, SP_E_CORRUPT, "text after the JSON document at byte %zu",
                             (size_t)(p - data));
            break;
        }
    }
    const cJSON *list = NULL;
    const cJSON *type = cJSON_IsObject(root) ? member(root, "type") : NULL;
    gj g = {.a = a};
    if (st != SP_OK) {
        /* reported above */
    } else if (cJSON_IsArray(root)) {
        list = root;
    } else if (cJSON_IsString(type) && strcmp(type->valuestring, "FeatureCollection") == 0) {
        list = member(root, "features");
        if (!cJSON_IsArray(list)) {
            st = sp_ann_fail(a, err, SP_E_CORRUPT,
                             "the FeatureCollection has no \"features\" array");
        }
    } else if (cJSON_IsString(type) && strcmp(type->valuestring, "Feature") == 0) {
        st = feature(&g, root, 0, err);
    } else {
        st = sp_ann_fail(a, err, SP_E_UNSUPPORTED,
                         "JSON that is not a GeoJSON FeatureCollection, Feature or array of "
                         "Features");
    }
    size_t index = 0;
    const cJSON *f;
    if (st == SP_OK && list != NULL) {
        cJSON_ArrayForEach(f, list) {
            if ((st = feature(&g, f, index++, err)) != SP_OK) {
                break;
            }
        }
    }
    free(g.xy);
    cJSON_Delete(root);
    return st;
}
