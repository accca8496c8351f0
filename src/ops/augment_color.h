/* augment_color.h — what the photometric augmentation's files share inside the library: the
 * parameter check and the draws (augment_color.c), and the three stages, one file each — colour
 * jitter (augment_color.c), Gaussian blur (augment_blur.c), Gaussian noise (augment_noise.c).
 * The GPU backend uses the same draws, kernel weights and constants. */
#ifndef SP_OPS_AUGMENT_COLOR_H
#define SP_OPS_AUGMENT_COLOR_H

#include <stdint.h>

#include "slidepipe.h"

/* The patch's draw stream starts at seed ^ SP_PHOTOMETRIC_STREAM ("photomet" in ASCII); the
 * noise's counter-based generator is keyed by seed ^ SP_NOISE_STREAM ("noisegau"). */
#define SP_PHOTOMETRIC_STREAM 0x70686f746f6d6574ull
#define SP_NOISE_STREAM 0x6e6f697365676175ull

/* Limits of the parameters (sp_photometric_params documents them). */
#define SP_BLUR_SIGMA_MAX 40.0
#define SP_BLUR_KERNEL_MAX 255
#define SP_PHOTOMETRIC_SIDE_MAX (INT64_C(1) << 20)

/* SP_E_INVALID_ARG unless `p` is non-NULL, large enough and every parameter is in range. */
sp_status sp_photometric_check(const sp_photometric_params *p);

/* The draws of `seed` (p already checked); out->struct_size is left as it is. */
void sp_photometric_draws_of(uint64_t seed, const sp_photometric_params *p,
                             sp_photometric_draws *out);

/* The jitter's steps in d->order on npixels RGB8 pixels (d->jitter set). */
void sp_color_jitter(uint8_t *rgb, int64_t npixels, const sp_photometric_draws *d);

/* The float32 factor and (1 - factor) a jitter step blends with, and for hue its shift. */
void sp_jitter_ratio(const sp_photometric_draws *d, int step, float *ratio, float *rest);

/* The grey mean contrast blends with: the exact integer sum of the uint8 grey values, divided by
 * the pixel count in float32 (torch.mean's value while the sum is below 2^24). */
float sp_jitter_grey_mean(uint64_t grey_sum, int64_t npixels);

/* The blur's kernel size for `sigma`: `given` when nonzero, else 2 * ceil(3 sigma) + 1. */
int32_t sp_blur_kernel_size(double sigma, int32_t given);

/* The k normalised kernel weights for `sigma`, in float32 as torchvision's
 * _get_gaussian_kernel1d computes them. */
void sp_blur_weights(int32_t k, double sigma, float *w);

/* The separable blur in place: rows then columns, float32, reflect borders, rounded half to
 * even; scratch holds width * height * 3 floats. */
void sp_gaussian_blur(uint8_t *rgb, int64_t width, int64_t height, const float *w, int32_t k,
                      float *scratch);

/* Additive noise of standard deviation sigma (8-bit units) in place, from seed's generator. */
void sp_gaussian_noise(uint8_t *rgb, int64_t npixels, uint64_t seed, double sigma);

#endif
