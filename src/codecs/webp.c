/* webp.c — WebP tiles (TIFF compression 50001, as GDAL and libvips write them) through libwebp,
 * decoded straight into RGBA. The stream's dimensions are checked against the tile before
 * decoding, so a hostile header cannot make libwebp write outside the caller's area. */
#include <webp/decode.h>

#include "codecs/codec.h"

sp_status sp_webp_decode_rgba(const uint8_t *data, size_t len, uint64_t width, uint64_t height,
                              uint8_t *rgba, size_t stride, sp_err *err) {
    int w = 0, h = 0;
    if (!WebPGetInfo(data, len, &w, &h)) {
        return sp_err_set(err, SP_E_CORRUPT, "WebP: not a valid stream");
    }
    if (w <= 0 || h <= 0 || (uint64_t)w > width || (uint64_t)h > height) {
        return sp_err_set(err, SP_E_CORRUPT, "WebP tile is %dx%d, expected at most %llux%llu", w,
                          h, (unsigned long long)width, (unsigned long long)height);
    }
    if (WebPDecodeRGBAInto(data, len, rgba, stride * (size_t)(h - 1) + (size_t)w * 4,
                           (int)stride) == NULL) {
        return sp_err_set(err, SP_E_CORRUPT, "WebP: decoding failed");
    }
    return SP_OK;
}
