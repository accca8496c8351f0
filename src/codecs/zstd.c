/* zstd.c — Zstandard chunks (TIFF compression 50000, Zarr's zstd), and the zstd contexts of
 * each thread.
 *
 * A chunk is one or more whole frames decoded in one call straight into the caller's buffer, so
 * zstd needs no window buffer and its state stays a fixed size whatever the frame header claims.
 * Each thread keeps one decompression and one compression context, made on first use and freed
 * when the thread ends: a new context per chunk would allocate (and, to compress, clear) hundreds
 * of kilobytes each time. zstd resets a context's state at the start of every frame, so the bytes
 * produced never depend on what the context did before, nor on which thread holds it.
 */
#include "codecs/codec.h"

#include <pthread.h>
#include <stdlib.h>
#include <zstd.h>
#include <zstd_errors.h>

typedef struct zstd_contexts {
    ZSTD_DCtx *dctx;
    ZSTD_CCtx *cctx;
} zstd_contexts;

static pthread_key_t contexts_key;
static pthread_once_t contexts_once = PTHREAD_ONCE_INIT;
static bool contexts_key_ok;

static void contexts_free(void *p) {
    zstd_contexts *c = p;
    ZSTD_freeDCtx(c->dctx);
    ZSTD_freeCCtx(c->cctx);
    free(c);
}

static void contexts_key_make(void) {
    contexts_key_ok = pthread_key_create(&contexts_key, contexts_free) == 0;
}

/* This thread's contexts (members NULL until first made); NULL when out of memory. */
static zstd_contexts *thread_contexts(void) {
    pthread_once(&contexts_once, contexts_key_make);
    if (!contexts_key_ok) {
        return NULL;
    }
    zstd_contexts *c = pthread_getspecific(contexts_key);
    if (c == NULL && (c = calloc(1, sizeof *c)) != NULL &&
        pthread_setspecific(contexts_key, c) != 0) {
        free(c);
        c = NULL;
    }
    return c;
}

ZSTD_CCtx *sp_zstd_thread_cctx(void) {
    zstd_contexts *c = thread_contexts();
    if (c != NULL && c->cctx == NULL) {
        c->cctx = ZSTD_createCCtx();
    }
    return c != NULL ? c->cctx : NULL;
}

static ZSTD_DCtx *thread_dctx(void) {
    zstd_contexts *c = thread_contexts();
    if (c != NULL && c->dctx == NULL) {
        c->dctx = ZSTD_createDCtx();
    }
    return c != NULL ? c->dctx : NULL;
}

sp_status sp_zstd_decode(const uint8_t *in, size_t in_len, uint8_t *out, size_t out_len,
                         size_t *written, sp_err *err) {
    if (written != NULL) {
        *written = 0;
    }
    if ((in == NULL && in_len > 0) || (out == NULL && out_len > 0) || written == NULL) {
        return sp_err_set(err, SP_E_INVALID_ARG, "Zstandard: null argument");
    }
    if (in_len == 0) {
        /* zstd reads no input as zero frames, but every TIFF chunk holds at least one */
        return sp_err_set(err, SP_E_CORRUPT, "Zstandard: empty chunk");
    }
    ZSTD_DCtx *dctx = thread_dctx();
    if (dctx == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "Zstandard: out of memory for the decoder");
    }
    size_t r = ZSTD_decompressDCtx(dctx, out, out_len, in, in_len);
    if (ZSTD_isError(r)) {
        if (ZSTD_getErrorCode(r) == ZSTD_error_dstSize_tooSmall) {
            return sp_err_set(err, SP_E_CORRUPT,
                              "Zstandard: chunk decodes to more than the expected %zu bytes",
                              out_len);
        }
        return sp_err_set(err, SP_E_CORRUPT, "Zstandard: %s", ZSTD_getErrorName(r));
    }
    *written = r;
    return SP_OK;
}
