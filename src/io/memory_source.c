/* memory_source.c — a byte source over a caller's memory buffer, for tests and fuzz targets. */
#include <stdlib.h>
#include <string.h>

#include "io/source.h"

typedef struct mem_ctx {
    const unsigned char *data;
    size_t len;
} mem_ctx;

static sp_status mem_read_at(void *ctx, uint64_t offset, void *buf, size_t len, size_t *got,
                             sp_err *err) {
    (void)err;
    mem_ctx *m = ctx;
    if (offset >= m->len) {
        *got = 0;
        return SP_OK;
    }
    size_t avail = m->len - (size_t)offset;
    *got = len < avail ? len : avail;
    memcpy(buf, m->data + offset, *got);
    return SP_OK;
}

static void mem_close(void *ctx) { free(ctx); }

static const sp_source_impl MEM_IMPL = {mem_read_at, mem_close, NULL, NULL, NULL};

sp_status sp_source_open_memory(const void *data, size_t len, const char *name, sp_source **out,
                                sp_err *err) {
    *out = NULL;
    mem_ctx *m = malloc(sizeof *m);
    if (m == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory");
    }
    m->data = data;
    m->len = len;
    return sp_source_create(&MEM_IMPL, m, len, name ? name : "memory", out, err);
}
