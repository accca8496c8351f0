/* augment_color_rows.c — the colour jitter's hue and saturation steps (torchvision's
 * adjust_hue and adjust_saturation, docs/augment-color.md) over a run of pixels. sp_aug_hue does
 * one pixel with a switch on the HSV sector (about 25 ns a pixel here, the largest part of the
 * colour jitter). Here eight pixels go through AVX2 together (about 7 ns a pixel): the same
 * float32 operations in the same order (no fused multiply-adds, floor exact,
 * max/min/compare/blend for the branches), so the bytes are the one-pixel code's, which
 * tests/unit/test_augment_color.c checks on every 8-bit colour. Without AVX2 (or with
 * SP_NO_SIMD) every pixel goes through the one-pixel code. */
#include "ops/augment_color_rows.h"

#include "base/simd_x86.h"
#include "ops/augment_color_math.h"

#ifdef SP_HAVE_X86
#include <immintrin.h>

/* select(mask, a, b): a where mask is set, else b. */
#define SELECT(mask, a, b) _mm256_blendv_ps((b), (a), (mask))

/* Eight RGB8 pixels at px as three vectors of channel values (float32). */
__attribute__((target("avx2"))) static inline void load8(const uint8_t *px, __m256 v[3]) {
    int32_t ch[3][8];
    for (int j = 0; j < 8; j++) {
        for (int c = 0; c < 3; c++) {
            ch[c][j] = px[3 * j + c];
        }
    }
    for (int c = 0; c < 3; c++) {
        v[c] = _mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)ch[c]));
    }
}

/* Three vectors of channel values 0..255 back into the eight RGB8 pixels at px. */
__attribute__((target("avx2"))) static inline void store8(const __m256i v[3], uint8_t *px) {
    int32_t ch[3][8];
    for (int c = 0; c < 3; c++) {
        _mm256_storeu_si256((__m256i *)ch[c], v[c]);
    }
    for (int j = 0; j < 8; j++) {
        for (int c = 0; c < 3; c++) {
            px[3 * j + c] = (uint8_t)ch[c][j];
        }
    }
}

/* sp_aug_unit of eight values: clamp to [0, 1] (max and min as its compares). */
__attribute__((target("avx2"))) static inline __m256 unit(__m256 v) {
    return _mm256_min_ps(_mm256_max_ps(v, _mm256_setzero_ps()), _mm256_set1_ps(1.0f));
}

__attribute__((target("avx2"))) static void hue_avx2(uint8_t *rgb, int64_t npixels, float shift) {
    const __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.0f);
    const __m256 two = _mm256_set1_ps(2.0f), four = _mm256_set1_ps(4.0f);
    const __m256 six = _mm256_set1_ps(6.0f), c255 = _mm256_set1_ps(255.0f);
    const __m256 to_byte = _mm256_set1_ps(255.999f), by = _mm256_set1_ps(shift);
    int64_t k = 0;
    for (; k + 8 <= npixels; k += 8) {
        __m256 in[3];
        load8(rgb + 3 * k, in);
        __m256 r = _mm256_div_ps(in[0], c255), g = _mm256_div_ps(in[1], c255);
        __m256 b = _mm256_div_ps(in[2], c255);
        /* _mm256_max_ps(a, b) is a > b ? a : b, _mm256_min_ps(a, b) a < b ? a : b: sp_aug_max
         * and sp_aug_min exactly. */
        __m256 maxc = _mm256_max_ps(_mm256_max_ps(r, g), b);
        __m256 minc = _mm256_min_ps(_mm256_min_ps(r, g), b);
        __m256 eqc = _mm256_cmp_ps(maxc, minc, _CMP_EQ_OQ);
        __m256 cr = _mm256_sub_ps(maxc, minc);
        __m256 s = _mm256_div_ps(cr, SELECT(eqc, one, maxc));
        __m256 div = SELECT(eqc, one, cr);
        __m256 rc = _mm256_div_ps(_mm256_sub_ps(maxc, r), div);
        __m256 gc = _mm256_div_ps(_mm256_sub_ps(maxc, g), div);
        __m256 bc = _mm256_div_ps(_mm256_sub_ps(maxc, b), div);
        __m256 is_r = _mm256_cmp_ps(maxc, r, _CMP_EQ_OQ), is_g = _mm256_cmp_ps(maxc, g, _CMP_EQ_OQ);
        __m256 hr = _mm256_and_ps(is_r, _mm256_sub_ps(bc, gc));
        __m256 hg =
            _mm256_and_ps(_mm256_andnot_ps(is_r, is_g), _mm256_sub_ps(_mm256_add_ps(two, rc), bc));
        __m256 hb =
            _mm256_andnot_ps(_mm256_or_ps(is_r, is_g), _mm256_sub_ps(_mm256_add_ps(four, gc), rc));
        __m256 h = _mm256_add_ps(_mm256_add_ps(hr, hg), hb);
        h = _mm256_add_ps(_mm256_div_ps(h, six), one);
        h = _mm256_sub_ps(h, _mm256_floor_ps(h));
        h = _mm256_add_ps(h, by);
        h = _mm256_sub_ps(h, _mm256_floor_ps(h));
        __m256 h6 = _mm256_mul_ps(h, six);
        __m256 i = _mm256_floor_ps(h6);
        __m256 f = _mm256_sub_ps(h6, i);
        __m256 sector = SELECT(_mm256_cmp_ps(i, six, _CMP_GE_OQ), zero, i); /* (int)i % 6 */
        __m256 v = maxc;
        __m256 p = unit(_mm256_mul_ps(v, _mm256_sub_ps(one, s)));
        __m256 q = unit(_mm256_mul_ps(v, _mm256_sub_ps(one, _mm256_mul_ps(s, f))));
        __m256 t =
            unit(_mm256_mul_ps(v, _mm256_sub_ps(one, _mm256_mul_ps(s, _mm256_sub_ps(one, f)))));
        __m256 at[6];
        for (int n = 0; n < 6; n++) {
            at[n] = _mm256_cmp_ps(sector, _mm256_set1_ps((float)n), _CMP_EQ_OQ);
        }
        /* sp_aug_hue's switch: sectors 0..5 give (v,t,p) (q,v,p) (p,v,t) (p,q,v) (t,p,v) (v,p,q).
         */
        __m256 o[3];
        o[0] = SELECT(_mm256_or_ps(at[0], at[5]), v, SELECT(at[1], q, SELECT(at[4], t, p)));
        o[1] = SELECT(_mm256_or_ps(at[1], at[2]), v, SELECT(at[0], t, SELECT(at[3], q, p)));
        o[2] = SELECT(_mm256_or_ps(at[3], at[4]), v, SELECT(at[2], t, SELECT(at[5], q, p)));
        __m256i out[3];
        for (int c = 0; c < 3; c++) {
            out[c] = _mm256_cvttps_epi32(_mm256_mul_ps(o[c], to_byte));
        }
        store8(out, rgb + 3 * k);
    }
    for (; k < npixels; k++) {
        sp_aug_hue(rgb + 3 * k, shift);
    }
}

/* sp_aug_trunc_u8 of eight values: clamp to [0, 255] (max and min as its compares), truncate. */
__attribute__((target("avx2"))) static inline __m256i trunc_u8(__m256 v) {
    v = _mm256_min_ps(_mm256_max_ps(v, _mm256_setzero_ps()), _mm256_set1_ps(255.0f));
    return _mm256_cvttps_epi32(v);
}

__attribute__((target("avx2"))) static void saturation_avx2(uint8_t *rgb, int64_t npixels,
                                                            float ratio, float rest) {
    const __m256 wr = _mm256_set1_ps(0.2989f), wg = _mm256_set1_ps(0.587f);
    const __m256 wb = _mm256_set1_ps(0.114f);
    const __m256 by = _mm256_set1_ps(ratio), other_by = _mm256_set1_ps(rest);
    int64_t k = 0;
    for (; k + 8 <= npixels; k += 8) {
        __m256 v[3];
        load8(rgb + 3 * k, v);
        /* sp_aug_grey: (0.2989 r + 0.587 g) + 0.114 b, truncated to a whole number. */
        __m256 grey = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(wr, v[0]), _mm256_mul_ps(wg, v[1])),
                                    _mm256_mul_ps(wb, v[2]));
        grey = _mm256_cvtepi32_ps(_mm256_cvttps_epi32(grey));
        __m256 blend = _mm256_mul_ps(other_by, grey);
        __m256i out[3];
        for (int c = 0; c < 3; c++) {
            out[c] = trunc_u8(_mm256_add_ps(_mm256_mul_ps(by, v[c]), blend));
        }
        store8(out, rgb + 3 * k);
    }
    for (; k < npixels; k++) {
        sp_aug_jitter_step(rgb + 3 * k, SP_JITTER_SATURATION, ratio, rest, 0.0f);
    }
}
#endif

void sp_hue_pixels(uint8_t *rgb, int64_t npixels, float shift) {
#ifdef SP_HAVE_X86
    if (__builtin_cpu_supports("avx2")) {
        hue_avx2(rgb, npixels, shift);
        return;
    }
#endif
    for (int64_t k = 0; k < npixels; k++) {
        sp_aug_hue(rgb + 3 * k, shift);
    }
}

void sp_saturation_pixels(uint8_t *rgb, int64_t npixels, float ratio, float rest) {
#ifdef SP_HAVE_X86
    if (__builtin_cpu_supports("avx2")) {
        saturation_avx2(rgb, npixels, ratio, rest);
        return;
    }
#endif
    for (int64_t k = 0; k < npixels; k++) {
        sp_aug_jitter_step(rgb + 3 * k, SP_JITTER_SATURATION, ratio, rest, 0.0f);
    }
}
