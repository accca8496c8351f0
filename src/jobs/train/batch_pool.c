/* batch_pool.c — a loader's batch memory, kept for reuse (batch_pool.h). */
#include "jobs/train/batch_pool.h"

#include <pthread.h>
#include <stdlib.h>

#include "cuda/cuda_host.h"

struct sp_batch_pool {
    pthread_mutex_t mu; /* guards what follows */
    int refs;           /* the loader's, and one for each buffer taken */
    int n_spare, spares;
    void **spare;
    int *spare_pinned;
    size_t bytes;
    bool want_pinned;
};

sp_batch_pool *sp_batch_pool_new(size_t bytes, bool want_pinned, int spares) {
    sp_batch_pool *p = calloc(1, sizeof *p);
    if (p == NULL) {
        return NULL;
    }
    p->spare = calloc((size_t)(spares > 0 ? spares : 1), sizeof *p->spare);
    p->spare_pinned = calloc((size_t)(spares > 0 ? spares : 1), sizeof *p->spare_pinned);
    if (p->spare == NULL || p->spare_pinned == NULL || pthread_mutex_init(&p->mu, NULL) != 0) {
        free(p->spare);
        free(p->spare_pinned);
        free(p);
        return NULL;
    }
    p->refs = 1;
    p->spares = spares > 0 ? spares : 0;
    p->bytes = bytes > 0 ? bytes : 1;
    p->want_pinned = want_pinned;
    return p;
}

static void free_buffer(void *buffer, int pinned) {
    if (pinned) {
        sp_cuda_host_free(buffer);
    } else {
        free(buffer);
    }
}

void *sp_batch_pool_take(sp_batch_pool *p, int *pinned) {
    void *buffer = NULL;
    *pinned = 0;
    pthread_mutex_lock(&p->mu);
    if (p->n_spare > 0) {
        p->n_spare--;
        buffer = p->spare[p->n_spare];
        *pinned = p->spare_pinned[p->n_spare];
    }
    pthread_mutex_unlock(&p->mu);
    if (buffer == NULL && p->want_pinned && sp_cuda_host_alloc(p->bytes, &buffer) == SP_OK) {
        *pinned = 1;
    } else if (buffer == NULL) {
        buffer = malloc(p->bytes);
    }
    if (buffer != NULL) {
        pthread_mutex_lock(&p->mu);
        p->refs++;
        pthread_mutex_unlock(&p->mu);
    }
    return buffer;
}

void sp_batch_pool_give(sp_batch_pool *p, void *buffer, int pinned) {
    pthread_mutex_lock(&p->mu);
    bool kept = p->n_spare < p->spares;
    if (kept) {
        p->spare[p->n_spare] = buffer;
        p->spare_pinned[p->n_spare++] = pinned;
    }
    pthread_mutex_unlock(&p->mu);
    if (!kept) {
        free_buffer(buffer, pinned);
    }
    sp_batch_pool_release(p);
}

void sp_batch_pool_release(sp_batch_pool *p) {
    if (p == NULL) {
        return;
    }
    pthread_mutex_lock(&p->mu);
    bool last = --p->refs == 0;
    pthread_mutex_unlock(&p->mu);
    if (!last) {
        return;
    }
    for (int i = 0; i < p->n_spare; i++) {
        free_buffer(p->spare[i], p->spare_pinned[i]);
    }
    free(p->spare);
    free(p->spare_pinned);
    pthread_mutex_destroy(&p->mu);
    free(p);
}
