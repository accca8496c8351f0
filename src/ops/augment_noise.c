/* augment_noise.c — additive Gaussian noise on RGB8 patches: each channel value v becomes
 * round_half_even(v + sigma z), clamped to [0, 255], with z a standard normal number from a
 * counter-based generator keyed by (seed, element index) (augment_color_math.h): elements 2p and
 * 2p + 1 share one Box-Muller pair, so the loop takes them two at a time. No state is
 * carried from one element to the next, so the noise of a pixel does not depend on which thread
 * or kernel computes it, and the GPU draws the same numbers.
 */
#include "ops/augment_color.h"
#include "ops/augment_color_math.h"

void sp_gaussian_noise(uint8_t *rgb, int64_t npixels, uint64_t seed, double sigma) {
    uint64_t key = seed ^ SP_NOISE_STREAM;
    int64_t n = npixels * 3, e = 0;
    for (; e + 1 < n; e += 2) { /* a pair's two numbers from one log */
        double z0, z1;
        sp_aug_normal_pair(key, (uint64_t)e >> 1, &z0, &z1);
        rgb[e] = sp_aug_noisy(rgb[e], sigma, z0);
        rgb[e + 1] = sp_aug_noisy(rgb[e + 1], sigma, z1);
    }
    if (e < n) {
        rgb[e] = sp_aug_noisy(rgb[e], sigma, sp_aug_normal(key, (uint64_t)e));
    }
}
