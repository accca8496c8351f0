/* zarr_planes.c — interleaving planar chunk rows into RGBA or RGB pixels (zarr_planes.h).
 *
 * RGBA needs only SSE2: bytes pair up (r with g, b with a), then the pairs pair up. RGB's 3-byte
 * pixels need byte shuffles (SSSE3, chosen at run time): each 16-byte store takes its bytes from
 * the three planes through one shuffle each, joined by OR.
 */
#include "formats/zarr_planes.h"

#include "base/simd_x86.h"

void sp_planes_to_rgba(const uint8_t *r, const uint8_t *g, const uint8_t *b, const uint8_t *a,
                       uint8_t *out, int64_t n) {
    int64_t x = 0;
#ifdef SP_HAVE_X86
    const __m128i opaque = _mm_set1_epi8((char)0xFF);
    for (; x + 16 <= n; x += 16) {
        __m128i vr = _mm_loadu_si128((const __m128i *)(r + x));
        __m128i vg = _mm_loadu_si128((const __m128i *)(g + x));
        __m128i vb = _mm_loadu_si128((const __m128i *)(b + x));
        __m128i va = a != NULL ? _mm_loadu_si128((const __m128i *)(a + x)) : opaque;
        __m128i rg_lo = _mm_unpacklo_epi8(vr, vg), rg_hi = _mm_unpackhi_epi8(vr, vg);
        __m128i ba_lo = _mm_unpacklo_epi8(vb, va), ba_hi = _mm_unpackhi_epi8(vb, va);
        _mm_storeu_si128((__m128i *)(out + 4 * x), _mm_unpacklo_epi16(rg_lo, ba_lo));
        _mm_storeu_si128((__m128i *)(out + 4 * x + 16), _mm_unpackhi_epi16(rg_lo, ba_lo));
        _mm_storeu_si128((__m128i *)(out + 4 * x + 32), _mm_unpacklo_epi16(rg_hi, ba_hi));
        _mm_storeu_si128((__m128i *)(out + 4 * x + 48), _mm_unpackhi_epi16(rg_hi, ba_hi));
    }
#endif
    for (; x < n; x++) {
        out[4 * x] = r[x];
        out[4 * x + 1] = g[x];
        out[4 * x + 2] = b[x];
        out[4 * x + 3] = a != NULL ? a[x] : 255;
    }
}

#ifdef SP_HAVE_X86
/* Output byte j of 16 pixels (48 bytes) is channel j % 3 of pixel j / 3: SHUFFLE[s][c] picks,
 * for the s-th 16-byte store, the bytes that come from plane c (-1: none). */
static const int8_t SHUFFLE[3][3][16] = {
    {{0, -1, -1, 1, -1, -1, 2, -1, -1, 3, -1, -1, 4, -1, -1, 5},
     {-1, 0, -1, -1, 1, -1, -1, 2, -1, -1, 3, -1, -1, 4, -1, -1},
     {-1, -1, 0, -1, -1, 1, -1, -1, 2, -1, -1, 3, -1, -1, 4, -1}},
    {{-1, -1, 6, -1, -1, 7, -1, -1, 8, -1, -1, 9, -1, -1, 10, -1},
     {5, -1, -1, 6, -1, -1, 7, -1, -1, 8, -1, -1, 9, -1, -1, 10},
     {-1, 5, -1, -1, 6, -1, -1, 7, -1, -1, 8, -1, -1, 9, -1, -1}},
    {{-1, 11, -1, -1, 12, -1, -1, 13, -1, -1, 14, -1, -1, 15, -1, -1},
     {-1, -1, 11, -1, -1, 12, -1, -1, 13, -1, -1, 14, -1, -1, 15, -1},
     {10, -1, -1, 11, -1, -1, 12, -1, -1, 13, -1, -1, 14, -1, -1, 15}},
};

/* The first multiple of 16 of the n pixels; returns how many it did. */
__attribute__((target("ssse3"))) static int64_t
planes_to_rgb_ssse3(const uint8_t *r, const uint8_t *g, const uint8_t *b, uint8_t *out, int64_t n) {
    __m128i pick[3][3];
    for (int s = 0; s < 3; s++) {
        for (int c = 0; c < 3; c++) {
            pick[s][c] = _mm_loadu_si128((const __m128i *)SHUFFLE[s][c]);
        }
    }
    int64_t x = 0;
    for (; x + 16 <= n; x += 16) {
        __m128i v[3] = {_mm_loadu_si128((const __m128i *)(r + x)),
                        _mm_loadu_si128((const __m128i *)(g + x)),
                        _mm_loadu_si128((const __m128i *)(b + x))};
        for (int s = 0; s < 3; s++) {
            __m128i o = _mm_or_si128(_mm_shuffle_epi8(v[0], pick[s][0]),
                                     _mm_or_si128(_mm_shuffle_epi8(v[1], pick[s][1]),
                                                  _mm_shuffle_epi8(v[2], pick[s][2])));
            _mm_storeu_si128((__m128i *)(out + 3 * x + 16 * s), o);
        }
    }
    return x;
}
#endif

void sp_planes_to_rgb(const uint8_t *r, const uint8_t *g, const uint8_t *b, uint8_t *out,
                      int64_t n) {
    int64_t x = 0;
#ifdef SP_HAVE_X86
    if (__builtin_cpu_supports("ssse3")) {
        x = planes_to_rgb_ssse3(r, g, b, out, n);
    }
#endif
    for (; x < n; x++) {
        out[3 * x] = r[x];
        out[3 * x + 1] = g[x];
        out[3 * x + 2] = b[x];
    }
}
