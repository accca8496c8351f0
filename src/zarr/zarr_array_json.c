/* zarr_array_json.c — writing an array's .zarray (v2) or zarr.json (v3) document (see
 * zarr_array_json.h). Built with printf into a growing buffer: the documents are small and their
 * exact bytes are hashed, so a fixed template is clearer than a JSON library's formatting. The
 * compressor's own JSON comes from zarr_codec.c.
 */
#include "zarr/zarr_array_json.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "zarr/zarr_codec.h"

/* A growing text buffer; `failed` sticks after an allocation failure. */
typedef struct strbuf {
    char *s;
    size_t len, cap;
    bool failed;
} strbuf;

static void sb_printf(strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void sb_printf(strbuf *b, const char *fmt, ...) {
    if (b->failed) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = true;
        return;
    }
    if (b->len + (size_t)n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + (size_t)n + 1) {
            cap *= 2;
        }
        char *s = realloc(b->s, cap);
        if (s == NULL) {
            b->failed = true;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

static void sb_int_list(strbuf *b, const int64_t *v, int n) {
    sb_printf(b, "[");
    for (int d = 0; d < n; d++) {
        sb_printf(b, "%s%lld", d ? ", " : "", (long long)v[d]);
    }
    sb_printf(b, "]");
}

static void v2_document(strbuf *b, const sp_zarr_array_spec *sp, const char *comp) {
    sb_printf(b, "{\n  \"zarr_format\": 2,\n  \"shape\": ");
    sb_int_list(b, sp->shape, sp->ndim);
    sb_printf(b, ",\n  \"chunks\": ");
    sb_int_list(b, sp->chunks, sp->ndim);
    sb_printf(b,
              ",\n  \"dtype\": \"%s\",\n  \"compressor\": %s,\n  \"fill_value\": 0,\n"
              "  \"order\": \"C\",\n  \"filters\": null,\n  \"dimension_separator\": \"/\"\n}\n",
              sp->dtype == SP_ZARR_F32 ? "<f4" : "|u1", comp);
}

static void v3_document(strbuf *b, const sp_zarr_array_spec *sp, bool sharded, const char *comp) {
    const char *bytes = "{\"name\": \"bytes\", \"configuration\": {\"endian\": \"little\"}}";
    sb_printf(b, "{\n  \"zarr_format\": 3,\n  \"node_type\": \"array\",\n  \"shape\": ");
    sb_int_list(b, sp->shape, sp->ndim);
    sb_printf(b, ",\n  \"data_type\": \"%s\",\n", sp->dtype == SP_ZARR_F32 ? "float32" : "uint8");
    sb_printf(b, "  \"chunk_grid\": {\"name\": \"regular\", \"configuration\": "
                 "{\"chunk_shape\": ");
    sb_int_list(b, sharded ? sp->shard : sp->chunks, sp->ndim);
    sb_printf(b, "}},\n  \"chunk_key_encoding\": {\"name\": \"default\", \"configuration\": "
                 "{\"separator\": \"/\"}},\n");
    sb_printf(b, "  \"fill_value\": %s,\n  \"codecs\": [", sp->dtype == SP_ZARR_F32 ? "0.0" : "0");
    if (sharded) {
        sb_printf(b, "{\"name\": \"sharding_indexed\", \"configuration\": {\"chunk_shape\": ");
        sb_int_list(b, sp->chunks, sp->ndim);
        sb_printf(b,
                  ", \"codecs\": [%s%s%s], \"index_codecs\": [%s, {\"name\": \"crc32c\"}], "
                  "\"index_location\": \"end\"}}",
                  bytes, comp ? ", " : "", comp ? comp : "", bytes);
    } else {
        sb_printf(b, "%s%s%s", bytes, comp ? ", " : "", comp ? comp : "");
    }
    sb_printf(b, "],\n  \"attributes\": {}");
    bool named = false;
    for (int d = 0; d < sp->ndim; d++) {
        named |= sp->dimension_names[d] != NULL;
    }
    if (named) {
        sb_printf(b, ",\n  \"dimension_names\": [");
        for (int d = 0; d < sp->ndim; d++) {
            const char *dn = sp->dimension_names[d];
            if (dn != NULL) {
                sb_printf(b, "%s\"%s\"", d ? ", " : "", dn);
            } else {
                sb_printf(b, "%snull", d ? ", " : "");
            }
        }
        sb_printf(b, "]");
    }
    sb_printf(b, "\n}\n");
}

char *sp_zarr_array_json(const sp_zarr_array_spec *spec, size_t *len) {
    *len = 0;
    size_t typesize = spec->dtype == SP_ZARR_F32 ? 4 : 1;
    bool sharded = false;
    for (int d = 0; d < spec->ndim; d++) {
        sharded |= spec->shard[d] != 0;
    }
    strbuf b = {0};
    if (spec->zarr_version == 2) {
        char *comp = sp_zarr_codec_v2_json(spec->codec, spec->level, typesize);
        if (comp == NULL) {
            return NULL;
        }
        v2_document(&b, spec, comp);
        free(comp);
    } else {
        char *comp = sp_zarr_codec_v3_json(spec->codec, spec->level, typesize);
        if (comp == NULL && spec->codec != SP_ZARR_CODEC_NONE) {
            return NULL;
        }
        v3_document(&b, spec, sharded, comp);
        free(comp);
    }
    if (b.failed) {
        free(b.s);
        return NULL;
    }
    *len = b.len;
    return b.s;
}
