/* zstd.c — Zstandard chunks (TIFF compression 50000).
 *
 * A chunk is one or more whole frames decoded in one call straight into the caller's buffer, so
 * zstd needs no window buffer and its state stays a fixed size whatever the frame header claims.
 * The context is made and freed per call, keeping the codec free of hidden state.
 */
#include "codecs/codec.h"

#include <zstd.h>
#include <zstd_errors.h>

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
    ZSTD_DCtx *dctx = ZSTD_createDCtx();
    if (dctx == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "Zstandard: out of memory for the decoder");
    }
    size_t r = ZSTD_decompressDCtx(dctx, out, out_len, in, in_len);
    ZSTD_freeDCtx(dctx);
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
