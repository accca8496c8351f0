/* lzw.c — the TIFF LZW decoder (TIFF 6.0, section 13), used for strips and tiles of
 * compression 5, most often associated images such as Aperio labels.
 *
 * Codes are 9 to 12 bits, most significant bit first; 256 clears the table and 257 ends the
 * stream. TIFF's encoder widens its codes one entry "early", so the decoder, which always runs one
 * entry behind the encoder, widens when its table reaches 511, 1023 and 2047 entries. The table
 * stores each string as (prefix code, last byte, length), so a string is written back to front
 * straight into the output, with no stack and no copy.
 */
#include "codecs/codec.h"

#include <string.h>

enum {
    LZW_CLEAR = 256,
    LZW_EOI = 257,
    LZW_FIRST_FREE = 258,
    LZW_MIN_BITS = 9,
    LZW_MAX_BITS = 12,
    LZW_TABLE_SIZE = 1 << LZW_MAX_BITS,
};

typedef struct lzw_table {
    uint16_t prefix[LZW_TABLE_SIZE]; /* code of the string minus its last byte */
    uint16_t length[LZW_TABLE_SIZE]; /* at most 4096 - 256 + 1, so 16 bits suffice */
    uint8_t suffix[LZW_TABLE_SIZE];  /* the string's last byte */
    uint8_t first[LZW_TABLE_SIZE];   /* its first byte, needed for every new entry */
} lzw_table;

/* Write the string of `code`, or as much of its beginning as fits in `avail` bytes, at `dst`.
 * Returns the number of bytes written. */
static size_t lzw_emit(const lzw_table *t, unsigned code, uint8_t *dst, size_t avail) {
    size_t len = t->length[code];
    /* a string that does not fit loses its tail: walk past the bytes that will not be kept */
    while (len > avail) {
        code = t->prefix[code];
        len--;
    }
    for (size_t i = len; i-- > 1;) {
        dst[i] = t->suffix[code];
        code = t->prefix[code];
    }
    if (len > 0) {
        dst[0] = (uint8_t)code; /* the walk always ends on a single-byte code */
    }
    return len;
}

sp_status sp_lzw_decode(const uint8_t *in, size_t in_len, uint8_t *out, size_t out_len,
                        size_t *written, sp_err *err) {
    if (written != NULL) {
        *written = 0;
    }
    if ((in == NULL && in_len > 0) || (out == NULL && out_len > 0) || written == NULL) {
        return sp_err_set(err, SP_E_INVALID_ARG, "LZW: null argument");
    }
    /* libtiff's test for the LSB-first LZW of TIFF 5 writers: a clear code written LSB-first
     * starts with these bits, while a TIFF 6 stream starts with a clear code, byte 0x80. */
    if (in_len >= 2 && in[0] == 0 && (in[1] & 1)) {
        return sp_err_set(err, SP_E_UNSUPPORTED, "LZW: old-style (pre-TIFF 6.0) LZW stream");
    }

    lzw_table t;
    for (unsigned i = 0; i < 256; i++) {
        t.prefix[i] = 0;
        t.length[i] = 1;
        t.suffix[i] = (uint8_t)i;
        t.first[i] = (uint8_t)i;
    }

    size_t pos = 0, in_pos = 0;
    uint32_t bitbuf = 0; /* holds `nbits` unread bits in its low end; at most 7 + 8 + 8 */
    unsigned nbits = 0;
    unsigned width = LZW_MIN_BITS;
    unsigned next = LZW_FIRST_FREE; /* the code the next table entry gets */
    int prev = -1;                  /* the previous code, or -1 right after a clear */

    while (pos < out_len) {
        while (nbits < width && in_pos < in_len) {
            bitbuf = (bitbuf << 8) | in[in_pos++];
            nbits += 8;
        }
        if (nbits < width) {
            break; /* input ends without EOI: keep what was decoded, as libtiff does */
        }
        nbits -= width;
        unsigned code = (bitbuf >> nbits) & ((1u << width) - 1);

        if (code == LZW_CLEAR) {
            width = LZW_MIN_BITS;
            next = LZW_FIRST_FREE;
            prev = -1;
            continue;
        }
        if (code == LZW_EOI) {
            break;
        }
        if (prev < 0) {
            if (code > 255) {
                *written = pos;
                return sp_err_set(err, SP_E_CORRUPT,
                                  "LZW: code %u at byte %zu follows a clear code", code, in_pos);
            }
        } else if (code <= next && next < LZW_TABLE_SIZE) {
            /* code == next is the one code the decoder may see before defining it: the string
             * prev + first byte of prev, which is also what the new entry is. */
            unsigned p = (unsigned)prev;
            t.prefix[next] = (uint16_t)p;
            t.suffix[next] = code == next ? t.first[p] : t.first[code];
            t.first[next] = t.first[p];
            t.length[next] = (uint16_t)(t.length[p] + 1);
            next++;
            if (next >= (1u << width) - 1 && width < LZW_MAX_BITS) {
                width++;
            }
        } else if (code >= next) {
            /* with a full table, codes go on referring to it until the encoder clears it;
             * libtiff tolerates such streams, and so does this */
            *written = pos;
            return sp_err_set(err, SP_E_CORRUPT, "LZW: code %u at byte %zu is not yet defined",
                              code, in_pos);
        }
        pos += lzw_emit(&t, code, out + pos, out_len - pos);
        prev = (int)code;
    }
    *written = pos;
    return SP_OK;
}
