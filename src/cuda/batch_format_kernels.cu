/* batch_format_kernels.cu — RGB8 patches in device memory written into the tensor a model takes,
 * as the CPU's sp_batch_write_rows does (src/jobs/train/batch_format.c): every output value is
 * a table entry chosen by its channel and 8-bit value (the table is the CPU's, made on the host),
 * placed by the layout, NHWC or NCHW. One thread per value. The launcher is a C function that
 * returns a cudaError_t as int. */
#include <cuda_runtime.h>
#include <stdint.h>

namespace {

constexpr int THREADS = 256;

/* Value j of the batch's count * pixels * 3: patch i, pixel p, channel c, read interleaved. */
template <typename T>
__global__ void format_kernel(const uint8_t *__restrict__ rgb, T *__restrict__ out,
                              const T *__restrict__ table, int64_t pixels, int64_t values,
                              int nchw) {
    int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (j >= values) {
        return;
    }
    int64_t c = j % 3, p = (j / 3) % pixels, i = j / (3 * pixels);
    int64_t at = nchw ? (i * 3 + c) * pixels + p : j;
    out[at] = table[c * 256 + rgb[j]];
}

template <typename T>
int launch(const uint8_t *rgb, void *out, const void *table, int64_t pixels, int64_t values,
           int nchw, cudaStream_t stream) {
    unsigned blocks = (unsigned)((values + THREADS - 1) / THREADS);
    format_kernel<T>
        <<<blocks, THREADS, 0, stream>>>(rgb, (T *)out, (const T *)table, pixels, values, nchw);
    return (int)cudaGetLastError();
}

} // namespace

extern "C" {

/* `count` patches of `pixels` interleaved RGB8 pixels (device memory) into out (device memory):
 * each value is table[c * 256 + v] (device memory, 3 x 256 entries of `bytes` = 1, 2 or 4),
 * in NCHW order when nchw, else NHWC. */
int sp_cuda_launch_batch_format(const uint8_t *rgb, void *out, const void *table, int bytes,
                                int64_t count, int64_t pixels, int nchw, cudaStream_t stream) {
    int64_t values = count * pixels * 3;
    if (values <= 0) {
        return 0;
    }
    switch (bytes) {
    case 1: return launch<uint8_t>(rgb, out, table, pixels, values, nchw, stream);
    case 2: return launch<uint16_t>(rgb, out, table, pixels, values, nchw, stream);
    case 4: return launch<uint32_t>(rgb, out, table, pixels, values, nchw, stream);
    default: return (int)cudaErrorInvalidValue;
    }
}

} // extern "C"
