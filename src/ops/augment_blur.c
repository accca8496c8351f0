/* augment_blur.c — the Gaussian blur of the photometric augmentation: torchvision's
 * gaussian_blur (kernel weights in float32 as its _get_gaussian_kernel1d computes them, reflect
 * padding, rounding half to even back to uint8), evaluated separably — rows into a float32
 * scratch, then columns — where torchvision convolves with the outer product of the two 1-D
 * kernels. The two agree up to float32 rounding, which moves a byte only when a value lies
 * within a hair of .5 (docs/augment-color.md gives the measured figures).
 */
#include <math.h>

#include "ops/augment_color.h"
#include "ops/augment_color_math.h"

int32_t sp_blur_kernel_size(double sigma, int32_t given) {
    if (given > 0) {
        return given;
    }
    int32_t k = 2 * (int32_t)ceil(3.0 * sigma) + 1;
    return k > SP_BLUR_KERNEL_MAX ? SP_BLUR_KERNEL_MAX : k;
}

void sp_blur_weights(int32_t k, double sigma, float *w) {
    float half = (float)(k - 1) * 0.5f, s = (float)sigma, sum = 0.0f;
    for (int32_t i = 0; i < k; i++) {
        float x = (-half + (float)i) / s; /* the offsets are whole numbers: exact */
        w[i] = expf(-0.5f * (x * x));
        sum += w[i];
    }
    for (int32_t i = 0; i < k; i++) {
        w[i] /= sum;
    }
}

void sp_gaussian_blur(uint8_t *rgb, int64_t width, int64_t height, const float *w, int32_t k,
                      float *scratch) {
    int64_t r = k / 2;
    for (int64_t y = 0; y < height; y++) {
        const uint8_t *row = rgb + y * width * 3;
        float *out = scratch + y * width * 3;
        for (int64_t x = 0; x < width; x++) {
            float acc[3] = {0.0f, 0.0f, 0.0f};
            for (int32_t i = 0; i < k; i++) {
                const uint8_t *px = row + 3 * sp_aug_reflect(x + i - r, width);
                for (int c = 0; c < 3; c++) {
                    acc[c] += w[i] * (float)px[c];
                }
            }
            for (int c = 0; c < 3; c++) {
                out[3 * x + c] = acc[c];
            }
        }
    }
    for (int64_t y = 0; y < height; y++) {
        uint8_t *out = rgb + y * width * 3;
        for (int64_t x = 0; x < width; x++) {
            float acc[3] = {0.0f, 0.0f, 0.0f};
            for (int32_t i = 0; i < k; i++) {
                const float *px = scratch + (sp_aug_reflect(y + i - r, height) * width + x) * 3;
                for (int c = 0; c < 3; c++) {
                    acc[c] += w[i] * px[c];
                }
            }
            for (int c = 0; c < 3; c++) {
                float v = rintf(acc[c]);
                out[3 * x + c] = (uint8_t)(v < 0.0f ? 0.0f : (v > 255.0f ? 255.0f : v));
            }
        }
    }
}
