/* hamamatsu_keys.c — reading Hamamatsu VMS/VMU key files (hamamatsu_keys.h).
 *
 * Values are read as OpenSlide reads them through GKeyFile: integers must be whole (trailing
 * blanks allowed), the SourceLens a whole double. An ImageFile key's suffix is split at commas:
 * none is image (0, 0), one part "(z)" a layer, two "(x,y)" a place in the grid, three
 * "(z,x,y)" both; each part is read as a leading integer, the first after its '(' .
 * Only layer 0 is read (the focal plane OpenSlide shows). Every place of the grid needs exactly
 * one image and the map is required. File names are relative to the key file's folder and may
 * not leave it.
 */
#include "formats/hamamatsu_keys.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codecs/codec.h"
#include "io/paths.h"

static const char GROUP_VMS[] = "Virtual Microscope Specimen";
static const char GROUP_VMU[] = "Uncompressed Virtual Microscope Specimen";
static const char KEY_IMAGE_FILE[] = "ImageFile";

bool sp_hamamatsu_keys_detect(const sp_probe *p, bool vmu) {
    if (p->tiff != NULL || p->is_directory || p->src == NULL) {
        return false;
    }
    const char *want = vmu ? GROUP_VMU : GROUP_VMS;
    size_t i = 0, n = p->head_len;
    const uint8_t *h = p->head;
    if (n >= 3 && h[0] == 0xEF && h[1] == 0xBB && h[2] == 0xBF) {
        i = 3;
    }
    while (i < n) { /* blank lines and comments before the first [section] */
        while (i < n && (h[i] == ' ' || h[i] == '\t' || h[i] == '\r' || h[i] == '\n')) {
            i++;
        }
        if (i < n && (h[i] == '#' || h[i] == ';')) {
            while (i < n && h[i] != '\n') {
                i++;
            }
            continue;
        }
        break;
    }
    size_t len = strlen(want);
    return i + len + 2 <= n && h[i] == '[' && memcmp(h + i + 1, want, len) == 0 &&
           h[i + 1 + len] == ']';
}

/* GKeyFile's integer: strtol of the whole value (trailing blanks allowed), within an int. */
static bool parse_int(const char *v, long *out) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    while (*end == ' ' || *end == '\t') {
        end++;
    }
    if (*v == '\0' || *end != '\0' || errno == ERANGE || x < INT_MIN || x > INT_MAX) {
        return false;
    }
    *out = x;
    return true;
}

long sp_hamamatsu_keys_int(const sp_hamamatsu_keys *keys, const char *key, long absent) {
    const char *v = sp_ini_get(&keys->ini, keys->group, key);
    long x;
    return v != NULL && parse_int(v, &x) ? x : absent;
}

/* A part of an ImageFile suffix as g_ascii_strtoll reads it: a leading integer (0 when none),
 * after its first character (the '(') when `first`. */
static long long suffix_number(const char *part, size_t len, bool first) {
    char buf[32];
    if (first) {
        part += len > 0;
        len -= len > 0;
    }
    len = len < sizeof buf - 1 ? len : sizeof buf - 1;
    memcpy(buf, part, len);
    buf[len] = '\0';
    return strtoll(buf, NULL, 10);
}

/* Place ImageFile* key `key` = `value` in the grid. */
static sp_status place_image(sp_hamamatsu_keys *k, const char *key, const char *value,
                             sp_err *err) {
    const char *suffix = key + strlen(KEY_IMAGE_FILE);
    size_t n = *suffix != '\0'; /* parts between commas; none for no suffix */
    for (const char *p = suffix; (p = strchr(p, ',')) != NULL; p++) {
        n++;
    }
    if (n > 3) {
        return sp_err_set(err, SP_E_CORRUPT, "%s: key %.60s has more than three numbers", k->file,
                          key);
    }
    const char *part[3] = {suffix, suffix, suffix};
    size_t len[3] = {0, 0, 0};
    for (size_t i = 0, at = 0; i < n; i++) {
        part[i] = suffix + at;
        len[i] = strcspn(part[i], ",");
        at += len[i] + 1;
    }
    long long layer = 0, col = 0, row = 0;
    if (n == 1) {
        layer = suffix_number(part[0], len[0], true);
    } else if (n == 2) {
        col = suffix_number(part[0], len[0], true);
        row = suffix_number(part[1], len[1], false);
    } else if (n == 3) {
        layer = suffix_number(part[0], len[0], true);
        col = suffix_number(part[1], len[1], false);
        row = suffix_number(part[2], len[2], false);
    }
    if (layer != 0) {
        return SP_OK; /* other focal layers are not read */
    }
    if (col < 0 || row < 0 || col >= k->cols || row >= k->rows) {
        return sp_err_set(err, SP_E_CORRUPT, "%s: %.60s is outside the %dx%d grid of images",
                          k->file, key, k->cols, k->rows);
    }
    size_t i = (size_t)row * (size_t)k->cols + (size_t)col;
    if (k->images[i] != NULL) {
        return sp_err_set(err, SP_E_CORRUPT, "%s: two images for (%lld, %lld)", k->file, col, row);
    }
    k->images[i] = value;
    return SP_OK;
}

sp_status sp_hamamatsu_keys_read(const sp_probe *p, bool vmu, sp_hamamatsu_keys *out, sp_err *err) {
    memset(out, 0, sizeof *out);
    out->group = vmu ? GROUP_VMU : GROUP_VMS;
    const char *slash = strrchr(p->path, '/');
    out->file = slash != NULL ? slash + 1 : p->path;
    size_t dir_len = slash != NULL ? (size_t)(slash - p->path) : 0;
    out->dir = malloc(dir_len + 2);
    if (out->dir == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory reading %s", out->file);
    }
    if (slash == NULL) {
        strcpy(out->dir, ".");
    } else {
        memcpy(out->dir, p->path, dir_len);
        out->dir[dir_len] = '\0';
    }
    uint64_t size = sp_source_size(p->src);
    if (size > SP_HAMAMATSU_KEYS_MAX) {
        return sp_err_set(err, SP_E_LIMIT, "%s is %llu bytes, over the %u of a key file", out->file,
                          (unsigned long long)size, SP_HAMAMATSU_KEYS_MAX);
    }
    char *text = malloc((size_t)size + 1);
    if (text == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory reading %s", out->file);
    }
    sp_status st = sp_source_read(p->src, 0, text, (size_t)size, err);
    text[size] = '\0';
    if (st == SP_OK && strlen(text) != size) {
        st = sp_err_set(err, SP_E_CORRUPT, "%s holds a NUL byte", out->file);
    }
    if (st == SP_OK) {
        st = sp_ini_parse(text, out->file, &out->ini, err);
    }
    free(text);
    if (st != SP_OK) {
        return st;
    }
    long cols = vmu ? 1 : sp_hamamatsu_keys_int(out, "NoJpegColumns", 0);
    long rows = vmu ? 1 : sp_hamamatsu_keys_int(out, "NoJpegRows", 0);
    if (cols < 1 || rows < 1 || cols * rows > SP_HAMAMATSU_MAX_IMAGES) {
        return sp_err_set(err, SP_E_CORRUPT,
                          "%s: NoJpegColumns x NoJpegRows is %ldx%ld (1 to %d images are read)",
                          out->file, cols, rows, SP_HAMAMATSU_MAX_IMAGES);
    }
    out->cols = (int)cols;
    out->rows = (int)rows;
    size_t n = (size_t)cols * (size_t)rows + 1;
    out->images = calloc(n, sizeof *out->images);
    if (out->images == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory reading %s", out->file);
    }
    const char *map = sp_ini_get(&out->ini, out->group, "MapFile");
    if (map == NULL || *map == '\0') {
        return sp_err_set(err, SP_E_CORRUPT, "%s names no MapFile", out->file);
    }
    out->images[n - 1] = map;
    for (size_t i = 0; st == SP_OK && i < out->ini.n; i++) {
        const sp_ini_entry *e = &out->ini.entries[i];
        if (strcmp(e->section, out->group) == 0 &&
            strncmp(e->key, KEY_IMAGE_FILE, strlen(KEY_IMAGE_FILE)) == 0) {
            /* A repeated key is one key (GKeyFile): only its last value counts. */
            if (sp_ini_get(&out->ini, out->group, e->key) == e->value) {
                st = place_image(out, e->key, e->value, err);
            }
        }
    }
    for (size_t i = 0; st == SP_OK && i + 1 < n; i++) {
        if (out->images[i] == NULL) {
            st = sp_err_set(err, SP_E_CORRUPT, "%s names no image for (%zu, %zu)", out->file,
                            i % (size_t)cols, i / (size_t)cols);
        }
    }
    const char *macro = sp_ini_get(&out->ini, out->group, "MacroImage");
    out->macro = macro != NULL && *macro != '\0' ? macro : NULL;
    return st;
}

void sp_hamamatsu_keys_free(sp_hamamatsu_keys *keys) {
    if (keys == NULL) {
        return;
    }
    sp_source_close(keys->macro_src);
    free(keys->images);
    free(keys->dir);
    sp_ini_free(&keys->ini);
    memset(keys, 0, sizeof *keys);
}

/* A name that stays in the folder: relative, no ".." part. */
static bool inside_folder(const char *name) {
    if (name[0] == '\0' || name[0] == '/' || name[0] == '\\' || strchr(name, ':') != NULL) {
        return false;
    }
    for (const char *p = name; *p != '\0';) {
        size_t len = strcspn(p, "/\\");
        if (len == 2 && p[0] == '.' && p[1] == '.') {
            return false;
        }
        p += len;
        p += *p != '\0';
    }
    return true;
}

sp_status sp_hamamatsu_open_file(const sp_hamamatsu_keys *keys, const char *name, sp_source **out,
                                 sp_err *err) {
    *out = NULL;
    if (!inside_folder(name)) {
        return sp_err_set(err, SP_E_CORRUPT,
                          "%s names file \"%.60s\", which is not in the slide's folder", keys->file,
                          name);
    }
    size_t len = strlen(keys->dir) + strlen(name) + 2;
    char *path = malloc(len);
    if (path == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory opening %s", name);
    }
    snprintf(path, len, "%s/%s", keys->dir, name);
    sp_status st = sp_source_open_any(path, out, err);
    free(path);
    return st;
}

sp_status sp_hamamatsu_add_properties(sp_slide *s, const sp_hamamatsu_keys *keys, int64_t width0,
                                      int64_t height0, sp_err *err) {
    sp_status st = SP_OK;
    for (size_t i = 0; st == SP_OK && i < keys->ini.n; i++) {
        const sp_ini_entry *e = &keys->ini.entries[i];
        char name[256];
        if (strcmp(e->section, keys->group) == 0 &&
            snprintf(name, sizeof name, "hamamatsu.%s", e->key) < (int)sizeof name) {
            st = sp_props_set(&s->props, name, e->value, err);
        }
    }
    /* SourceLens as a double read whole: the objective power, fraction and all. */
    const char *lens = sp_ini_get(&keys->ini, keys->group, "SourceLens");
    if (st == SP_OK && lens != NULL && *lens != '\0') {
        char *end;
        errno = 0;
        double v = strtod(lens, &end);
        if (*end == '\0' && errno != ERANGE && isfinite(v)) {
            st = sp_slide_set_number(s, SP_PROPERTY_OBJECTIVE_POWER, v, err);
        }
    }
    long nm_x = sp_hamamatsu_keys_int(keys, "PhysicalWidth", 0);
    long nm_y = sp_hamamatsu_keys_int(keys, "PhysicalHeight", 0);
    if (st == SP_OK && nm_x > 0 && width0 > 0) {
        st = sp_slide_set_number(s, SP_PROPERTY_MPP_X, (double)nm_x / (1000.0 * (double)width0),
                                 err);
    }
    if (st == SP_OK && nm_y > 0 && height0 > 0) {
        st = sp_slide_set_number(s, SP_PROPERTY_MPP_Y, (double)nm_y / (1000.0 * (double)height0),
                                 err);
    }
    return st;
}

/* The whole macro JPEG (to free). */
static sp_status read_macro(const sp_limits *limits, const sp_hamamatsu_keys *keys, uint8_t **out,
                            size_t *len, sp_err *err) {
    uint64_t size = sp_source_size(keys->macro_src);
    *out = NULL;
    *len = (size_t)size;
    sp_status st =
        size > 0 ? sp_alloc(limits, size, "the macro image", (void **)out, err)
                 : sp_err_set(err, SP_E_CORRUPT, "the macro image %.60s is empty", keys->macro);
    if (st == SP_OK) {
        st = sp_source_read(keys->macro_src, 0, *out, (size_t)size, err);
    }
    if (st != SP_OK) {
        free(*out);
        *out = NULL;
    }
    return st;
}

sp_status sp_hamamatsu_add_macro(sp_slide *s, sp_hamamatsu_keys *keys, sp_err *err) {
    if (keys->macro == NULL) {
        return SP_OK;
    }
    sp_status st = sp_hamamatsu_open_file(keys, keys->macro, &keys->macro_src, err);
    uint8_t *jpeg = NULL;
    size_t len = 0;
    uint32_t w = 0, h = 0;
    int components = 0;
    if (st == SP_OK) {
        st = read_macro(&s->limits, keys, &jpeg, &len, err);
    }
    if (st == SP_OK) {
        st = sp_jpeg_read_header(jpeg, len, NULL, 0, &w, &h, &components, err);
    }
    free(jpeg);
    if (st != SP_OK) {
        char msg[SP_ERR_MSG_MAX];
        snprintf(msg, sizeof msg, "%s", err != NULL ? err->msg : "");
        sp_err_clear(err);
        return sp_err_set(err, st, "the macro image %.60s: %s", keys->macro, msg);
    }
    return sp_slide_add_associated(s, "macro", w, h, NULL, err);
}

sp_status sp_hamamatsu_read_macro(sp_slide *s, const sp_hamamatsu_keys *keys,
                                  const sp_associated *a, uint8_t *rgba, uint64_t stride,
                                  sp_err *err) {
    uint8_t *jpeg = NULL;
    size_t len = 0;
    sp_status st = read_macro(&s->limits, keys, &jpeg, &len, err);
    if (st == SP_OK) {
        st = sp_jpeg_decode_rgba(jpeg, len, NULL, 0, SP_JPEG_SPACE_AUTO, (uint64_t)a->width,
                                 (uint64_t)a->height, rgba, (size_t)stride, err);
    }
    free(jpeg);
    return st;
}
