/* deflate.c — zlib-wrapped Deflate chunks (TIFF compressions 8 and 32946) through libdeflate.
 *
 * libdeflate decompresses a whole buffer in one call, which is how TIFF stores chunks. Its
 * decompressor state is a few kilobytes and costs little next to the chunk, so each call makes
 * and frees its own: no global or thread-local state to leak when threads come and go.
 */
#include "codecs/codec.h"

#include <libdeflate.h>

sp_status sp_deflate_decode(const uint8_t *in, size_t in_len, uint8_t *out, size_t out_len,
                            size_t *written, sp_err *err) {
    if (written != NULL) {
        *written = 0;
    }
    if ((in == NULL && in_len > 0) || (out == NULL && out_len > 0) || written == NULL) {
        return sp_err_set(err, SP_E_INVALID_ARG, "Deflate: null argument");
    }
    struct libdeflate_decompressor *d = libdeflate_alloc_decompressor();
    if (d == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "Deflate: out of memory for the decompressor");
    }
    /* Passing actual_out lets a chunk decode to less than out_len (a short last strip) */
    size_t actual = 0;
    enum libdeflate_result r = libdeflate_zlib_decompress(d, in, in_len, out, out_len, &actual);
    libdeflate_free_decompressor(d);
    switch (r) {
    case LIBDEFLATE_SUCCESS:
        *written = actual;
        return SP_OK;
    case LIBDEFLATE_INSUFFICIENT_SPACE:
        return sp_err_set(err, SP_E_CORRUPT,
                          "Deflate: chunk decodes to more than the expected %zu bytes", out_len);
    default:
        return sp_err_set(err, SP_E_CORRUPT, "Deflate: corrupt compressed data (%zu bytes)",
                          in_len);
    }
}
