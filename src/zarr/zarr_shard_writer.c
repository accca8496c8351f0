/* zarr_shard_writer.c — collecting inner chunks into shards and laying shards out (see
 * zarr_shard_writer.h).
 *
 * An encoded inner chunk waits in its shard's slot until every inner chunk of that shard that
 * lies in the array has arrived; the thread that delivers the last one takes the shard out of the
 * table and has it written, so memory holds only the shards in flight. The table of shards in
 * flight is a chained hash table that doubles when the shards outnumber its buckets. A shard is
 * written from its chunk buffers and one small index buffer, never copied into one shard-sized
 * buffer.
 */
#include "zarr/zarr_shard_writer.h"

#include <pthread.h>
#include <stdlib.h>

struct sp_zarr_shard {
    struct sp_zarr_shard *next; /* hash chain */
    int64_t key;                /* linear shard index */
    int64_t arrived, expected;
    uint8_t **bufs; /* encoded inner chunks, C order over the shard's inner grid */
    size_t *lens;
};

struct sp_zarr_shards {
    pthread_mutex_t lock;
    int ndim;
    int64_t nchunks[3];
    int64_t per_shard[3]; /* inner chunks per shard side */
    int64_t nshards[3];
    int64_t inner; /* inner chunks per shard */
    uint8_t *done; /* bitmap: shards written or found on disk */
    sp_zarr_shard **buckets;
    size_t nbuckets, nflight;
};

static void put_le64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

static bool bit_test(const uint8_t *bits, int64_t i) {
    return (bits[i >> 3] >> (i & 7)) & 1;
}

static void bit_set(uint8_t *bits, int64_t i) {
    bits[i >> 3] |= (uint8_t)(1u << (i & 7));
}

void sp_zarr_shard_free(const sp_zarr_shards *s, sp_zarr_shard *sh) {
    if (sh == NULL) {
        return;
    }
    if (sh->bufs != NULL) {
        for (int64_t i = 0; i < s->inner; i++) {
            free(sh->bufs[i]);
        }
    }
    free(sh->bufs);
    free(sh->lens);
    free(sh);
}

void sp_zarr_shards_free(sp_zarr_shards *s) {
    if (s == NULL) {
        return;
    }
    for (size_t b = 0; b < s->nbuckets; b++) {
        for (sp_zarr_shard *sh = s->buckets[b], *next; sh != NULL; sh = next) {
            next = sh->next;
            sp_zarr_shard_free(s, sh);
        }
    }
    free(s->buckets);
    free(s->done);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

sp_status sp_zarr_shards_create(int ndim, const int64_t nchunks[3], const int64_t per_shard[3],
                                sp_zarr_shards **out, sp_err *err) {
    *out = NULL;
    sp_zarr_shards *s = calloc(1, sizeof *s);
    if (s == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory");
    }
    if (pthread_mutex_init(&s->lock, NULL) != 0) {
        free(s);
        return sp_err_set(err, SP_E_NOMEM, "cannot create a mutex");
    }
    s->ndim = ndim;
    s->inner = 1;
    uint64_t total = 1;
    for (int d = 0; d < ndim; d++) {
        s->nchunks[d] = nchunks[d];
        s->per_shard[d] = per_shard[d];
        s->nshards[d] = (nchunks[d] + per_shard[d] - 1) / per_shard[d];
        s->inner *= per_shard[d];
        total *= (uint64_t)s->nshards[d];
    }
    s->done = calloc((size_t)(total + 7) / 8, 1);
    s->nbuckets = 64;
    s->buckets = calloc(s->nbuckets, sizeof *s->buckets);
    if (s->done == NULL || s->buckets == NULL) {
        sp_zarr_shards_free(s);
        return sp_err_set(err, SP_E_NOMEM, "out of memory");
    }
    *out = s;
    return SP_OK;
}

int64_t sp_zarr_shards_inner(const sp_zarr_shards *s) {
    return s->inner;
}

size_t sp_zarr_shards_in_flight(sp_zarr_shards *s) {
    pthread_mutex_lock(&s->lock);
    size_t n = s->nflight;
    pthread_mutex_unlock(&s->lock);
    return n;
}

void sp_zarr_shards_place(const sp_zarr_shards *s, const int64_t index[3], sp_zarr_shard_place *p) {
    *p = (sp_zarr_shard_place){.key = 0, .slot = 0, .expected = 1};
    for (int d = 0; d < s->ndim; d++) {
        p->coord[d] = index[d] / s->per_shard[d];
        p->key = p->key * s->nshards[d] + p->coord[d];
        p->slot = p->slot * s->per_shard[d] + index[d] % s->per_shard[d];
        int64_t left = s->nchunks[d] - p->coord[d] * s->per_shard[d];
        p->expected *= left < s->per_shard[d] ? left : s->per_shard[d];
    }
}

static sp_zarr_shard **slot_of(sp_zarr_shards *s, int64_t key) {
    uint64_t h = (uint64_t)key * 0x9E3779B97F4A7C15u;
    sp_zarr_shard **p = &s->buckets[(h >> 32) & (s->nbuckets - 1)];
    while (*p != NULL && (*p)->key != key) {
        p = &(*p)->next;
    }
    return p;
}

/* Double the bucket table when the shards in flight outnumber it (under the lock). Failure to
 * grow only makes chains longer, so it is not an error. */
static void maybe_grow(sp_zarr_shards *s) {
    if (s->nflight <= s->nbuckets) {
        return;
    }
    size_t nb = s->nbuckets * 2;
    sp_zarr_shard **b = calloc(nb, sizeof *b);
    if (b == NULL) {
        return;
    }
    sp_zarr_shard **old = s->buckets;
    size_t oldn = s->nbuckets;
    s->buckets = b;
    s->nbuckets = nb;
    for (size_t i = 0; i < oldn; i++) {
        for (sp_zarr_shard *sh = old[i], *next; sh != NULL; sh = next) {
            next = sh->next;
            sp_zarr_shard **p = slot_of(s, sh->key);
            sh->next = NULL;
            *p = sh;
        }
    }
    free(old);
}

void sp_zarr_shards_state(sp_zarr_shards *s, int64_t key, bool *done, bool *collecting) {
    pthread_mutex_lock(&s->lock);
    *done = bit_test(s->done, key);
    *collecting = *slot_of(s, key) != NULL;
    pthread_mutex_unlock(&s->lock);
}

bool sp_zarr_shards_claim(sp_zarr_shards *s, int64_t key) {
    pthread_mutex_lock(&s->lock);
    bool claim = !bit_test(s->done, key) && *slot_of(s, key) == NULL;
    if (claim) {
        bit_set(s->done, key);
    }
    pthread_mutex_unlock(&s->lock);
    return claim;
}

sp_status sp_zarr_shards_add(sp_zarr_shards *s, const sp_zarr_shard_place *p, uint8_t *enc,
                             size_t enc_len, sp_zarr_shard **complete, sp_err *err) {
    *complete = NULL;
    pthread_mutex_lock(&s->lock);
    sp_zarr_shard **at = slot_of(s, p->key);
    sp_zarr_shard *sh = *at;
    if (sh == NULL) {
        sh = calloc(1, sizeof *sh);
        if (sh != NULL) {
            sh->bufs = calloc((size_t)s->inner, sizeof *sh->bufs);
            sh->lens = calloc((size_t)s->inner, sizeof *sh->lens);
        }
        if (sh == NULL || sh->bufs == NULL || sh->lens == NULL) {
            pthread_mutex_unlock(&s->lock);
            sp_zarr_shard_free(s, sh);
            free(enc);
            return sp_err_set(err, SP_E_NOMEM, "out of memory for a shard");
        }
        sh->key = p->key;
        sh->expected = p->expected;
        *at = sh;
        s->nflight++;
        maybe_grow(s);
    }
    sh->bufs[p->slot] = enc;
    sh->lens[p->slot] = enc_len;
    if (++sh->arrived == sh->expected) {
        *slot_of(s, p->key) = sh->next; /* the table may have grown: look the slot up again */
        sh->next = NULL;
        s->nflight--;
        bit_set(s->done, p->key);
        *complete = sh;
    }
    pthread_mutex_unlock(&s->lock);
    return SP_OK;
}

sp_status sp_zarr_shard_layout(const sp_zarr_shards *s, const sp_zarr_shard *sh, sp_bytes **parts,
                               size_t *nparts, uint8_t **index, sp_err *err) {
    int64_t n = s->inner;
    size_t index_bytes = (size_t)n * 16;
    uint8_t *idx = malloc(index_bytes + 4);
    sp_bytes *pieces = malloc(sizeof *pieces * ((size_t)n + 1));
    if (idx == NULL || pieces == NULL) {
        free(idx);
        free(pieces);
        *parts = NULL;
        *index = NULL;
        *nparts = 0;
        return sp_err_set(err, SP_E_NOMEM, "out of memory writing a shard");
    }
    uint64_t off = 0;
    size_t np = 0;
    for (int64_t i = 0; i < n; i++) {
        if (sh->bufs[i] != NULL) {
            pieces[np++] = (sp_bytes){sh->bufs[i], sh->lens[i]};
            put_le64(idx + 16 * i, off);
            put_le64(idx + 16 * i + 8, sh->lens[i]);
            off += sh->lens[i];
        } else {
            put_le64(idx + 16 * i, UINT64_MAX);
            put_le64(idx + 16 * i + 8, UINT64_MAX);
        }
    }
    uint32_t crc = sp_crc32c(idx, index_bytes);
    for (int k = 0; k < 4; k++) {
        idx[index_bytes + (size_t)k] = (uint8_t)(crc >> (8 * k));
    }
    pieces[np++] = (sp_bytes){idx, index_bytes + 4};
    *parts = pieces;
    *nparts = np;
    *index = idx;
    return SP_OK;
}
