/* spectrum_math.h — the two per-value steps of the spectral statistics, shared word for word by
 * the CPU kernel (spectrum_kernel.c) and the GPU kernels (src/cuda/spectrum_kernels.cu) so that
 * both compute the same dB values and bins: a dB value from a squared magnitude, and its
 * histogram slot (0 below -40 dB, 1..800 the bins, 801 above 160 dB). Both files compile them
 * without fused multiply-adds (-ffp-contract=off, --fmad=false). */
#ifndef SP_OPS_SPECTRUM_MATH_H
#define SP_OPS_SPECTRUM_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "slidepipe.h"

#ifdef __CUDACC__
#define SP_SPECTRUM_HD __host__ __device__
#else
#define SP_SPECTRUM_HD
#endif

/* Both are written without branches (selects the compiler turns into masks), so that the CPU
 * kernel's row loop is vectorised. */
SP_SPECTRUM_HD static inline int sp_spectrum_slot_of(float db) {
    /* Truncation lands on the right bin or one off near an edge (db + 40 is rounded); comparing
     * db with the exact float edges settles it. Edges -40 + i/4 are exact in float. */
    float v = (db + 40.0f) * 4.0f;
    v = v > 0.0f ? v : 0.0f;
    v = v < 799.0f ? v : 799.0f;
    int b = (int)v;
    float lo = -40.0f + 0.25f * (float)b;
    int dec = db < lo;
    int inc = (db >= lo + 0.25f) & (b < 799);
    b = b - dec + inc + 1;
    b = db < -40.0f ? 0 : b;
    return db > 160.0f ? SP_SPECTRUM_BINS + 1 : b;
}

SP_SPECTRUM_HD static inline float sp_spectrum_db_of(float power) {
    float mag = sqrtf(power) + 1e-6f; /* >= 1e-6: positive and normal, so the bits below hold */
    uint32_t bits;
    memcpy(&bits, &mag, sizeof bits);
    int32_t e = (int32_t)(bits >> 23) - 127;
    uint32_t mbits = (bits & 0x007fffffu) | 0x3f800000u;
    float m;
    memcpy(&m, &mbits, sizeof m); /* mag = m 2^e, m in [1, 2) */
    int big = m > 1.41421356f;    /* fold m into [sqrt(1/2), sqrt(2)) so |t| <= 0.172 */
    m = big ? m * 0.5f : m;
    e += big;
    /* ln m = 2 atanh(t), t = (m - 1) / (m + 1): the series to t^9 errs by < 1e-9. */
    float t = (m - 1.0f) / (m + 1.0f);
    float t2 = t * t;
    float p = 1.0f / 9.0f;
    p = p * t2 + 1.0f / 7.0f;
    p = p * t2 + 1.0f / 5.0f;
    p = p * t2 + 1.0f / 3.0f;
    p = p * t2 + 1.0f;
    float ln_m = 2.0f * t * p;
    /* e ln 2 with ln 2 split in two so that e * hi is exact. */
    float fe = (float)e;
    float ln = fe * 0.693145751953125f + (fe * 1.428606765330187e-06f + ln_m);
    return ln * 8.68588963806503655f; /* 20 / ln 10 */
}

#endif
