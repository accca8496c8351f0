/* http_internal.h — one remote object as http_source.c (its requests) and http_cache.c (what
 * reads do with them: blocks, ranges held, requests sent ahead) both see it. Not for other files.
 */
#ifndef SP_IO_HTTP_INTERNAL_H
#define SP_IO_HTTP_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "io/http_source.h"

#define SP_HTTP_BLOCK ((size_t)64 << 10)
#define SP_HTTP_CACHE_BLOCKS 128 /* 8 MiB a remote slide */
#define SP_HTTP_HELD_MAX 32      /* ranges of a block or more sent ahead, kept for their reads */
#define SP_HTTP_ETAG_MAX 256

/* A cached block, or one requested ahead whose answer has not come (pending). */
typedef struct http_block {
    uint64_t index;
    uint64_t last_use; /* 0: empty slot */
    size_t len;
    unsigned char *data;
    bool pending;
    unsigned generation; /* sp_io_pool_generation() when it was requested */
} http_block;

/* A range of a block or more requested ahead, kept until the read that asks for exactly it. */
typedef struct http_held {
    bool used, pending;
    unsigned generation;
    uint64_t offset;
    size_t len;
    uint64_t since;
    unsigned char *data;
} http_held;

typedef struct http_ctx {
    char *url;
    char *name;
    sp_http_signer signer;
    long stall_timeout_s;
    int parallel; /* requests sent ahead at once; 1: none */
    uint64_t size;
    char etag[SP_HTTP_ETAG_MAX]; /* "" when the server sends none */
    unsigned char *head;         /* the object's first head_len bytes, from the opening request */
    size_t head_len;
    pthread_mutex_t lock;   /* guards what follows */
    pthread_cond_t arrived; /* broadcast when a request sent ahead has been answered */
    int refs;               /* the source's, and one for each request sent ahead and out */
    http_block blocks[SP_HTTP_CACHE_BLOCKS];
    http_held held[SP_HTTP_HELD_MAX];
    size_t held_bytes;
    uint64_t clock;
} http_ctx;

/* GET bytes [offset, offset + len) into buf, in at most `attempts` tries, checking the answer
 * (http_source.h). `open` is the first request, which learns the size and ETag: there the server
 * may answer with fewer bytes than asked (a shorter object). */
sp_status sp_http_fetch(http_ctx *h, uint64_t offset, size_t len, void *buf, bool open,
                        int attempts, size_t *got, sp_err *err);

/* Drop a reference (without the lock held); the last one frees the object. */
void sp_http_ctx_release(http_ctx *h);

/* The source's read_at and prefetch (http_cache.c). */
sp_status sp_http_read_at(void *ctx, uint64_t offset, void *buf, size_t len, size_t *got,
                          sp_err *err);
void sp_http_prefetch(void *ctx, const sp_byte_range *ranges, size_t n);

/* Forget the requests sent ahead by the process this one was forked from, which will never be
 * answered here, and the references they held (http_cache.c). Lock held. */
void sp_http_forget_orphans(http_ctx *h);

#endif
