/* huron.c — Huron Digital Pathology (TissueScope) slides: a TIFF whose first directory is tiled
 * and whose Make tag starts "Huron". The directories are laid out as Aperio's: the tiled ones
 * are the pyramid, in file order; of the stripped ones the second directory is the thumbnail,
 * NewSubfileType 1 the label and 9 the macro. The first ImageDescription is newline-separated
 * "key = value" lines, each kept as huron.KEY (key and value trimmed of blanks; a line without
 * '=' is skipped; a repeated key keeps its last value), and is itself kept out of the properties,
 * as OpenSlide 4 does; the resolution tags give the microns per pixel. Tiles may be JPEG or
 * JPEG 2000 with Aperio's codes (33003 YCbCr, 33005 RGB), which the TIFF layer decodes. */
#include <stdlib.h>
#include <string.h>

#include "formats/tiff_slide.h"

/* Real descriptions hold a few dozen pairs; the bound keeps a hostile one (up to the metadata
 * limit, 64 MiB) from making millions of properties, each set with a search of those before. */
enum { MAX_PAIRS = 4096 };

static bool huron_detect(const sp_probe *p) {
    if (p->tiff == NULL || !p->tiff->dirs[0].tiled) {
        return false;
    }
    const char *make = sp_tiff_entry_string(sp_tiff_find(&p->tiff->dirs[0], SP_TAG_MAKE));
    return make != NULL && strncmp(make, "Huron", 5) == 0;
}

/* The blanks OpenSlide's g_strstrip removes (GLib's ASCII space: not the vertical tab). */
static bool is_blank(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r';
}

/* The part [start, end) of a line without leading and trailing blanks, NUL-terminated in place. */
static char *trim(char *start, char *end) {
    while (start < end && is_blank(*start)) {
        start++;
    }
    while (end > start && is_blank(end[-1])) {
        end--;
    }
    *end = '\0';
    return start;
}

static sp_status add_line(sp_slide *s, char *line, sp_err *err) {
    char *eq = strchr(line, '=');
    if (eq == NULL) {
        return SP_OK;
    }
    char *value = trim(eq + 1, eq + strlen(eq));
    char *key = trim(line, eq);
    size_t size = strlen("huron.") + strlen(key) + 1;
    char *name = malloc(size);
    if (name == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory reading the Huron description");
    }
    memcpy(name, "huron.", 6);
    memcpy(name + 6, key, size - 6);
    sp_status st = sp_props_set(&s->props, name, value, err);
    free(name);
    return st;
}

static sp_status add_description_properties(sp_slide *s, const char *desc, sp_err *err) {
    char *copy = strdup(desc);
    if (copy == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory reading the Huron description");
    }
    sp_status st = SP_OK;
    int pairs = 0;
    for (char *line = copy; st == SP_OK && line != NULL;) {
        char *next = strchr(line, '\n');
        if (next != NULL) {
            *next++ = '\0';
        }
        if (strchr(line, '=') != NULL && ++pairs > MAX_PAIRS) {
            st = sp_err_set(err, SP_E_LIMIT,
                            "the Huron description has more than %d \"key = value\" lines",
                            MAX_PAIRS);
            break;
        }
        st = add_line(s, line, err);
        line = next;
    }
    free(copy);
    return st;
}

static sp_status huron_open(sp_slide *s, sp_probe *p, sp_err *err) {
    sp_tiff_slide_adopt(s, p);
    const sp_tiff *t = s->container;
    const char *desc = t->dirs[0].description;
    if (desc == NULL) {
        return sp_err_set(err, SP_E_CORRUPT,
                          "the Huron slide has no ImageDescription in its first directory");
    }
    sp_status st = sp_tiff_slide_add_aperio_layout(s, err);
    if (st == SP_OK) {
        st = sp_tiff_slide_add_properties(s, &t->dirs[0], true, err);
    }
    if (st == SP_OK) {
        sp_props_remove(&s->props, "tiff.ImageDescription");
        st = add_description_properties(s, desc, err);
    }
    return st;
}

const sp_format sp_format_huron = {"huron", huron_detect, huron_open};
