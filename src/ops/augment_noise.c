/* augment_noise.c — additive Gaussian noise on RGB8 patches: each channel value v becomes
 * round_half_even(v + sigma z), clamped to [0, 255], with z a standard normal number from a
 * counter-based generator keyed by (seed, element index) (augment_color_math.h). No state is
 * carried from one element to the next, so the noise of a pixel does not depend on which thread
 * or kernel computes it, and the GPU draws the same numbers.
 */
#include "ops/augment_color.h"
#include "ops/augment_color_math.h"

void sp_gaussian_noise(uint8_t *rgb, int64_t npixels, uint64_t seed, double sigma) {
    uint64_t key = seed ^ SP_NOISE_STREAM;
    for (int64_t e = 0; e < npixels * 3; e++) {
        rgb[e] = sp_aug_noisy(rgb[e], sigma, sp_aug_normal(key, (uint64_t)e));
    }
}
