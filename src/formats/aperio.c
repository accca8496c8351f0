/* aperio.c — Aperio SVS: a TIFF whose first ImageDescription starts "Aperio". The tiled
 * directories are the pyramid; the stripped ones are associated images: the second directory
 * is the thumbnail, NewSubfileType 1 the label and 9 the macro. The ImageDescription after its
 * first '|' is a list of "key = value" pairs that become aperio.* properties; AppMag gives the
 * objective power and MPP the microns per pixel. JPEG tiles are tagged Photometric RGB and their
 * components are decoded as RGB (no YCbCr conversion), as Aperio writes them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/numbers.h"
#include "formats/tiff_slide.h"

static bool aperio_detect(const sp_probe *p) {
    if (p->tiff == NULL || !p->tiff->dirs[0].tiled) {
        return false;
    }
    const char *desc = p->tiff->dirs[0].description;
    return desc != NULL && strncmp(desc, "Aperio", 6) == 0;
}

static char *trim(char *s) {
    while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n') {
        s++;
    }
    char *end = s + strlen(s);
    while (end > s && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r' || end[-1] == '\n')) {
        *--end = '\0';
    }
    return s;
}

/* Copy a numeric property under a normalised name when it parses as a number. */
static sp_status duplicate_number(sp_slide *s, const char *from, const char *to, sp_err *err) {
    const char *v = sp_props_get(&s->props, from);
    if (v == NULL) {
        return SP_OK;
    }
    char *end;
    double d = sp_strtod(v, &end);
    if (end == v || *trim(end) != '\0') {
        return SP_OK;
    }
    return sp_slide_set_number(s, to, d, err);
}

static sp_status add_description_properties(sp_slide *s, const char *desc, sp_err *err) {
    char *copy = strdup(desc);
    if (copy == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory parsing the Aperio description");
    }
    sp_status st = SP_OK;
    char *item = strchr(copy, '|'); /* the first item is the image summary, not a pair */
    while (st == SP_OK && item != NULL) {
        item++;
        char *next = strchr(item, '|');
        if (next != NULL) {
            *next = '\0';
        }
        char *eq = strchr(item, '=');
        if (eq != NULL) {
            *eq = '\0';
            char key[256];
            snprintf(key, sizeof key, "aperio.%s", trim(item));
            st = sp_props_set(&s->props, key, trim(eq + 1), err);
        }
        item = next;
    }
    free(copy);
    if (st == SP_OK) {
        st = duplicate_number(s, "aperio.AppMag", SP_PROPERTY_OBJECTIVE_POWER, err);
    }
    if (st == SP_OK) {
        st = duplicate_number(s, "aperio.MPP", SP_PROPERTY_MPP_X, err);
    }
    if (st == SP_OK) {
        st = duplicate_number(s, "aperio.MPP", SP_PROPERTY_MPP_Y, err);
    }
    return st;
}

static sp_status aperio_open(sp_slide *s, sp_probe *p, sp_err *err) {
    sp_tiff_slide_adopt(s, p);
    const sp_tiff *t = s->container;
    sp_status st = sp_tiff_slide_add_aperio_layout(s, err);
    if (st == SP_OK) {
        st = sp_tiff_slide_add_properties(s, &t->dirs[0], false, err);
    }
    if (st == SP_OK) {
        st = add_description_properties(s, t->dirs[0].description, err);
    }
    return st;
}

const sp_format sp_format_aperio = {"aperio", aperio_detect, aperio_open};
