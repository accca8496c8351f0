/* gaussian.c — the `gaussian:SIGMA` op: per channel, a Gaussian blur as
 * scipy.ndimage.gaussian_filter(channel, SIGMA, truncate=4.0, mode='reflect') computes it, as
 * float32, three channels. Halo = the kernel's radius, int(4 * SIGMA + 0.5), as scipy rounds it.
 *
 * The kernel is scipy's: w[k] = exp(-k² / (2 SIGMA²)) for |k| <= radius, divided by its sum, in
 * double precision, then rounded to float. Like scipy, the filter runs down the columns (axis 0)
 * first, then along the rows (axis 1), both with the symmetric weights paired:
 * w[0] * p[i] + sum over k of w[k] * (p[i - k] + p[i + k]), accumulated in float32 in a fixed
 * order, so every pixel gets the same arithmetic in any block (the engine's tile-wise result
 * equals the whole-level result bit for bit); against scipy's float64 the difference is a few
 * float32 roundings of values up to 255, far below the 0.01 the tests allow.
 */
#include <math.h>
#include <stdlib.h>

#include "base/numbers.h"
#include "ops/op.h"

/* Largest sigma accepted: radius 400, a block's halo stays small next to a chunk. */
#define MAX_SIGMA 100.0

int sp_op_gaussian_radius(double sigma) {
    return (int)(4.0 * sigma + 0.5);
}

static sp_status gaussian_parse(const char *arg, sp_op_params *p, sp_err *err) {
    if (arg == NULL || *arg == '\0') {
        return sp_err_set(err, SP_E_INVALID_ARG, "gaussian needs a sigma: gaussian:SIGMA");
    }
    char *end;
    double sigma = sp_strtod(arg, &end);
    if (end == arg || *end != '\0' || !isfinite(sigma) || sigma <= 0 || sigma > MAX_SIGMA) {
        return sp_err_set(err, SP_E_INVALID_ARG,
                          "bad gaussian sigma '%s' (a number above 0, at most %g)", arg, MAX_SIGMA);
    }
    p->sigma = sigma;
    return SP_OK;
}

static int gaussian_halo(const sp_op_params *p) {
    return sp_op_gaussian_radius(p->sigma);
}

/* The channel plane, the column-filtered rows, and the weights. */
static size_t gaussian_scratch(const sp_op_params *p, int64_t w, int64_t h) {
    int64_t r = sp_op_gaussian_radius(p->sigma);
    return (size_t)((w + 2 * r) * (h + 2 * r) + (w + 2 * r) * h + r + 1);
}

void sp_op_gaussian_weights(double sigma, int r, float *weights) {
    double sum = 0, s2 = sigma * sigma;
    for (int k = -r; k <= r; k++) {
        sum += exp(-0.5 / s2 * (double)k * (double)k);
    }
    for (int k = 0; k <= r; k++) {
        weights[k] = (float)(exp(-0.5 / s2 * (double)k * (double)k) / sum);
    }
}

/* out[x] = w0 c[x] + sum_k w[k] (above_k[x] + below_k[x]) for x < n, rows `pitch` apart. */
static void filter_columns(const float *restrict centre, int64_t pitch, const float *w, int r,
                           float *restrict out, int64_t n) {
    float w0 = w[0];
    for (int64_t x = 0; x < n; x++) {
        out[x] = w0 * centre[x];
    }
    for (int k = 1; k <= r; k++) {
        const float *restrict a = centre - k * pitch, *restrict b = centre + k * pitch;
        float wk = w[k];
        for (int64_t x = 0; x < n; x++) {
            out[x] += wk * (a[x] + b[x]);
        }
    }
}

/* out[x] = w0 row[x] + sum_k w[k] (row[x - k] + row[x + k]) for x < n; row has r pixels of
 * context on either side. */
static void filter_row(const float *restrict row, const float *w, int r, float *restrict out,
                       int64_t n) {
    float w0 = w[0];
    for (int64_t x = 0; x < n; x++) {
        out[x] = w0 * row[x];
    }
    for (int k = 1; k <= r; k++) {
        float wk = w[k];
        const float *restrict a = row - k, *restrict b = row + k;
        for (int64_t x = 0; x < n; x++) {
            out[x] += wk * (a[x] + b[x]);
        }
    }
}

static sp_status gaussian_cpu(const sp_op_params *p, const sp_op_block *b) {
    int r = sp_op_gaussian_radius(p->sigma);
    int64_t pw = b->width + 2 * r, ph = b->height + 2 * r;
    float *plane = b->scratch, *cols = plane + pw * ph, *w = cols + pw * b->height;
    sp_op_gaussian_weights(p->sigma, r, w);
    for (int c = 0; c < 3; c++) {
        sp_op_rgb_channel_to_float(b->src - r * b->src_stride - 3 * r, b->src_stride, c, pw, ph,
                                   plane);
        for (int64_t y = 0; y < b->height; y++) {
            filter_columns(plane + (y + r) * pw, pw, w, r, cols + y * pw, pw);
        }
        float *out = (float *)b->dst + c * b->dst_plane;
        for (int64_t y = 0; y < b->height; y++) {
            filter_row(cols + y * pw + r, w, r, out + y * b->dst_stride, b->width);
        }
    }
    return SP_OK;
}

const sp_op sp_op_gaussian = {
    .name = "gaussian",
    .parse = gaussian_parse,
    .halo = gaussian_halo,
    .input = SP_PIXEL_RGB8,
    .output = SP_ZARR_F32,
    .channels = 3,
    .scratch_floats = gaussian_scratch,
    .cpu = gaussian_cpu,
};
