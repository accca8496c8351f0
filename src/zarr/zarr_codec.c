/* zarr_codec.c — the chunk codecs of Zarr stores (see zarr_codec.h): zstd through libzstd,
 * blosc through c-blosc 1, gzip through libdeflate, and none, with their numcodecs (Zarr v2) and
 * Zarr v3 metadata. zstd compresses with the calling thread's own context (codecs/zstd.c); the
 * other compressors make and free their own context per call, and blosc runs with one internal
 * thread through its _ctx entry points. So no state is shared between threads, the output bytes do
 * not depend on how many threads call us, and any thread may encode or decode at any time.
 * Decoders take their input as hostile: the decoded size must be exactly the chunk size, and for
 * blosc the header is validated against the buffer before blosc touches the payload.
 */
#include "base/strings.h"
#include "codecs/codec.h"
#include "zarr/zarr_codec.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <blosc.h>
#include <libdeflate.h>
#include <zstd.h>

/* The codecs, in sp_zarr_codec order: name, levels, and what level 0 means (zstd's 1, see
 * zarr_codec.h). */
static const struct {
    const char *name;
    int min, max, fallback;
} CODECS[] = {
    [SP_ZARR_CODEC_ZSTD] = {"zstd", 1, 22, 1},
    [SP_ZARR_CODEC_BLOSC_LZ4] = {"blosc-lz4", 1, 9, 5},
    [SP_ZARR_CODEC_BLOSC_ZSTD] = {"blosc-zstd", 1, 9, 5},
    [SP_ZARR_CODEC_GZIP] = {"gzip", 1, 9, 6},
    [SP_ZARR_CODEC_NONE] = {"none", 0, 0, 0},
};
enum { N_CODECS = sizeof CODECS / sizeof CODECS[0] };

static bool known(sp_zarr_codec codec) {
    return (unsigned)codec < N_CODECS;
}

const char *sp_zarr_codec_name(sp_zarr_codec codec) {
    return known(codec) ? CODECS[codec].name : NULL;
}

sp_status sp_zarr_codec_from_name(const char *name, sp_zarr_codec *codec) {
    for (unsigned i = 0; name != NULL && i < N_CODECS; i++) {
        if (strcmp(name, CODECS[i].name) == 0) {
            *codec = (sp_zarr_codec)i;
            return SP_OK;
        }
    }
    return SP_E_INVALID_ARG;
}

sp_status sp_zarr_codec_levels(sp_zarr_codec codec, int *min, int *max, int *fallback) {
    if (!known(codec)) {
        return SP_E_INVALID_ARG;
    }
    if (min != NULL) {
        *min = CODECS[codec].min;
    }
    if (max != NULL) {
        *max = CODECS[codec].max;
    }
    if (fallback != NULL) {
        *fallback = CODECS[codec].fallback;
    }
    return SP_OK;
}

int sp_zarr_codec_default_level(sp_zarr_codec codec) {
    return known(codec) ? CODECS[codec].fallback : 0;
}

/* The level actually used: 0 means the default; out-of-range levels are refused so that the
 * metadata never names a level the encoder silently clamped. */
static sp_status resolve_level(sp_zarr_codec codec, int level, int *out, sp_err *err) {
    if (!known(codec)) {
        return sp_err_set(err, SP_E_INVALID_ARG, "unknown Zarr codec %d", (int)codec);
    }
    if (codec == SP_ZARR_CODEC_NONE) { /* takes no level: whatever is asked means none */
        *out = 0;
        return SP_OK;
    }
    int lo = CODECS[codec].min, hi = CODECS[codec].max;
    level = level == 0 ? CODECS[codec].fallback : level;
    if (level < lo || level > hi) {
        return sp_err_set(err, SP_E_INVALID_ARG, "%s level %d out of range %d..%d",
                          CODECS[codec].name, level, lo, hi);
    }
    *out = level;
    return SP_OK;
}

sp_status sp_zarr_codec_check(sp_zarr_codec codec, int level, sp_err *err) {
    int lv = 0;
    return resolve_level(codec, level, &lv, err);
}

static sp_status encode_zstd(int level, const void *in, size_t len, uint8_t **out, size_t *out_len,
                             sp_err *err) {
    size_t cap = ZSTD_compressBound(len);
    if (ZSTD_isError(cap)) {
        return sp_err_set(err, SP_E_LIMIT, "zstd: chunk of %zu bytes too large", len);
    }
    uint8_t *buf = malloc(cap ? cap : 1);
    if (buf == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "zstd: out of memory for %zu bytes", cap);
    }
    ZSTD_CCtx *cctx = sp_zstd_thread_cctx();
    if (cctx == NULL) {
        free(buf);
        return sp_err_set(err, SP_E_NOMEM, "zstd: out of memory for the compressor");
    }
    /* ZSTD_compressCCtx writes the content size into the frame header, which numcodecs needs, and
     * sets every parameter from the level, so a reused context gives the same bytes as a new one. */
    size_t n = ZSTD_compressCCtx(cctx, buf, cap, in, len, level);
    if (ZSTD_isError(n)) {
        free(buf);
        return sp_err_set(err, SP_E_INVALID_ARG, "zstd: %s", ZSTD_getErrorName(n));
    }
    *out = buf;
    *out_len = n;
    return SP_OK;
}

static sp_status encode_blosc(const char *cname, int level, size_t typesize, const void *in,
                              size_t len, uint8_t **out, size_t *out_len, sp_err *err) {
    if (len > (size_t)BLOSC_MAX_BUFFERSIZE) {
        return sp_err_set(err, SP_E_LIMIT, "blosc: chunk of %zu bytes above blosc's limit", len);
    }
    if (typesize == 0 || typesize > 255) {
        return sp_err_set(err, SP_E_INVALID_ARG, "blosc: bad element size %zu", typesize);
    }
    size_t cap = len + BLOSC_MAX_OVERHEAD;
    uint8_t *buf = malloc(cap);
    if (buf == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "blosc: out of memory for %zu bytes", cap);
    }
    int n = blosc_compress_ctx(level, BLOSC_SHUFFLE, typesize, len, in, buf, cap, cname, 0, 1);
    if (n <= 0) {
        free(buf);
        return sp_err_set(err, SP_E_UNSUPPORTED, "blosc: compressing with %s failed (%d)", cname,
                          n);
    }
    *out = buf;
    *out_len = (size_t)n;
    return SP_OK;
}

static sp_status encode_gzip(int level, const void *in, size_t len, uint8_t **out, size_t *out_len,
                             sp_err *err) {
    struct libdeflate_compressor *c = libdeflate_alloc_compressor(level);
    if (c == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "gzip: out of memory for the compressor");
    }
    size_t cap = libdeflate_gzip_compress_bound(c, len);
    uint8_t *buf = malloc(cap ? cap : 1);
    if (buf == NULL) {
        libdeflate_free_compressor(c);
        return sp_err_set(err, SP_E_NOMEM, "gzip: out of memory for %zu bytes", cap);
    }
    /* libdeflate writes mtime 0 and no file name, so the member is a function of the input. */
    size_t n = libdeflate_gzip_compress(c, in, len, buf, cap);
    libdeflate_free_compressor(c);
    if (n == 0) {
        free(buf);
        return sp_err_set(err, SP_E_INVALID_ARG, "gzip: compression failed");
    }
    *out = buf;
    *out_len = n;
    return SP_OK;
}

sp_status sp_zarr_encode(sp_zarr_codec codec, int level, size_t typesize, const void *in,
                         size_t len, uint8_t **out, size_t *out_len, sp_err *err) {
    if (out == NULL || out_len == NULL) {
        return sp_err_set(err, SP_E_INVALID_ARG, "Zarr encode: null output");
    }
    *out = NULL;
    *out_len = 0;
    if (in == NULL && len > 0) {
        return sp_err_set(err, SP_E_INVALID_ARG, "Zarr encode: null input");
    }
    int lv = 0;
    sp_status st = resolve_level(codec, level, &lv, err);
    if (st != SP_OK) {
        return st;
    }
    switch (codec) {
    case SP_ZARR_CODEC_ZSTD: return encode_zstd(lv, in, len, out, out_len, err);
    case SP_ZARR_CODEC_BLOSC_LZ4:
        return encode_blosc("lz4", lv, typesize, in, len, out, out_len, err);
    case SP_ZARR_CODEC_BLOSC_ZSTD:
        return encode_blosc("zstd", lv, typesize, in, len, out, out_len, err);
    case SP_ZARR_CODEC_GZIP: return encode_gzip(lv, in, len, out, out_len, err);
    case SP_ZARR_CODEC_NONE: {
        uint8_t *buf = malloc(len ? len : 1);
        if (buf == NULL) {
            return sp_err_set(err, SP_E_NOMEM, "out of memory for a %zu-byte chunk", len);
        }
        if (len > 0) {
            memcpy(buf, in, len);
        }
        *out = buf;
        *out_len = len;
        return SP_OK;
    }
    }
    return sp_err_set(err, SP_E_INVALID_ARG, "unknown Zarr codec %d", (int)codec);
}

static sp_status decode_zstd(const uint8_t *in, size_t in_len, void *out, size_t out_len,
                             sp_err *err) {
    size_t written = 0;
    sp_status st = sp_zstd_decode(in, in_len, out, out_len, &written, err);
    if (st == SP_OK && written != out_len) {
        return sp_err_set(err, SP_E_CORRUPT, "zstd chunk decodes to %zu bytes, expected %zu",
                          written, out_len);
    }
    return st;
}

static sp_status decode_blosc(const uint8_t *in, size_t in_len, void *out, size_t out_len,
                              sp_err *err) {
    size_t nbytes = 0;
    /* Validation checks the header's sizes against in_len, which makes decompression safe. */
    if (in_len < BLOSC_MIN_HEADER_LENGTH || blosc_cbuffer_validate(in, in_len, &nbytes) != 0) {
        return sp_err_set(err, SP_E_CORRUPT, "blosc chunk: bad header (%zu bytes)", in_len);
    }
    if (nbytes != out_len) {
        return sp_err_set(err, SP_E_CORRUPT, "blosc chunk holds %zu bytes, expected %zu", nbytes,
                          out_len);
    }
    if (out_len == 0) {
        return SP_OK;
    }
    int n = blosc_decompress_ctx(in, out, out_len, 1);
    if (n < 0 || (size_t)n != out_len) {
        return sp_err_set(err, SP_E_CORRUPT, "blosc chunk: decompression failed (%d)", n);
    }
    return SP_OK;
}

static sp_status decode_gzip(const uint8_t *in, size_t in_len, void *out, size_t out_len,
                             sp_err *err) {
    struct libdeflate_decompressor *d = libdeflate_alloc_decompressor();
    if (d == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "gzip: out of memory for the decoder");
    }
    size_t got = 0;
    enum libdeflate_result r = libdeflate_gzip_decompress(d, in, in_len, out, out_len, &got);
    libdeflate_free_decompressor(d);
    if (r == LIBDEFLATE_INSUFFICIENT_SPACE) {
        return sp_err_set(err, SP_E_CORRUPT, "gzip chunk decodes to more than %zu bytes", out_len);
    }
    if (r != LIBDEFLATE_SUCCESS) {
        return sp_err_set(err, SP_E_CORRUPT, "gzip chunk: bad data");
    }
    if (got != out_len) {
        return sp_err_set(err, SP_E_CORRUPT, "gzip chunk decodes to %zu bytes, expected %zu", got,
                          out_len);
    }
    return SP_OK;
}

sp_status sp_zarr_decode(sp_zarr_codec codec, const uint8_t *in, size_t in_len, void *out,
                         size_t out_len, sp_err *err) {
    if ((in == NULL && in_len > 0) || (out == NULL && out_len > 0)) {
        return sp_err_set(err, SP_E_INVALID_ARG, "Zarr decode: null buffer");
    }
    sp_status st;
    switch (codec) {
    case SP_ZARR_CODEC_ZSTD: st = decode_zstd(in, in_len, out, out_len, err); break;
    case SP_ZARR_CODEC_BLOSC_LZ4:
    case SP_ZARR_CODEC_BLOSC_ZSTD: st = decode_blosc(in, in_len, out, out_len, err); break;
    case SP_ZARR_CODEC_GZIP: st = decode_gzip(in, in_len, out, out_len, err); break;
    case SP_ZARR_CODEC_NONE:
        if (in_len != out_len) {
            st = sp_err_set(err, SP_E_CORRUPT, "uncompressed chunk of %zu bytes, expected %zu",
                            in_len, out_len);
        } else {
            if (out_len > 0) {
                memcpy(out, in, out_len);
            }
            st = SP_OK;
        }
        break;
    default: return sp_err_set(err, SP_E_INVALID_ARG, "unknown Zarr codec %d", (int)codec);
    }
    if (st != SP_OK && out_len > 0) {
        memset(out, 0, out_len); /* never hand back half a chunk */
    }
    return st;
}


/* Levels out of range fall back to the default here; sp_zarr_encode refuses them, so a store
 * never reaches this with one. */
static int level_or_default(sp_zarr_codec codec, int level) {
    int lv = 0;
    if (resolve_level(codec, level, &lv, NULL) != SP_OK) {
        lv = sp_zarr_codec_default_level(codec);
    }
    return lv;
}

char *sp_zarr_codec_v2_json(sp_zarr_codec codec, int level, size_t typesize) {
    (void)typesize; /* numcodecs Blosc takes the element size from the array's dtype */
    int lv = level_or_default(codec, level);
    switch (codec) {
    case SP_ZARR_CODEC_ZSTD: return sp_strdup_printf("{\"id\": \"zstd\", \"level\": %d}", lv);
    case SP_ZARR_CODEC_BLOSC_LZ4:
    case SP_ZARR_CODEC_BLOSC_ZSTD:
        return sp_strdup_printf("{\"id\": \"blosc\", \"cname\": \"%s\", \"clevel\": %d, \"shuffle\": 1, "
                          "\"blocksize\": 0}",
                          codec == SP_ZARR_CODEC_BLOSC_LZ4 ? "lz4" : "zstd", lv);
    case SP_ZARR_CODEC_GZIP: return sp_strdup_printf("{\"id\": \"gzip\", \"level\": %d}", lv);
    case SP_ZARR_CODEC_NONE: return sp_strdup_printf("null");
    }
    return NULL;
}

char *sp_zarr_codec_v3_json(sp_zarr_codec codec, int level, size_t typesize) {
    int lv = level_or_default(codec, level);
    switch (codec) {
    case SP_ZARR_CODEC_ZSTD:
        return sp_strdup_printf(
            "{\"name\": \"zstd\", \"configuration\": {\"level\": %d, \"checksum\": false}}", lv);
    case SP_ZARR_CODEC_BLOSC_LZ4:
    case SP_ZARR_CODEC_BLOSC_ZSTD:
        return sp_strdup_printf("{\"name\": \"blosc\", \"configuration\": {\"cname\": \"%s\", "
                          "\"clevel\": %d, \"shuffle\": \"shuffle\", \"typesize\": %zu, "
                          "\"blocksize\": 0}}",
                          codec == SP_ZARR_CODEC_BLOSC_LZ4 ? "lz4" : "zstd", lv, typesize);
    case SP_ZARR_CODEC_GZIP:
        return sp_strdup_printf("{\"name\": \"gzip\", \"configuration\": {\"level\": %d}}", lv);
    case SP_ZARR_CODEC_NONE: return NULL;
    }
    return NULL;
}

static sp_status blosc_from_cname(const char *cname, sp_zarr_codec *out, sp_err *err) {
    if (cname != NULL && strcmp(cname, "lz4") == 0) {
        *out = SP_ZARR_CODEC_BLOSC_LZ4;
        return SP_OK;
    }
    if (cname != NULL && strcmp(cname, "zstd") == 0) {
        *out = SP_ZARR_CODEC_BLOSC_ZSTD;
        return SP_OK;
    }
    return sp_err_set(err, SP_E_UNSUPPORTED, "blosc with cname \"%s\" is not supported",
                      cname ? cname : "(none)");
}

sp_status sp_zarr_codec_from_v2(const char *id, const char *cname, sp_zarr_codec *out,
                                sp_err *err) {
    if (id == NULL) { /* "compressor": null */
        *out = SP_ZARR_CODEC_NONE;
        return SP_OK;
    }
    if (strcmp(id, "zstd") == 0) {
        *out = SP_ZARR_CODEC_ZSTD;
        return SP_OK;
    }
    if (strcmp(id, "gzip") == 0) {
        *out = SP_ZARR_CODEC_GZIP;
        return SP_OK;
    }
    if (strcmp(id, "blosc") == 0) {
        return blosc_from_cname(cname, out, err);
    }
    return sp_err_set(err, SP_E_UNSUPPORTED, "Zarr v2 compressor \"%s\" is not supported", id);
}

sp_status sp_zarr_codec_from_v3(const char *name, const char *cname, sp_zarr_codec *out,
                                sp_err *err) {
    if (name == NULL) { /* only the bytes codec */
        *out = SP_ZARR_CODEC_NONE;
        return SP_OK;
    }
    if (strcmp(name, "zstd") == 0) {
        *out = SP_ZARR_CODEC_ZSTD;
        return SP_OK;
    }
    if (strcmp(name, "gzip") == 0) {
        *out = SP_ZARR_CODEC_GZIP;
        return SP_OK;
    }
    if (strcmp(name, "blosc") == 0) {
        return blosc_from_cname(cname, out, err);
    }
    return sp_err_set(err, SP_E_UNSUPPORTED, "Zarr v3 codec \"%s\" is not supported", name);
}
