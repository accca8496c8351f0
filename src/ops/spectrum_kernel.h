/* spectrum.h — the pieces of the spectral statistics (sp_spectrum_compute) shared between their
 * files: the per-thread patch kernel (spectrum_kernel.c), the FFTW plan made under a lock, and
 * the binning of one dB value, which the unit tests check against the definition.
 */
#ifndef SP_OPS_SPECTRUM_KERNEL_H
#define SP_OPS_SPECTRUM_KERNEL_H

#include <fftw3.h>
#include <stdint.h>

#include "base/err.h"
#include "slidepipe.h"

/* Slots of a working histogram: slot 0 counts values below -40 dB, slots 1..800 are the bins,
 * slot 801 counts values above 160 dB. */
#define SP_SPECTRUM_SLOTS (SP_SPECTRUM_BINS + 2)

/* The slot of one dB value: bin i (slot i + 1) when -40 + i/4 <= db < -40 + (i+1)/4, the last
 * bin also holding 160 exactly, as numpy.histogram bins with edges linspace(-40, 160, 801). */
int sp_spectrum_slot(float db);

/* 20 log10(sqrt(power) + 1e-6) for a squared magnitude `power` >= 0, in float, within a few
 * units in the last place of the correctly rounded value (a vectorisable logarithm). */
float sp_spectrum_db(float power);

/* Sums of one block of patches: kept per block and added in block order, so that the total does
 * not depend on which thread computed which block. */
typedef struct sp_spectrum_sums {
    double sum, sum_squares;
} sp_spectrum_sums;

/* One worker's FFT buffers and working histogram. */
typedef struct sp_spectrum_kernel {
    int patch;               /* P */
    fftwf_plan plan;         /* shared, made by sp_spectrum_plan_create; not owned */
    float *grey;             /* P x P, fftwf_malloc'd (the plan's alignment) */
    fftwf_complex *freq;     /* P x (P/2 + 1) */
    float *db;               /* P/2 + 1 */
    int32_t *slot;           /* P/2 + 1 */
    int64_t hist[SP_SPECTRUM_SLOTS];
    float red[256], green[256], blue[256]; /* v * 0.299f, v * 0.587f, v * 0.114f */
} sp_spectrum_kernel;

/* The r2c plan for P x P patches (FFTW_ESTIMATE, see spectrum_kernel.c for why), made under a
 * process-wide lock because FFTW's planner is not thread-safe. NULL when FFTW cannot plan. */
fftwf_plan sp_spectrum_plan_create(int patch);
void sp_spectrum_plan_destroy(fftwf_plan plan);

/* Allocate a kernel's buffers; SP_E_NOMEM on failure (then free it with kernel_free). */
sp_status sp_spectrum_kernel_init(sp_spectrum_kernel *k, int patch, fftwf_plan plan);
void sp_spectrum_kernel_free(sp_spectrum_kernel *k);

/* Analyse one patch: P x P RGB8 pixels at `rgb` with rows of `stride` bytes. Adds its values'
 * slots to k->hist and their sums to *sums (in a fixed order). */
void sp_spectrum_patch(sp_spectrum_kernel *k, const uint8_t *rgb, int64_t stride,
                       sp_spectrum_sums *sums);

/* The same for a patch whose grey values were computed already (by sp_op_spectrum_grey, whose
 * values equal the ones sp_spectrum_patch computes): P x P floats at `grey` with rows of
 * `stride` floats. Gives the same histogram slots and sums as sp_spectrum_patch on the RGB8
 * pixels they came from, bit for bit. */
void sp_spectrum_patch_grey(sp_spectrum_kernel *k, const float *grey, int64_t stride,
                            sp_spectrum_sums *sums);

#endif
