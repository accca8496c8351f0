/* cuda_spectrum.h — the spectral statistics of one slide on the GPU (cuFFT), called by
 * sp_spectrum_compute when SP_SPECTRUM_DEVICE is SP_DEVICE_CUDA. Plain C, declared in every
 * build; without the CUDA backend it answers SP_E_UNSUPPORTED. */
#ifndef SP_CUDA_CUDA_SPECTRUM_H
#define SP_CUDA_CUDA_SPECTRUM_H

#include "base/err.h"
#include "slidepipe.h"

/* What to analyse: the full patches of a level (width x height, multiples of the patch), read in
 * strips of strip_rows rows and pieces of piece_cols columns on `threads` threads. */
typedef struct sp_cuda_spectrum_job {
    sp_slide *slide;
    int32_t level;
    double downsample;
    int patch;
    int64_t width, height, strip_rows, piece_cols;
    int threads;
    sp_progress_fn progress;
    void *progress_user;
} sp_cuda_spectrum_job;

/* Fill `out` (initialised by the caller) with the statistics; the slide's read error or the
 * GPU's error otherwise. */
sp_status sp_cuda_spectrum(const sp_cuda_spectrum_job *job, sp_spectrum_stats *out, sp_err *err);

#endif
