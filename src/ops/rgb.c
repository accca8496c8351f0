/* rgb.c — the `rgb` op: the slide's RGB8 pixels as three uint8 planes (R, G, B), unchanged. It is
 * what `slidepipe convert` streams through the tile engine: the identity, in the planar layout
 * the engine hands to its sinks.
 *
 * The split has a plain C version, the reference, and an SSSE3 one (one byte shuffle per plane
 * and 16 pixels) that gives the same bytes, chosen at run time as libdeflate does; building with
 * -DSP_NO_SIMD keeps only the C version. A pixel op: no halo.
 */
#include <stdbool.h>

#include "base/simd_x86.h"
#include "ops/op.h"

static void rgb_to_planes_c(const uint8_t *s, uint8_t *r, uint8_t *g, uint8_t *b, int64_t x0,
                            int64_t w) {
    for (int64_t x = x0; x < w; x++) {
        r[x] = s[3 * x];
        g[x] = s[3 * x + 1];
        b[x] = s[3 * x + 2];
    }
}

#ifdef SP_HAVE_X86
/* 16 pixels (48 bytes, three vectors) at a time: each plane gathers its bytes from the three
 * vectors with one shuffle each (-1 lanes become zero) and ORs them together. */
__attribute__((target("ssse3"))) static void
rgb_to_planes_ssse3(const uint8_t *s, uint8_t *r, uint8_t *g, uint8_t *b, int64_t w) {
    const __m128i r0 = _mm_setr_epi8(0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m128i r1 = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14, -1, -1, -1, -1, -1);
    const __m128i r2 = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 1, 4, 7, 10, 13);
    const __m128i g0 = _mm_setr_epi8(1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m128i g1 = _mm_setr_epi8(-1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1);
    const __m128i g2 = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14);
    const __m128i b0 = _mm_setr_epi8(2, 5, 8, 11, 14, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m128i b1 = _mm_setr_epi8(-1, -1, -1, -1, -1, 1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1);
    const __m128i b2 = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15);
    int64_t x = 0;
    for (; x + 16 <= w; x += 16) {
        __m128i v0 = _mm_loadu_si128((const __m128i *)(s + 3 * x));
        __m128i v1 = _mm_loadu_si128((const __m128i *)(s + 3 * x + 16));
        __m128i v2 = _mm_loadu_si128((const __m128i *)(s + 3 * x + 32));
        __m128i vr = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(v0, r0), _mm_shuffle_epi8(v1, r1)),
                                  _mm_shuffle_epi8(v2, r2));
        __m128i vg = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(v0, g0), _mm_shuffle_epi8(v1, g1)),
                                  _mm_shuffle_epi8(v2, g2));
        __m128i vb = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(v0, b0), _mm_shuffle_epi8(v1, b1)),
                                  _mm_shuffle_epi8(v2, b2));
        _mm_storeu_si128((__m128i *)(r + x), vr);
        _mm_storeu_si128((__m128i *)(g + x), vg);
        _mm_storeu_si128((__m128i *)(b + x), vb);
    }
    rgb_to_planes_c(s, r, g, b, x, w);
}
#endif

static void rgb_to_planes(const uint8_t *rgb, uint8_t *r, uint8_t *g, uint8_t *b, int64_t width) {
#ifdef SP_HAVE_X86
    /* __builtin_cpu_supports reads a table the C runtime fills before main: no state of ours. */
    if (__builtin_cpu_supports("ssse3")) {
        rgb_to_planes_ssse3(rgb, r, g, b, width);
        return;
    }
#endif
    rgb_to_planes_c(rgb, r, g, b, 0, width);
}

static int rgb_halo(const sp_op_params *p) {
    (void)p;
    return 0;
}

static sp_status rgb_cpu(const sp_op_params *p, const sp_op_block *b) {
    (void)p;
    uint8_t *r = b->dst, *g = r + b->dst_plane, *bl = g + b->dst_plane;
    for (int64_t y = 0; y < b->height; y++) {
        int64_t o = y * b->dst_stride;
        rgb_to_planes(b->src + y * b->src_stride, r + o, g + o, bl + o, b->width);
    }
    return SP_OK;
}

const sp_op sp_op_rgb = {
    .name = "rgb",
    .parse = NULL,
    .halo = rgb_halo,
    .input = SP_PIXEL_RGB8,
    .output = SP_ZARR_U8,
    .channels = 3,
    .scratch_floats = NULL,
    .cpu = rgb_cpu,
};
