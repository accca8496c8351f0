/* err.h — the internal error record passed down every fallible call.
 *
 * A function that fails fills an sp_err with a status and a one-line message and returns the
 * status; callers propagate the status without rewriting the message, so the deepest, most
 * precise cause is what the user sees. The first error recorded wins.
 */
#ifndef SP_BASE_ERR_H
#define SP_BASE_ERR_H

#include "slidepipe.h"

#define SP_ERR_MSG_MAX 512

typedef struct sp_err {
    sp_status status;
    char msg[SP_ERR_MSG_MAX];
} sp_err;

/* Record an error unless one is already recorded; returns `status` for `return sp_err_set(...)`.
 * `err` may be NULL. */
sp_status sp_err_set(sp_err *err, sp_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Clear the record. */
void sp_err_clear(sp_err *err);

/* Copy the message (or the status name when there is none) into a caller buffer. */
void sp_err_copy_out(const sp_err *err, char *buf, size_t buf_len);

/* What a public call leaves in its caller's error buffer: "" when `status` is SP_OK, else the
 * message (buf may be NULL). */
void sp_err_report(sp_status status, const sp_err *err, char *buf, size_t buf_len);

#endif
