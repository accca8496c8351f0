/* convert.c — sp_convert_to_zarr: a whole slide into a content-addressed OME-Zarr pyramid in one
 * streaming pass.
 *
 * Level 0 streams through the tile engine (engine/engine.h) with the identity op `rgb`: the
 * engine reads chunk x chunk tiles ahead on its workers and hands each to pyramid_sink as R, G, B
 * planes. The sink writes the chunk to the store (which encodes, hashes and writes it
 * atomically) and copies it into its band: a chunk row of level 0, one of BANDS slots, so the
 * engine can fill band r + 1 while band r is reduced. The sink call that completes the next band
 * in order reduces it 2x2 into level 1's band (pyramid.c), row pairs split over the library's
 * thread pool; when that band holds N rows, or the level's last row, it is written the same way
 * and reduced into level 2, and so on. A row left unpaired at the end of a band (odd N) is carried
 * into the next one. So the slide is read exactly once and memory stays at BANDS bands of level 0
 * plus one band per lower level (about three times level 0's band) plus the engine's tiles in
 * flight, whatever the slide's size. Chunk bytes depend only on pixels and options, and the
 * store's manifest is sorted by path, so the dataset hash does not depend on the thread count or
 * on timing. Group metadata (zarr/ome_json.c) is written after the last chunk; the store then
 * writes the arrays' metadata, the manifest and the completion marker. The first file written,
 * slidepipe-convert.json, records the options, so that --resume refuses to mix two different
 * conversions in one folder. Each chunk's pixels inside the level also go to the pixel hasher
 * (slide/pixel_hash.h) as the chunk is written, so the pixel hash recorded in the group
 * attributes is folded from exactly the arrays written, in the same pass, without reading the
 * store back (a resumed run recomputes every level from the slide, so it folds every chunk too,
 * written or kept). When the slide's reads convert its embedded ICC profile to sRGB
 * (sp_slide_set_icc_transform), the pixels written are the converted ones, and both the group
 * attributes (slidepipe.icc) and the options file say so, naming the profile by its SHA-256;
 * without the transform neither mentions ICC, so such stores are unchanged byte for byte.
 */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/err.h"
#include "base/hash.h"
#include "base/int_options.h"
#include "base/numbers.h"
#include "base/strings.h"
#include "base/thread_pool.h"
#include "engine/engine.h"
#include "io/store.h"
#include "jobs/convert/pyramid.h"
#include "ops/op.h"
#include "slide/icc.h"
#include "slide/pixel_hash.h"
#include "slide/slide.h"
#include "zarr/ome_json.h"
#include "zarr/zarr_codec.h"
#include "zarr/zarr_store.h"

/* The options file written first into the output folder: it records what the conversion was
 * started with, so --resume refuses to mix chunks of two different conversions. */
#define OPTIONS_FILE "slidepipe-convert.json"

#define MAX_THREADS 1024
#define MAX_LEVELS 64
#define ASSOCIATED_CHUNK 1024

/* The codecs' names, in sp_zarr_codec order (as the CLI spells them). */

/* ---- options ----------------------------------------------------------------------------- */

struct sp_convert_options {
    int64_t value[SP_CONVERT_RESUME + 1];
};

/* Defaults and valid ranges, in sp_convert_option order (the level's range depends on the codec
 * and is checked when the job starts). */
static const sp_int_option CONVERT_OPTIONS[] = {
    [SP_CONVERT_FORMAT] = {SP_ZARR_OME_04, SP_ZARR_OME_04, SP_ZARR_OME_05},
    [SP_CONVERT_CHUNK] = {512, 256, 4096},
    [SP_CONVERT_CODEC] = {SP_ZARR_CODEC_ZSTD, SP_ZARR_CODEC_ZSTD, SP_ZARR_CODEC_NONE},
    [SP_CONVERT_LEVEL] = {0, 0, 22},
    [SP_CONVERT_SHARD] = {0, 0, 256},
    [SP_CONVERT_LEVELS] = {0, 0, MAX_LEVELS},
    [SP_CONVERT_LAYOUT] = {SP_ZARR_LAYOUT_CYX, SP_ZARR_LAYOUT_CYX, SP_ZARR_LAYOUT_YXC},
    [SP_CONVERT_THREADS] = {0, 0, MAX_THREADS},
    [SP_CONVERT_RESUME] = {0, 0, 1},
};
#define CONVERT_OPTION_COUNT ((int)(sizeof CONVERT_OPTIONS / sizeof CONVERT_OPTIONS[0]))
_Static_assert(CONVERT_OPTION_COUNT == SP_CONVERT_RESUME + 1, "one entry per option");

SP_INT_OPTIONS_API(convert, CONVERT_OPTIONS, CONVERT_OPTION_COUNT)

/* Checks that involve more than one option, and the codec level's range, which depends on the
 * codec. */
static sp_status check_options(const sp_convert_options *o, sp_err *err) {
    if (o->value[SP_CONVERT_SHARD] != 0 && o->value[SP_CONVERT_FORMAT] != SP_ZARR_OME_05) {
        return sp_err_set(err, SP_E_INVALID_ARG,
                          "sharding needs Zarr v3: use OME-Zarr 0.5 (SP_ZARR_OME_05)");
    }
    sp_zarr_codec codec = (sp_zarr_codec)o->value[SP_CONVERT_CODEC];
    int64_t level = o->value[SP_CONVERT_LEVEL];
    int max = 0;
    sp_zarr_codec_levels(codec, NULL, &max, NULL);
    if (level > max) {
        if (max == 0) {
            return sp_err_set(err, SP_E_INVALID_ARG, "codec 'none' takes no level");
        }
        return sp_err_set(err, SP_E_INVALID_ARG,
                          "codec level %lld is out of range for %s (1..%d)", (long long)level,
                          sp_zarr_codec_name(codec), max);
    }
    return SP_OK;
}

/* ---- the converter ----------------------------------------------------------------------- */

/* Level-0 bands held at once: the engine fills band r + 1 while band r is reduced. */
#define BANDS 2

typedef struct level_state {
    int64_t width, height; /* pixels */
    int64_t cols;          /* chunks across */
    sp_zarr_array *array;
    /* Up to N whole rows: for layout c,y,x three planes of N x width (plane p at p * N * width),
     * so chunks are row copies and the reducer works on one channel; for y,x,c interleaved RGB.
     * Level 0's points at the band being reduced (one of the converter's band slots). */
    uint8_t *band;
    int64_t band_rows;  /* rows held */
    int64_t band_index; /* the band's chunk row */
    int64_t produced;   /* rows of this level made so far (levels >= 1) */
    uint8_t *carry;     /* a row whose partner (for the level below) is in the next band,
                           three planes of width or one RGB row */
    bool has_carry;
} level_state;

/* A level-0 band being filled by the engine's sink calls. */
typedef struct band_slot {
    uint8_t *pixels; /* laid out as level_state.band */
    int64_t chunks;  /* chunks of its band put in so far */
} band_slot;

typedef struct converter {
    sp_slide *slide;
    sp_zarr_store *store;
    int64_t chunk;
    int layout;
    int zarr_version;
    int n_levels;
    level_state *levels;
    int threads;
    sp_pixel_hasher *hasher; /* every level's pixels, as the chunks are written */
    char pixel_hash[65];

    pthread_mutex_t lock; /* guards what follows */
    pthread_cond_t changed;
    band_slot slots[BANDS];
    int64_t reduced;  /* level-0 bands reduced so far; band r may fill its slot once r < reduced + BANDS */
    bool reducing;    /* a sink call is reducing bands */
    uint8_t **spare;  /* chunk buffers not in use (a stack of up to max_buffers) */
    int n_spare, n_buffers, max_buffers;
    sp_err err;
    atomic_bool failed;

    /* The reduction being run (only the reducing call sets these): which level, which rows. */
    int job_level;
    int64_t job_first; /* global row of level job_level paired into output row 0 of the batch */
    int64_t job_band0; /* global row of the band's first row */
    int64_t job_dst0;  /* first destination row in the next level's band */
} converter;

static void record(converter *c, const sp_err *e) {
    pthread_mutex_lock(&c->lock);
    if (c->err.status == SP_OK) {
        c->err = *e;
    }
    atomic_store(&c->failed, true);
    pthread_cond_broadcast(&c->changed);
    pthread_mutex_unlock(&c->lock);
}

/* The engine failed elsewhere (a read): stop the sink calls that wait for a band slot. */
static void stop_waiting(void *ctx) {
    converter *c = ctx;
    pthread_mutex_lock(&c->lock);
    atomic_store(&c->failed, true);
    pthread_cond_broadcast(&c->changed);
    pthread_mutex_unlock(&c->lock);
}

/* The error a sink call returns once the run has failed. */
static sp_status failure(converter *c, sp_err *err) {
    pthread_mutex_lock(&c->lock);
    sp_status st = c->err.status;
    if (st != SP_OK) {
        *err = c->err;
    }
    pthread_mutex_unlock(&c->lock);
    return st != SP_OK ? st : sp_err_set(err, SP_E_IO, "stopped: the conversion failed");
}

/* A chunk buffer (chunk x chunk x 3 bytes), or NULL when out of memory (recorded). */
static uint8_t *take_buffer(converter *c) {
    pthread_mutex_lock(&c->lock);
    while (c->n_spare == 0 && c->n_buffers >= c->max_buffers) {
        pthread_cond_wait(&c->changed, &c->lock);
    }
    uint8_t *buf = c->n_spare > 0 ? c->spare[--c->n_spare] : NULL;
    if (buf == NULL) {
        c->n_buffers++;
    }
    pthread_mutex_unlock(&c->lock);
    if (buf == NULL && (buf = malloc((size_t)(c->chunk * c->chunk * 3))) == NULL) {
        sp_err e = {0};
        sp_err_set(&e, SP_E_NOMEM, "out of memory for a chunk buffer");
        record(c, &e);
        pthread_mutex_lock(&c->lock);
        c->n_buffers--;
        pthread_cond_broadcast(&c->changed);
        pthread_mutex_unlock(&c->lock);
    }
    return buf;
}

static void give_buffer(converter *c, uint8_t *buf) {
    pthread_mutex_lock(&c->lock);
    c->spare[c->n_spare++] = buf;
    pthread_cond_broadcast(&c->changed);
    pthread_mutex_unlock(&c->lock);
}

/* Lay out chunk (band_index, col) of level k from `band` (rows of it held) into `buf`
 * (zero-padded at the edges) and hand it to the store. */
static void write_band_chunk(converter *c, int k, const uint8_t *band, int64_t band_index,
                             int64_t rows, int64_t col, uint8_t *buf) {
    level_state *l = &c->levels[k];
    int64_t n = c->chunk;
    int64_t x0 = col * n;
    int64_t w = l->width - x0 < n ? l->width - x0 : n;
    if (w < n || rows < n) {
        memset(buf, 0, (size_t)(n * n * 3));
    }
    int64_t index[3];
    sp_err e = {0};
    /* The pixel hash takes the chunk's pixels inside the level from the band, before padding. */
    const uint8_t *planes[3];
    int64_t step = c->layout == SP_ZARR_LAYOUT_CYX ? 1 : 3;
    int64_t stride = c->layout == SP_ZARR_LAYOUT_CYX ? l->width : l->width * 3;
    for (int p = 0; p < 3; p++) {
        planes[p] =
            c->layout == SP_ZARR_LAYOUT_CYX ? band + p * n * l->width + x0 : band + x0 * 3 + p;
    }
    if (sp_pixel_hasher_put(c->hasher, k, x0, band_index * n, w, rows, planes, step, stride,
                            &e) != SP_OK) {
        record(c, &e);
        return;
    }
    if (c->layout == SP_ZARR_LAYOUT_CYX) {
        for (int p = 0; p < 3; p++) {
            const uint8_t *src = band + p * n * l->width + x0;
            for (int64_t y = 0; y < rows; y++) {
                memcpy(buf + (p * n + y) * n, src + y * l->width, (size_t)w);
            }
        }
        index[0] = 0;
        index[1] = band_index;
        index[2] = col;
    } else {
        const uint8_t *src = band + x0 * 3;
        for (int64_t y = 0; y < rows; y++) {
            memcpy(buf + y * n * 3, src + y * l->width * 3, (size_t)(w * 3));
        }
        index[0] = band_index;
        index[1] = col;
        index[2] = 0;
    }
    if (sp_zarr_array_write_chunk(l->array, index, buf, &e) != SP_OK) {
        record(c, &e);
    }
}

/* Task: write chunk column `col` of the current band of level job_level. */
static void task_write_band(void *ctx, size_t col) {
    converter *c = ctx;
    if (atomic_load(&c->failed)) {
        return;
    }
    uint8_t *buf = take_buffer(c);
    if (buf != NULL) {
        level_state *l = &c->levels[c->job_level];
        write_band_chunk(c, c->job_level, l->band, l->band_index, l->band_rows, (int64_t)col, buf);
        give_buffer(c, buf);
    }
}

/* The address of global row g of level k (plane p in layout c,y,x): a row of its band, or the
 * carried row before it. */
static const uint8_t *source_row(const converter *c, int k, int64_t g, int p) {
    const level_state *l = &c->levels[k];
    if (c->layout == SP_ZARR_LAYOUT_CYX) {
        if (g < c->job_band0) {
            return l->carry + p * l->width;
        }
        return l->band + (p * c->chunk + (g - c->job_band0)) * l->width;
    }
    if (g < c->job_band0) {
        return l->carry;
    }
    return l->band + (g - c->job_band0) * l->width * 3;
}

/* Task: make output row t of the current reduction (level job_level into job_level + 1). */
static void task_reduce_row(void *ctx, size_t t) {
    converter *c = ctx;
    int k = c->job_level;
    level_state *dst = &c->levels[k + 1];
    int64_t g = c->job_first + 2 * (int64_t)t, y = c->job_dst0 + (int64_t)t;
    if (c->layout == SP_ZARR_LAYOUT_CYX) {
        for (int p = 0; p < 3; p++) {
            sp_pyramid_reduce_plane(source_row(c, k, g, p), source_row(c, k, g + 1, p),
                                    dst->band + (p * c->chunk + y) * dst->width, dst->width);
        }
    } else {
        sp_pyramid_reduce_rgb(source_row(c, k, g, 0), source_row(c, k, g + 1, 0),
                              dst->band + y * dst->width * 3, dst->width);
    }
}

static void reduce_band(converter *c, int k);

/* Level k's band (k >= 1) is complete: write its chunks, feed the level below, and empty it. */
static void emit_band(converter *c, int k) {
    level_state *l = &c->levels[k];
    c->job_level = k;
    sp_pool_run((size_t)l->cols, c->threads, task_write_band, c);
    if (!atomic_load(&c->failed)) {
        reduce_band(c, k);
    }
    l->band_rows = 0;
    l->band_index++;
}

/* Reduce level k's current band (plus a carried row from the band before) into level k + 1,
 * emitting level k + 1's band whenever it fills. */
static void reduce_band(converter *c, int k) {
    if (k + 1 >= c->n_levels || atomic_load(&c->failed)) {
        return;
    }
    level_state *src = &c->levels[k], *dst = &c->levels[k + 1];
    int64_t band0 = src->band_index * c->chunk;
    int64_t end = band0 + src->band_rows;
    int64_t first = src->has_carry ? band0 - 1 : band0;
    int64_t pairs = (end - first) / 2;
    int64_t done = 0;
    while (done < pairs && !atomic_load(&c->failed)) {
        int64_t space = c->chunk - dst->band_rows;
        int64_t seg = pairs - done < space ? pairs - done : space;
        /* Nested emits below change the job fields; set them for every segment. */
        c->job_level = k;
        c->job_band0 = band0;
        c->job_first = first + 2 * done;
        c->job_dst0 = dst->band_rows;
        sp_pool_run((size_t)seg, c->threads, task_reduce_row, c);
        dst->band_rows += seg;
        dst->produced += seg;
        done += seg;
        if (dst->band_rows == c->chunk || dst->produced == dst->height) {
            emit_band(c, k + 1);
        }
    }
    /* An unpaired last row waits for its partner in the next band, unless it is the level's
     * last row (odd height), which the reduction drops. */
    src->has_carry = false;
    if (((end - first) & 1) != 0 && end < src->height) {
        int64_t last = src->band_rows - 1;
        if (c->layout == SP_ZARR_LAYOUT_CYX) {
            for (int p = 0; p < 3; p++) {
                memcpy(src->carry + p * src->width, src->band + (p * c->chunk + last) * src->width,
                       (size_t)src->width);
            }
        } else {
            memcpy(src->carry, src->band + last * src->width * 3, (size_t)(src->width * 3));
        }
        src->has_carry = true;
    }
}

/* Reduce level-0 bands in order, from the next one, for as long as the next one is complete.
 * Only one sink call at a time does this (c->reducing). */
static void reduce_ready_bands(converter *c) {
    level_state *l0 = &c->levels[0];
    int64_t bands = (l0->height + c->chunk - 1) / c->chunk;
    for (;;) {
        int64_t r = c->reduced;
        band_slot *b = &c->slots[r % BANDS];
        l0->band = b->pixels;
        l0->band_index = r;
        l0->band_rows = l0->height - r * c->chunk < c->chunk ? l0->height - r * c->chunk : c->chunk;
        reduce_band(c, 0);
        pthread_mutex_lock(&c->lock);
        b->chunks = 0;
        c->reduced++;
        pthread_cond_broadcast(&c->changed);
        bool more = !atomic_load(&c->failed) && c->reduced < bands &&
                    c->slots[c->reduced % BANDS].chunks == l0->cols;
        if (!more) {
            c->reducing = false;
        }
        pthread_mutex_unlock(&c->lock);
        if (!more) {
            return;
        }
    }
}

/* The engine's sink: chunk (row, col) of level 0, as R, G, B planes of chunk x chunk. It is
 * written to the store as it is (layout c,y,x) or from the band (y,x,c), and put into its band;
 * the call that completes the next band to reduce goes on to reduce it into the levels below. */
static sp_status pyramid_sink(void *ctx, int64_t row, int64_t col, const void *chunk,
                              sp_err *err) {
    converter *c = ctx;
    level_state *l0 = &c->levels[0];
    int64_t n = c->chunk;
    pthread_mutex_lock(&c->lock);
    while (!atomic_load(&c->failed) && row >= c->reduced + BANDS) {
        pthread_cond_wait(&c->changed, &c->lock);
    }
    pthread_mutex_unlock(&c->lock);
    if (atomic_load(&c->failed)) {
        return failure(c, err);
    }
    band_slot *b = &c->slots[row % BANDS];
    const uint8_t *planes = chunk;
    int64_t x0 = col * n;
    int64_t w = l0->width - x0 < n ? l0->width - x0 : n;
    int64_t h = l0->height - row * n < n ? l0->height - row * n : n;
    if (c->layout == SP_ZARR_LAYOUT_CYX) {
        for (int p = 0; p < 3; p++) {
            for (int64_t y = 0; y < h; y++) {
                memcpy(b->pixels + (p * n + y) * l0->width + x0, planes + (p * n + y) * n,
                       (size_t)w);
            }
        }
        const uint8_t *hp[3] = {planes, planes + n * n, planes + 2 * n * n};
        sp_err e = {0};
        int64_t index[3] = {0, row, col};
        if (sp_pixel_hasher_put(c->hasher, 0, x0, row * n, w, h, hp, 1, n, &e) != SP_OK ||
            sp_zarr_array_write_chunk(l0->array, index, chunk, &e) != SP_OK) {
            record(c, &e);
        }
    } else {
        for (int64_t y = 0; y < h; y++) {
            uint8_t *dst = b->pixels + y * l0->width * 3 + x0 * 3;
            const uint8_t *r = planes + y * n, *g = r + n * n, *bl = g + n * n;
            for (int64_t x = 0; x < w; x++) {
                dst[3 * x] = r[x];
                dst[3 * x + 1] = g[x];
                dst[3 * x + 2] = bl[x];
            }
        }
        uint8_t *buf = take_buffer(c);
        if (buf != NULL) {
            write_band_chunk(c, 0, b->pixels, row, h, col, buf);
            give_buffer(c, buf);
        }
    }
    pthread_mutex_lock(&c->lock);
    bool reduce = ++b->chunks == l0->cols && row == c->reduced && !c->reducing &&
                  !atomic_load(&c->failed);
    if (reduce) {
        c->reducing = true;
    }
    pthread_mutex_unlock(&c->lock);
    if (reduce) {
        reduce_ready_bands(c);
    }
    return atomic_load(&c->failed) ? failure(c, err) : SP_OK;
}

/* ---- metadata ---------------------------------------------------------------------------- */

/* The path of associated image `name` inside the store: associated/<name>, with anything but
 * letters, digits, '-', '_' and inner '.' replaced by '_' so a name cannot leave the folder. */
static void associated_path(const char *name, char *out, size_t len) {
    int n = snprintf(out, len, "associated/");
    size_t o = n > 0 ? (size_t)n : 0;
    for (const char *p = name; *p && o + 1 < len; p++) {
        char ch = *p;
        bool keep = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                    (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || (ch == '.' && p != name);
        out[o++] = keep ? ch : '_';
    }
    if (o == strlen("associated/") && o + 1 < len) {
        out[o++] = '_';
    }
    out[o] = '\0';
}

/* When the slide's reads convert its embedded ICC profile to sRGB: {"transform": "embedded
 * profile to sRGB", "profile_size": N, "profile_sha256": HEX}, added to `parent` as "icc".
 * Nothing otherwise. */
static void add_icc_record(const sp_slide *s, cJSON *parent, bool *ok) {
    const uint8_t *profile = NULL;
    size_t len = 0;
    if (!sp_slide_icc_active(s) || sp_slide_icc_profile(s, &profile, &len) != SP_OK) {
        return;
    }
    char hex[65];
    sp_sha256_hex(profile, len, hex);
    cJSON *icc = cJSON_AddObjectToObject(parent, "icc");
    *ok &= icc != NULL;
    if (icc != NULL) {
        cJSON_AddStringToObject(icc, "transform", "embedded profile to sRGB");
        cJSON_AddNumberToObject(icc, "profile_size", (double)len);
        cJSON_AddStringToObject(icc, "profile_sha256", hex);
    }
}

static cJSON *slidepipe_json(const converter *c, bool *ok) {
    const sp_slide *s = c->slide;
    cJSON *sp = cJSON_CreateObject();
    cJSON_AddStringToObject(sp, "version", sp_version());
    cJSON_AddStringToObject(sp, "pixel_hash", c->pixel_hash);
    cJSON *src = cJSON_AddObjectToObject(sp, "source");
    *ok &= sp_json_add_string(src, "format", sp_slide_format(s));
    cJSON_AddNumberToObject(src, "width", (double)c->levels[0].width);
    cJSON_AddNumberToObject(src, "height", (double)c->levels[0].height);
    add_icc_record(s, sp, ok);
    cJSON *props = cJSON_AddObjectToObject(sp, "properties");
    for (int32_t i = 0; i < sp_slide_property_count(s); i++) {
        const char *key = sp_slide_property_name(s, i);
        *ok &= sp_json_add_string(props, key, sp_slide_property_value(s, key));
    }
    cJSON *assoc = cJSON_AddObjectToObject(sp, "associated");
    for (int32_t i = 0; i < sp_slide_associated_count(s); i++) {
        const char *name = sp_slide_associated_name(s, i);
        int64_t w = 0, h = 0;
        sp_slide_associated_dimensions(s, name, &w, &h);
        char path[256];
        associated_path(name, path, sizeof path);
        char *clean = sp_json_utf8_clean(name);
        cJSON *a = clean ? cJSON_AddObjectToObject(assoc, clean) : NULL;
        free(clean);
        *ok &= a != NULL;
        if (a != NULL) {
            cJSON_AddStringToObject(a, "path", path);
            cJSON_AddNumberToObject(a, "width", (double)w);
            cJSON_AddNumberToObject(a, "height", (double)h);
        }
    }
    return sp;
}

static sp_status write_group_metadata(converter *c, sp_err *err) {
    sp_ome_multiscales_spec spec = {
        .name = sp_slide_file_name(c->slide),
        .mpp_x = sp_slide_mpp_property(c->slide, SP_PROPERTY_MPP_X),
        .mpp_y = sp_slide_mpp_property(c->slide, SP_PROPERTY_MPP_Y),
        .channels_last = c->layout == SP_ZARR_LAYOUT_YXC,
        .levels = c->n_levels,
        .first_scale = 1.0,
        .type = "mean",
        .description = "each level is the 2x2 mean of the level above, rounded half up: "
                       "(a + b + c + d + 2) >> 2; an odd last row or column is dropped",
        .method = "slidepipe convert",
    };
    bool ok = true;
    cJSON *ms = sp_ome_multiscales(&spec, c->zarr_version == 2, &ok);
    cJSON *sp = slidepipe_json(c, &ok);
    sp_status st = sp_ome_write_group(c->store, c->zarr_version, ms, sp_ome_omero_rgb(), sp, ok,
                                      err);
    if (st != SP_OK || sp_slide_associated_count(c->slide) == 0) {
        return st;
    }
    cJSON *ag = cJSON_CreateObject();
    cJSON_AddNumberToObject(ag, "zarr_format", c->zarr_version);
    if (c->zarr_version == 2) {
        return sp_ome_write_json(c->store, "associated/.zgroup", ag, true, err);
    }
    cJSON_AddStringToObject(ag, "node_type", "group");
    cJSON_AddObjectToObject(ag, "attributes");
    return sp_ome_write_json(c->store, "associated/zarr.json", ag, true, err);
}

/* What the conversion was started with; compared on resume. */
static char *options_text(const converter *c, const sp_convert_options *o) {
    cJSON *doc = cJSON_CreateObject();
    cJSON_AddStringToObject(doc, "slidepipe", sp_version());
    cJSON *src = cJSON_AddObjectToObject(doc, "source");
    const char *name = sp_slide_file_name(c->slide);
    bool ok = name == NULL || sp_json_add_string(src, "name", name);
    ok &= sp_json_add_string(src, "format", sp_slide_format(c->slide));
    cJSON_AddNumberToObject(src, "width", (double)c->levels[0].width);
    cJSON_AddNumberToObject(src, "height", (double)c->levels[0].height);
    cJSON *opt = cJSON_AddObjectToObject(doc, "options");
    sp_zarr_codec codec = (sp_zarr_codec)o->value[SP_CONVERT_CODEC];
    cJSON_AddStringToObject(opt, "format", c->zarr_version == 3 ? "ome-zarr-0.5" : "ome-zarr-0.4");
    cJSON_AddNumberToObject(opt, "chunk", (double)c->chunk);
    cJSON_AddStringToObject(opt, "codec", sp_zarr_codec_name(codec));
    int level = (int)o->value[SP_CONVERT_LEVEL];
    cJSON_AddNumberToObject(opt, "codec_level", level ? level : sp_zarr_codec_default_level(codec));
    cJSON_AddNumberToObject(opt, "shard", (double)o->value[SP_CONVERT_SHARD]);
    cJSON_AddNumberToObject(opt, "levels", c->n_levels);
    cJSON_AddStringToObject(opt, "layout", c->layout == SP_ZARR_LAYOUT_CYX ? "cyx" : "yxc");
    add_icc_record(c->slide, opt, &ok);
    char *text = ok ? cJSON_Print(doc) : NULL;
    cJSON_Delete(doc);
    return text;
}

/* On resume: the options file of the interrupted run must say the same as ours. A store that has
 * none (killed before anything was written) is fine. */
static sp_status check_resume(const char *out_path, const char *expected, sp_err *err) {
    char *path = sp_path_join(out_path, OPTIONS_FILE);
    if (path == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory");
    }
    sp_source *src = NULL;
    bool missing = false;
    sp_status st = sp_store_open(path, 0, &src, &missing, err);
    free(path);
    if (st != SP_OK || missing) {
        return st;
    }
    size_t len = strlen(expected);
    char *buf = NULL;
    if (sp_source_size(src) == len && (buf = malloc(len + 1)) == NULL) {
        st = sp_err_set(err, SP_E_NOMEM, "out of memory");
    }
    if (buf != NULL) {
        st = sp_source_read(src, 0, buf, len, err);
    }
    sp_source_close(src);
    if (st == SP_OK && (buf == NULL || memcmp(buf, expected, len) != 0)) {
        st = sp_err_set(err, SP_E_INVALID_ARG,
                        "%s: this store was started from another slide or with other options; "
                        "resume it with the same ones, or convert into a new one",
                        out_path);
    }
    free(buf);
    return st;
}

/* ---- associated images ------------------------------------------------------------------- */

static sp_status write_associated(converter *c, const sp_convert_options *o, sp_err *err) {
    sp_slide *s = c->slide;
    for (int32_t i = 0; i < sp_slide_associated_count(s); i++) {
        const char *name = sp_slide_associated_name(s, i);
        int64_t w, h;
        sp_status st = sp_slide_associated_dimensions(s, name, &w, &h);
        if (st != SP_OK || w <= 0 || h <= 0) {
            continue;
        }
        uint64_t bytes;
        if (!sp_mul_u64((uint64_t)w * 3, (uint64_t)h, &bytes) || bytes > SIZE_MAX / 2) {
            return sp_err_set(err, SP_E_LIMIT, "associated image '%s' is too large", name);
        }
        int64_t cw = w < ASSOCIATED_CHUNK ? w : ASSOCIATED_CHUNK;
        int64_t ch = h < ASSOCIATED_CHUNK ? h : ASSOCIATED_CHUNK;
        uint8_t *img = malloc((size_t)bytes);
        uint8_t *chunk = malloc((size_t)(cw * ch * 3));
        if (img == NULL || chunk == NULL) {
            free(img);
            free(chunk);
            return sp_err_set(err, SP_E_NOMEM, "out of memory for associated image '%s'", name);
        }
        st = sp_slide_read_associated(s, name, SP_PIXEL_RGB8, img, w * 3);
        if (st != SP_OK) {
            const char *msg = sp_slide_error(s);
            sp_err_set(err, st, "reading associated image '%s': %s", name,
                       msg ? msg : sp_status_str(st));
        }
        sp_zarr_array *array = NULL;
        if (st == SP_OK) {
            char path[256];
            associated_path(name, path, sizeof path);
            sp_zarr_array_spec spec = {0};
            spec.zarr_version = c->zarr_version;
            spec.ndim = 3;
            spec.shape[0] = h;
            spec.shape[1] = w;
            spec.shape[2] = 3;
            spec.chunks[0] = ch;
            spec.chunks[1] = cw;
            spec.chunks[2] = 3;
            spec.dtype = SP_ZARR_U8;
            spec.codec = (sp_zarr_codec)o->value[SP_CONVERT_CODEC];
            spec.level = (int)o->value[SP_CONVERT_LEVEL];
            spec.dimension_names[0] = "y";
            spec.dimension_names[1] = "x";
            spec.dimension_names[2] = "c";
            st = sp_zarr_array_create(c->store, path, &spec, &array, err);
        }
        for (int64_t cy = 0; st == SP_OK && cy * ch < h; cy++) {
            for (int64_t cx = 0; st == SP_OK && cx * cw < w; cx++) {
                int64_t rows = h - cy * ch < ch ? h - cy * ch : ch;
                int64_t cols = w - cx * cw < cw ? w - cx * cw : cw;
                memset(chunk, 0, (size_t)(cw * ch * 3));
                for (int64_t y = 0; y < rows; y++) {
                    memcpy(chunk + y * cw * 3, img + (cy * ch + y) * w * 3 + cx * cw * 3,
                           (size_t)(cols * 3));
                }
                int64_t index[3] = {cy, cx, 0};
                st = sp_zarr_array_write_chunk(array, index, chunk, err);
            }
        }
        free(img);
        free(chunk);
        if (st != SP_OK) {
            return st;
        }
    }
    return SP_OK;
}

/* ---- the conversion ---------------------------------------------------------------------- */

/* "All cores" is two workers per core: a worker spends about a fifth of its time blocked while
 * the store flushes its chunk to disk, and a second one per core computes meanwhile (measured on
 * the 16384² benchmark: 1.5 cores busy with one worker per core, 1.75 with two). */
static int default_threads(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    n = n < 1 ? 2 : 2 * n;
    return n > MAX_THREADS ? MAX_THREADS : (int)n;
}

/* How many levels to write: down to the first that fits one chunk, or as asked, never past a
 * level with a side of 1. */
static int count_levels(int64_t w, int64_t h, int64_t chunk, int64_t wanted) {
    int n = 1;
    while (n < MAX_LEVELS && w >= 2 && h >= 2) {
        if (wanted == 0 ? (w <= chunk && h <= chunk) : n >= wanted) {
            break;
        }
        w /= 2;
        h /= 2;
        n++;
    }
    return n;
}

static sp_status setup_levels(converter *c, const sp_convert_options *o, sp_err *err) {
    int64_t w, h;
    sp_status st = sp_slide_level_dimensions(c->slide, 0, &w, &h);
    if (st != SP_OK || w <= 0 || h <= 0) {
        return sp_err_set(err, SP_E_INVALID_ARG, "the slide's level 0 is empty");
    }
    c->n_levels = count_levels(w, h, c->chunk, o->value[SP_CONVERT_LEVELS]);
    c->levels = calloc((size_t)c->n_levels, sizeof *c->levels);
    if (c->levels == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory");
    }
    for (int k = 0; k < c->n_levels; k++) {
        level_state *l = &c->levels[k];
        l->width = w;
        l->height = h;
        l->cols = (w + c->chunk - 1) / c->chunk;
        uint64_t row = (uint64_t)w * 3, band;
        if (!sp_mul_u64(row, (uint64_t)c->chunk, &band) || band > SIZE_MAX / 4) {
            return sp_err_set(err, SP_E_LIMIT, "level %d (%lld pixels wide) is too wide", k,
                              (long long)w);
        }
        /* Level 0's bands are the slots the engine's sink fills. */
        bool filled = true;
        for (int i = 0; k == 0 && i < BANDS; i++) {
            filled &= (c->slots[i].pixels = malloc((size_t)band)) != NULL;
        }
        l->band = k > 0 ? malloc((size_t)band) : NULL;
        l->carry = k + 1 < c->n_levels ? malloc((size_t)row) : NULL;
        if (!filled || (k > 0 && l->band == NULL) || (k + 1 < c->n_levels && l->carry == NULL)) {
            return sp_err_set(err, SP_E_NOMEM, "out of memory for a %lld x %lld band of level %d",
                              (long long)w, (long long)c->chunk, k);
        }
        w /= 2;
        h /= 2;
    }
    return SP_OK;
}

static sp_status create_arrays(converter *c, const sp_convert_options *o, sp_err *err) {
    int64_t shard = o->value[SP_CONVERT_SHARD];
    for (int k = 0; k < c->n_levels; k++) {
        level_state *l = &c->levels[k];
        sp_zarr_array_spec spec = {0};
        spec.zarr_version = c->zarr_version;
        spec.ndim = 3;
        spec.dtype = SP_ZARR_U8;
        spec.codec = (sp_zarr_codec)o->value[SP_CONVERT_CODEC];
        spec.level = (int)o->value[SP_CONVERT_LEVEL];
        int cax = c->layout == SP_ZARR_LAYOUT_CYX ? 0 : 2;
        int yax = c->layout == SP_ZARR_LAYOUT_CYX ? 1 : 0;
        spec.shape[cax] = 3;
        spec.shape[yax] = l->height;
        spec.shape[yax + 1] = l->width;
        spec.chunks[cax] = 3;
        spec.chunks[yax] = c->chunk;
        spec.chunks[yax + 1] = c->chunk;
        if (shard > 0) {
            spec.shard[cax] = 3;
            spec.shard[yax] = shard * c->chunk;
            spec.shard[yax + 1] = shard * c->chunk;
        }
        spec.dimension_names[cax] = "c";
        spec.dimension_names[yax] = "y";
        spec.dimension_names[yax + 1] = "x";
        char name[16];
        snprintf(name, sizeof name, "%d", k);
        sp_status st = sp_zarr_array_create(c->store, name, &spec, &l->array, err);
        if (st != SP_OK) {
            return st;
        }
    }
    return SP_OK;
}

static void converter_free(converter *c) {
    for (int i = 0; i < c->n_spare; i++) {
        free(c->spare[i]);
    }
    free(c->spare);
    for (int i = 0; i < BANDS; i++) {
        free(c->slots[i].pixels);
    }
    sp_pixel_hasher_free(c->hasher);
    if (c->levels != NULL) {
        for (int k = 1; k < c->n_levels; k++) {
            free(c->levels[k].band);
        }
        for (int k = 0; k < c->n_levels; k++) {
            free(c->levels[k].carry);
        }
        free(c->levels);
    }
    pthread_cond_destroy(&c->changed);
    pthread_mutex_destroy(&c->lock);
}

static sp_status convert(converter *c, const char *out_path, const sp_convert_options *o,
                         sp_progress_fn progress, void *user, char *hash, sp_err *err) {
    sp_status st = check_options(o, err);
    if (st == SP_OK) {
        st = setup_levels(c, o, err);
    }
    char *opts_text = NULL;
    if (st == SP_OK && (opts_text = options_text(c, o)) == NULL) {
        st = sp_err_set(err, SP_E_NOMEM, "out of memory");
    }
    bool resume = o->value[SP_CONVERT_RESUME] != 0;
    if (st == SP_OK && resume) {
        st = check_resume(out_path, opts_text, err);
    }
    if (st == SP_OK) {
        int threads = (int)o->value[SP_CONVERT_THREADS];
        c->threads = threads > 0 ? threads : default_threads();
        /* Chunk buffers in use at once: one per sink call and one per reducing thread. */
        c->max_buffers = 2 * c->threads + 1;
        c->spare = calloc((size_t)c->max_buffers, sizeof *c->spare);
        if (c->spare == NULL) {
            st = sp_err_set(err, SP_E_NOMEM, "out of memory");
        }
    }
    if (st == SP_OK) {
        st = sp_zarr_store_open(out_path, resume, &c->store, err);
    }
    if (st == SP_OK) {
        st = sp_zarr_store_write_json(c->store, OPTIONS_FILE, opts_text, err);
    }
    free(opts_text);
    if (st == SP_OK) {
        st = create_arrays(c, o, err);
    }
    if (st == SP_OK) {
        int64_t widths[MAX_LEVELS], heights[MAX_LEVELS];
        for (int k = 0; k < c->n_levels; k++) {
            widths[k] = c->levels[k].width;
            heights[k] = c->levels[k].height;
        }
        st = sp_pixel_hasher_create(c->n_levels, widths, heights, &c->hasher, err);
    }

    if (st == SP_OK) {
        sp_engine_job job = {
            .slide = c->slide,
            .level = 0,
            .op = &sp_op_rgb,
            .chunk = c->chunk,
            .threads = c->threads,
            .sink = pyramid_sink,
            .sink_ctx = c,
            .sink_abort = stop_waiting,
            .progress = progress,
            .progress_user = user,
        };
        st = sp_engine_run(&job, NULL, err);
    }
    if (st == SP_OK) {
        st = write_associated(c, o, err);
    }
    if (st == SP_OK) {
        st = sp_pixel_hasher_finish(c->hasher, c->pixel_hash, err);
    }
    if (st == SP_OK) {
        st = write_group_metadata(c, err);
    }
    if (st == SP_OK) {
        sp_zarr_store *store = c->store;
        c->store = NULL;
        st = sp_zarr_store_finish(store, hash, err);
    }
    if (c->store != NULL) {
        sp_zarr_store_abort(c->store);
        c->store = NULL;
    }
    return st;
}

sp_status sp_convert_to_zarr(sp_slide *slide, const char *out_path,
                             const sp_convert_options *options, sp_progress_fn progress,
                             void *progress_user, char *dataset_hash, char *errbuf,
                             size_t err_len) {
    sp_err err = {0};
    sp_status st;
    char hash[65] = "";
    if (slide == NULL || out_path == NULL || *out_path == '\0') {
        st = sp_err_set(&err, SP_E_INVALID_ARG, "sp_convert_to_zarr: null argument");
    } else {
        sp_convert_options *defaults = NULL;
        if (options == NULL) {
            st = sp_convert_options_create(&defaults);
            options = defaults;
        } else {
            st = SP_OK;
        }
        if (st == SP_OK) {
            converter c = {0};
            pthread_mutex_init(&c.lock, NULL);
            pthread_cond_init(&c.changed, NULL);
            c.slide = slide;
            c.chunk = options->value[SP_CONVERT_CHUNK];
            c.layout = (int)options->value[SP_CONVERT_LAYOUT];
            c.zarr_version = options->value[SP_CONVERT_FORMAT] == SP_ZARR_OME_05 ? 3 : 2;
            st = convert(&c, out_path, options, progress, progress_user, hash, &err);
            converter_free(&c);
        } else {
            sp_err_set(&err, st, "out of memory");
        }
        sp_convert_options_destroy(defaults);
    }
    if (dataset_hash != NULL) {
        memcpy(dataset_hash, st == SP_OK ? hash : "", st == SP_OK ? 65 : 1);
    }
    sp_err_report(st, &err, errbuf, err_len);
    return st;
}
