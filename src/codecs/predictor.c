/* predictor.c — undoing TIFF horizontal differencing (Predictor 2) after decompression.
 *
 * The encoder stored each sample as its difference from the same sample of the pixel to its
 * left, modulo 2^bits; adding back left to right restores the row. 16-bit samples are read and
 * written in the file's byte order so this runs before any byte swapping, as in libtiff.
 */
#include "codecs/codec.h"

#include "base/limits.h"

static void undo_row8(uint8_t *p, size_t n, unsigned samples) {
    for (size_t i = samples; i < n; i++) {
        p[i] = (uint8_t)(p[i] + p[i - samples]);
    }
}

static void undo_row16(uint8_t *p, size_t n, unsigned samples, bool big_endian) {
    /* n counts samples; byte offsets are twice the sample index */
    for (size_t i = samples; i < n; i++) {
        uint8_t *cur = p + 2 * i, *left = p + 2 * (i - samples);
        unsigned v;
        if (big_endian) {
            v = ((unsigned)cur[0] << 8 | cur[1]) + ((unsigned)left[0] << 8 | left[1]);
            cur[0] = (uint8_t)(v >> 8);
            cur[1] = (uint8_t)v;
        } else {
            v = ((unsigned)cur[1] << 8 | cur[0]) + ((unsigned)left[1] << 8 | left[0]);
            cur[1] = (uint8_t)(v >> 8);
            cur[0] = (uint8_t)v;
        }
    }
}

sp_status sp_predictor_undo(uint8_t *buf, size_t row_bytes, uint64_t width, uint64_t rows,
                            unsigned samples, unsigned bits, bool big_endian, sp_err *err) {
    if (bits != 8 && bits != 16) {
        return sp_err_set(err, SP_E_UNSUPPORTED,
                          "horizontal predictor on %u-bit samples is not supported", bits);
    }
    uint64_t n, need;
    if (samples == 0 || !sp_mul_u64(width, samples, &n) || !sp_mul_u64(n, bits / 8, &need) ||
        need > row_bytes || (buf == NULL && rows > 0 && need > 0)) {
        return sp_err_set(err, SP_E_INVALID_ARG,
                          "predictor: %llu pixels of %u samples do not fit a %zu-byte row",
                          (unsigned long long)width, samples, row_bytes);
    }
    for (uint64_t r = 0; r < rows; r++) {
        uint8_t *p = buf + r * row_bytes;
        if (bits == 8) {
            undo_row8(p, (size_t)n, samples);
        } else {
            undo_row16(p, (size_t)n, samples, big_endian);
        }
    }
    return SP_OK;
}
