/* stain_cache.c — per-slide stain estimates (Macenko stains and Reinhard statistics) kept on disk
 * so that a second run over the same slide does not read its low-resolution image again
 * (docs/stains.md, "The cache"). An entry is a small JSON file in
 * $XDG_CACHE_HOME/slidepipe/stains/ (else ~/.cache/slidepipe/stains/) named by a SHA-256 key of
 * the slide's identity — its recorded pixel hash when it has one, else its absolute path, size
 * and modification time — and of everything that defines the estimate (max side, definitions'
 * version). An entry is trusted only after every number in it is checked; anything else is a
 * miss, recomputed and rewritten atomically through io/. Failing to write is not an error: the
 * cache only saves time. SLIDEPIPE_STAIN_CACHE=0 turns it off.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/file_target.h"
#include "io/paths.h"
#include "ops/reinhard.h"
#include "ops/stains.h"
#include "slide/overview.h"
#include "slide/slide.h"

/* Bump when a definition in docs/stains.md changes, so old entries stop matching. */
#define CACHE_DEFINITION                                                                           \
    "slidepipe-stains-v1 macenko beta=0.15 p=1,99 reinhard=cielab-d65 tissue<=219"
#define PIXEL_HASH_PROPERTY "slidepipe.pixel-hash"
#define ENTRY_MAX_BYTES 4096

static bool cache_enabled(void) {
    const char *v = getenv("SLIDEPIPE_STAIN_CACHE");
    return v == NULL || strcmp(v, "0") != 0;
}

/* The cache folder (malloc'd), or NULL when there is no home to put it in. */
static char *cache_dir(void) {
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    const char *base = xdg != NULL && xdg[0] == '/' ? xdg : NULL;
    const char *suffix = base != NULL ? "/slidepipe/stains" : "/.cache/slidepipe/stains";
    if (base == NULL) {
        base = home != NULL && home[0] == '/' ? home : NULL;
    }
    if (base == NULL) {
        return NULL;
    }
    size_t n = strlen(base) + strlen(suffix) + 1;
    char *dir = malloc(n);
    if (dir != NULL) {
        snprintf(dir, n, "%s%s", base, suffix);
    }
    return dir;
}

/* The entry's key in hex, from the slide's identity; false when the slide has none (a remote
 * slide without a pixel hash). */
static bool cache_key(sp_slide *slide, int64_t max_side, char hex[65]) {
    char ident[8192];
    const char *pixel_hash = sp_slide_property_value(slide, PIXEL_HASH_PROPERTY);
    int len;
    if (pixel_hash != NULL && strlen(pixel_hash) == 64) {
        len = snprintf(ident, sizeof ident, "%s\nmax_side=%lld\npixel-hash=%s\n", CACHE_DEFINITION,
                       (long long)max_side, pixel_hash);
    } else {
        const char *path = sp_slide_source_path(slide);
        char *abs = path != NULL && !sp_path_is_remote(path) ? sp_path_absolute(path) : NULL;
        sp_path_info info = sp_path_look(abs);
        if (abs == NULL || !info.exists) {
            free(abs);
            return false;
        }
        len =
            snprintf(ident, sizeof ident, "%s\nmax_side=%lld\npath=%s\nsize=%llu\nmtime_ns=%lld\n",
                     CACHE_DEFINITION, (long long)max_side, abs, (unsigned long long)info.size,
                     (long long)info.mtime_ns);
        free(abs);
    }
    if (len < 0 || (size_t)len >= sizeof ident) {
        return false;
    }
    unsigned char md[32];
    unsigned int md_len = 0;
    if (EVP_Digest(ident, (size_t)len, md, &md_len, EVP_sha256(), NULL) != 1 || md_len != 32) {
        return false;
    }
    for (int i = 0; i < 32; i++) {
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    }
    return true;
}

/* ---- reading and checking an entry ---------------------------------------------------- */

static bool get_number(const cJSON *obj, const char *name, double *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) {
        return false;
    }
    *out = v->valuedouble;
    return true;
}

static bool get_triple(const cJSON *obj, const char *name, double out[3]) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(obj, name);
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != 3) {
        return false;
    }
    for (int k = 0; k < 3; k++) {
        const cJSON *v = cJSON_GetArrayItem(a, k);
        if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) {
            return false;
        }
        out[k] = v->valuedouble;
    }
    return true;
}

static bool get_pixels(const cJSON *obj, int64_t min, int64_t *out) {
    double v;
    if (!get_number(obj, "pixels", &v) || !(v >= (double)min && v <= 9.0e15) || v != floor(v)) {
        return false;
    }
    *out = (int64_t)v;
    return true;
}

/* Stains as the estimate makes them: unit vectors with components summing to >= 0, haematoxylin
 * absorbing more red, positive finite maxima, a pair normalization accepts. */
static bool stains_valid(const sp_stains *s) {
    const double *v[2] = {s->h, s->e};
    for (int i = 0; i < 2; i++) {
        double len = sqrt(v[i][0] * v[i][0] + v[i][1] * v[i][1] + v[i][2] * v[i][2]);
        if (!(fabs(len - 1.0) <= 1e-9) || !(v[i][0] + v[i][1] + v[i][2] >= 0)) {
            return false;
        }
    }
    if (!(s->h[0] >= s->e[0]) || !(s->max_h > 0 && s->max_h < 1e3) ||
        !(s->max_e > 0 && s->max_e < 1e3) || s->pixels < SP_STAINS_MIN_PIXELS) {
        return false;
    }
    sp_stains_map map;
    return sp_stains_map_init(s, s, &map, NULL) == SP_OK;
}

static bool parse_entry(const char *text, const char *key, int64_t max_side, sp_stains *stains,
                        sp_reinhard_stats *rs) {
    cJSON *doc = cJSON_Parse(text);
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(doc, "macenko");
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(doc, "reinhard");
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(doc, "key");
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(doc, "definition");
    double side = 0;
    bool ok = cJSON_IsObject(doc) && cJSON_IsString(k) && strcmp(k->valuestring, key) == 0 &&
              cJSON_IsString(d) && strcmp(d->valuestring, CACHE_DEFINITION) == 0 &&
              get_number(doc, "max_side", &side) && side == (double)max_side && cJSON_IsObject(m) &&
              cJSON_IsObject(r);
    memset(stains, 0, sizeof *stains);
    memset(rs, 0, sizeof *rs);
    ok = ok && get_triple(m, "h", stains->h) && get_triple(m, "e", stains->e) &&
         get_number(m, "max_h", &stains->max_h) && get_number(m, "max_e", &stains->max_e) &&
         get_pixels(m, SP_STAINS_MIN_PIXELS, &stains->pixels) && stains_valid(stains);
    ok = ok && get_triple(r, "mean", rs->mean) && get_triple(r, "std", rs->std) &&
         get_pixels(r, SP_REINHARD_MIN_PIXELS, &rs->pixels) &&
         sp_reinhard_check(rs, "cached", NULL) == SP_OK;
    cJSON_Delete(doc);
    return ok;
}

/* ---- writing an entry ----------------------------------------------------------------- */

static int put_triple(char *p, size_t n, const double v[3]) {
    return snprintf(p, n, "[%.17g, %.17g, %.17g]", v[0], v[1], v[2]);
}

static void write_entry(const char *dir, const char *path, const char *key, int64_t max_side,
                        const sp_stains *s, const sp_reinhard_stats *r) {
    char h[96], e[96], mean[96], sd[96], text[ENTRY_MAX_BYTES];
    put_triple(h, sizeof h, s->h);
    put_triple(e, sizeof e, s->e);
    put_triple(mean, sizeof mean, r->mean);
    put_triple(sd, sizeof sd, r->std);
    int n = snprintf(text, sizeof text,
                     "{\"key\": \"%s\", \"definition\": \"%s\", \"max_side\": %lld,\n"
                     " \"macenko\": {\"h\": %s, \"e\": %s, \"max_h\": %.17g, \"max_e\": %.17g, "
                     "\"pixels\": %lld},\n"
                     " \"reinhard\": {\"mean\": %s, \"std\": %s, \"pixels\": %lld}}\n",
                     key, CACHE_DEFINITION, (long long)max_side, h, e, s->max_h, s->max_e,
                     (long long)s->pixels, mean, sd, (long long)r->pixels);
    if (n < 0 || (size_t)n >= sizeof text || sp_path_make_dirs(dir, NULL) != SP_OK) {
        return;
    }
    sp_file_target *t = NULL;
    if (sp_file_target_open(path, &t, NULL) != SP_OK) {
        return;
    }
    if (sp_file_target_append(t, text, (size_t)n, NULL) != SP_OK) {
        sp_file_target_abort(t);
        return;
    }
    (void)sp_file_target_commit(t, NULL); /* a cache that cannot be written only costs time */
}

/* ---- the call ------------------------------------------------------------------------- */

/* Both estimates from one read of the slide's image. When the caller does not want the stains
 * (`need_stains` false), a slide whose stains cannot be estimated still gets its Reinhard
 * statistics, with *both false (and nothing cached). */
static sp_status estimate_both(sp_slide *slide, int64_t max_side, bool need_stains, sp_stains *s,
                               sp_reinhard_stats *r, bool *both, sp_err *err) {
    *both = false;
    sp_overview img;
    sp_status st = sp_overview_read(slide, max_side, "stains", &img, err);
    if (st == SP_OK) {
        int64_t n = img.width * img.height;
        st = sp_reinhard_stats_compute(img.rgb, n, 1, r);
        if (st != SP_OK || r->pixels < SP_REINHARD_MIN_PIXELS) {
            st = sp_err_set(err, SP_E_UNSUPPORTED,
                            "too few tissue pixels (%lld) to estimate colour statistics from",
                            (long long)r->pixels);
        } else {
            sp_err stains_err = {0};
            sp_status sst = sp_stains_estimate_rgb(img.rgb, n, s, need_stains ? err : &stains_err);
            *both = sst == SP_OK;
            st = need_stains ? sst : SP_OK;
        }
    }
    free(img.rgb);
    return st;
}

static sp_status estimate_cached(sp_slide *slide, int64_t max_side, sp_stains *stains,
                                 sp_reinhard_stats *rs, int *from_cache, sp_err *err) {
    if (max_side == 0) {
        max_side = SP_OVERVIEW_DEFAULT_SIDE;
    }
    char key[65];
    char *dir = NULL, *path = NULL;
    bool use = cache_enabled() && max_side >= 1 && max_side <= 16384 &&
               cache_key(slide, max_side, key) && (dir = cache_dir()) != NULL;
    if (use) {
        size_t n = strlen(dir) + 1 + 64 + sizeof ".json";
        path = malloc(n);
        use = path != NULL;
        if (use) {
            snprintf(path, n, "%s/%s.json", dir, key);
        }
    }
    sp_stains s;
    sp_reinhard_stats r;
    sp_status st = SP_OK;
    bool hit = false;
    if (use) {
        char *text = NULL;
        size_t len = 0;
        hit = sp_path_read_small(path, ENTRY_MAX_BYTES, &text, &len, NULL) == SP_OK &&
              strlen(text) == len && parse_entry(text, key, max_side, &s, &r);
        free(text);
    }
    if (!hit) {
        bool both = false;
        st = estimate_both(slide, max_side, stains != NULL, &s, &r, &both, err);
        if (st == SP_OK && both && use) {
            write_entry(dir, path, key, max_side, &s, &r);
        }
    }
    free(path);
    free(dir);
    if (st == SP_OK) {
        if (stains != NULL) {
            *stains = s;
        }
        if (rs != NULL) {
            *rs = r;
        }
        if (from_cache != NULL) {
            *from_cache = hit;
        }
    }
    return st;
}

sp_status sp_stains_estimate_cached(sp_slide *slide, int64_t max_side, sp_stains *stains,
                                    sp_reinhard_stats *reinhard, int *from_cache, char *err,
                                    size_t err_len) {
    sp_err e = {0};
    if (stains != NULL) {
        memset(stains, 0, sizeof *stains);
    }
    if (reinhard != NULL) {
        memset(reinhard, 0, sizeof *reinhard);
    }
    if (from_cache != NULL) {
        *from_cache = 0;
    }
    sp_status st =
        slide == NULL || (stains == NULL && reinhard == NULL)
            ? sp_err_set(&e, SP_E_INVALID_ARG, "sp_stains_estimate_cached: null argument")
            : estimate_cached(slide, max_side, stains, reinhard, from_cache, &e);
    sp_err_report(st, &e, err, err_len);
    return st;
}
