/* to_uint8.c — float values rounded and clipped into uint8 (see to_uint8.h). The loop compiles
 * to vector compares and blends (an AVX2 copy beside the baseline one), so narrowing a 1024²
 * three-channel chunk costs far less than compressing it.
 */
#include "ops/to_uint8.h"

#include "ops/op.h"

/* The clones live in a static function: clang 14 names the resolver of an exported clone set so
 * that other files cannot link to it. */
SP_OPS_SIMD
static void narrow(const float *restrict src, uint8_t *restrict dst, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float v = src[i] + 0.5f;
        v = v >= 0.0f ? v : 0.0f; /* NaN fails the test and becomes 0 too */
        v = v <= 255.0f ? v : 255.0f;
        dst[i] = (uint8_t)(int32_t)v; /* truncation of a value in 0..255: floor */
    }
}

void sp_float_to_uint8(const float *restrict src, uint8_t *restrict dst, size_t n) {
    narrow(src, dst, n);
}
