/* simd_x86.h — whether this build may use x86 SIMD kernels chosen at run time, and their
 * intrinsics. SP_HAVE_X86 is defined on x86-64 with GCC or Clang unless the build asks for
 * -DSP_NO_SIMD (to test the plain C versions). A kernel built for a later level than SSE2 carries
 * __attribute__((target(...))) and is called only after __builtin_cpu_supports says yes. */
#ifndef SP_BASE_SIMD_X86_H
#define SP_BASE_SIMD_X86_H

#if defined(__x86_64__) && defined(__GNUC__) && !defined(SP_NO_SIMD)
#define SP_HAVE_X86 1
#include <emmintrin.h>
#include <stdint.h>
#include <tmmintrin.h>

/* Four int32 lanes, each 0..255, as the bytes of one uint32 (lane 0 the lowest). */
static inline uint32_t sp_x86_bytes4(__m128i lanes) {
    __m128i n8 = _mm_packus_epi16(_mm_packs_epi32(lanes, lanes), lanes);
    return (uint32_t)_mm_cvtsi128_si32(n8);
}
#endif

#endif
