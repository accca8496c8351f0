/* dlpack_abi.h — the DLPack tensor structures of the DLPack specification, declared here with
 * this project's names: the unversioned managed tensor (capsule "dltensor") and the versioned one
 * of DLPack 1.x (capsule "dltensor_versioned", which also says whether the memory is read-only).
 * The consumer renames the capsule "used_..." and frees the tensor with its deleter when done.
 * Only what _loader.c exports is named. */
#ifndef SP_PYTHON_DLPACK_ABI_H
#define SP_PYTHON_DLPACK_ABI_H

#include <stdint.h>

enum { SP_DL_CPU = 1, SP_DL_CUDA = 2 };   /* DLDeviceType kDLCPU, kDLCUDA */
enum { SP_DL_UINT = 1, SP_DL_FLOAT = 2 }; /* DLDataTypeCode kDLUInt, kDLFloat */

typedef struct sp_dl_device {
    int32_t device_type;
    int32_t device_id;
} sp_dl_device;

typedef struct sp_dl_dtype {
    uint8_t code;
    uint8_t bits;
    uint16_t lanes;
} sp_dl_dtype;

typedef struct sp_dl_tensor {
    void *data;
    sp_dl_device device;
    int32_t ndim;
    sp_dl_dtype dtype;
    int64_t *shape;
    int64_t *strides; /* NULL: compact row-major */
    uint64_t byte_offset;
} sp_dl_tensor;

typedef struct sp_dl_managed_tensor {
    sp_dl_tensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct sp_dl_managed_tensor *self);
} sp_dl_managed_tensor;

/* DLPack 1.x: the version first, so a consumer can check it before reading the rest. */
typedef struct sp_dl_version {
    uint32_t major;
    uint32_t minor;
} sp_dl_version;

typedef struct sp_dl_managed_tensor_versioned {
    sp_dl_version version;
    void *manager_ctx;
    void (*deleter)(struct sp_dl_managed_tensor_versioned *self);
    uint64_t flags; /* bit 0: read-only; bit 1: a copy */
    sp_dl_tensor dl_tensor;
} sp_dl_managed_tensor_versioned;

#endif
