/* spectrum_kernel.c — the per-patch arithmetic of the spectral statistics: RGB8 to grey, the
 * real-to-complex FFT, dB values, their histogram slots and sums.
 *
 * A real patch's spectrum is Hermitian, F[u][v] = conj(F[-u][-v]), so FFTW's r2c output (columns
 * 0 .. P/2) holds every magnitude of the full spectrum numpy.fft.fft2 gives: column 0 (and column
 * P/2 when P is even) stands for itself, every other column also for its mirror, so it counts
 * twice. The grey value is computed exactly as the reference's float32 matrix product does
 * ((0.299 R + 0.587 G) + 0.114 B, each product rounded, no fused multiply-add: checked equal on
 * all 2^24 colours against Debian's numpy), which is why this file is built with
 * -ffp-contract=off. The logarithm is our own, branch-free so the compiler vectorises the row
 * loop (libm's log10f is a call per value and was a third of the time); it is built with
 * -fno-math-errno (sqrtf becomes one instruction), -fno-trapping-math (so the selects may be
 * if-converted into masks) and -O3.
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ops/spectrum_kernel.h"
#include "ops/spectrum_math.h"

int sp_spectrum_slot(float db) {
    return sp_spectrum_slot_of(db);
}

float sp_spectrum_db(float power) {
    return sp_spectrum_db_of(power);
}

static pthread_once_t planner_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t planner_lock = PTHREAD_MUTEX_INITIALIZER;

static void make_planner_thread_safe(void) {
    /* Protects FFTW's planner against other users of FFTW in the same process too. */
    fftwf_make_planner_thread_safe();
}

/* FFTW_ESTIMATE, not FFTW_MEASURE: MEASURE picks its algorithm by timing, so two processes may
 * pick different ones and round differently, and an MPI run would no longer give exactly the
 * single-process statistics. MEASURE's plan is about 18% faster for 256 x 256 (117 against
 * 143 us per patch here), which is a few percent of a whole slide's time. */
fftwf_plan sp_spectrum_plan_create(int patch) {
    pthread_once(&planner_once, make_planner_thread_safe);
    size_t half = (size_t)patch / 2 + 1;
    float *in = fftwf_malloc(sizeof(float) * (size_t)patch * (size_t)patch);
    fftwf_complex *out = fftwf_malloc(sizeof(fftwf_complex) * (size_t)patch * half);
    fftwf_plan plan = NULL;
    if (in != NULL && out != NULL) {
        pthread_mutex_lock(&planner_lock);
        plan = fftwf_plan_dft_r2c_2d(patch, patch, in, out, FFTW_ESTIMATE);
        pthread_mutex_unlock(&planner_lock);
    }
    fftwf_free(in);
    fftwf_free(out);
    return plan;
}

void sp_spectrum_plan_destroy(fftwf_plan plan) {
    if (plan != NULL) {
        pthread_mutex_lock(&planner_lock);
        fftwf_destroy_plan(plan);
        pthread_mutex_unlock(&planner_lock);
    }
}

sp_status sp_spectrum_kernel_init(sp_spectrum_kernel *k, int patch, fftwf_plan plan) {
    memset(k, 0, sizeof *k);
    k->patch = patch;
    k->plan = plan;
    size_t half = (size_t)patch / 2 + 1;
    k->grey = fftwf_malloc(sizeof(float) * (size_t)patch * (size_t)patch);
    k->freq = fftwf_malloc(sizeof(fftwf_complex) * (size_t)patch * half);
    k->db = malloc(sizeof(float) * half);
    k->slot = malloc(sizeof(int32_t) * half);
    for (int v = 0; v < 256; v++) {
        k->red[v] = (float)v * 0.299f;
        k->green[v] = (float)v * 0.587f;
        k->blue[v] = (float)v * 0.114f;
    }
    return k->grey && k->freq && k->db && k->slot ? SP_OK : SP_E_NOMEM;
}

void sp_spectrum_kernel_free(sp_spectrum_kernel *k) {
    fftwf_free(k->grey);
    fftwf_free(k->freq);
    free(k->db);
    free(k->slot);
    k->grey = NULL;
    k->freq = NULL;
    k->db = NULL;
    k->slot = NULL;
}

/* Add one row of grey values to the four double accumulators. Both entry points below sum the
 * same floats this way, so a patch gives the same total whichever one computed it. */
static void add_row(double acc[4], const float *restrict g, int n) {
    int x = 0;
    for (; x + 4 <= n; x += 4) {
        acc[0] += g[x];
        acc[1] += g[x + 1];
        acc[2] += g[x + 2];
        acc[3] += g[x + 3];
    }
    for (; x < n; x++) {
        acc[0] += g[x];
    }
}

/* Grey values of a patch; returns their sum. The three products come from the kernel's tables
 * (the same float products, looked up instead of converted and multiplied per pixel); the sum is
 * kept in four double accumulators, so it is not one long chain of dependent additions. */
static double to_grey(const sp_spectrum_kernel *k, float *restrict grey,
                      const uint8_t *restrict rgb, int64_t stride, int n) {
    double acc[4] = {0, 0, 0, 0};
    for (int y = 0; y < n; y++) {
        const uint8_t *px = rgb + y * stride;
        float *g = grey + (size_t)y * (size_t)n;
        for (int x = 0; x < n; x++) {
            g[x] = (k->red[px[3 * x]] + k->green[px[3 * x + 1]]) + k->blue[px[3 * x + 2]];
        }
        add_row(acc, g, n);
    }
    return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

/* Grey values already computed (sp_op_spectrum_grey), copied into the FFT buffer; returns their
 * sum, added exactly as to_grey adds. */
static double copy_grey(float *restrict grey, const float *restrict src, int64_t stride, int n) {
    double acc[4] = {0, 0, 0, 0};
    for (int y = 0; y < n; y++) {
        float *g = grey + (size_t)y * (size_t)n;
        memcpy(g, src + y * stride, sizeof(float) * (size_t)n);
        add_row(acc, g, n);
    }
    return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

/* Subtract the integer nearest the patch's mean. A float FFT's rounding error grows with the
 * input's magnitude, which a bright patch owes almost all to its mean (the DC term); without it
 * the small coefficients come out about ten times closer to the reference's double-precision
 * FFT. The subtraction is exact except for pixels much darker than the mean, where it rounds
 * by at most 2^-18. The DC coefficient is then put back from the exact sum. */
static void remove_offset(float *grey, size_t count, float offset) {
    for (size_t i = 0; i < count; i++) {
        grey[i] -= offset;
    }
}

/* dB values and slots of one output row (vectorised by the compiler). */
static void row_values(const float *restrict f, float *restrict db, int32_t *restrict slot, int n) {
    for (int j = 0; j < n; j++) {
        float re = f[2 * j], im = f[2 * j + 1];
        float d = sp_spectrum_db_of(re * re + im * im);
        db[j] = d;
        slot[j] = sp_spectrum_slot_of(d);
    }
}

/* The rest of a patch once its grey values are in k->grey and their sum is `total`. */
static void transform(sp_spectrum_kernel *k, double total, sp_spectrum_sums *sums) {
    int n = k->patch, half = n / 2 + 1;
    /* Columns 1 .. last_twice count twice; column 0 and, for even P, column P/2 once. */
    int last_twice = n % 2 == 0 ? half - 2 : half - 1;
    remove_offset(k->grey, (size_t)n * (size_t)n, (float)nearbyint(total / ((double)n * n)));
    fftwf_execute_dft_r2c(k->plan, k->grey, k->freq);
    k->freq[0][0] = (float)total; /* F[0][0] is the sum of the patch, a real number */
    k->freq[0][1] = 0.0f;
    double once = 0, once_sq = 0;
    double twice[4] = {0, 0, 0, 0}, twice_sq[4] = {0, 0, 0, 0};
    for (int r = 0; r < n; r++) {
        const float *f = (const float *)(k->freq + (size_t)r * (size_t)half);
        row_values(f, k->db, k->slot, half);
        const float *db = k->db;
        const int32_t *slot = k->slot;
        k->hist[slot[0]] += 1;
        once += db[0];
        once_sq += (double)db[0] * db[0];
        if (n % 2 == 0) {
            k->hist[slot[half - 1]] += 1;
            once += db[half - 1];
            once_sq += (double)db[half - 1] * db[half - 1];
        }
        for (int j = 1; j <= last_twice; j++) {
            k->hist[slot[j]] += 2;
            double d = db[j];
            twice[j & 3] += d;
            twice_sq[j & 3] += d * d;
        }
    }
    double t = (twice[0] + twice[1]) + (twice[2] + twice[3]);
    double tsq = (twice_sq[0] + twice_sq[1]) + (twice_sq[2] + twice_sq[3]);
    sums->sum += once + 2.0 * t;
    sums->sum_squares += once_sq + 2.0 * tsq;
}

void sp_spectrum_patch(sp_spectrum_kernel *k, const uint8_t *rgb, int64_t stride,
                       sp_spectrum_sums *sums) {
    transform(k, to_grey(k, k->grey, rgb, stride, k->patch), sums);
}

void sp_spectrum_patch_grey(sp_spectrum_kernel *k, const float *grey, int64_t stride,
                            sp_spectrum_sums *sums) {
    transform(k, copy_grey(k->grey, grey, stride, k->patch), sums);
}
