/* packbits.c — PackBits run-length decoding (TIFF compression 32773), from the TIFF 6.0 spec:
 * a header byte n in 0..127 copies the next n + 1 bytes, -127..-1 repeats the next byte -n + 1
 * times, and -128 is a no-op. Output beyond out_len is cut, as libtiff does. */
#include "codecs/codec.h"

#include <string.h>

sp_status sp_packbits_decode(const uint8_t *in, size_t in_len, uint8_t *out, size_t out_len,
                             size_t *written, sp_err *err) {
    size_t i = 0, o = 0;
    while (i < in_len && o < out_len) {
        int n = (int8_t)in[i++];
        if (n >= 0) {
            size_t count = (size_t)n + 1;
            if (count > in_len - i) {
                *written = o;
                return sp_err_set(err, SP_E_CORRUPT, "PackBits literal run past the end of data");
            }
            if (count > out_len - o) {
                count = out_len - o;
            }
            memcpy(out + o, in + i, count);
            i += (size_t)n + 1;
            o += count;
        } else if (n != -128) {
            if (i >= in_len) {
                *written = o;
                return sp_err_set(err, SP_E_CORRUPT, "PackBits repeat run past the end of data");
            }
            size_t count = (size_t)(1 - n);
            if (count > out_len - o) {
                count = out_len - o;
            }
            memset(out + o, in[i++], count);
            o += count;
        }
    }
    *written = o;
    return SP_OK;
}
