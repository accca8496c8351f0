/* source.c — the generic sp_source wrapper: bounds checks and exact reads over any
 * implementation (see source.h). */
#include "io/source.h"

#include <stdlib.h>
#include <string.h>

struct sp_source {
    sp_source_impl impl;
    void *ctx;
    uint64_t size;
    char *name;
};

sp_status sp_source_create(const sp_source_impl *impl, void *ctx, uint64_t size, const char *name,
                           sp_source **out, sp_err *err) {
    *out = NULL;
    sp_source *src = calloc(1, sizeof *src);
    char *copy = strdup(name ? name : "");
    if (src == NULL || copy == NULL) {
        free(src);
        free(copy);
        impl->close(ctx);
        return sp_err_set(err, SP_E_NOMEM, "out of memory opening %s", name ? name : "source");
    }
    src->impl = *impl;
    src->ctx = ctx;
    src->size = size;
    src->name = copy;
    *out = src;
    return SP_OK;
}

sp_status sp_source_read(sp_source *src, uint64_t offset, void *buf, size_t len, sp_err *err) {
    if (offset > src->size || len > src->size - offset) {
        return sp_err_set(err, SP_E_CORRUPT,
                          "%s: truncated: %zu bytes at offset %llu lie beyond the end (%llu bytes)",
                          src->name, len, (unsigned long long)offset,
                          (unsigned long long)src->size);
    }
    size_t done = 0;
    while (done < len) {
        size_t got = 0;
        sp_status st = src->impl.read_at(src->ctx, offset + done, (char *)buf + done, len - done,
                                         &got, err);
        if (st != SP_OK) {
            return st;
        }
        if (got == 0) {
            return sp_err_set(err, SP_E_IO, "%s: unexpected end of data at offset %llu",
                              src->name, (unsigned long long)(offset + done));
        }
        done += got;
    }
    return SP_OK;
}

bool sp_source_can_prefetch(const sp_source *src) { return src->impl.prefetch != NULL; }

void sp_source_prefetch(sp_source *src, const sp_byte_range *ranges, size_t n) {
    if (src->impl.prefetch != NULL && n > 0) {
        src->impl.prefetch(src->ctx, ranges, n);
    }
}

void *sp_source_take_whole(sp_source *src, size_t *len) {
    *len = 0;
    return src->impl.take_whole != NULL ? src->impl.take_whole(src->ctx, len) : NULL;
}

int sp_source_local_fd(const sp_source *src) {
    return src->impl.local_fd != NULL ? src->impl.local_fd(src->ctx) : -1;
}

uint64_t sp_source_size(const sp_source *src) { return src->size; }

const char *sp_source_name(const sp_source *src) { return src->name; }

void sp_source_close(sp_source *src) {
    if (src == NULL) {
        return;
    }
    src->impl.close(src->ctx);
    free(src->name);
    free(src);
}

sp_status sp_source_read_whole(sp_source *src, const char *name, uint64_t max, char **out,
                               size_t *len, sp_err *err) {
    *out = NULL;
    *len = 0;
    uint64_t size = sp_source_size(src);
    char *buf = NULL;
    sp_status st = SP_OK;
    if (size > max) {
        st = sp_err_set(err, SP_E_LIMIT, "%s: %llu bytes exceed the limit of %llu for this file",
                        name, (unsigned long long)size, (unsigned long long)max);
    } else if ((buf = malloc((size_t)size + 1)) == NULL) {
        st = sp_err_set(err, SP_E_NOMEM, "out of memory reading %s", name);
    } else {
        st = sp_source_read(src, 0, buf, (size_t)size, err);
    }
    sp_source_close(src);
    if (st != SP_OK) {
        free(buf);
        return st;
    }
    buf[size] = '\0';
    *out = buf;
    *len = (size_t)size;
    return SP_OK;
}
