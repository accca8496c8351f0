/* annotations.c — the annotation set (sp_annotations): loading a file, the model the parsers
 * build, the class table and the getters. A file is read whole through the byte-source layer
 * (so a URL works as a path does), its format told by its first character (JSON or XML), and
 * parsed by annotations_geojson.c or annotations_asap.c through the builder below. The builder
 * is where every geometry is checked, whatever the syntax it came in: a ring needs 3 distinct
 * vertices, coordinates must be finite and at most 2^40 in magnitude, and counts stay within
 * the limits of annotations_internal.h, each failure a message naming the file and the feature.
 * Classes are numbered 1..n in the order their names first appear among kept features. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/paths.h"
#include "jobs/train/annotations_internal.h"

static const char UNCLASSIFIED[] = "unclassified";

/* ---- messages ---------------------------------------------------------------------------- */

/* Up to 60 bytes of an untrusted name for a message, control bytes as '?'. */
static void printable(const char *s, char *out, size_t cap) {
    size_t n = 0;
    for (; s != NULL && s[n] != '\0' && n + 1 < cap && n < 60; n++) {
        unsigned char c = (unsigned char)s[n];
        out[n] = c < 0x20 || c == 0x7f ? '?' : (char)c;
    }
    out[n] = '\0';
}

static sp_status vfail(const sp_annotations *a, sp_err *err, sp_status status, bool feature,
                       size_t index, const char *name, const char *cls, const char *fmt,
                       va_list ap) {
    char msg[SP_ERR_MSG_MAX];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (!feature) {
        return sp_err_set(err, status, "%s: %s", a->source, msg);
    }
    char n[64], c[64];
    printable(name, n, sizeof n);
    printable(cls != NULL && cls[0] != '\0' ? cls : UNCLASSIFIED, c, sizeof c);
    return sp_err_set(err, status, "%s: feature %zu (\"%s\", class \"%s\"): %s", a->source, index,
                      n, c, msg);
}

sp_status sp_ann_fail(const sp_annotations *a, sp_err *err, sp_status status, const char *fmt,
                      ...) {
    va_list ap;
    va_start(ap, fmt);
    const sp_ann_feature *f = a->open ? &a->features[a->n_features - 1] : NULL;
    sp_status st = vfail(a, err, status, f != NULL, f ? f->file_index : 0, f ? f->name : NULL,
                         f ? f->pending_cls : NULL, fmt, ap);
    va_end(ap);
    return st;
}

sp_status sp_ann_fail_at(const sp_annotations *a, sp_err *err, sp_status status, size_t file_index,
                         const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    sp_status st = vfail(a, err, status, true, file_index, "", NULL, fmt, ap);
    va_end(ap);
    return st;
}

/* ---- the builder ------------------------------------------------------------------------- */

sp_status sp_ann_create(const char *source, sp_annotations **out, sp_err *err) {
    *out = NULL;
    sp_annotations *a = calloc(1, sizeof *a);
    if (a == NULL || (a->source = strdup(source != NULL ? source : "annotations")) == NULL) {
        free(a);
        return sp_err_set(err, SP_E_NOMEM, "out of memory");
    }
    *out = a;
    return SP_OK;
}

/* Make room for one more of `size`-byte items in *items (count n, capacity *cap). */
static bool grow(void **items, size_t n, size_t *cap, size_t size) {
    if (n < *cap) {
        return true;
    }
    size_t c = *cap ? *cap * 2 : 4;
    void *p = realloc(*items, c * size);
    if (p == NULL) {
        return false;
    }
    *items = p;
    *cap = c;
    return true;
}

sp_status sp_ann_begin_feature(sp_annotations *a, const char *cls, const char *name, sp_err *err) {
    if (a->seen >= SP_ANN_MAX_FEATURES) {
        return sp_ann_fail(a, err, SP_E_LIMIT, "more than %zu features", SP_ANN_MAX_FEATURES);
    }
    if (!grow((void **)&a->features, a->n_features, &a->cap_features, sizeof *a->features)) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory");
    }
    sp_ann_feature *f = &a->features[a->n_features];
    memset(f, 0, sizeof *f);
    f->file_index = a->seen;
    f->name = strdup(name != NULL ? name : "");
    f->pending_cls = strdup(cls != NULL && cls[0] != '\0' ? cls : UNCLASSIFIED);
    if (f->name == NULL || f->pending_cls == NULL) {
        free(f->name);
        free(f->pending_cls);
        return sp_err_set(err, SP_E_NOMEM, "out of memory");
    }
    a->n_features++;
    a->seen++;
    a->open = true;
    return SP_OK;
}

sp_status sp_ann_add_polygon(sp_annotations *a, sp_err *err) {
    sp_ann_feature *f = &a->features[a->n_features - 1];
    size_t cap = f->cap_polys;
    if (f->n_polys == UINT32_MAX || !grow((void **)&f->polys, f->n_polys, &cap, sizeof *f->polys)) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory");
    }
    f->cap_polys = (uint32_t)(cap > UINT32_MAX ? UINT32_MAX : cap);
    sp_ann_polygon *p = &f->polys[f->n_polys++];
    memset(p, 0, sizeof *p);
    p->x_min = p->y_min = INFINITY;
    p->x_max = p->y_max = -INFINITY;
    return SP_OK;
}

static bool same(const double *xy, size_t i, size_t j) {
    return xy[2 * i] == xy[2 * j] && xy[2 * i + 1] == xy[2 * j + 1];
}

sp_status sp_ann_add_ring(sp_annotations *a, const double *xy, size_t n, sp_err *err) {
    sp_ann_feature *f = &a->features[a->n_features - 1];
    sp_ann_polygon *p = &f->polys[f->n_polys - 1];
    const char *what = p->n_rings == 0 ? "exterior ring" : "hole";
    unsigned pi = f->n_polys - 1, ri = p->n_rings;
    for (size_t i = 0; i < 2 * n; i++) {
        if (!isfinite(xy[i]) || fabs(xy[i]) > SP_ANN_MAX_COORD) {
            return sp_ann_fail(a, err, SP_E_CORRUPT,
                               "polygon %u, ring %u: vertex %zu has %s %g (coordinates must be "
                               "finite and at most 2^40 in magnitude)",
                               pi, ri, i / 2, i % 2 ? "y" : "x", xy[i]);
        }
    }
    if (n > 1 && same(xy, 0, n - 1)) {
        n--; /* closed: the last vertex repeats the first */
    }
    /* Three distinct vertices: the first, one unlike it, and one unlike both. */
    size_t second = 1;
    while (second < n && same(xy, 0, second)) {
        second++;
    }
    size_t third = second + 1;
    while (third < n && (same(xy, 0, third) || same(xy, second, third))) {
        third++;
    }
    if (third >= n) {
        return sp_ann_fail(a, err, SP_E_CORRUPT,
                           "polygon %u, %s (ring %u) has fewer than 3 distinct points", pi, what,
                           ri);
    }
    if (n > UINT32_MAX || a->n_points + n > SP_ANN_MAX_POINTS) {
        return sp_ann_fail(a, err, SP_E_LIMIT, "more than %llu points in the file",
                           (unsigned long long)SP_ANN_MAX_POINTS);
    }
    size_t cap = p->cap_rings;
    if (p->n_rings == UINT32_MAX || !grow((void **)&p->rings, p->n_rings, &cap, sizeof *p->rings)) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory");
    }
    p->cap_rings = (uint32_t)(cap > UINT32_MAX ? UINT32_MAX : cap);
    double *copy = malloc(n * 2 * sizeof *copy);
    if (copy == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory");
    }
    memcpy(copy, xy, n * 2 * sizeof *copy);
    for (size_t i = 0; i < n; i++) {
        p->x_min = fmin(p->x_min, copy[2 * i]);
        p->x_max = fmax(p->x_max, copy[2 * i]);
        p->y_min = fmin(p->y_min, copy[2 * i + 1]);
        p->y_max = fmax(p->y_max, copy[2 * i + 1]);
    }
    p->rings[p->n_rings++] = (sp_ann_ring){.xy = copy, .n = (uint32_t)n};
    a->n_points += n;
    return SP_OK;
}

static void feature_free(sp_ann_feature *f) {
    for (uint32_t i = 0; i < f->n_polys; i++) {
        for (uint32_t r = 0; r < f->polys[i].n_rings; r++) {
            free(f->polys[i].rings[r].xy);
        }
        free(f->polys[i].rings);
    }
    free(f->polys);
    free(f->name);
    free(f->pending_cls);
}

sp_status sp_ann_end_feature(sp_annotations *a, sp_err *err) {
    sp_ann_feature *f = &a->features[a->n_features - 1];
    if (f->n_polys == 0) {
        feature_free(f);
        a->n_features--;
        a->skipped++;
        a->open = false;
        return SP_OK;
    }
    size_t k = 0;
    while (k < a->n_classes && strcmp(a->classes[k], f->pending_cls) != 0) {
        k++;
    }
    if (k == a->n_classes) {
        if (a->n_classes >= SP_ANN_MAX_CLASSES) {
            return sp_ann_fail(a, err, SP_E_LIMIT,
                               "more than %d classes (labels are 8-bit: 0 is background)",
                               SP_ANN_MAX_CLASSES);
        }
        if (a->classes == NULL &&
            (a->classes = calloc(SP_ANN_MAX_CLASSES, sizeof *a->classes)) == NULL) {
            return sp_err_set(err, SP_E_NOMEM, "out of memory");
        }
        a->classes[a->n_classes++] = f->pending_cls; /* the table takes the string */
    } else {
        free(f->pending_cls);
    }
    f->pending_cls = NULL;
    f->cls = (uint32_t)k + 1;
    a->open = false;
    return SP_OK;
}

/* ---- loading ----------------------------------------------------------------------------- */

sp_status sp_ann_parse(const char *data, size_t len, const char *source, sp_annotations **out,
                       sp_err *err) {
    *out = NULL;
    sp_annotations *a = NULL;
    sp_status st = sp_ann_create(source, &a, err);
    if (st != SP_OK) {
        return st;
    }
    size_t i = 0;
    if (len >= 3 && memcmp(data, "\xEF\xBB\xBF", 3) == 0) {
        i = 3; /* a UTF-8 byte-order mark */
    }
    while (i < len && (data[i] == ' ' || data[i] == '\t' || data[i] == '\r' || data[i] == '\n')) {
        i++;
    }
    if (i < len && (data[i] == '{' || data[i] == '[')) {
        st = sp_ann_parse_geojson(a, data, len, err);
    } else if (i < len && data[i] == '<') {
        st = sp_ann_parse_asap(a, data, len, err);
    } else {
        st = sp_ann_fail(a, err, i < len ? SP_E_UNSUPPORTED : SP_E_CORRUPT,
                         i < len ? "neither GeoJSON nor ASAP XML" : "the file is empty");
    }
    if (st == SP_OK && a->open) {
        st = sp_ann_end_feature(a, err); /* a parser bug otherwise; never leave one open */
    }
    if (st != SP_OK) {
        sp_annotations_free(a);
        return st;
    }
    *out = a;
    return SP_OK;
}

static sp_status read_whole(const char *path, char **out, size_t *len, sp_err *err) {
    sp_source *src = NULL;
    sp_status st = sp_source_open_any(path, &src, err);
    if (st != SP_OK) {
        return st;
    }
    return sp_source_read_whole(src, path, SP_ANN_MAX_FILE_BYTES, out, len, err);
}

sp_status sp_annotations_load(const char *path, sp_annotations **out, char *err, size_t err_len) {
    sp_err e = {0};
    sp_status st;
    if (out != NULL) {
        *out = NULL;
    }
    if (path == NULL || out == NULL) {
        st = sp_err_set(&e, SP_E_INVALID_ARG, "path and out must not be NULL");
    } else {
        char *text = NULL;
        size_t len = 0;
        st = read_whole(path, &text, &len, &e);
        if (st == SP_OK) {
            st = sp_ann_parse(text, len, path, out, &e);
        }
        free(text);
    }
    sp_err_report(st, &e, err, err_len);
    return st;
}

void sp_annotations_free(sp_annotations *a) {
    if (a == NULL) {
        return;
    }
    for (size_t i = 0; i < a->n_features; i++) {
        feature_free(&a->features[i]);
    }
    for (size_t k = 0; k < a->n_classes; k++) {
        free(a->classes[k]);
    }
    free(a->classes);
    free(a->features);
    free(a->source);
    free(a);
}

/* ---- getters ----------------------------------------------------------------------------- */

int64_t sp_annotations_class_count(const sp_annotations *a) {
    return a != NULL ? (int64_t)a->n_classes : -1;
}

const char *sp_annotations_class_name(const sp_annotations *a, int64_t index) {
    if (a == NULL || index < 0 || index > (int64_t)a->n_classes) {
        return NULL;
    }
    return index == 0 ? "background" : a->classes[index - 1];
}

int64_t sp_annotations_feature_count(const sp_annotations *a) {
    return a != NULL ? (int64_t)a->n_features : -1;
}

int64_t sp_annotations_feature_class(const sp_annotations *a, int64_t index) {
    if (a == NULL || index < 0 || index >= (int64_t)a->n_features) {
        return -1;
    }
    return a->features[index].cls;
}

int64_t sp_annotations_skipped(const sp_annotations *a) {
    return a != NULL ? a->skipped : -1;
}

sp_status sp_annotations_bounds(const sp_annotations *a, double *x_min, double *y_min,
                                double *x_max, double *y_max) {
    if (a == NULL || x_min == NULL || y_min == NULL || x_max == NULL || y_max == NULL) {
        return SP_E_INVALID_ARG;
    }
    double b[4] = {INFINITY, INFINITY, -INFINITY, -INFINITY};
    for (size_t i = 0; i < a->n_features; i++) {
        for (uint32_t k = 0; k < a->features[i].n_polys; k++) {
            const sp_ann_polygon *p = &a->features[i].polys[k];
            b[0] = fmin(b[0], p->x_min);
            b[1] = fmin(b[1], p->y_min);
            b[2] = fmax(b[2], p->x_max);
            b[3] = fmax(b[3], p->y_max);
        }
    }
    if (a->n_features == 0) {
        *x_min = *y_min = *x_max = *y_max = 0;
        return SP_E_NOT_FOUND;
    }
    *x_min = b[0];
    *y_min = b[1];
    *x_max = b[2];
    *y_max = b[3];
    return SP_OK;
}
