/* cuda_ops.h — the engine's operations on the GPU: the kernels this backend registers for the
 * ops of src/ops/ by name, and the runner that the engine uses to run an op on one tile on the
 * GPU. Plain C, no CUDA headers, declared in every build: without the CUDA backend the kernels
 * answer SP_E_UNSUPPORTED. */
#ifndef SP_CUDA_CUDA_OPS_H
#define SP_CUDA_CUDA_OPS_H

#include "base/err.h"
#include "ops/op.h"

/* The ops' CUDA functions: the block's src, dst and scratch are device pointers (scratch holds
 * op->scratch_floats(params, width, height) floats); `stream` is a cudaStream_t. They enqueue work
 * on the stream and return; SP_E_IO when a launch fails. */
sp_status sp_cuda_op_grey(const sp_op_params *params, const sp_op_block *block, void *stream);
sp_status sp_cuda_op_od(const sp_op_params *params, const sp_op_block *block, void *stream);
sp_status sp_cuda_op_sobel(const sp_op_params *params, const sp_op_block *block, void *stream);
sp_status sp_cuda_op_gaussian(const sp_op_params *params, const sp_op_block *block, void *stream);
sp_status sp_cuda_op_reinhard(const sp_op_params *params, const sp_op_block *block, void *stream);
sp_status sp_cuda_op_macenko(const sp_op_params *params, const sp_op_block *block, void *stream);

typedef sp_status (*sp_cuda_op_fn)(const sp_op_params *params, const sp_op_block *block,
                                   void *stream);

/* The kernel registered for the op named `name`, or NULL when the backend has none. */
sp_cuda_op_fn sp_cuda_op_kernel(const char *name);

/* One worker's GPU state for running `op` on tiles of at most chunk x chunk outputs: a context
 * (device chosen by sp_cuda_default_device, stream), device buffers for the input with halo, the
 * output planes and the scratch. */
typedef struct sp_cuda_op_runner sp_cuda_op_runner;

sp_status sp_cuda_op_runner_create(const sp_op *op, const sp_op_params *params, int64_t chunk,
                                   sp_cuda_op_runner **out, sp_err *err);

/* Run the op on a host block as the engine lays it out (src: RGB8 with the op's halo around it,
 * dst: op->channels planes, dst_plane elements apart; scratch unused): upload the input, run, and
 * download the planes into block->dst (zeros past width and height). Synchronous. */
sp_status sp_cuda_op_runner_run(sp_cuda_op_runner *runner, const sp_op_block *block, sp_err *err);

void sp_cuda_op_runner_destroy(sp_cuda_op_runner *runner);

#endif
