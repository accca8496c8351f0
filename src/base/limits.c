/* limits.c — default limits and limit-checked allocation (see limits.h). */
#include "base/limits.h"

#include <string.h>

void sp_limits_default(sp_limits *limits) {
    limits->value[SP_LIMIT_MAX_DIRECTORIES] = 4096;
    limits->value[SP_LIMIT_MAX_TILE_PIXELS] = INT64_C(1) << 28;
    limits->value[SP_LIMIT_MAX_ALLOC] = INT64_C(2) << 30;
    limits->value[SP_LIMIT_MAX_METADATA] = INT64_C(64) << 20;
}

sp_status sp_alloc(const sp_limits *limits, uint64_t size, const char *what, void **out,
                   sp_err *err) {
    *out = NULL;
    if (size > (uint64_t)limits->value[SP_LIMIT_MAX_ALLOC] || size > SIZE_MAX) {
        return sp_err_set(err, SP_E_LIMIT,
                          "%s needs %llu bytes, over the allocation limit of %lld bytes", what,
                          (unsigned long long)size,
                          (long long)limits->value[SP_LIMIT_MAX_ALLOC]);
    }
    void *p = malloc(size ? (size_t)size : 1);
    if (p == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory allocating %llu bytes for %s",
                          (unsigned long long)size, what);
    }
    *out = p;
    return SP_OK;
}

sp_status sp_calloc(const sp_limits *limits, uint64_t count, uint64_t size, const char *what,
                    void **out, sp_err *err) {
    uint64_t total;
    if (!sp_mul_u64(count, size, &total)) {
        *out = NULL;
        return sp_err_set(err, SP_E_LIMIT, "%s size overflows", what);
    }
    sp_status st = sp_alloc(limits, total, what, out, err);
    if (st == SP_OK) {
        memset(*out, 0, (size_t)total);
    }
    return st;
}
