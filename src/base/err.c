/* err.c — recording and copying internal error messages (see err.h). */
#include "base/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

sp_status sp_err_set(sp_err *err, sp_status status, const char *fmt, ...) {
    if (err == NULL || err->status != SP_OK) {
        return status;
    }
    err->status = status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return status;
}

void sp_err_clear(sp_err *err) {
    err->status = SP_OK;
    err->msg[0] = '\0';
}

void sp_err_copy_out(const sp_err *err, char *buf, size_t buf_len) {
    if (buf == NULL || buf_len == 0) {
        return;
    }
    const char *msg = err->msg[0] ? err->msg : sp_status_str(err->status);
    snprintf(buf, buf_len, "%s", msg);
}

void sp_err_report(sp_status status, const sp_err *err, char *buf, size_t buf_len) {
    if (buf == NULL || buf_len == 0) {
        return;
    }
    if (status == SP_OK) {
        buf[0] = '\0';
    } else {
        sp_err_copy_out(err, buf, buf_len);
    }
}
