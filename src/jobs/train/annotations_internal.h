/* annotations_internal.h — the in-memory model of an annotation set (sp_annotations) and the
 * builder the two parsers fill it through. annotations.c owns the model: it checks every ring
 * as it is added (at least 3 distinct points, finite coordinates of magnitude at most 2^40),
 * counts features and points against the limits below, and numbers the classes. The parsers
 * (annotations_geojson.c, annotations_asap.c) only turn their syntax into begin / polygon /
 * ring / end calls; the rasteriser (annotations_raster.c) reads the finished model. Exposed for
 * tests/unit/test_annotations.c and fuzz/fuzz_annotations.c, which parse from memory. */
#ifndef SP_JOBS_TRAIN_ANNOTATIONS_INTERNAL_H
#define SP_JOBS_TRAIN_ANNOTATIONS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "slidepipe.h"

/* Limits on what a file may make the library hold (docs/labels.md). */
#define SP_ANN_MAX_FILE_BYTES ((uint64_t)1 << 30) /* bytes of one annotation file */
#define SP_ANN_MAX_FEATURES ((size_t)1 << 20)     /* features in a file, skipped ones included */
#define SP_ANN_MAX_POINTS ((uint64_t)1 << 24)     /* vertices in a file, all rings together */
#define SP_ANN_MAX_CLASSES 255                    /* class indices must fit a uint8 label */
#define SP_ANN_MAX_COORD 1099511627776.0          /* 2^40: larger magnitudes are absurd */

/* A closed ring of n >= 3 vertices, x and y interleaved; the closing vertex (equal to the first)
 * is not stored. */
typedef struct sp_ann_ring {
    double *xy;
    uint32_t n;
} sp_ann_ring;

/* Ring 0 is the exterior, the others holes; inside is the even-odd rule over all of them. */
typedef struct sp_ann_polygon {
    sp_ann_ring *rings;
    uint32_t n_rings, cap_rings;
    double x_min, y_min, x_max, y_max; /* of its vertices */
} sp_ann_polygon;

typedef struct sp_ann_feature {
    size_t file_index; /* 0-based position among the file's features, skipped ones included */
    uint32_t cls;      /* 1..n once ended; 0 while the feature is being built */
    char *name;        /* "" when it has none */
    char *pending_cls; /* the class name while the feature is being built */
    sp_ann_polygon *polys;
    uint32_t n_polys, cap_polys;
} sp_ann_feature;

struct sp_annotations {
    char *source; /* the file name, for messages */
    sp_ann_feature *features;
    size_t n_features, cap_features;
    char **classes; /* classes[k] is the name of class k + 1 */
    size_t n_classes;
    int64_t skipped;
    size_t seen; /* features begun, skipped ones included */
    uint64_t n_points;
    bool open; /* a feature is being built (the last one) */
};

/* A new, empty set whose messages name `source`. SP_E_NOMEM. */
sp_status sp_ann_create(const char *source, sp_annotations **out, sp_err *err);

/* Start the next feature of the file with class name `cls` (NULL or "" means "unclassified")
 * and feature name `name` (NULL means none). SP_E_LIMIT past SP_ANN_MAX_FEATURES. */
sp_status sp_ann_begin_feature(sp_annotations *a, const char *cls, const char *name, sp_err *err);

/* Start a polygon of the open feature; its first ring is the exterior. */
sp_status sp_ann_add_polygon(sp_annotations *a, sp_err *err);

/* Add a ring of n vertices (xy interleaved) to the open polygon, checked and copied; a last
 * vertex equal to the first is dropped. SP_E_CORRUPT naming the feature for a bad ring,
 * SP_E_LIMIT past SP_ANN_MAX_POINTS. */
sp_status sp_ann_add_ring(sp_annotations *a, const double *xy, size_t n, sp_err *err);

/* Finish the open feature: with no polygon it is dropped and counted as skipped; otherwise its
 * class is numbered (SP_E_LIMIT past SP_ANN_MAX_CLASSES). */
sp_status sp_ann_end_feature(sp_annotations *a, sp_err *err);

/* Record `status` with "SOURCE: feature I ("NAME", class "CLASS"): MESSAGE" for the open
 * feature, or "SOURCE: MESSAGE" when none is open. Returns `status`. */
sp_status sp_ann_fail(const sp_annotations *a, sp_err *err, sp_status status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* As sp_ann_fail, for the feature at `file_index` that has not been begun. */
sp_status sp_ann_fail_at(const sp_annotations *a, sp_err *err, sp_status status, size_t file_index,
                         const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Parse an annotation file from memory (`len` bytes; need not be NUL-terminated), the format by
 * content; messages name `source`. On failure *out is NULL. */
sp_status sp_ann_parse(const char *data, size_t len, const char *source, sp_annotations **out,
                       sp_err *err);

/* The two parsers, filling a fresh set from the whole text. */
sp_status sp_ann_parse_geojson(sp_annotations *a, const char *data, size_t len, sp_err *err);
sp_status sp_ann_parse_asap(sp_annotations *a, const char *data, size_t len, sp_err *err);

/* A number as ASAP writes it: optional spaces, then a decimal with '.' or, when there is no '.',
 * one ',' as the decimal separator (locale-dependent writers), optional exponent; nothing else.
 * False when the text is not such a number. */
bool sp_ann_parse_decimal(const char *text, size_t len, double *out);

#endif
