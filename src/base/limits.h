/* limits.h — safety limits on what a file may make the library do, and allocation and
 * arithmetic helpers that enforce them.
 *
 * Every size that comes from a file goes through these helpers: multiplications are checked for
 * overflow and allocations are refused above SP_LIMIT_MAX_ALLOC, so a hostile header yields
 * SP_E_LIMIT or SP_E_CORRUPT instead of a crash or an out-of-memory kill.
 */
#ifndef SP_BASE_LIMITS_H
#define SP_BASE_LIMITS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "base/err.h"

typedef struct sp_limits {
    int64_t value[SP_LIMIT_COUNT_];
} sp_limits;

/* Fill with the defaults documented in slidepipe.h. */
void sp_limits_default(sp_limits *limits);

/* a * b into *out; false on overflow. */
static inline bool sp_mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool sp_add_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_add_overflow(a, b, out);
}

/* malloc / calloc of a file-driven size: SP_E_LIMIT above the allocation limit, SP_E_NOMEM when
 * malloc fails; `what` names the buffer in the message. */
sp_status sp_alloc(const sp_limits *limits, uint64_t size, const char *what, void **out,
                   sp_err *err);
sp_status sp_calloc(const sp_limits *limits, uint64_t count, uint64_t size, const char *what,
                    void **out, sp_err *err);

/* The limits an options object carries (api_misc.c). */
const sp_limits *sp_options_limits(const sp_options *options);

/* The plane (z, c, t) an options object asks to open (zeros for NULL). */
void sp_options_plane(const sp_options *options, int64_t plane[3]);

#endif
