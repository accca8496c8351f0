/* store_prefetch.c — files of a store fetched ahead of their reads (see store_prefetch.h). */
#include "io/store_prefetch.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/io_pool.h"
#include "io/http_source.h"
#include "io/store.h"

#define KEPT_MAX 32
#define KEPT_BYTES ((uint64_t)64 << 20)

typedef struct kept_file {
    char *path; /* NULL: empty slot */
    uint8_t *bytes;
    uint64_t len;
    bool missing;
    uint64_t since;
} kept_file;

struct sp_store_prefetch {
    pthread_mutex_t lock;
    kept_file kept[KEPT_MAX];
    uint64_t kept_bytes;
    uint64_t clock;
};

sp_store_prefetch *sp_store_prefetch_new(void) {
    sp_store_prefetch *p = calloc(1, sizeof *p);
    if (p != NULL) {
        pthread_mutex_init(&p->lock, NULL);
    }
    return p;
}

static void clear(sp_store_prefetch *p, kept_file *k) {
    p->kept_bytes -= k->len;
    free(k->path);
    free(k->bytes);
    *k = (kept_file){0};
}

void sp_store_prefetch_free(sp_store_prefetch *p) {
    if (p == NULL) {
        return;
    }
    for (int i = 0; i < KEPT_MAX; i++) {
        if (p->kept[i].path != NULL) {
            clear(p, &p->kept[i]);
        }
    }
    pthread_mutex_destroy(&p->lock);
    free(p);
}

static kept_file *find(sp_store_prefetch *p, const char *path) {
    for (int i = 0; i < KEPT_MAX; i++) {
        if (p->kept[i].path != NULL && strcmp(p->kept[i].path, path) == 0) {
            return &p->kept[i];
        }
    }
    return NULL;
}

/* Keep `f` (its path and bytes now owned here), letting the oldest go while the slots or the
 * byte budget are full; a file larger than the whole budget is not kept. */
static void keep(sp_store_prefetch *p, kept_file f) {
    pthread_mutex_lock(&p->lock);
    bool fits = f.len <= KEPT_BYTES && find(p, f.path) == NULL;
    while (fits) {
        kept_file *empty = NULL, *oldest = NULL;
        for (int i = 0; i < KEPT_MAX; i++) {
            kept_file *k = &p->kept[i];
            if (k->path == NULL) {
                empty = empty != NULL ? empty : k;
            } else if (oldest == NULL || k->since < oldest->since) {
                oldest = k;
            }
        }
        if (empty != NULL && p->kept_bytes + f.len <= KEPT_BYTES) {
            f.since = ++p->clock;
            *empty = f;
            p->kept_bytes += f.len;
            pthread_mutex_unlock(&p->lock);
            return;
        }
        clear(p, oldest);
    }
    pthread_mutex_unlock(&p->lock);
    free(f.path);
    free(f.bytes);
}

typedef struct fetch_job {
    sp_store_prefetch *p;
    const char *const *paths;
    size_t expected;
    const sp_limits *limits;
} fetch_job;

/* Fetch file i whole; on any failure keep nothing (its read will meet the failure). */
static void fetch_one(void *user, size_t i) {
    const fetch_job *job = user;
    sp_source *src = NULL;
    sp_err ignored = {0};
    kept_file f = {0};
    if (sp_store_open(job->paths[i], job->expected, &src, &f.missing, &ignored) != SP_OK) {
        return;
    }
    bool ok = true;
    if (!f.missing) {
        f.len = sp_source_size(src);
        ok = sp_alloc(job->limits, f.len ? f.len : 1, "compressed chunk", (void **)&f.bytes,
                      &ignored) == SP_OK &&
             sp_source_read(src, 0, f.bytes, (size_t)f.len, &ignored) == SP_OK;
    }
    sp_source_close(src);
    f.path = ok ? strdup(job->paths[i]) : NULL;
    if (f.path == NULL) {
        free(f.bytes);
        return;
    }
    keep(job->p, f);
}

void sp_store_prefetch_files(sp_store_prefetch *p, const char *const *paths, size_t n,
                             size_t expected, const sp_limits *limits) {
    const char *wanted[KEPT_MAX];
    size_t count = 0;
    pthread_mutex_lock(&p->lock);
    for (size_t i = 0; i < n && count < KEPT_MAX; i++) {
        bool listed = false;
        for (size_t k = 0; k < count && !listed; k++) {
            listed = strcmp(wanted[k], paths[i]) == 0;
        }
        if (!listed && find(p, paths[i]) == NULL) {
            wanted[count++] = paths[i];
        }
    }
    pthread_mutex_unlock(&p->lock);
    int parallel = sp_http_parallel();
    int threads = (size_t)parallel < count ? parallel : (int)count;
    if (threads >= 2 && sp_http_prefetch_pays()) {
        fetch_job job = {p, wanted, expected, limits};
        sp_io_pool_run(count, threads, fetch_one, &job);
    }
}

bool sp_store_prefetch_take(sp_store_prefetch *p, const char *path, uint8_t **bytes,
                            uint64_t *len, bool *missing) {
    pthread_mutex_lock(&p->lock);
    kept_file *k = find(p, path);
    if (k != NULL) {
        *bytes = k->bytes;
        *len = k->len;
        *missing = k->missing;
        k->bytes = NULL;
        clear(p, k);
    }
    pthread_mutex_unlock(&p->lock);
    return k != NULL;
}
