/* slide.c — opening and closing slides, and the public getters over levels, properties and
 * associated images. Opening reads the first bytes through the byte source, parses the
 * container it recognises, and hands the probe to the first format that detects it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/strings.h"
#include "formats/format.h"
#include "io/paths.h"
#include "io/store.h"
#include "slide/icc.h"
#include "slide/slide.h"
#include "slide/tile_cache.h"

/* A plane beyond the slide's (after the format's open() set the counts). */
static sp_status check_plane(const sp_slide *s, const char *name, sp_err *err) {
    static const char *const AXIS[3] = {"focal plane (z)", "channel plane (c)", "time point (t)"};
    for (int i = 0; i < 3; i++) {
        if (s->plane[i] >= s->plane_count[i]) {
            return sp_err_set(err, SP_E_INVALID_ARG,
                              "%s: no %s %lld: the slide has %lld (numbered from 0)", name,
                              AXIS[i], (long long)s->plane[i], (long long)s->plane_count[i]);
        }
    }
    return SP_OK;
}

/* Why a remote prefix holds no slide that detection saw. Detection only asks whether files exist,
 * so a request refused (credentials), one that could not be signed (a key file that mints no
 * token) or a server that is down looked like an empty prefix: one more request, for the first
 * file a store would have, tells those apart from a prefix that is really empty. */
static sp_status remote_prefix_error(const char *path, sp_err *err) {
    char *probe = sp_path_join(path, "zarr.json");
    sp_source *src = NULL;
    bool missing = false;
    sp_err why = {0};
    sp_status st = probe != NULL ? sp_store_open(probe, 0, &src, &missing, &why) : SP_OK;
    sp_source_close(src);
    free(probe);
    if (st != SP_OK) {
        return sp_err_set(err, st, "%s", why.msg);
    }
    return sp_err_set(err, SP_E_NOT_A_SLIDE,
                      "%s: no slide under this prefix (no zarr.json, .zgroup or .zarray)", path);
}

static sp_status open_probe(sp_slide *s, const char *path, bool is_directory, sp_err *err) {
    sp_probe probe = {.path = path, .is_directory = is_directory, .src = s->src,
                      .limits = &s->limits};
    if (is_directory && sp_path_is_remote(path)) {
        probe.kept = sp_store_prefetch_new(&s->limits); /* NULL (out of memory): plain requests */
    }
    sp_status st;
    if (s->src != NULL) {
        uint64_t size = sp_source_size(s->src);
        probe.head_len = size < SP_PROBE_HEAD ? (size_t)size : SP_PROBE_HEAD;
        st = sp_source_read(s->src, 0, probe.head, probe.head_len, err);
        if (st != SP_OK) {
            return st;
        }
        if (probe.head_len == 0) {
            return sp_err_set(err, SP_E_NOT_A_SLIDE, "%s: empty file", path);
        }
        if (sp_tiff_magic(probe.head, probe.head_len)) {
            st = sp_tiff_open(s->src, &s->limits, &probe.tiff, err);
            if (st != SP_OK) {
                return st;
            }
        }
    }
    if (is_directory && sp_path_is_remote(path)) {
        st = SP_E_NOT_A_SLIDE; /* remote_prefix_error says why, if no format detects a slide */
    } else if (is_directory) {
        st = sp_err_set(err, SP_E_NOT_A_SLIDE, "%s: a directory holding no slide slidepipe reads",
                        path);
    } else {
        st = sp_err_set(err, SP_E_NOT_A_SLIDE, "%s: not a recognised slide format", path);
    }
    bool detected = false;
    for (const sp_format *const *f = sp_formats; *f != NULL && !detected; f++) {
        if ((*f)->detect(&probe)) {
            detected = true;
            sp_err_clear(err);
            s->format = (*f)->name;
            st = (*f)->open(s, &probe, err);
        }
    }
    if (!detected && is_directory && sp_path_is_remote(path)) {
        st = remote_prefix_error(path, err);
    }
    sp_tiff_close(probe.tiff); /* NULL when a format took it over */
    sp_store_prefetch_free(probe.kept);
    if (st == SP_OK) {
        st = check_plane(s, path, err);
    }
    if (st == SP_OK && s->n_levels == 0) {
        st = sp_err_set(err, SP_E_CORRUPT, "%s: the slide has no readable levels", path);
    }
    return st;
}

sp_status sp_slide_open_source_at(sp_source *src, const char *name, const sp_limits *limits,
                                const int64_t plane[3], sp_slide **out, sp_err *err) {
    *out = NULL;
    sp_slide *s = calloc(1, sizeof *s);
    if (s == NULL) {
        sp_source_close(src);
        return sp_err_set(err, SP_E_NOMEM, "out of memory");
    }
    bool is_directory = src == NULL;
    pthread_mutex_init(&s->error_lock, NULL);
    s->cache_id = sp_tile_cache_new_slide_id();
    s->limits = *limits;
    s->src = src;
    s->background[0] = s->background[1] = s->background[2] = 255;
    s->open_name = strdup(name); /* NULL (out of memory): messages say "slide" */
    for (int i = 0; i < 3; i++) {
        s->plane_count[i] = 1;
        s->plane[i] = plane[i];
    }
    sp_status st = open_probe(s, name, is_directory, err);
    if (st == SP_OK) {
        sp_slide_finish_levels(s);
        st = sp_props_set(&s->props, SP_PROPERTY_VENDOR, s->format, err);
        sp_props_finish(&s->props);
    }
    if (st != SP_OK) {
        sp_slide_close(s);
        /* Name the file in messages that come from deep inside a container or codec. */
        size_t n = strlen(name);
        if (err != NULL && strncmp(err->msg, name, n) != 0) {
            char msg[SP_ERR_MSG_MAX * 2];
            snprintf(msg, sizeof msg, "%s: %s", name, err->msg);
            size_t m = strlen(msg) < sizeof err->msg - 1 ? strlen(msg) : sizeof err->msg - 1;
            memcpy(err->msg, msg, m);
            err->msg[m] = '\0';
        }
        return st;
    }
    *out = s;
    return SP_OK;
}

sp_status sp_slide_open_source(sp_source *src, const char *name, const sp_limits *limits,
                               sp_slide **out, sp_err *err) {
    static const int64_t first[3] = {0, 0, 0};
    return sp_slide_open_source_at(src, name, limits, first, out, err);
}

/* Whether `s` ends with `suffix`, ignoring case. */
static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcasecmp(s + n - k, suffix) == 0;
}

/* A remote path names an object (a slide file) or a prefix (a folder-shaped slide: a Zarr store).
 * A path ending in ".zarr" or ".zarr/", or an http(s) URL ending in "/" (a web server answers a
 * folder's URL with a redirect or a refusal, not a 404), is taken for a prefix. Any other is tried
 * as an object first and as a prefix when no such object exists; if that finds no slide either,
 * the object's "not found" is the error. */
static sp_status open_remote(const char *path, const sp_limits *limits, const int64_t plane[3],
                             sp_slide **out, sp_err *err) {
    bool prefix = ends_with(path, ".zarr") || ends_with(path, ".zarr/") ||
                  (!sp_path_is_object_store(path) && ends_with(path, "/"));
    if (!prefix) {
        sp_source *src = NULL;
        sp_status st = sp_source_open_any(path, &src, err);
        if (st != SP_E_NOT_FOUND) {
            return st == SP_OK ? sp_slide_open_source_at(src, path, limits, plane, out, err) : st;
        }
        sp_err as_prefix = {0};
        st = sp_slide_open_source_at(NULL, path, limits, plane, out, &as_prefix);
        if (st != SP_E_NOT_A_SLIDE) {
            *err = as_prefix;
        }
        return st == SP_E_NOT_A_SLIDE ? err->status : st;
    }
    return sp_slide_open_source_at(NULL, path, limits, plane, out, err);
}

sp_status sp_slide_open_with(const char *path, const sp_options *options, sp_slide **out,
                             char *errbuf, size_t err_len) {
    sp_err err = {0};
    sp_status st;
    if (out == NULL || path == NULL) {
        st = sp_err_set(&err, SP_E_INVALID_ARG, "sp_slide_open: null argument");
    } else {
        *out = NULL;
        sp_limits limits;
        int64_t plane[3];
        sp_options_plane(options, plane);
        if (options != NULL) {
            limits = *sp_options_limits(options);
        } else {
            sp_limits_default(&limits);
        }
        if (sp_path_is_remote(path)) {
            st = open_remote(path, &limits, plane, out, &err);
        } else {
            sp_source *src = NULL;
            bool is_directory = sp_path_look(path).is_directory;
            st = is_directory ? SP_OK : sp_source_open_any(path, &src, &err);
            if (st == SP_OK) {
                st = sp_slide_open_source_at(src, path, &limits, plane, out, &err);
            }
        }
    }
    if (st != SP_OK) {
        sp_err_copy_out(&err, errbuf, err_len);
    }
    return st;
}

sp_status sp_slide_open(const char *path, sp_slide **out, char *err, size_t err_len) {
    return sp_slide_open_with(path, NULL, out, err, err_len);
}

void sp_slide_close(sp_slide *s) {
    if (s == NULL) {
        return;
    }
    sp_tile_cache_drop_slide(s->cache_id);
    if (s->ops != NULL && s->ops->destroy != NULL) {
        s->ops->destroy(s);
    }
    for (int32_t i = 0; i < s->n_associated; i++) {
        free(s->associated[i].name);
    }
    free(s->associated);
    free(s->levels);
    sp_slide_icc_free(s);
    free(s->open_name);
    sp_props_free(&s->props);
    sp_source_close(s->src);
    pthread_mutex_destroy(&s->error_lock);
    free(s);
}

const char *sp_slide_error(const sp_slide *s) {
    if (s == NULL) {
        return "null slide";
    }
    sp_slide *m = (sp_slide *)s;
    pthread_mutex_lock(&m->error_lock);
    const char *msg = m->sticky != SP_OK ? m->sticky_message : NULL;
    pthread_mutex_unlock(&m->error_lock);
    return msg;
}

void sp_slide_record_error(sp_slide *s, const sp_err *err) {
    switch (err->status) {
    case SP_OK:
    case SP_E_INVALID_ARG:
    case SP_E_NOT_FOUND:
        return; /* caller mistakes do not poison the handle */
    default:
        break;
    }
    pthread_mutex_lock(&s->error_lock);
    if (s->sticky == SP_OK) {
        s->sticky = err->status;
        snprintf(s->sticky_message, sizeof s->sticky_message, "%s",
                 err->msg[0] ? err->msg : sp_status_str(err->status));
    }
    pthread_mutex_unlock(&s->error_lock);
}

/* ---- getters ---- */

static const sp_level *level_at(const sp_slide *s, int32_t level) {
    if (s == NULL || level < 0 || level >= s->n_levels) {
        return NULL;
    }
    return &s->levels[level];
}

const char *sp_slide_format(const sp_slide *s) { return s ? s->format : NULL; }

int32_t sp_slide_level_count(const sp_slide *s) { return s ? s->n_levels : 0; }

sp_status sp_slide_level_dimensions(const sp_slide *s, int32_t level, int64_t *w, int64_t *h) {
    const sp_level *l = level_at(s, level);
    if (l == NULL || w == NULL || h == NULL) {
        return SP_E_INVALID_ARG;
    }
    *w = l->width;
    *h = l->height;
    return SP_OK;
}

sp_status sp_slide_level_downsample(const sp_slide *s, int32_t level, double *downsample) {
    const sp_level *l = level_at(s, level);
    if (l == NULL || downsample == NULL) {
        return SP_E_INVALID_ARG;
    }
    *downsample = l->downsample;
    return SP_OK;
}

sp_status sp_slide_level_tile_size(const sp_slide *s, int32_t level, int64_t *tw, int64_t *th) {
    const sp_level *l = level_at(s, level);
    if (l == NULL || tw == NULL || th == NULL) {
        return SP_E_INVALID_ARG;
    }
    *tw = l->tile_width;
    *th = l->tile_height;
    return SP_OK;
}

const char *sp_slide_level_compression(const sp_slide *s, int32_t level) {
    const sp_level *l = level_at(s, level);
    return l ? l->compression : NULL;
}

int32_t sp_slide_best_level_for_downsample(const sp_slide *s, double downsample) {
    if (s == NULL || s->n_levels == 0 || !(downsample >= 1.0)) {
        return 0;
    }
    int32_t best = 0;
    for (int32_t i = 1; i < s->n_levels; i++) {
        if (s->levels[i].downsample <= downsample) {
            best = i;
        }
    }
    return best;
}

int32_t sp_slide_property_count(const sp_slide *s) { return s ? s->props.count : 0; }

const char *sp_slide_property_name(const sp_slide *s, int32_t index) {
    if (s == NULL || index < 0 || index >= s->props.count) {
        return NULL;
    }
    return s->props.items[index].key;
}

const char *sp_slide_property_value(const sp_slide *s, const char *name) {
    if (s == NULL || name == NULL) {
        return NULL;
    }
    return sp_props_get(&s->props, name);
}

int64_t sp_slide_plane_count(const sp_slide *s, sp_plane_axis axis) {
    return s != NULL && (unsigned)axis < 3 ? s->plane_count[axis] : 0;
}

int64_t sp_slide_plane(const sp_slide *s, sp_plane_axis axis) {
    return s != NULL && (unsigned)axis < 3 ? s->plane[axis] : 0;
}

int32_t sp_slide_associated_count(const sp_slide *s) { return s ? s->n_associated : 0; }

const char *sp_slide_associated_name(const sp_slide *s, int32_t index) {
    if (s == NULL || index < 0 || index >= s->n_associated) {
        return NULL;
    }
    return s->associated[index].name;
}

sp_status sp_slide_associated_dimensions(const sp_slide *s, const char *name, int64_t *w,
                                         int64_t *h) {
    if (s == NULL || name == NULL || w == NULL || h == NULL) {
        return SP_E_INVALID_ARG;
    }
    for (int32_t i = 0; i < s->n_associated; i++) {
        if (strcmp(s->associated[i].name, name) == 0) {
            *w = s->associated[i].width;
            *h = s->associated[i].height;
            return SP_OK;
        }
    }
    return SP_E_NOT_FOUND;
}

/* A positive, finite microns-per-pixel property, or 0. */
double sp_slide_mpp_property(const sp_slide *slide, const char *key) {
    const char *v = sp_slide_property_value(slide, key);
    if (v == NULL) {
        return 0;
    }
    char *end;
    double d = sp_strtod(v, &end);
    return end != v && *end == '\0' && isfinite(d) && d > 0 ? d : 0;
}

/* The slide's file name (without folders), or NULL when the slide has no file. */
const char *sp_slide_file_name(const sp_slide *slide) {
    if (slide->src == NULL) {
        return NULL;
    }
    const char *name = sp_source_name(slide->src);
    if (name == NULL) {
        return NULL;
    }
    const char *slash = strrchr(name, '/');
    return slash ? slash + 1 : name;
}

const char *sp_slide_source_path(const sp_slide *slide) {
    return slide->src != NULL ? sp_source_name(slide->src) : NULL;
}
