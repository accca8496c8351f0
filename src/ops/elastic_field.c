/* elastic_field.c — the displacement field of the elastic deformation (augment_geometry.c), as
 * Kornia's elastic_transform2d defines it with align_corners=True: per-pixel noise uniform in
 * [-1, 1), smoothed by a normalised Gaussian of size k (odd) and standard deviation sigma, x
 * then y, with zeros beyond the edges (Kornia 0.9 filters with border_type="constant"), scaled
 * by alpha and turned from Kornia's normalised units into pixels ((size - 1) / 2 per unit).
 *
 * The noise is drawn from the geometry stream after its scalar draws: the x plane row by row,
 * then the y plane, so turning elastic on or off changes no other number. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/augment_geometry.h"
#include "ops/op.h"

static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void sp_geom_elastic_noise(int64_t w, int64_t h, uint64_t seed, double *noise) {
    uint64_t state = seed ^ SP_GEOMETRY_STREAM;
    for (int i = 0; i < SP_GEOM_SCALAR_DRAWS; i++) {
        splitmix64(&state);
    }
    for (int64_t i = 0; i < 2 * w * h; i++) {
        noise[i] = 2.0 * ((double)(splitmix64(&state) >> 11) * 0x1p-53) - 1.0;
    }
}

/* One plane: rows along x into tmp, then columns along y back into the plane; each output is
 * the sum over k = -r..r in that order, in float32 (as Kornia smooths a float32 image; four
 * lanes a vector where double has two). Rows go through a zero-padded copy (`pad`, w + 2 r) and
 * columns are accumulated a whole row at a time, so the inner loops have no edge tests and
 * vectorise (eight lanes with AVX2: each output is still the same sum in the same order). */
SP_OPS_SIMD static void smooth_plane(int64_t w, int64_t h, const float *weights, int r,
                                     double *plane, float *tmp, float *pad, float *row) {
    for (int64_t i = 0; i < r; i++) {
        pad[i] = 0.0f;
        pad[w + r + i] = 0.0f;
    }
    for (int64_t y = 0; y < h; y++) {
        for (int64_t x = 0; x < w; x++) {
            pad[r + x] = (float)plane[y * w + x];
        }
        float *out = tmp + y * w;
        for (int64_t x = 0; x < w; x++) {
            out[x] = 0.0f;
        }
        for (int k = 0; k <= 2 * r; k++) {
            float wk = weights[k];
            for (int64_t x = 0; x < w; x++) {
                out[x] += wk * pad[x + k];
            }
        }
    }
    for (int64_t y = 0; y < h; y++) {
        for (int64_t x = 0; x < w; x++) {
            row[x] = 0.0f;
        }
        for (int k = -r; k <= r; k++) {
            int64_t yy = y + k;
            if (yy < 0 || yy >= h) {
                continue; /* zeros beyond the edges add nothing */
            }
            float wk = weights[k + r];
            const float *in = tmp + yy * w;
            for (int64_t x = 0; x < w; x++) {
                row[x] += wk * in[x];
            }
        }
        for (int64_t x = 0; x < w; x++) {
            plane[y * w + x] = row[x];
        }
    }
}

void sp_geom_elastic_smooth(int64_t w, int64_t h, const sp_geometry_params *p, double *field,
                            double *scratch) {
    double sigma = p->elastic_sigma;
    int k = p->elastic_kernel != 0 ? p->elastic_kernel : 2 * (int)ceil(3.0 * sigma) + 1;
    if (k > 1023) {
        k = 1023;
    }
    int r = k / 2;
    double weights[1023], sum = 0.0;
    float weights_f[1023];
    for (int i = -r; i <= r; i++) {
        weights[i + r] = exp(-((double)i * (double)i) / (2.0 * sigma * sigma));
        sum += weights[i + r];
    }
    for (int i = 0; i < k; i++) {
        weights_f[i] = (float)(weights[i] / sum);
    }
    double unit_x = p->elastic_alpha[0] * (double)(w - 1) / 2.0;
    double unit_y = p->elastic_alpha[1] * (double)(h - 1) / 2.0;
    float *tmp = (float *)scratch, *pad = tmp + w * h, *row = pad + w + 2 * r;
    smooth_plane(w, h, weights_f, r, field, tmp, pad, row);
    smooth_plane(w, h, weights_f, r, field + w * h, tmp, pad, row);
    for (int64_t i = 0; i < w * h; i++) {
        field[i] *= unit_x;
        field[w * h + i] *= unit_y;
    }
}
