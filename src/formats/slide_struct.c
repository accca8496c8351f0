/* slide_struct.c — the helpers a format's open() fills a slide with (slide_struct.h). */
#include "formats/slide_struct.h"

#include <stdlib.h>
#include <string.h>

sp_status sp_slide_add_level(sp_slide *s, const sp_level *level, sp_err *err) {
    sp_level *grown = realloc(s->levels, (size_t)(s->n_levels + 1) * sizeof *grown);
    if (grown == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory adding a level");
    }
    s->levels = grown;
    sp_level *l = &s->levels[s->n_levels++];
    *l = *level;
    l->tiles_across = (l->width + l->tile_width - 1) / l->tile_width;
    l->tiles_down = (l->height + l->tile_height - 1) / l->tile_height;
    return SP_OK;
}

sp_status sp_slide_add_associated(sp_slide *s, const char *name, int64_t width, int64_t height,
                                  const void *priv, sp_err *err) {
    for (int32_t i = 0; i < s->n_associated; i++) {
        if (strcmp(s->associated[i].name, name) == 0) {
            return SP_OK; /* keep the first of duplicate names */
        }
    }
    sp_associated *grown = realloc(s->associated, (size_t)(s->n_associated + 1) * sizeof *grown);
    if (grown == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory adding an associated image");
    }
    s->associated = grown;
    char *copy = strdup(name);
    if (copy == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory adding an associated image");
    }
    s->associated[s->n_associated++] = (sp_associated){copy, width, height, priv};
    return SP_OK;
}

static int level_cmp(const void *a, const void *b) {
    const sp_level *x = a, *y = b;
    return (x->width < y->width) - (x->width > y->width);
}

static int assoc_cmp(const void *a, const void *b) {
    return strcmp(((const sp_associated *)a)->name, ((const sp_associated *)b)->name);
}

void sp_slide_finish_levels(sp_slide *s) {
    if (s->n_levels > 1) {
        qsort(s->levels, (size_t)s->n_levels, sizeof *s->levels, level_cmp);
    }
    for (int32_t i = 0; i < s->n_levels; i++) {
        sp_level *l = &s->levels[i];
        if (i == 0 || !(l->downsample > 0)) { /* kept when the format knows it (Philips) */
            l->downsample = i == 0 ? 1.0
                                   : ((double)s->levels[0].width / (double)l->width +
                                      (double)s->levels[0].height / (double)l->height) /
                                         2.0;
        }
    }
    if (s->n_associated > 1) {
        qsort(s->associated, (size_t)s->n_associated, sizeof *s->associated, assoc_cmp);
    }
}

sp_status sp_slide_set_number(sp_slide *s, const char *key, double v, sp_err *err) {
    char buf[64];
    sp_format_double(v, buf, sizeof buf);
    return sp_props_set(&s->props, key, buf, err);
}

sp_status sp_slide_set_icc_profile(sp_slide *s, const uint8_t *data, size_t len, sp_err *err) {
    if (s->icc_profile != NULL || data == NULL || len == 0) {
        return SP_OK;
    }
    if ((uint64_t)len > (uint64_t)s->limits.value[SP_LIMIT_MAX_METADATA]) {
        return sp_err_set(err, SP_E_LIMIT,
                          "the embedded ICC profile is %zu bytes, over the metadata limit (%lld)",
                          len, (long long)s->limits.value[SP_LIMIT_MAX_METADATA]);
    }
    uint8_t *copy = malloc(len);
    if (copy == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory keeping the ICC profile");
    }
    memcpy(copy, data, len);
    s->icc_profile = copy;
    s->icc_profile_len = len;
    return SP_OK;
}
