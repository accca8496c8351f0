/* fuzz_annotations.c — libFuzzer target for the annotation parsers and the rasteriser
 * (src/jobs/train/annotations*.c): the input is a whole annotation file, GeoJSON or ASAP XML
 * by its first character. A parsed set is then read through every getter and painted twice: a
 * 32 x 32 window over its bounds, and a window at the origin at downsample 1, so the scanline
 * fill sees hostile vertices (huge, tiny, self-intersecting, holes outside their exterior).
 * The input is copied to an exact-size buffer: the parsers are told the length and must never
 * read past it. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jobs/train/annotations_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size ? size : 1);
    if (text == NULL) {
        return 0;
    }
    memcpy(text, data, size);
    sp_annotations *a = NULL;
    sp_err err = {0};
    if (sp_ann_parse(text, size, "fuzz", &a, &err) == SP_OK) {
        for (int64_t k = 0; k <= sp_annotations_class_count(a); k++) {
            if (sp_annotations_class_name(a, k) == NULL) {
                abort(); /* every index 0..n names a class */
            }
        }
        for (int64_t i = 0; i < sp_annotations_feature_count(a); i++) {
            int64_t c = sp_annotations_feature_class(a, i);
            if (c < 1 || c > sp_annotations_class_count(a)) {
                abort();
            }
        }
        uint8_t map[32 * 32];
        double x0, y0, x1, y1;
        if (sp_annotations_bounds(a, &x0, &y0, &x1, &y1) == SP_OK) {
            double d = fmax(x1 - x0, y1 - y0) / 32;
            sp_annotations_rasterize(a, d > 0 ? d : 1, x0, y0, 32, 32, map, 32);
            for (int i = 0; i < 32 * 32; i++) {
                if (map[i] > sp_annotations_class_count(a)) {
                    abort();
                }
            }
        }
        sp_annotations_rasterize(a, 1, 0, 0, 32, 32, map, 32);
        sp_annotations_free(a);
    }
    free(text);
    return 0;
}
