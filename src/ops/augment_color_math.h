/* augment_color_math.h — the per-pixel arithmetic of the photometric augmentations (colour
 * jitter, Gaussian noise, the blur's border rule), shared word for word by the CPU reference
 * (augment_color.c, augment_noise.c, augment_blur.c) and the GPU kernels
 * (src/cuda/augment_color_kernels.cu), so that both compute the same bytes. The jitter steps
 * repeat torchvision's uint8-tensor arithmetic in float32, operation by operation (each step
 * truncates back to uint8 as torchvision's `.to(torch.uint8)` does); docs/augment-color.md has
 * the definitions. Every file that includes it compiles without fused multiply-adds
 * (-ffp-contract=off, --fmad=false). */
#ifndef SP_OPS_AUGMENT_COLOR_MATH_H
#define SP_OPS_AUGMENT_COLOR_MATH_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define SP_AUG_HD __host__ __device__
#else
#define SP_AUG_HD
#endif

/* The jitter's four steps, as torchvision's ColorJitter numbers them. */
enum { SP_JITTER_BRIGHTNESS, SP_JITTER_CONTRAST, SP_JITTER_SATURATION, SP_JITTER_HUE };

/* float32 -> uint8 as torch's `.clamp(0, 255).to(torch.uint8)`: clamp, then truncate. */
SP_AUG_HD static inline uint8_t sp_aug_trunc_u8(float v) {
    v = v < 0.0f ? 0.0f : (v > 255.0f ? 255.0f : v);
    return (uint8_t)v;
}

/* torchvision's rgb_to_grayscale on uint8: (0.2989 r + 0.587 g) + 0.114 b in float32,
 * truncated to uint8. */
SP_AUG_HD static inline uint8_t sp_aug_grey(const uint8_t *px) {
    float l = (0.2989f * (float)px[0] + 0.587f * (float)px[1]) + 0.114f * (float)px[2];
    return (uint8_t)l;
}

/* torchvision's _blend on uint8: ratio * v + (1 - ratio) * other in float32, clamped and
 * truncated. `ratio` and `rest` are the float32 values of the factor and of (1 - factor) taken
 * in double, as torch turns the Python floats into the tensor's float32. */
SP_AUG_HD static inline uint8_t sp_aug_blend(uint8_t v, float other, float ratio, float rest) {
    return sp_aug_trunc_u8(ratio * (float)v + rest * other);
}

/* torchvision's adjust_hue on one uint8 pixel: to float32 (v / 255), RGB -> HSV as its _rgb2hsv
 * computes it, h' = (h + shift) mod 1, back with _hsv2rgb, and to uint8 as
 * convert_image_dtype does (x * 255.999, truncated). */
/* max and min of numbers that are never NaN here, as a compare (fmaxf and fminf are library calls
 * on the CPU unless NaN handling is waived). */
SP_AUG_HD static inline float sp_aug_max(float a, float b) {
    return a > b ? a : b;
}

SP_AUG_HD static inline float sp_aug_min(float a, float b) {
    return a < b ? a : b;
}

/* clamp(x, 0, 1). */
SP_AUG_HD static inline float sp_aug_unit(float x) {
    return sp_aug_min(sp_aug_max(x, 0.0f), 1.0f);
}

SP_AUG_HD static inline void sp_aug_hue(uint8_t *px, float shift) {
    float r = (float)px[0] / 255.0f, g = (float)px[1] / 255.0f, b = (float)px[2] / 255.0f;
    float maxc = sp_aug_max(sp_aug_max(r, g), b), minc = sp_aug_min(sp_aug_min(r, g), b);
    int eqc = maxc == minc;
    float cr = maxc - minc;
    float s = cr / (eqc ? 1.0f : maxc);
    float div = eqc ? 1.0f : cr;
    float rc = (maxc - r) / div, gc = (maxc - g) / div, bc = (maxc - b) / div;
    float hr = maxc == r ? bc - gc : 0.0f;
    float hg = (maxc == g && maxc != r) ? (2.0f + rc) - bc : 0.0f;
    float hb = (maxc != g && maxc != r) ? (4.0f + gc) - rc : 0.0f;
    float h = (hr + hg) + hb;
    /* fmod(x, 1) by x - floor(x): exact for these x (in [-0.5, 2)), so the same numbers. */
    h = h / 6.0f + 1.0f;
    h -= floorf(h);
    h += shift;
    h -= floorf(h); /* torch.remainder: the sign of the divisor */
    float i = floorf(h * 6.0f);
    float f = h * 6.0f - i;
    int sector = (int)i % 6;
    float v = maxc;
    float p = sp_aug_unit(v * (1.0f - s));
    float q = sp_aug_unit(v * (1.0f - s * f));
    float t = sp_aug_unit(v * (1.0f - s * (1.0f - f)));
    float o[3];
    switch (sector) {
    case 0: o[0] = v, o[1] = t, o[2] = p; break;
    case 1: o[0] = q, o[1] = v, o[2] = p; break;
    case 2: o[0] = p, o[1] = v, o[2] = t; break;
    case 3: o[0] = p, o[1] = q, o[2] = v; break;
    case 4: o[0] = t, o[1] = p, o[2] = v; break;
    default: o[0] = v, o[1] = p, o[2] = q; break;
    }
    for (int c = 0; c < 3; c++) {
        px[c] = (uint8_t)(o[c] * 255.999f); /* o in [0, 1] */
    }
}

/* One step of the jitter on one pixel. `mean` is the contrast step's grey mean (unused by the
 * others). */
SP_AUG_HD static inline void sp_aug_jitter_step(uint8_t *px, int step, float ratio, float rest,
                                                float mean) {
    if (step == SP_JITTER_HUE) {
        sp_aug_hue(px, ratio);
        return;
    }
    float other = step == SP_JITTER_CONTRAST     ? mean
                  : step == SP_JITTER_SATURATION ? (float)sp_aug_grey(px)
                                                 : 0.0f;
    for (int c = 0; c < 3; c++) {
        px[c] = sp_aug_blend(px[c], other, ratio, rest);
    }
}

/* The counter-based generator: the n-th output (n >= 0) of splitmix64 started at `key`,
 * computed directly, so any element's numbers are had without the ones before it. */
SP_AUG_HD static inline uint64_t sp_aug_counter_u64(uint64_t key, uint64_t n) {
    uint64_t z = key + (n + 1) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The standard normal numbers of elements 2p and 2p + 1 (element = pixel index * 3 + channel)
 * by Box-Muller from outputs 2p and 2p + 1: u1 in (0, 1], u2 in [0, 1), r = sqrt(-2 ln u1),
 * t = 2 pi u2, z0 = r cos t, z1 = r sin t, in double (both outputs used: one log per two). */
SP_AUG_HD static inline void sp_aug_normal_pair(uint64_t key, uint64_t p, double *z0, double *z1) {
    double u1 = (double)((sp_aug_counter_u64(key, 2 * p) >> 11) + 1) * 0x1p-53;
    double u2 = (double)(sp_aug_counter_u64(key, 2 * p + 1) >> 11) * 0x1p-53;
    double r = sqrt(-2.0 * log(u1)), t = 6.283185307179586 * u2;
    *z0 = r * cos(t);
    *z1 = r * sin(t);
}

/* The standard normal number of element e alone (its pair's even or odd output). */
SP_AUG_HD static inline double sp_aug_normal(uint64_t key, uint64_t e) {
    double z0, z1;
    sp_aug_normal_pair(key, e >> 1, &z0, &z1);
    return (e & 1) ? z1 : z0;
}

/* v + sigma z rounded half to even and clamped to [0, 255]. */
SP_AUG_HD static inline uint8_t sp_aug_noisy(uint8_t v, double sigma, double z) {
    double x = rint((double)v + sigma * z);
    return (uint8_t)(x < 0.0 ? 0.0 : (x > 255.0 ? 255.0 : x));
}

/* Reflect padding ("reflect", not "symmetric": the edge pixel is not repeated) of index i into
 * [0, n), folded as often as needed so that any kernel works on any size. */
SP_AUG_HD static inline int64_t sp_aug_reflect(int64_t i, int64_t n) {
    if (n == 1) {
        return 0;
    }
    int64_t period = 2 * (n - 1);
    i %= period;
    if (i < 0) {
        i += period;
    }
    return i < n ? i : period - i;
}

#endif
