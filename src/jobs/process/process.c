/* process.c — sp_process_to_zarr: one level of a slide through an op (the tile engine) into an
 * OME-Zarr store with one array.
 *
 * The engine's sink is the Zarr writer: every finished chunk is encoded, hashed and written
 * atomically by sp_zarr_array_write_chunk from the worker that computed it (a float chunk is
 * first narrowed to uint8 when SP_PROCESS_DTYPE asks for it). The group metadata
 * says what was computed (the op, its parameters and halo, the source level) but nothing about
 * how (mode, threads, in-flight tiles), so the dataset hash is the same for a tile-wise and a
 * whole-level run: the tests use that to compare the two. A uint8 result (grey, macenko, or any op
 * stored as uint8) also goes, chunk by chunk as it is written, to the pixel hasher
 * (slide/pixel_hash.h) as the RGB8 a reader of the store sees (grey as R = G = B), and the group
 * attributes record its pixel hash; a float32 result has none, as the slide layer cannot read it.
 */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/err.h"
#include "base/int_options.h"
#include "cuda/cuda_ops.h"
#include "engine/engine.h"
#include "ops/op.h"
#include "ops/to_uint8.h"
#include "slide/overview.h"
#include "slide/pixel_hash.h"
#include "slide/slide.h"
#include "zarr/ome_json.h"
#include "zarr/zarr_codec.h"
#include "zarr/zarr_store.h"

#define MAX_THREADS 1024

struct sp_process_options {
    int64_t value[SP_PROCESS_DTYPE + 1];
};

/* Defaults and valid ranges, in sp_process_option order (the codec level's range depends on the
 * codec and is checked when the job starts). The default codec level is the fastest of whichever
 * codec: float32 output is four times the input's bytes and compression is the largest cost of a
 * run (blosc-lz4 level 1 against its default 5 on the 16384² Sobel benchmark: 0.7-1 s less CPU of
 * about 10, 5% larger output). */
static const sp_int_option PROCESS_OPTIONS[] = {
    [SP_PROCESS_LEVEL] = {0, 0, 1024},
    [SP_PROCESS_CHUNK] = {1024, 16, 4096},
    [SP_PROCESS_CODEC] = {SP_ZARR_CODEC_BLOSC_LZ4, SP_ZARR_CODEC_ZSTD, SP_ZARR_CODEC_NONE},
    [SP_PROCESS_CODEC_LEVEL] = {1, 0, 22},
    [SP_PROCESS_FORMAT] = {SP_ZARR_OME_04, SP_ZARR_OME_04, SP_ZARR_OME_05},
    [SP_PROCESS_THREADS] = {0, 0, MAX_THREADS},
    [SP_PROCESS_IN_FLIGHT] = {0, 0, 4 * MAX_THREADS},
    [SP_PROCESS_MODE] = {SP_PROCESS_TILED, SP_PROCESS_TILED, SP_PROCESS_GLOBAL},
    [SP_PROCESS_DEVICE] = {SP_DEVICE_CPU, SP_DEVICE_CPU, SP_DEVICE_CUDA},
    [SP_PROCESS_DTYPE] = {SP_PROCESS_DTYPE_OP, SP_PROCESS_DTYPE_OP, SP_PROCESS_DTYPE_UINT8},
};
#define PROCESS_OPTION_COUNT ((int)(sizeof PROCESS_OPTIONS / sizeof PROCESS_OPTIONS[0]))
_Static_assert(PROCESS_OPTION_COUNT == SP_PROCESS_DTYPE + 1, "one entry per option");

SP_INT_OPTIONS_API(process, PROCESS_OPTIONS, PROCESS_OPTION_COUNT)

sp_status sp_op_check(const char *op_spec, char *errbuf, size_t err_len) {
    sp_err err = {0};
    const sp_op *op;
    sp_op_params params;
    sp_status st = sp_op_parse(op_spec, &op, &params, &err);
    sp_err_report(st, &err, errbuf, err_len);
    return st;
}

/* ---- metadata ---------------------------------------------------------------------------- */

typedef struct process_ctx {
    sp_slide *slide;
    const char *spec;
    const sp_op *op;
    sp_op_params params;
    int32_t level;
    int64_t width, height, chunk;
    int zarr_version;
    bool to_uint8;       /* a float op's values stored as uint8 */
    size_t chunk_values; /* channels x chunk x chunk */
    sp_zarr_array *array;
    sp_pixel_hasher *hasher; /* uint8 results only, else NULL */
    char pixel_hash[65];     /* "" until the run is done, and for float32 results */
} process_ctx;

/* A double written with 17 significant digits, so that it reads back as the same double
 * (cJSON's own printing may drop the last bit). */
static cJSON *exact_number(double v) {
    char text[32];
    snprintf(text, sizeof text, "%.17g", v);
    return cJSON_CreateRaw(text);
}

/* Stains as {"h": [..], "e": [..], "max_h", "max_e"} (and the pixels they were estimated from),
 * exactly, so that sp_stains_normalize with them gives the stored bytes again. */
static cJSON *stains_json(const sp_stains *st) {
    cJSON *o = cJSON_CreateObject();
    cJSON *h = cJSON_AddArrayToObject(o, "h"), *e = cJSON_AddArrayToObject(o, "e");
    for (int k = 0; k < 3; k++) {
        cJSON_AddItemToArray(h, exact_number(st->h[k]));
        cJSON_AddItemToArray(e, exact_number(st->e[k]));
    }
    cJSON_AddItemToObject(o, "max_h", exact_number(st->max_h));
    cJSON_AddItemToObject(o, "max_e", exact_number(st->max_e));
    if (st->pixels > 0) {
        cJSON_AddNumberToObject(o, "pixels", (double)st->pixels);
    }
    return o;
}

static cJSON *reinhard_json(const sp_reinhard_stats *st) {
    cJSON *o = cJSON_CreateObject();
    cJSON *mean = cJSON_AddArrayToObject(o, "mean"), *sd = cJSON_AddArrayToObject(o, "std");
    for (int k = 0; k < 3; k++) {
        cJSON_AddItemToArray(mean, exact_number(st->mean[k]));
        cJSON_AddItemToArray(sd, exact_number(st->std[k]));
    }
    if (st->pixels > 0) {
        cJSON_AddNumberToObject(o, "pixels", (double)st->pixels);
    }
    return o;
}

/* The op and its source; *ok becomes false when a string could not be added (out of memory). */
static cJSON *slidepipe_json(const process_ctx *p, bool *ok) {
    cJSON *sp = cJSON_CreateObject();
    cJSON_AddStringToObject(sp, "version", sp_version());
    if (p->pixel_hash[0] != '\0') {
        cJSON_AddStringToObject(sp, "pixel_hash", p->pixel_hash);
    }
    cJSON *op = cJSON_AddObjectToObject(sp, "op");
    cJSON_AddStringToObject(op, "name", p->op->name);
    *ok &= sp_json_add_string(op, "spec", p->spec);
    if (p->op == &sp_op_gaussian) {
        cJSON *params = cJSON_AddObjectToObject(op, "parameters");
        cJSON_AddNumberToObject(params, "sigma", p->params.sigma);
        cJSON_AddNumberToObject(params, "truncate", 4.0);
        cJSON_AddStringToObject(params, "mode", "reflect");
    }
    if (p->op == &sp_op_macenko) {
        cJSON *params = cJSON_AddObjectToObject(op, "parameters");
        cJSON_AddItemToObject(params, "source", stains_json(&p->params.source));
        cJSON_AddItemToObject(params, "target", stains_json(&p->params.target));
        cJSON_AddNumberToObject(params, "max_side", SP_OVERVIEW_DEFAULT_SIDE);
        cJSON_AddStringToObject(params, "definition", "docs/stains.md");
    }
    if (p->op == &sp_op_reinhard) {
        cJSON *params = cJSON_AddObjectToObject(op, "parameters");
        cJSON_AddItemToObject(params, "source", reinhard_json(&p->params.colour_source));
        cJSON_AddItemToObject(params, "target", reinhard_json(&p->params.colour_target));
        cJSON_AddNumberToObject(params, "max_side", SP_OVERVIEW_DEFAULT_SIDE);
        cJSON_AddStringToObject(params, "colour_space", "CIELAB D65 (scikit-image rgb2lab)");
        cJSON_AddStringToObject(params, "definition", "docs/stains.md");
    }
    cJSON_AddNumberToObject(op, "halo", p->op->halo(&p->params));
    cJSON_AddStringToObject(op, "dtype", p->op->output == SP_ZARR_F32 ? "float32" : "uint8");
    cJSON_AddNumberToObject(op, "channels", p->op->channels);
    if (p->to_uint8) {
        cJSON *stored = cJSON_AddObjectToObject(op, "stored");
        cJSON_AddStringToObject(stored, "dtype", "uint8");
        cJSON_AddStringToObject(stored, "conversion", "min(max(floor(v + 0.5), 0), 255)");
    }
    cJSON_AddStringToObject(op, "input", "RGB8, alpha composited over the background colour");
    cJSON_AddStringToObject(op, "definition", "docs/ops.md");
    cJSON *src = cJSON_AddObjectToObject(sp, "source");
    const char *name = sp_slide_file_name(p->slide);
    if (name != NULL) {
        *ok &= sp_json_add_string(src, "name", name);
    }
    *ok &= sp_json_add_string(src, "format", sp_slide_format(p->slide));
    cJSON_AddNumberToObject(src, "level", p->level);
    cJSON_AddNumberToObject(src, "width", (double)p->width);
    cJSON_AddNumberToObject(src, "height", (double)p->height);
    return sp;
}

static sp_status write_group_metadata(const process_ctx *p, sp_zarr_store *store, sp_err *err) {
    char name[128];
    snprintf(name, sizeof name, "%s of level %d", p->spec, (int)p->level);
    double ds = 1.0;
    sp_slide_level_downsample(p->slide, p->level, &ds);
    sp_ome_multiscales_spec spec = {
        .name = name,
        .mpp_x = sp_slide_mpp_property(p->slide, SP_PROPERTY_MPP_X),
        .mpp_y = sp_slide_mpp_property(p->slide, SP_PROPERTY_MPP_Y),
        .levels = 1,
        .first_scale = ds,
        .method = "slidepipe process",
    };
    bool ok = true;
    cJSON *ms = sp_ome_multiscales(&spec, p->zarr_version == 2, &ok);
    cJSON *sp = slidepipe_json(p, &ok);
    return sp_ome_write_group(store, p->zarr_version, ms, NULL, sp, ok, err);
}

/* ---- the run ----------------------------------------------------------------------------- */

/* Give the part of a uint8 chunk (planes of chunk x chunk) that lies inside the level to the
 * pixel hasher. */
static sp_status hash_chunk(process_ctx *p, int64_t row, int64_t col, const uint8_t *chunk,
                            sp_err *err) {
    int64_t n = p->chunk, x = col * n, y = row * n;
    int64_t w = p->width - x < n ? p->width - x : n, h = p->height - y < n ? p->height - y : n;
    bool grey = p->op->channels == 1;
    const uint8_t *planes[3] = {chunk, grey ? chunk : chunk + n * n,
                                grey ? chunk : chunk + 2 * n * n};
    return sp_pixel_hasher_put(p->hasher, 0, x, y, w, h, planes, 1, n, err);
}

static sp_status zarr_sink(void *ctx, int64_t row, int64_t col, const void *chunk, sp_err *err) {
    process_ctx *p = ctx;
    int64_t index[3] = {0, row, col};
    if (!p->to_uint8) {
        sp_status st = p->hasher ? hash_chunk(p, row, col, chunk, err) : SP_OK;
        return st == SP_OK ? sp_zarr_array_write_chunk(p->array, index, chunk, err) : st;
    }
    /* A chunk's worth (3 MB for 1024² x 3): after the first, glibc serves these from the heap. */
    uint8_t *narrow = malloc(p->chunk_values);
    if (narrow == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory for a uint8 chunk");
    }
    sp_float_to_uint8(chunk, narrow, p->chunk_values);
    sp_status st = hash_chunk(p, row, col, narrow, err);
    if (st == SP_OK) {
        st = sp_zarr_array_write_chunk(p->array, index, narrow, err);
    }
    free(narrow);
    return st;
}

/* "All cores" is two workers per core, as for convert: a worker spends part of its time blocked
 * while the store writes and syncs its chunk, and a second worker per core computes meanwhile
 * (16384² Sobel on 2 busy cores: 11.9 s wall with 4 workers, 14.7 s with 2, at equal CPU time).
 * Capped at 32 so that memory (about 22 MB per worker and its two input tiles, 1024² Sobel) stays
 * under 1 GiB on large machines too. */
static int default_threads(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    n = n < 1 ? 2 : 2 * n;
    return n > 32 ? 32 : (int)n;
}

static sp_status process(sp_slide *slide, const char *spec, const char *out_path,
                         const sp_process_options *o, sp_progress_fn progress, void *user,
                         char *hash, sp_err *err) {
    process_ctx p = {0};
    p.slide = slide;
    p.spec = spec;
    p.level = (int32_t)o->value[SP_PROCESS_LEVEL];
    p.chunk = o->value[SP_PROCESS_CHUNK];
    p.zarr_version = o->value[SP_PROCESS_FORMAT] == SP_ZARR_OME_05 ? 3 : 2;
    sp_status st = sp_op_parse(spec, &p.op, &p.params, err);
    if (st != SP_OK) {
        return st;
    }
    if (p.level >= sp_slide_level_count(slide)) {
        return sp_err_set(err, SP_E_INVALID_ARG, "level %d does not exist (the slide has %d)",
                          (int)p.level, (int)sp_slide_level_count(slide));
    }
    sp_slide_level_dimensions(slide, p.level, &p.width, &p.height);
    p.to_uint8 = o->value[SP_PROCESS_DTYPE] == SP_PROCESS_DTYPE_UINT8 && p.op->output != SP_ZARR_U8;
    p.chunk_values = (size_t)p.op->channels * (size_t)p.chunk * (size_t)p.chunk;
    sp_zarr_codec codec = (sp_zarr_codec)o->value[SP_PROCESS_CODEC];
    int codec_level = (int)o->value[SP_PROCESS_CODEC_LEVEL];
    st = sp_zarr_codec_check(codec, codec_level, err);
    if (st != SP_OK) {
        return st;
    }
    bool cuda = o->value[SP_PROCESS_DEVICE] == SP_DEVICE_CUDA;
    if (cuda && o->value[SP_PROCESS_MODE] == SP_PROCESS_GLOBAL) {
        return sp_err_set(err, SP_E_INVALID_ARG, "the global mode runs on the CPU only");
    }
    if (cuda && sp_cuda_op_kernel(p.op->name) == NULL) {
        return sp_err_set(err, SP_E_UNSUPPORTED, "--device cuda: op %s has no CUDA implementation",
                          p.op->name);
    }
    char why[300];
    if (cuda && sp_cuda_device_count(why, sizeof why) == 0) {
        return sp_err_set(err, SP_E_UNSUPPORTED, "--device cuda: %s", why);
    }
    if (p.op->prepare != NULL) {
        st = p.op->prepare(slide, &p.params, err);
        if (st != SP_OK) {
            return st;
        }
    }
    sp_zarr_store *store = NULL;
    st = sp_zarr_store_open(out_path, false, &store, err);
    if (st != SP_OK) {
        return st;
    }
    sp_zarr_array_spec spec_a = {0};
    spec_a.zarr_version = p.zarr_version;
    spec_a.ndim = 3;
    spec_a.shape[0] = p.op->channels;
    spec_a.shape[1] = p.height;
    spec_a.shape[2] = p.width;
    spec_a.chunks[0] = p.op->channels;
    spec_a.chunks[1] = p.chunk;
    spec_a.chunks[2] = p.chunk;
    spec_a.dtype = p.to_uint8 ? SP_ZARR_U8 : p.op->output;
    spec_a.codec = codec;
    spec_a.level = codec_level;
    spec_a.dimension_names[0] = "c";
    spec_a.dimension_names[1] = "y";
    spec_a.dimension_names[2] = "x";
    st = sp_zarr_array_create(store, "0", &spec_a, &p.array, err);
    if (st == SP_OK && spec_a.dtype == SP_ZARR_U8 && (p.op->channels == 1 || p.op->channels == 3)) {
        st = sp_pixel_hasher_create(1, &p.width, &p.height, &p.hasher, err);
    }
    if (st == SP_OK) {
        int threads = (int)o->value[SP_PROCESS_THREADS];
        sp_engine_job job = {
            .slide = slide,
            .level = p.level,
            .op = p.op,
            .params = p.params,
            .chunk = p.chunk,
            .threads = threads > 0 ? threads : default_threads(),
            .in_flight = (int)o->value[SP_PROCESS_IN_FLIGHT],
            .global = o->value[SP_PROCESS_MODE] == SP_PROCESS_GLOBAL,
            .cuda = cuda,
            .sink = zarr_sink,
            .sink_ctx = &p,
            .progress = progress,
            .progress_user = user,
        };
        st = sp_engine_run(&job, NULL, err);
    }
    if (st == SP_OK && p.hasher != NULL) {
        st = sp_pixel_hasher_finish(p.hasher, p.pixel_hash, err);
    }
    sp_pixel_hasher_free(p.hasher);
    if (st == SP_OK) {
        st = write_group_metadata(&p, store, err);
    }
    if (st == SP_OK) {
        return sp_zarr_store_finish(store, hash, err);
    }
    sp_zarr_store_abort(store);
    return st;
}

sp_status sp_process_to_zarr(sp_slide *slide, const char *op_spec, const char *out_path,
                             const sp_process_options *options, sp_progress_fn progress,
                             void *progress_user, char *dataset_hash, char *errbuf,
                             size_t err_len) {
    sp_err err = {0};
    sp_status st;
    char hash[65] = "";
    sp_process_options *defaults = NULL;
    if (slide == NULL || op_spec == NULL || out_path == NULL || *out_path == '\0') {
        st = sp_err_set(&err, SP_E_INVALID_ARG, "sp_process_to_zarr: null argument");
    } else if (options == NULL && sp_process_options_create(&defaults) != SP_OK) {
        st = sp_err_set(&err, SP_E_NOMEM, "out of memory");
    } else {
        st = process(slide, op_spec, out_path, options ? options : defaults, progress,
                     progress_user, hash, &err);
    }
    sp_process_options_destroy(defaults);
    if (dataset_hash != NULL) {
        memcpy(dataset_hash, st == SP_OK ? hash : "", st == SP_OK ? 65 : 1);
    }
    sp_err_report(st, &err, errbuf, err_len);
    return st;
}
