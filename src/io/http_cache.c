/* http_cache.c — reads of a remote object, and requests sent ahead of them (http_internal.h).
 *
 * Slide parsers make many small reads (TIFF directories, tag arrays, tile tables) before the large
 * ones (tiles), and a request costs a round trip, so reads under one block go through a small
 * cache of aligned 64 KiB blocks, filled one request each; larger reads are one request of their
 * own; reads within the head opening fetched need none.
 *
 * A region read that needs several tiles tells the source their byte ranges first (prefetch):
 * the blocks holding them, and ranges of a block or more, are requested at once on the process's
 * waiting threads (core/io_pool.h), up to SLIDEPIPE_HTTP_PARALLEL requests an announcement, and
 * the call returns without waiting. Each such request has its place reserved (a pending block, a pending held
 * range); a read that needs it waits for the answer instead of asking again, and decodes the
 * tiles that have arrived while the others are still on their way. An answer that failed leaves
 * the place empty, and the read then asks itself, with retries and its own error message. Where
 * requests come back within a millisecond (a server on the same machine or rack) there is no wait
 * to save and handing requests to other threads would only cost CPU, so nothing is sent ahead
 * until requests are seen to take longer.
 */
#include <stdlib.h>
#include <string.h>

#include "io/http_internal.h"
#include "io/io_pool.h"

#define PREFETCH_BLOCKS (SP_HTTP_CACHE_BLOCKS * 3 / 4) /* blocks out at once; the rest stay ready */
#define HELD_BYTES ((size_t)32 << 20)                   /* held ranges, ready or out, a source */

/* The slot of block `index` (ready or on its way), or NULL. Lock held. */
static http_block *find_block(http_ctx *h, uint64_t index) {
    for (int i = 0; i < SP_HTTP_CACHE_BLOCKS; i++) {
        if (h->blocks[i].last_use != 0 && h->blocks[i].index == index) {
            return &h->blocks[i];
        }
    }
    return NULL;
}

/* An empty slot, emptying the least recently used ready block if need be; NULL when every
 * slot waits for an answer. Lock held. */
static http_block *free_block(http_ctx *h) {
    http_block *victim = NULL;
    for (int i = 0; i < SP_HTTP_CACHE_BLOCKS; i++) {
        http_block *b = &h->blocks[i];
        if (b->last_use == 0) {
            return b;
        }
        if (!b->pending && (victim == NULL || b->last_use < victim->last_use)) {
            victim = b;
        }
    }
    if (victim != NULL) {
        free(victim->data);
        *victim = (http_block){0};
    }
    return victim;
}

/* Whether a pending place waits for a request this process will never see answered: one sent
 * by the parent before this process was forked from it. Lock held. */
static bool orphaned(bool pending, unsigned generation) {
    return pending && generation != sp_io_pool_generation();
}

/* Block `index` from the cache into dst (n bytes from `from` within it), waiting for it when it
 * is on its way; false when it is not there (or its request failed). */
static bool cache_copy(http_ctx *h, uint64_t index, size_t from, void *dst, size_t n) {
    bool hit = false;
    pthread_mutex_lock(&h->lock);
    for (;;) {
        http_block *b = find_block(h, index);
        if (b != NULL && orphaned(b->pending, b->generation)) {
            *b = (http_block){0};
            h->refs--; /* the reference its request held */
            b = NULL;
        }
        if (b == NULL || !b->pending) {
            if (b != NULL && from + n <= b->len) {
                memcpy(dst, b->data + from, n);
                b->last_use = ++h->clock;
                hit = true;
            }
            break;
        }
        pthread_cond_wait(&h->arrived, &h->lock);
    }
    pthread_mutex_unlock(&h->lock);
    return hit;
}

/* Keep `data` (malloc'd, len bytes) as block `index` unless the cache has it already. */
static void cache_put(http_ctx *h, uint64_t index, unsigned char *data, size_t len) {
    pthread_mutex_lock(&h->lock);
    http_block *b = find_block(h, index) == NULL ? free_block(h) : NULL;
    if (b != NULL) {
        *b = (http_block){.index = index, .last_use = ++h->clock, .len = len, .data = data};
        data = NULL;
    }
    pthread_mutex_unlock(&h->lock);
    free(data);
}

static sp_status read_small(http_ctx *h, uint64_t offset, unsigned char *buf, size_t len,
                            sp_err *err) {
    while (len > 0) {
        uint64_t index = offset / SP_HTTP_BLOCK;
        size_t from = (size_t)(offset % SP_HTTP_BLOCK);
        size_t n = SP_HTTP_BLOCK - from < len ? SP_HTTP_BLOCK - from : len;
        if (!cache_copy(h, index, from, buf, n)) {
            uint64_t start = index * SP_HTTP_BLOCK;
            size_t block_len =
                h->size - start < SP_HTTP_BLOCK ? (size_t)(h->size - start) : SP_HTTP_BLOCK;
            unsigned char *data = malloc(block_len);
            size_t got = 0;
            if (data == NULL) {
                return sp_err_set(err, SP_E_NOMEM, "%s: out of memory", h->name);
            }
            sp_status st = sp_http_fetch(h, start, block_len, data, false, SP_HTTP_ATTEMPTS, &got,
                                         err);
            if (st != SP_OK) {
                free(data);
                return st;
            }
            memcpy(buf, data + from, n);
            cache_put(h, index, data, block_len);
        }
        offset += n;
        buf += n;
        len -= n;
    }
    return SP_OK;
}

static http_held *find_held(http_ctx *h, uint64_t offset, size_t len) {
    for (int i = 0; i < SP_HTTP_HELD_MAX; i++) {
        http_held *r = &h->held[i];
        if (r->used && r->offset == offset && r->len == len) {
            return r;
        }
    }
    return NULL;
}

static void clear_held(http_ctx *h, http_held *r) {
    h->held_bytes -= r->len;
    free(r->data);
    *r = (http_held){0};
}

/* Copy the held range [offset, offset + len) into buf and let it go, waiting for it when it is
 * on its way; false when none is held (or its request failed). */
static bool held_take(http_ctx *h, uint64_t offset, size_t len, void *buf) {
    bool hit = false;
    pthread_mutex_lock(&h->lock);
    for (;;) {
        http_held *r = find_held(h, offset, len);
        if (r != NULL && orphaned(r->pending, r->generation)) {
            clear_held(h, r);
            h->refs--;
            r = NULL;
        }
        if (r == NULL || !r->pending) {
            if (r != NULL) {
                memcpy(buf, r->data, len);
                clear_held(h, r);
                hit = true;
            }
            break;
        }
        pthread_cond_wait(&h->arrived, &h->lock);
    }
    pthread_mutex_unlock(&h->lock);
    return hit;
}

/* A place for a held range of `len` bytes, letting the oldest ready ranges go while the slots or
 * the byte budget are full; NULL when the ranges on their way leave no room. Lock held. */
static http_held *free_held(http_ctx *h, size_t len) {
    for (;;) {
        http_held *empty = NULL, *oldest = NULL;
        for (int i = 0; i < SP_HTTP_HELD_MAX; i++) {
            http_held *r = &h->held[i];
            if (!r->used) {
                empty = empty != NULL ? empty : r;
            } else if (!r->pending && (oldest == NULL || r->since < oldest->since)) {
                oldest = r;
            }
        }
        if (empty != NULL && h->held_bytes + len <= HELD_BYTES) {
            return empty;
        }
        if (oldest == NULL) {
            return NULL;
        }
        clear_held(h, oldest);
    }
}

/* A request sent ahead: a block for the cache, or a larger range to hold. */
typedef struct ahead {
    http_ctx *h;
    uint64_t offset;
    size_t len;
    bool block;
} ahead;

/* Send one request ahead, in one try, and fill its place (or empty it when the request failed:
 * the read that needs those bytes then asks itself, with retries, and reports the failure). */
static void answer(void *user) {
    ahead *a = user;
    http_ctx *h = a->h;
    unsigned char *data = malloc(a->len ? a->len : 1);
    size_t got = 0;
    sp_err ignored = {0};
    bool ok = data != NULL &&
              sp_http_fetch(h, a->offset, a->len, data, false, 1, &got, &ignored) == SP_OK;
    pthread_mutex_lock(&h->lock);
    if (a->block) {
        http_block *b = find_block(h, a->offset / SP_HTTP_BLOCK);
        if (b != NULL && b->pending) {
            if (ok) {
                b->data = data;
                b->len = a->len;
                b->pending = false;
                b->last_use = ++h->clock;
                data = NULL;
            } else {
                *b = (http_block){0};
            }
        }
    } else {
        http_held *r = find_held(h, a->offset, a->len);
        if (r != NULL && r->pending) {
            if (ok) {
                r->data = data;
                r->pending = false;
                r->since = ++h->clock;
                data = NULL;
            } else {
                clear_held(h, r);
            }
        }
    }
    pthread_cond_broadcast(&h->arrived);
    pthread_mutex_unlock(&h->lock);
    free(data);
    free(a);
    sp_http_ctx_release(h);
}

/* Reserve the place of one request sent ahead and count it out; false when out of memory.
 * Lock held. */
static ahead *reserve(http_ctx *h, uint64_t offset, size_t len, bool block) {
    ahead *a = malloc(sizeof *a);
    if (a != NULL) {
        *a = (ahead){h, offset, len, block};
        h->refs++;
    }
    return a;
}

void sp_http_forget_orphans(http_ctx *h) {
    for (int i = 0; i < SP_HTTP_CACHE_BLOCKS; i++) {
        http_block *b = &h->blocks[i];
        if (orphaned(b->pending, b->generation)) {
            *b = (http_block){0};
            h->refs--;
        }
    }
    for (int i = 0; i < SP_HTTP_HELD_MAX; i++) {
        http_held *r = &h->held[i];
        if (orphaned(r->pending, r->generation)) {
            clear_held(h, r);
            h->refs--;
        }
    }
}

void sp_http_prefetch(void *ctx, const sp_byte_range *ranges, size_t n) {
    http_ctx *h = ctx;
    if (h->parallel < 2 || !sp_http_prefetch_pays()) {
        return;
    }
    ahead *out[64]; /* at most h->parallel <= 64 */
    size_t count = 0;
    unsigned generation = sp_io_pool_generation();
    pthread_mutex_lock(&h->lock);
    sp_http_forget_orphans(h);
    int pending_blocks = 0;
    for (int i = 0; i < SP_HTTP_CACHE_BLOCKS; i++) {
        pending_blocks += h->blocks[i].pending;
    }
    for (size_t i = 0; i < n && count < (size_t)h->parallel; i++) {
        uint64_t offset = ranges[i].offset;
        if (offset >= h->size || ranges[i].length == 0) {
            continue;
        }
        size_t len = ranges[i].length < h->size - offset ? (size_t)ranges[i].length
                                                          : (size_t)(h->size - offset);
        if (offset + len <= h->head_len) {
            continue;
        }
        if (len >= SP_HTTP_BLOCK) {
            http_held *r = find_held(h, offset, len) == NULL ? free_held(h, len) : NULL;
            ahead *a = r != NULL ? reserve(h, offset, len, false) : NULL;
            if (a != NULL) {
                *r = (http_held){.used = true, .pending = true, .generation = generation,
                                 .offset = offset, .len = len};
                h->held_bytes += len;
                out[count++] = a;
            }
            continue;
        }
        for (uint64_t index = offset / SP_HTTP_BLOCK; index <= (offset + len - 1) / SP_HTTP_BLOCK &&
                                                      pending_blocks < PREFETCH_BLOCKS &&
                                                      count < (size_t)h->parallel;
             index++) {
            uint64_t start = index * SP_HTTP_BLOCK;
            size_t block_len =
                h->size - start < SP_HTTP_BLOCK ? (size_t)(h->size - start) : SP_HTTP_BLOCK;
            http_block *b = find_block(h, index) == NULL ? free_block(h) : NULL;
            ahead *a = b != NULL ? reserve(h, start, block_len, true) : NULL;
            if (a != NULL) {
                *b = (http_block){.index = index, .last_use = ++h->clock, .pending = true,
                                  .generation = generation};
                out[count++] = a;
                pending_blocks++;
            }
        }
    }
    pthread_mutex_unlock(&h->lock);
    for (size_t i = 0; i < count; i++) {
        sp_io_pool_start(answer, out[i]);
    }
}

sp_status sp_http_read_at(void *ctx, uint64_t offset, void *buf, size_t len, size_t *got,
                          sp_err *err) {
    http_ctx *h = ctx;
    *got = 0;
    if (offset >= h->size || len == 0) {
        return SP_OK;
    }
    if (len > h->size - offset) {
        len = (size_t)(h->size - offset);
    }
    if (offset + len <= h->head_len) {
        memcpy(buf, h->head + offset, len);
        *got = len;
        return SP_OK;
    }
    if (len >= SP_HTTP_BLOCK && held_take(h, offset, len, buf)) {
        *got = len;
        return SP_OK;
    }
    sp_status st = len < SP_HTTP_BLOCK
                       ? read_small(h, offset, buf, len, err)
                       : sp_http_fetch(h, offset, len, buf, false, SP_HTTP_ATTEMPTS, got, err);
    if (st == SP_OK) {
        *got = len;
    }
    return st;
}
