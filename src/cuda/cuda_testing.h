/* cuda_testing.h — internal knobs of the CUDA backend for tests, declared in both builds (with
 * and without CUDA) so that tests compile either way. */
#ifndef SP_CUDA_CUDA_TESTING_H
#define SP_CUDA_CUDA_TESTING_H

#include <stddef.h>

#include "slidepipe.h"

/* Use bands of at most `bytes` for region uploads (default and maximum: the staging size), so
 * that tests exercise many bands with small regions. */
void sp_cuda_context_set_band_bytes(sp_cuda_context *ctx, size_t bytes);

/* Whether cuFile's functions were found and its driver opened (looked at once per process);
 * `why` gets "driver open" or the reason. 0 in a build without CUDA. */
int sp_cuda_cufile_state(char *why, size_t why_len);

#endif
