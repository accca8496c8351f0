/* op_kernel_table.c — the GPU kernels by the name of the op they implement (cuda_ops.h), in
 * every build: with the CUDA backend they run on the device, without it (cuda_absent.c) they
 * answer SP_E_UNSUPPORTED. */
#include <string.h>

#include "cuda/cuda_ops.h"

static const struct {
    const char *name;
    sp_cuda_op_fn fn;
} KERNELS[] = {
    {"grey", sp_cuda_op_grey},
    {"od", sp_cuda_op_od},
    {"sobel", sp_cuda_op_sobel},
    {"gaussian", sp_cuda_op_gaussian},
    {"reinhard", sp_cuda_op_reinhard},
    {"macenko", sp_cuda_op_macenko},
};

sp_cuda_op_fn sp_cuda_op_kernel(const char *name) {
    for (size_t i = 0; name != NULL && i < sizeof KERNELS / sizeof KERNELS[0]; i++) {
        if (strcmp(KERNELS[i].name, name) == 0) {
            return KERNELS[i].fn;
        }
    }
    return NULL;
}
