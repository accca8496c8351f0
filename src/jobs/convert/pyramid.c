/* pyramid.c — the converter's pixel kernels (see pyramid.h for the averaging rule).
 *
 * Each kernel has a plain C version, which is the reference, and where it pays a SIMD version
 * that produces the same bytes: the planar reducer uses SSE2 (always present on x86-64). Building
 * with -DSP_NO_SIMD keeps only the C versions (to test them). These kernels are most of the
 * converter's own CPU time, after decoding, splitting into planes (ops/rgb.c) and compression.
 */
#include "jobs/convert/pyramid.h"

#include <stdbool.h>
#include <stddef.h>

#include "base/simd_x86.h"

/* ---- 2x2 mean, one channel --------------------------------------------------------------- */

static void reduce_plane_c(const uint8_t *t, const uint8_t *b, uint8_t *out, int64_t x0,
                           int64_t n) {
    for (int64_t x = x0; x < n; x++) {
        out[x] = (uint8_t)((t[2 * x] + t[2 * x + 1] + b[2 * x] + b[2 * x + 1] + 2) >> 2);
    }
}

void sp_pyramid_reduce_plane(const uint8_t *top, const uint8_t *bottom, uint8_t *out,
                             int64_t out_width) {
    int64_t x = 0;
#ifdef SP_HAVE_X86
    /* 16 output bytes from 32 input bytes of each row: in 16-bit lanes the even byte is the low
     * half and the odd byte the high half, so the four terms are two masks and two shifts. */
    const __m128i lo = _mm_set1_epi16(0x00ff), two = _mm_set1_epi16(2);
    for (; x + 16 <= out_width; x += 16) {
        __m128i t0 = _mm_loadu_si128((const __m128i *)(top + 2 * x));
        __m128i t1 = _mm_loadu_si128((const __m128i *)(top + 2 * x + 16));
        __m128i b0 = _mm_loadu_si128((const __m128i *)(bottom + 2 * x));
        __m128i b1 = _mm_loadu_si128((const __m128i *)(bottom + 2 * x + 16));
        __m128i s0 = _mm_add_epi16(_mm_add_epi16(_mm_and_si128(t0, lo), _mm_srli_epi16(t0, 8)),
                                   _mm_add_epi16(_mm_and_si128(b0, lo), _mm_srli_epi16(b0, 8)));
        __m128i s1 = _mm_add_epi16(_mm_add_epi16(_mm_and_si128(t1, lo), _mm_srli_epi16(t1, 8)),
                                   _mm_add_epi16(_mm_and_si128(b1, lo), _mm_srli_epi16(b1, 8)));
        s0 = _mm_srli_epi16(_mm_add_epi16(s0, two), 2);
        s1 = _mm_srli_epi16(_mm_add_epi16(s1, two), 2);
        _mm_storeu_si128((__m128i *)(out + x), _mm_packus_epi16(s0, s1));
    }
#endif
    reduce_plane_c(top, bottom, out, x, out_width);
}

/* ---- 2x2 mean, interleaved RGB ----------------------------------------------------------- */

#define BLOCK_PIXELS 256 /* output pixels per block: the sums of 512 input pixels stay in L1 */

void sp_pyramid_reduce_rgb(const uint8_t *top, const uint8_t *bottom, uint8_t *out,
                           int64_t out_width) {
    /* Vertical sums first (contiguous, which the compiler vectorises), then neighbours. */
    uint16_t sum[BLOCK_PIXELS * 6];
    for (int64_t x0 = 0; x0 < out_width; x0 += BLOCK_PIXELS) {
        int64_t n = out_width - x0 < BLOCK_PIXELS ? out_width - x0 : BLOCK_PIXELS;
        const uint8_t *a = top + x0 * 6, *b = bottom + x0 * 6;
        for (int64_t i = 0; i < n * 6; i++) {
            sum[i] = (uint16_t)(a[i] + b[i]);
        }
        uint8_t *o = out + x0 * 3;
        for (int64_t i = 0; i < n; i++) {
            const uint16_t *s = sum + i * 6;
            o[i * 3 + 0] = (uint8_t)((s[0] + s[3] + 2) >> 2);
            o[i * 3 + 1] = (uint8_t)((s[1] + s[4] + 2) >> 2);
            o[i * 3 + 2] = (uint8_t)((s[2] + s[5] + 2) >> 2);
        }
    }
}
