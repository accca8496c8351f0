/* reinhard_math.h — the per-value pieces of the sRGB <-> CIELAB conversions of Reinhard
 * normalization, written once for the CPU reference (reinhard.c) and the CUDA kernel
 * (stain_kernels.cu), so both run the same arithmetic in the same order, in double. */
#ifndef SP_OPS_REINHARD_MATH_H
#define SP_OPS_REINHARD_MATH_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define SP_REINHARD_HD __host__ __device__
#else
#define SP_REINHARD_HD
#endif

/* An sRGB value in [0, 1] to linear light. */
SP_REINHARD_HD static inline double sp_srgb_to_linear(double v) {
    return v > 0.04045 ? pow((v + 0.055) / 1.055, 2.4) : v / 12.92;
}

/* CIELAB's f and its inverse. */
SP_REINHARD_HD static inline double sp_lab_f(double t) {
    return t > 0.008856 ? cbrt(t) : 7.787 * t + 16.0 / 116.0;
}

SP_REINHARD_HD static inline double sp_lab_f_inv(double f) {
    return f > 0.2068966 ? f * f * f : (f - 16.0 / 116.0) / 7.787;
}

/* Linear light back to an 8-bit sRGB code, rounded half up; NaN and below 0 give 0. */
SP_REINHARD_HD static inline uint8_t sp_linear_to_byte(double v) {
    double s = v > 0.0031308 ? 1.055 * pow(v, 1.0 / 2.4) - 0.055 : 12.92 * v;
    if (!(s > 0)) {
        return 0;
    }
    return s >= 1.0 ? 255 : (uint8_t)floor(255.0 * s + 0.5);
}

#endif
