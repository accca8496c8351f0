/* batch_format.c — RGB8 pixels into the tensor a model takes: uint8, float16 or float32, NHWC or
 * NCHW, floats normalized as torchvision's ToTensor then Normalize do it.
 *
 * A float is ((v / 255) - mean) / std in float32, so an 8-bit channel has only 256 possible
 * outputs: they are computed once per format into a table, and writing a batch is a table lookup
 * per value (float16 by rounding the float32 to nearest, ties to even, bit for bit as numpy's
 * astype(float16) does). The layout only decides where each value goes.
 */
#include <math.h>
#include <string.h>

#include "jobs/train/batch_format.h"

/* float32 to IEEE half, round to nearest, ties to even; infinities and NaN kept. */
static uint16_t half_from_float(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t a = x & 0x7fffffffu;
    if (a > 0x7f800000u) {
        return (uint16_t)(sign | 0x7e00u); /* NaN */
    }
    if (a >= 0x47800000u) {
        return (uint16_t)(sign | 0x7c00u); /* 65536 and above, infinity */
    }
    if (a < 0x38800000u) { /* below 2^-14: a subnormal half, a multiple of 2^-24 */
        float m;
        memcpy(&m, &a, sizeof m);
        return (uint16_t)(sign | (uint16_t)lrintf(m * 16777216.0f));
    }
    uint32_t h = (a - 0x38000000u) >> 13; /* rebias the exponent 127 -> 15, drop 13 bits */
    uint32_t rest = a & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) {
        h++; /* a carry into the exponent is right, up to infinity */
    }
    return (uint16_t)(sign | h);
}

int sp_batch_dtype_bytes(sp_batch_dtype dtype) {
    switch (dtype) {
    case SP_BATCH_UINT8: return 1;
    case SP_BATCH_FLOAT16: return 2;
    case SP_BATCH_FLOAT32: return 4;
    }
    return 0;
}

sp_status sp_batch_lut_init(sp_batch_lut *lut, const sp_batch_format *format) {
    if (lut == NULL || format == NULL || sp_batch_dtype_bytes(format->dtype) == 0 ||
        (format->layout != SP_BATCH_NHWC && format->layout != SP_BATCH_NCHW)) {
        return SP_E_INVALID_ARG;
    }
    lut->format = *format;
    lut->bytes = sp_batch_dtype_bytes(format->dtype);
    if (format->dtype == SP_BATCH_UINT8) {
        return SP_OK;
    }
    for (int c = 0; c < 3; c++) {
        float mean = format->mean[c], std = format->std[c];
        if (!isfinite(mean) || !isfinite(std) || std == 0.0f) {
            return SP_E_INVALID_ARG;
        }
        for (int v = 0; v < 256; v++) {
            float unit = (float)v / 255.0f; /* float32 steps, as torch takes them */
            float out = (unit - mean) / std;
            lut->f32[c][v] = out;
            lut->f16[c][v] = half_from_float(out);
        }
    }
    return SP_OK;
}

void sp_batch_write_rows(const sp_batch_lut *lut, const uint8_t *rgb, int64_t width, int64_t height,
                         int64_t row0, int64_t rows, void *image) {
    int64_t n = width * rows, plane = width * height, at = width * row0;
    sp_batch_dtype dtype = lut->format.dtype;
    if (lut->format.layout == SP_BATCH_NHWC) {
        if (dtype == SP_BATCH_UINT8) {
            memcpy((uint8_t *)image + at * 3, rgb, (size_t)(n * 3));
        } else if (dtype == SP_BATCH_FLOAT32) {
            float *o = (float *)image + at * 3;
            for (int64_t p = 0; p < n; p++) {
                for (int c = 0; c < 3; c++) {
                    o[p * 3 + c] = lut->f32[c][rgb[p * 3 + c]];
                }
            }
        } else {
            uint16_t *o = (uint16_t *)image + at * 3;
            for (int64_t p = 0; p < n; p++) {
                for (int c = 0; c < 3; c++) {
                    o[p * 3 + c] = lut->f16[c][rgb[p * 3 + c]];
                }
            }
        }
        return;
    }
    for (int c = 0; c < 3; c++) { /* NCHW: one plane per channel */
        if (dtype == SP_BATCH_UINT8) {
            uint8_t *o = (uint8_t *)image + c * plane + at;
            for (int64_t p = 0; p < n; p++) {
                o[p] = rgb[p * 3 + c];
            }
        } else if (dtype == SP_BATCH_FLOAT32) {
            float *o = (float *)image + c * plane + at;
            const float *t = lut->f32[c];
            for (int64_t p = 0; p < n; p++) {
                o[p] = t[rgb[p * 3 + c]];
            }
        } else {
            uint16_t *o = (uint16_t *)image + c * plane + at;
            const uint16_t *t = lut->f16[c];
            for (int64_t p = 0; p < n; p++) {
                o[p] = t[rgb[p * 3 + c]];
            }
        }
    }
}

sp_status sp_batch_convert(const uint8_t *rgb, int64_t count, int64_t width, int64_t height,
                           const sp_batch_format *format, void *dst) {
    sp_batch_lut lut;
    if (rgb == NULL || dst == NULL || count < 1 || width < 1 || height < 1 ||
        width > INT64_MAX / 12 / height / count || sp_batch_lut_init(&lut, format) != SP_OK) {
        return SP_E_INVALID_ARG;
    }
    int64_t pixels = width * height;
    for (int64_t i = 0; i < count; i++) {
        sp_batch_write_rows(&lut, rgb + i * pixels * 3, width, height, 0, height,
                            (uint8_t *)dst + i * pixels * 3 * lut.bytes);
    }
    return SP_OK;
}
