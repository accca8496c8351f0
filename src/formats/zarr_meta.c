/* zarr_meta.c — parsing Zarr array metadata, OME-NGFF group attributes and shard indexes from
 * memory (see zarr_meta.h). JSON goes through cJSON; every value is then checked here for its
 * type and range before it reaches a descriptor, because a store's metadata is as untrusted as
 * its chunks. Sizes that drive allocations later (chunk bytes, shard index bytes) are checked
 * against the limits now, so that opening a hostile store fails at once and reading never has
 * to.
 */
#include "formats/zarr_meta.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "zarr/zarr_codec.h"

/* ---- JSON helpers ---- */

static sp_status parse_json(const char *text, size_t len, const sp_limits *limits, cJSON **out,
                            sp_err *err) {
    *out = NULL;
    if ((uint64_t)len > (uint64_t)limits->value[SP_LIMIT_MAX_METADATA]) {
        return sp_err_set(err, SP_E_LIMIT,
                          "%zu bytes of JSON exceed the metadata limit of %lld bytes", len,
                          (long long)limits->value[SP_LIMIT_MAX_METADATA]);
    }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, false);
    if (root == NULL) {
        size_t at = end != NULL && end >= text && end <= text + len ? (size_t)(end - text) : 0;
        return sp_err_set(err, SP_E_CORRUPT, "invalid JSON near byte %zu", at);
    }
    /* cJSON stops after the first value; anything but white space after it is an error. */
    for (const char *p = end; p != NULL && p < text + len; p++) {
        if (*p != ' ' && *p != '\t' && *p != '\r' && *p != '\n') {
            cJSON_Delete(root);
            return sp_err_set(err, SP_E_CORRUPT,
                              "invalid JSON: text after the document at byte %zu",
                              (size_t)(p - text));
        }
    }
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return sp_err_set(err, SP_E_CORRUPT, "the JSON document is not an object");
    }
    *out = root;
    return SP_OK;
}

static const cJSON *member(const cJSON *obj, const char *key) {
    return cJSON_IsObject(obj) ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
}

static bool is_absent(const cJSON *v) {
    return v == NULL || cJSON_IsNull(v);
}

static const char *string_of(const cJSON *v) {
    return cJSON_IsString(v) && v->valuestring != NULL ? v->valuestring : NULL;
}

static bool string_is(const cJSON *v, const char *s) {
    const char *t = string_of(v);
    return t != NULL && strcmp(t, s) == 0;
}

/* An integer-valued JSON number in [min, max] (both within +-2^53, where doubles are exact). */
static bool int_of(const cJSON *v, int64_t min, int64_t max, int64_t *out) {
    if (!cJSON_IsNumber(v)) {
        return false;
    }
    double d = v->valuedouble;
    if (!isfinite(d) || d != floor(d) || d < (double)min || d > (double)max) {
        return false;
    }
    *out = (int64_t)d;
    return true;
}

/* A list of 1..SP_ZARR_MAX_DIMS integers in [min, max]. */
static sp_status int_list(const cJSON *v, const char *what, int64_t min, int64_t max, int64_t *out,
                          int *n, sp_err *err) {
    if (!cJSON_IsArray(v)) {
        return sp_err_set(err, SP_E_CORRUPT, "\"%s\" is missing or not a list", what);
    }
    int count = cJSON_GetArraySize(v);
    if (count == 0) {
        return sp_err_set(err, SP_E_CORRUPT, "\"%s\" is empty", what);
    }
    if (count > SP_ZARR_MAX_DIMS) {
        return sp_err_set(err, SP_E_UNSUPPORTED,
                          "\"%s\" has %d dimensions; slidepipe reads at most %d (t, c, z, y, x)",
                          what, count, SP_ZARR_MAX_DIMS);
    }
    int i = 0;
    for (const cJSON *e = v->child; e != NULL; e = e->next, i++) {
        if (!int_of(e, min, max, &out[i])) {
            char shown[32] = "a non-number";
            if (cJSON_IsNumber(e)) {
                snprintf(shown, sizeof shown, "%.17g", e->valuedouble);
            }
            return sp_err_set(err, SP_E_CORRUPT,
                              "\"%s\"[%d] is %s, not an integer from %lld to %lld", what, i, shown,
                              (long long)min, (long long)max);
        }
    }
    *n = count;
    return SP_OK;
}

/* The name of a v3 codec entry: {"name": ..., "configuration": {...}}, or a bare name. */
static const char *codec_name(const cJSON *c) {
    return cJSON_IsString(c) ? string_of(c) : string_of(member(c, "name"));
}

static const cJSON *codec_config(const cJSON *c) {
    return member(c, "configuration");
}

/* ---- arrays ---- */

static void set_sample(sp_zarr_array_meta *m, sp_zarr_sample s) {
    static const char *const NAMES[] = {"uint8", "int8", "uint16", "int16"};
    m->sample = s;
    m->item_size = s == SP_ZARR_SAMPLE_U8 || s == SP_ZARR_SAMPLE_I8 ? 1 : 2;
    m->data_type = NAMES[s];
}

/* numpy type strings: byte order, kind, size ("|u1", "<u2", ">i2", "<f4"). */
static sp_status v2_dtype(const cJSON *v, sp_zarr_array_meta *m, sp_err *err) {
    if (cJSON_IsArray(v)) {
        return sp_err_set(err, SP_E_UNSUPPORTED, "structured dtypes are not supported");
    }
    const char *s = string_of(v);
    if (s == NULL) {
        return sp_err_set(err, SP_E_CORRUPT, "\"dtype\" is missing or not a string");
    }
    size_t n = strlen(s);
    if (n < 3 || strchr("<>|=", s[0]) == NULL) {
        return sp_err_set(err, SP_E_CORRUPT, "\"dtype\" \"%.32s\" is not a numpy type string", s);
    }
    char kind = s[1];
    const char *size = s + 2;
    if (kind == 'f') {
        return sp_err_set(err, SP_E_UNSUPPORTED,
                          "floating-point samples (dtype \"%.32s\") are not supported yet; "
                          "slidepipe reads 8- and 16-bit integer samples",
                          s);
    }
    bool one = strcmp(size, "1") == 0, two = strcmp(size, "2") == 0;
    if ((kind != 'u' && kind != 'i') || !(one || two)) {
        return sp_err_set(err, SP_E_UNSUPPORTED,
                          "dtype \"%.32s\" is not supported; slidepipe reads uint8, int8, uint16 "
                          "and int16 samples",
                          s);
    }
    if (two && s[0] != '<' && s[0] != '>') {
        return sp_err_set(err, SP_E_CORRUPT, "dtype \"%.32s\" has no byte order", s);
    }
    set_sample(m, kind == 'u' ? (one ? SP_ZARR_SAMPLE_U8 : SP_ZARR_SAMPLE_U16)
                              : (one ? SP_ZARR_SAMPLE_I8 : SP_ZARR_SAMPLE_I16));
    m->big_endian = two && s[0] == '>';
    return SP_OK;
}

static sp_status v3_data_type(const cJSON *v, sp_zarr_array_meta *m, sp_err *err) {
    const char *s = string_of(v);
    if (s == NULL) {
        return cJSON_IsObject(v)
                   ? sp_err_set(err, SP_E_UNSUPPORTED, "extension data types are not supported")
                   : sp_err_set(err, SP_E_CORRUPT, "\"data_type\" is missing or not a string");
    }
    static const struct {
        const char *name;
        sp_zarr_sample sample;
    } TYPES[] = {{"uint8", SP_ZARR_SAMPLE_U8},
                 {"int8", SP_ZARR_SAMPLE_I8},
                 {"uint16", SP_ZARR_SAMPLE_U16},
                 {"int16", SP_ZARR_SAMPLE_I16}};
    for (size_t i = 0; i < sizeof TYPES / sizeof *TYPES; i++) {
        if (strcmp(s, TYPES[i].name) == 0) {
            set_sample(m, TYPES[i].sample);
            return SP_OK;
        }
    }
    if (strncmp(s, "float", 5) == 0 || strncmp(s, "bfloat", 6) == 0) {
        return sp_err_set(err, SP_E_UNSUPPORTED,
                          "floating-point samples (data_type \"%.32s\") are not supported yet; "
                          "slidepipe reads 8- and 16-bit integer samples",
                          s);
    }
    return sp_err_set(err, SP_E_UNSUPPORTED,
                      "data_type \"%.32s\" is not supported; slidepipe reads uint8, int8, uint16 "
                      "and int16 samples",
                      s);
}

static sp_status fill_value(const cJSON *v, sp_zarr_array_meta *m, sp_err *err) {
    int64_t lo = 0, hi = 255;
    switch (m->sample) {
    case SP_ZARR_SAMPLE_U8: break;
    case SP_ZARR_SAMPLE_I8: lo = -128, hi = 127; break;
    case SP_ZARR_SAMPLE_U16: hi = 65535; break;
    case SP_ZARR_SAMPLE_I16: lo = -32768, hi = 32767; break;
    }
    m->fill = 0;
    if (is_absent(v)) {
        return SP_OK; /* v2 allows null: chunks are then undefined where missing; 0 is usual */
    }
    if (!int_of(v, lo, hi, &m->fill)) {
        return sp_err_set(err, SP_E_CORRUPT, "\"fill_value\" is not a %s value", m->data_type);
    }
    return SP_OK;
}

/* Sizes that later drive allocations: one decoded chunk, and a shard's index. */
static sp_status check_sizes(sp_zarr_array_meta *m, const sp_limits *limits, sp_err *err) {
    uint64_t elements = 1, shard_chunks = 1;
    for (int d = 0; d < m->ndim; d++) {
        if (!sp_mul_u64(elements, (uint64_t)m->chunk[d], &elements) ||
            !sp_mul_u64(shard_chunks, (uint64_t)(m->file[d] / m->chunk[d]), &shard_chunks)) {
            return sp_err_set(err, SP_E_LIMIT, "the chunk or shard shape is too large");
        }
    }
    uint64_t bytes;
    if (!sp_mul_u64(elements, (uint64_t)m->item_size, &bytes) ||
        bytes > (uint64_t)limits->value[SP_LIMIT_MAX_ALLOC]) {
        return sp_err_set(
            err, SP_E_LIMIT, "a chunk of %llu elements exceeds the allocation limit of %lld bytes",
            (unsigned long long)elements, (long long)limits->value[SP_LIMIT_MAX_ALLOC]);
    }
    m->chunk_elements = elements;
    m->chunk_bytes = bytes;
    m->shard_chunks = m->sharded ? shard_chunks : 1;
    if (m->sharded) {
        uint64_t index;
        if (!sp_mul_u64(shard_chunks, 16, &index) || !sp_add_u64(index, 4, &index) ||
            index > (uint64_t)limits->value[SP_LIMIT_MAX_ALLOC]) {
            return sp_err_set(err, SP_E_LIMIT,
                              "a shard of %llu chunks has an index over the allocation limit",
                              (unsigned long long)shard_chunks);
        }
    }
    return SP_OK;
}

static sp_status parse_v2_array(const cJSON *root, sp_zarr_array_meta *m, sp_err *err) {
    const cJSON *v = member(root, "zarr_format");
    int64_t version;
    if (v != NULL && (!int_of(v, 0, 100, &version) || version != 2)) {
        return sp_err_set(err, SP_E_CORRUPT, "\"zarr_format\" of a .zarray is not 2");
    }
    int n_shape = 0, n_chunks = 0;
    sp_status st =
        int_list(member(root, "shape"), "shape", 1, SP_ZARR_MAX_EXTENT, m->shape, &n_shape, err);
    if (st == SP_OK) {
        st = int_list(member(root, "chunks"), "chunks", 1, SP_ZARR_MAX_EXTENT, m->chunk, &n_chunks,
                      err);
    }
    if (st == SP_OK && n_chunks != n_shape) {
        st = sp_err_set(err, SP_E_CORRUPT, "\"chunks\" has %d dimensions but \"shape\" has %d",
                        n_chunks, n_shape);
    }
    if (st != SP_OK) {
        return st;
    }
    m->ndim = n_shape;
    memcpy(m->file, m->chunk, sizeof m->file);
    if ((st = v2_dtype(member(root, "dtype"), m, err)) != SP_OK ||
        (st = fill_value(member(root, "fill_value"), m, err)) != SP_OK) {
        return st;
    }
    v = member(root, "order");
    if (!is_absent(v) && !string_is(v, "C")) {
        return string_is(v, "F") ? sp_err_set(err, SP_E_UNSUPPORTED,
                                              "Fortran (column-major) chunk order is not supported")
                                 : sp_err_set(err, SP_E_CORRUPT, "\"order\" is not \"C\" or \"F\"");
    }
    v = member(root, "filters");
    if (!is_absent(v) && !(cJSON_IsArray(v) && cJSON_GetArraySize(v) == 0)) {
        const char *id = cJSON_IsArray(v) ? string_of(member(v->child, "id")) : NULL;
        return sp_err_set(err, SP_E_UNSUPPORTED, "Zarr filters are not supported (\"%.64s\")",
                          id ? id : "?");
    }
    v = member(root, "dimension_separator");
    m->separator = '.';
    if (!is_absent(v)) {
        if (string_is(v, "/")) {
            m->separator = '/';
        } else if (!string_is(v, ".")) {
            return sp_err_set(err, SP_E_CORRUPT, "\"dimension_separator\" is not \".\" or \"/\"");
        }
    }
    m->key_prefix_c = false;
    v = member(root, "compressor");
    m->codec = SP_ZARR_CODEC_NONE;
    if (!is_absent(v)) {
        const char *id = string_of(member(v, "id"));
        if (id == NULL) {
            return sp_err_set(err, SP_E_CORRUPT, "\"compressor\" has no \"id\"");
        }
        st = sp_zarr_codec_from_v2(id, string_of(member(v, "cname")), &m->codec, err);
    }
    return st;
}

static sp_status v3_codec_chain(const cJSON *codecs, bool inner, sp_zarr_array_meta *m,
                                sp_err *err);

static sp_status v3_sharding(const cJSON *config, sp_zarr_array_meta *m, sp_err *err) {
    int n = 0;
    sp_status st = int_list(member(config, "chunk_shape"), "sharding chunk_shape", 1,
                            SP_ZARR_MAX_EXTENT, m->chunk, &n, err);
    if (st != SP_OK) {
        return st;
    }
    if (n != m->ndim) {
        return sp_err_set(err, SP_E_CORRUPT,
                          "the sharding chunk_shape has %d dimensions but the array has %d", n,
                          m->ndim);
    }
    for (int d = 0; d < n; d++) {
        if (m->file[d] % m->chunk[d] != 0) {
            return sp_err_set(err, SP_E_CORRUPT,
                              "the shard shape is not a multiple of the inner chunk shape "
                              "(dimension %d: %lld and %lld)",
                              d, (long long)m->file[d], (long long)m->chunk[d]);
        }
    }
    st = v3_codec_chain(member(config, "codecs"), true, m, err);
    if (st != SP_OK) {
        return st;
    }
    const cJSON *index = member(config, "index_codecs");
    int count = cJSON_IsArray(index) ? cJSON_GetArraySize(index) : 0;
    const cJSON *first = count > 0 ? index->child : NULL;
    const cJSON *endian = member(codec_config(first), "endian");
    if (count < 1 || count > 2 || !string_is(member(first, "name"), "bytes") ||
        !(is_absent(endian) || string_is(endian, "little"))) {
        return sp_err_set(err, SP_E_UNSUPPORTED,
                          "shard index codecs other than bytes (little-endian) and crc32c are "
                          "not supported");
    }
    m->index_crc32c = false;
    if (count == 2) {
        const char *name = codec_name(first->next);
        if (name == NULL || strcmp(name, "crc32c") != 0) {
            return sp_err_set(err, SP_E_UNSUPPORTED, "shard index codec \"%.64s\" is not supported",
                              name ? name : "?");
        }
        m->index_crc32c = true;
    }
    const cJSON *location = member(config, "index_location");
    m->index_at_start = false;
    if (!is_absent(location)) {
        if (string_is(location, "start")) {
            m->index_at_start = true;
        } else if (!string_is(location, "end")) {
            return sp_err_set(err, SP_E_CORRUPT, "\"index_location\" is not \"start\" or \"end\"");
        }
    }
    m->sharded = true;
    return SP_OK;
}

/* codecs: [bytes | sharding_indexed, (compressor), (crc32c)]. */
static sp_status v3_codec_chain(const cJSON *codecs, bool inner, sp_zarr_array_meta *m,
                                sp_err *err) {
    if (!cJSON_IsArray(codecs) || cJSON_GetArraySize(codecs) == 0) {
        return sp_err_set(err, SP_E_CORRUPT, "\"codecs\" is missing or empty");
    }
    const cJSON *c = codecs->child;
    const char *name = codec_name(c);
    if (name == NULL) {
        return sp_err_set(err, SP_E_CORRUPT, "a codec has no name");
    }
    if (strcmp(name, "transpose") == 0) {
        return sp_err_set(err, SP_E_UNSUPPORTED, "the transpose codec is not supported");
    }
    if (strcmp(name, "sharding_indexed") == 0) {
        if (inner) {
            return sp_err_set(err, SP_E_UNSUPPORTED, "nested sharding is not supported");
        }
        if (c->next != NULL) {
            return sp_err_set(err, SP_E_UNSUPPORTED,
                              "codecs after sharding_indexed are not supported");
        }
        return v3_sharding(codec_config(c), m, err);
    }
    if (strcmp(name, "bytes") != 0) {
        return sp_err_set(err, SP_E_UNSUPPORTED,
                          "codec \"%.64s\" is not supported where the bytes codec is expected",
                          name);
    }
    const cJSON *endian = member(codec_config(c), "endian");
    m->big_endian = false;
    if (string_is(endian, "big")) {
        m->big_endian = true;
    } else if (!is_absent(endian) && !string_is(endian, "little")) {
        return sp_err_set(err, SP_E_CORRUPT, "the bytes codec's \"endian\" is not little or big");
    }
    m->codec = SP_ZARR_CODEC_NONE;
    m->chunk_crc32c = false;
    bool have_compressor = false;
    for (c = c->next; c != NULL; c = c->next) {
        name = codec_name(c);
        if (name == NULL) {
            return sp_err_set(err, SP_E_CORRUPT, "a codec has no name");
        }
        if (m->chunk_crc32c) {
            return sp_err_set(err, SP_E_UNSUPPORTED,
                              "codec \"%.64s\" after crc32c is not supported", name);
        }
        if (strcmp(name, "crc32c") == 0) {
            m->chunk_crc32c = true;
            continue;
        }
        if (have_compressor) {
            return sp_err_set(err, SP_E_UNSUPPORTED,
                              "more than one compressor (\"%.64s\") is not supported", name);
        }
        sp_status st = sp_zarr_codec_from_v3(name, string_of(member(codec_config(c), "cname")),
                                             &m->codec, err);
        if (st != SP_OK) {
            return st;
        }
        have_compressor = true;
    }
    return SP_OK;
}

static sp_status parse_v3_array(const cJSON *root, sp_zarr_array_meta *m, sp_err *err) {
    int64_t version;
    if (!int_of(member(root, "zarr_format"), 0, 100, &version) || version != 3) {
        return sp_err_set(err, SP_E_CORRUPT, "\"zarr_format\" of a zarr.json is not 3");
    }
    const cJSON *v = member(root, "node_type");
    if (!string_is(v, "array")) {
        return sp_err_set(err, SP_E_CORRUPT, "the node is not an array (\"node_type\")");
    }
    int n_shape = 0, n_chunks = 0;
    sp_status st =
        int_list(member(root, "shape"), "shape", 1, SP_ZARR_MAX_EXTENT, m->shape, &n_shape, err);
    if (st != SP_OK) {
        return st;
    }
    m->ndim = n_shape;
    const cJSON *grid = member(root, "chunk_grid");
    if (!string_is(member(grid, "name"), "regular")) {
        return grid == NULL ? sp_err_set(err, SP_E_CORRUPT, "\"chunk_grid\" is missing")
                            : sp_err_set(err, SP_E_UNSUPPORTED,
                                         "chunk grids other than \"regular\" are not supported");
    }
    st = int_list(member(codec_config(grid), "chunk_shape"), "chunk_shape", 1, SP_ZARR_MAX_EXTENT,
                  m->file, &n_chunks, err);
    if (st != SP_OK) {
        return st;
    }
    if (n_chunks != n_shape) {
        return sp_err_set(err, SP_E_CORRUPT,
                          "\"chunk_shape\" has %d dimensions but \"shape\" has %d", n_chunks,
                          n_shape);
    }
    memcpy(m->chunk, m->file, sizeof m->chunk);
    if ((st = v3_data_type(member(root, "data_type"), m, err)) != SP_OK ||
        (st = fill_value(member(root, "fill_value"), m, err)) != SP_OK) {
        return st;
    }
    const cJSON *keys = member(root, "chunk_key_encoding");
    m->key_prefix_c = true;
    m->separator = '/';
    if (keys != NULL) {
        if (string_is(member(keys, "name"), "v2")) {
            m->key_prefix_c = false;
            m->separator = '.';
        } else if (!string_is(member(keys, "name"), "default")) {
            return sp_err_set(err, SP_E_UNSUPPORTED, "this chunk_key_encoding is not supported");
        }
        const cJSON *sep = member(codec_config(keys), "separator");
        if (string_is(sep, "/")) {
            m->separator = '/';
        } else if (string_is(sep, ".")) {
            m->separator = '.';
        } else if (!is_absent(sep)) {
            return sp_err_set(err, SP_E_CORRUPT, "the chunk key separator is not \".\" or \"/\"");
        }
    }
    v = member(root, "storage_transformers");
    if (!is_absent(v) && !(cJSON_IsArray(v) && cJSON_GetArraySize(v) == 0)) {
        return sp_err_set(err, SP_E_UNSUPPORTED, "storage transformers are not supported");
    }
    return v3_codec_chain(member(root, "codecs"), false, m, err);
}

sp_status sp_zarr_parse_array(const char *text, size_t len, int zarr_format,
                              const sp_limits *limits, sp_zarr_array_meta *out, sp_err *err) {
    memset(out, 0, sizeof *out);
    cJSON *root;
    sp_status st = parse_json(text, len, limits, &root, err);
    if (st != SP_OK) {
        return st;
    }
    out->zarr_format = zarr_format;
    st = zarr_format == 2 ? parse_v2_array(root, out, err) : parse_v3_array(root, out, err);
    if (st == SP_OK) {
        st = check_sizes(out, limits, err);
    }
    cJSON_Delete(root);
    if (st != SP_OK) {
        memset(out, 0, sizeof *out);
    }
    return st;
}

sp_status sp_zarr_chunk_key(const sp_zarr_array_meta *m, const int64_t *index, char *buf,
                            size_t len, sp_err *err) {
    size_t at = 0;
    int n = 0;
    if (m->key_prefix_c) {
        n = snprintf(buf, len, "c");
        at = n < 0 ? len : (size_t)n;
    }
    for (int d = 0; d < m->ndim && at < len; d++) {
        if (d > 0 || m->key_prefix_c) {
            n = snprintf(buf + at, len - at, "%c%lld", m->separator, (long long)index[d]);
        } else {
            n = snprintf(buf + at, len - at, "%lld", (long long)index[d]);
        }
        at += n < 0 ? len : (size_t)n;
    }
    if (at >= len) {
        if (len > 0) {
            buf[0] = '\0';
        }
        return sp_err_set(err, SP_E_LIMIT, "a chunk key is too long");
    }
    return SP_OK;
}

/* ---- shards ---- */

static uint64_t le64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) {
        v = v << 8 | p[i];
    }
    return v;
}

uint64_t sp_zarr_shard_index_bytes(const sp_zarr_array_meta *m) {
    return m->shard_chunks * 16 + (m->index_crc32c ? 4 : 0);
}

sp_status sp_zarr_shard_index_check(const sp_zarr_array_meta *m, const uint8_t *index,
                                    size_t index_len, uint64_t shard_size, sp_err *err) {
    uint64_t need = sp_zarr_shard_index_bytes(m);
    if (index_len != need || shard_size < need) {
        return sp_err_set(err, SP_E_CORRUPT,
                          "the shard is %llu bytes, too small for its index of %llu bytes",
                          (unsigned long long)shard_size, (unsigned long long)need);
    }
    if (m->index_crc32c) {
        size_t body = (size_t)(need - 4);
        const uint8_t *c = index + body;
        uint32_t stored =
            (uint32_t)c[0] | (uint32_t)c[1] << 8 | (uint32_t)c[2] << 16 | (uint32_t)c[3] << 24;
        uint32_t actual = sp_crc32c(index, body);
        if (stored != actual) {
            return sp_err_set(err, SP_E_CORRUPT,
                              "the shard index checksum does not match (crc32c %08x, stored %08x)",
                              actual, stored);
        }
    }
    return SP_OK;
}

sp_status sp_zarr_shard_entry(const sp_zarr_array_meta *m, const uint8_t *index,
                              uint64_t shard_size, uint64_t which, bool *present, uint64_t *offset,
                              uint64_t *nbytes, sp_err *err) {
    *present = false;
    *offset = *nbytes = 0;
    if (which >= m->shard_chunks) {
        return sp_err_set(err, SP_E_INVALID_ARG, "inner chunk %llu is outside the shard",
                          (unsigned long long)which);
    }
    uint64_t off = le64(index + which * 16), n = le64(index + which * 16 + 8);
    if (off == UINT64_MAX && n == UINT64_MAX) {
        return SP_OK;
    }
    uint64_t index_bytes = sp_zarr_shard_index_bytes(m);
    if (shard_size < index_bytes) {
        return sp_err_set(err, SP_E_CORRUPT, "the shard is too small for its index");
    }
    uint64_t lo = m->index_at_start ? index_bytes : 0;
    uint64_t hi = m->index_at_start ? shard_size : shard_size - index_bytes;
    uint64_t end;
    if (!sp_add_u64(off, n, &end) || off < lo || end > hi) {
        return sp_err_set(err, SP_E_CORRUPT,
                          "the shard index places inner chunk %llu at bytes %llu + %llu, outside "
                          "the shard's data (%llu to %llu)",
                          (unsigned long long)which, (unsigned long long)off, (unsigned long long)n,
                          (unsigned long long)lo, (unsigned long long)hi);
    }
    *present = true;
    *offset = off;
    *nbytes = n;
    return SP_OK;
}

/* ---- groups ---- */

bool sp_zarr_path_is_safe(const char *path) {
    if (path == NULL || path[0] == '\0' || path[0] == '/') {
        return false;
    }
    const char *p = path;
    while (*p) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.')) {
            return false;
        }
        for (size_t i = 0; i < n; i++) {
            if ((unsigned char)p[i] < 0x20 || p[i] == '\\' || p[i] == 0x7F) {
                return false;
            }
        }
        p += n;
        if (*p == '/') {
            p++;
            if (*p == '\0') {
                return false; /* a trailing slash: an empty last component */
            }
        }
    }
    return true;
}

/* Micrometres per unit of an OME-NGFF axis unit (UDUNITS-2 names), 0 when not a length. */
static double um_per_unit(const char *unit) {
    static const struct {
        const char *name;
        double um;
    } UNITS[] = {
        {"micrometer", 1},   {"micrometre", 1},   {"micron", 1},       {"um", 1},
        {"\xC2\xB5m", 1},    {"\xCE\xBCm", 1},    {"millimeter", 1e3}, {"millimetre", 1e3},
        {"mm", 1e3},         {"centimeter", 1e4}, {"centimetre", 1e4}, {"cm", 1e4},
        {"meter", 1e6},      {"metre", 1e6},      {"m", 1e6},          {"nanometer", 1e-3},
        {"nanometre", 1e-3}, {"nm", 1e-3},        {"angstrom", 1e-4},
    };
    for (size_t i = 0; unit != NULL && i < sizeof UNITS / sizeof *UNITS; i++) {
        if (strcmp(unit, UNITS[i].name) == 0) {
            return UNITS[i].um;
        }
    }
    return 0;
}

static sp_status dup_string(const char *s, char **out, sp_err *err) {
    *out = strdup(s);
    return *out ? SP_OK : sp_err_set(err, SP_E_NOMEM, "out of memory reading Zarr attributes");
}

static sp_status parse_axes(const cJSON *axes, sp_zarr_group_meta *g, sp_err *err) {
    static const char ROLE_NAMES[] = "tczyx";
    if (is_absent(axes)) {
        /* OME-NGFF 0.1 and 0.2: always five dimensions, t, c, z, y, x. */
        g->ndim = 5;
        for (int d = 0; d < 5; d++) {
            g->axes[d] = (sp_zarr_axis)d;
        }
    } else {
        if (!cJSON_IsArray(axes) || cJSON_GetArraySize(axes) == 0) {
            return sp_err_set(err, SP_E_CORRUPT, "multiscales \"axes\" is not a non-empty list");
        }
        if (cJSON_GetArraySize(axes) > SP_ZARR_MAX_DIMS) {
            return sp_err_set(err, SP_E_UNSUPPORTED,
                              "%d axes; slidepipe reads at most t, c, z, y, x",
                              cJSON_GetArraySize(axes));
        }
        int d = 0;
        for (const cJSON *a = axes->child; a != NULL; a = a->next, d++) {
            /* 0.3 lists names; 0.4 and later objects with name, type and unit. */
            const char *name = cJSON_IsString(a) ? string_of(a) : string_of(member(a, "name"));
            const char *type = string_of(member(a, "type"));
            if (name == NULL) {
                return sp_err_set(err, SP_E_CORRUPT, "axis %d has no name", d);
            }
            const char *role = strlen(name) == 1 ? strchr(ROLE_NAMES, name[0]) : NULL;
            if (role == NULL && type != NULL) {
                role = strcmp(type, "channel") == 0 ? ROLE_NAMES + 1
                       : strcmp(type, "time") == 0  ? ROLE_NAMES
                                                    : NULL;
            }
            if (role == NULL || *role == '\0') {
                return sp_err_set(err, SP_E_UNSUPPORTED,
                                  "axis \"%.64s\" is not supported; slidepipe reads axes t, c, z, "
                                  "y and x",
                                  name);
            }
            g->axes[d] = (sp_zarr_axis)(role - ROLE_NAMES);
            for (int k = 0; k < d; k++) {
                if (g->axes[k] == g->axes[d]) {
                    return sp_err_set(err, SP_E_CORRUPT, "axis \"%.64s\" appears twice", name);
                }
            }
            g->um_per_unit[d] = um_per_unit(string_of(member(a, "unit")));
        }
        g->ndim = d;
    }
    bool y = false, x = false;
    size_t at = 0;
    for (int d = 0; d < g->ndim; d++) {
        y |= g->axes[d] == SP_ZARR_AXIS_Y;
        x |= g->axes[d] == SP_ZARR_AXIS_X;
        at += (size_t)snprintf(g->axes_text + at, sizeof g->axes_text - at, "%s%c", d ? "," : "",
                               ROLE_NAMES[g->axes[d]]);
    }
    if (!y || !x) {
        return sp_err_set(err, SP_E_UNSUPPORTED, "the image has no y and x axes (axes %s)",
                          g->axes_text);
    }
    return SP_OK;
}

/* The "scale" entry of a coordinateTransformations list, if it has one with ndim numbers. */
static sp_status find_scale(const cJSON *transforms, int ndim, bool *found, double *scale,
                            sp_err *err) {
    *found = false;
    if (is_absent(transforms)) {
        return SP_OK;
    }
    if (!cJSON_IsArray(transforms)) {
        return sp_err_set(err, SP_E_CORRUPT, "\"coordinateTransformations\" is not a list");
    }
    for (const cJSON *t = transforms->child; t != NULL; t = t->next) {
        if (!string_is(member(t, "type"), "scale")) {
            continue;
        }
        const cJSON *s = member(t, "scale");
        if (s == NULL) {
            return SP_OK; /* a scale kept in a file ("path"): no MPP */
        }
        if (!cJSON_IsArray(s) || cJSON_GetArraySize(s) != ndim) {
            return sp_err_set(err, SP_E_CORRUPT,
                              "a \"scale\" transformation does not have one number per axis");
        }
        int d = 0;
        for (const cJSON *e = s->child; e != NULL; e = e->next, d++) {
            if (!cJSON_IsNumber(e) || !isfinite(e->valuedouble) || !(e->valuedouble > 0)) {
                return sp_err_set(err, SP_E_CORRUPT,
                                  "a \"scale\" transformation has a value that is not a positive "
                                  "number");
            }
            scale[d] = e->valuedouble;
        }
        *found = true;
        return SP_OK;
    }
    return SP_OK;
}

static sp_status parse_datasets(const cJSON *ms, sp_zarr_group_meta *g, sp_err *err) {
    const cJSON *datasets = member(ms, "datasets");
    if (!cJSON_IsArray(datasets) || cJSON_GetArraySize(datasets) == 0) {
        return sp_err_set(err, SP_E_CORRUPT, "multiscales \"datasets\" is not a non-empty list");
    }
    int n = cJSON_GetArraySize(datasets);
    if (n > SP_ZARR_MAX_DATASETS) {
        return sp_err_set(err, SP_E_LIMIT, "%d datasets; slidepipe reads at most %d levels", n,
                          SP_ZARR_MAX_DATASETS);
    }
    double global[SP_ZARR_MAX_DIMS];
    bool has_global;
    sp_status st =
        find_scale(member(ms, "coordinateTransformations"), g->ndim, &has_global, global, err);
    if (st != SP_OK) {
        return st;
    }
    g->datasets = calloc((size_t)n, sizeof *g->datasets);
    if (g->datasets == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory reading Zarr attributes");
    }
    for (const cJSON *ds = datasets->child; ds != NULL; ds = ds->next) {
        sp_zarr_dataset *d = &g->datasets[g->n_datasets];
        const char *path = string_of(member(ds, "path"));
        if (path == NULL) {
            return sp_err_set(err, SP_E_CORRUPT, "dataset %d has no \"path\"", g->n_datasets);
        }
        if (!sp_zarr_path_is_safe(path)) {
            return sp_err_set(err, SP_E_CORRUPT,
                              "dataset path \"%.64s\" is not a relative path inside the store",
                              path);
        }
        if ((st = dup_string(path, &d->path, err)) != SP_OK) {
            return st;
        }
        g->n_datasets++;
        st = find_scale(member(ds, "coordinateTransformations"), g->ndim, &d->has_scale, d->scale,
                        err);
        if (st != SP_OK) {
            return st;
        }
        for (int k = 0; d->has_scale && has_global && k < g->ndim; k++) {
            d->scale[k] *= global[k];
        }
    }
    return SP_OK;
}

/* "slidepipe": {"properties": {key: "value"}, "associated": {name: {path, width, height}},
 * "pixel_hash": HEX}. Entries that do not have this shape are left out: they are extras, and the
 * slide itself does not depend on them. */
static sp_status parse_slidepipe(const cJSON *sp, sp_zarr_group_meta *g, sp_err *err) {
    const char *pixels = string_of(member(sp, "pixel_hash"));
    if (pixels != NULL && strlen(pixels) == 64 && strspn(pixels, "0123456789abcdef") == 64) {
        memcpy(g->pixel_hash, pixels, 65);
    }
    const cJSON *props = member(sp, "properties");
    int n = cJSON_IsObject(props) ? cJSON_GetArraySize(props) : 0;
    if (n > 0) {
        g->properties = calloc((size_t)n, sizeof *g->properties);
        if (g->properties == NULL) {
            return sp_err_set(err, SP_E_NOMEM, "out of memory reading Zarr attributes");
        }
        for (const cJSON *p = props->child; p != NULL; p = p->next) {
            const char *value = string_of(p);
            if (value == NULL || p->string == NULL || p->string[0] == '\0') {
                continue;
            }
            sp_zarr_property *out = &g->properties[g->n_properties];
            sp_status st = dup_string(p->string, &out->key, err);
            if (st == SP_OK) {
                st = dup_string(value, &out->value, err);
            }
            if (st != SP_OK) {
                free(out->key);
                out->key = NULL;
                return st;
            }
            g->n_properties++;
        }
    }
    const cJSON *assoc = member(sp, "associated");
    n = cJSON_IsObject(assoc) ? cJSON_GetArraySize(assoc) : 0;
    if (n > 0) {
        if (n > SP_ZARR_MAX_ASSOCIATED) {
            n = SP_ZARR_MAX_ASSOCIATED;
        }
        g->associated = calloc((size_t)n, sizeof *g->associated);
        if (g->associated == NULL) {
            return sp_err_set(err, SP_E_NOMEM, "out of memory reading Zarr attributes");
        }
        for (const cJSON *a = assoc->child; a != NULL && g->n_associated < n; a = a->next) {
            const char *path = string_of(member(a, "path"));
            int64_t w, h;
            size_t name_len = a->string ? strlen(a->string) : 0;
            if (name_len == 0 || name_len > SP_ZARR_MAX_NAME || !sp_zarr_path_is_safe(path) ||
                !int_of(member(a, "width"), 1, SP_ZARR_MAX_EXTENT, &w) ||
                !int_of(member(a, "height"), 1, SP_ZARR_MAX_EXTENT, &h)) {
                continue;
            }
            sp_zarr_associated_meta *out = &g->associated[g->n_associated];
            sp_status st = dup_string(a->string, &out->name, err);
            if (st == SP_OK) {
                st = dup_string(path, &out->path, err);
            }
            if (st != SP_OK) {
                free(out->name);
                out->name = NULL;
                return st;
            }
            out->width = w;
            out->height = h;
            g->n_associated++;
        }
    }
    return SP_OK;
}

static sp_status parse_group(const cJSON *root, sp_zarr_group_meta *g, sp_err *err) {
    const cJSON *attrs = root;
    if (g->zarr_format == 3) {
        int64_t version;
        if (!int_of(member(root, "zarr_format"), 0, 100, &version) || version != 3) {
            return sp_err_set(err, SP_E_CORRUPT, "\"zarr_format\" of a zarr.json is not 3");
        }
        if (string_is(member(root, "node_type"), "array")) {
            return sp_err_set(err, SP_E_NOT_A_SLIDE,
                              "not a recognised slide: a Zarr array, not an OME-Zarr image group "
                              "(open the group that holds it)");
        }
        if (!string_is(member(root, "node_type"), "group")) {
            return sp_err_set(err, SP_E_CORRUPT, "\"node_type\" is not \"group\" or \"array\"");
        }
        attrs = member(root, "attributes");
    }
    /* OME-NGFF 0.5 keeps its metadata under "ome"; 0.4 and earlier at the top. */
    const cJSON *ome = member(attrs, "ome");
    if (!cJSON_IsObject(ome)) {
        ome = attrs;
    }
    const cJSON *ms = member(ome, "multiscales");
    if (ms == NULL) {
        if (member(ome, "bioformats2raw.layout") != NULL) {
            g->redirect = true;
            return SP_OK;
        }
        if (member(ome, "plate") != NULL || member(ome, "well") != NULL) {
            return sp_err_set(err, SP_E_UNSUPPORTED,
                              "an OME-Zarr plate or well (high-content screening) is not a "
                              "single image; open one of its image groups");
        }
        return sp_err_set(err, SP_E_NOT_A_SLIDE,
                          "not a recognised slide: a Zarr v%d group without OME-NGFF "
                          "\"multiscales\" metadata",
                          g->zarr_format);
    }
    if (!cJSON_IsArray(ms) || !cJSON_IsObject(ms->child)) {
        return sp_err_set(err, SP_E_CORRUPT, "\"multiscales\" is not a list of objects");
    }
    ms = ms->child; /* the first multiscale is the image; others are alternatives */
    const char *version = string_of(member(ome, "version"));
    if (version == NULL) {
        version = string_of(member(ms, "version"));
    }
    const char *name = string_of(member(ms, "name"));
    sp_status st = SP_OK;
    if (version != NULL) {
        st = dup_string(version, &g->ome_version, err);
    }
    if (st == SP_OK && name != NULL) {
        st = dup_string(name, &g->name, err);
    }
    if (st == SP_OK) {
        st = parse_axes(member(ms, "axes"), g, err);
    }
    if (st == SP_OK) {
        st = parse_datasets(ms, g, err);
    }
    const cJSON *sp = member(attrs, "slidepipe");
    if (st == SP_OK && cJSON_IsObject(sp)) {
        st = parse_slidepipe(sp, g, err);
    }
    return st;
}

sp_status sp_zarr_parse_group(const char *text, size_t len, int zarr_format,
                              const sp_limits *limits, sp_zarr_group_meta *out, sp_err *err) {
    memset(out, 0, sizeof *out);
    cJSON *root;
    sp_status st = parse_json(text, len, limits, &root, err);
    if (st != SP_OK) {
        return st;
    }
    out->zarr_format = zarr_format;
    st = parse_group(root, out, err);
    cJSON_Delete(root);
    if (st != SP_OK) {
        sp_zarr_group_free(out);
    }
    return st;
}

void sp_zarr_group_free(sp_zarr_group_meta *g) {
    if (g == NULL) {
        return;
    }
    free(g->ome_version);
    free(g->name);
    for (int32_t i = 0; i < g->n_datasets; i++) {
        free(g->datasets[i].path);
    }
    free(g->datasets);
    for (int32_t i = 0; i < g->n_properties; i++) {
        free(g->properties[i].key);
        free(g->properties[i].value);
    }
    free(g->properties);
    for (int32_t i = 0; i < g->n_associated; i++) {
        free(g->associated[i].name);
        free(g->associated[i].path);
    }
    free(g->associated);
    memset(g, 0, sizeof *g);
}
