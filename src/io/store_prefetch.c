/* store_prefetch.c — files of a store fetched ahead of their reads (see store_prefetch.h). */
#include "io/store_prefetch.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "io/http_source.h"
#include "io/io_pool.h"
#include "io/store.h"

#define KEPT_MAX 64
#define KEPT_BYTES ((uint64_t)64 << 20)

typedef struct kept_file {
    char *path; /* NULL: empty slot */
    uint8_t *bytes;
    uint64_t len;
    bool missing, pending;
    unsigned generation; /* sp_io_pool_generation() when it was sent for */
    uint64_t since;
} kept_file;

struct sp_store_prefetch {
    pthread_mutex_t lock;   /* guards what follows */
    pthread_cond_t arrived; /* broadcast when a file sent for has come (or failed) */
    int refs;               /* the owner's, and one for each file on its way */
    int parallel;           /* files one announcement sends for at most (sp_http_parallel) */
    sp_limits limits;
    kept_file kept[KEPT_MAX];
    uint64_t kept_bytes;
    uint64_t clock;
};

sp_store_prefetch *sp_store_prefetch_new(const sp_limits *limits) {
    sp_store_prefetch *p = calloc(1, sizeof *p);
    if (p != NULL) {
        pthread_mutex_init(&p->lock, NULL);
        pthread_cond_init(&p->arrived, NULL);
        p->refs = 1;
        p->parallel = sp_http_parallel();
        p->limits = *limits;
    }
    return p;
}

static void clear(sp_store_prefetch *p, kept_file *k) {
    p->kept_bytes -= k->len;
    free(k->path);
    free(k->bytes);
    *k = (kept_file){0};
}

static void release(sp_store_prefetch *p) {
    pthread_mutex_lock(&p->lock);
    bool last = --p->refs == 0;
    pthread_mutex_unlock(&p->lock);
    if (!last) {
        return;
    }
    for (int i = 0; i < KEPT_MAX; i++) {
        if (p->kept[i].path != NULL) {
            clear(p, &p->kept[i]);
        }
    }
    pthread_cond_destroy(&p->arrived);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

void sp_store_prefetch_free(sp_store_prefetch *p) {
    if (p != NULL) {
        release(p); /* files still on their way keep it until they come */
    }
}

static kept_file *find(sp_store_prefetch *p, const char *path) {
    for (int i = 0; i < KEPT_MAX; i++) {
        if (p->kept[i].path != NULL && strcmp(p->kept[i].path, path) == 0) {
            return &p->kept[i];
        }
    }
    return NULL;
}

/* A file sent for by the parent of this forked process never comes here: forget it, and the
 * reference its fetch held. Lock held; true when k was such a file. */
static bool forget_orphan(sp_store_prefetch *p, kept_file *k) {
    if (!k->pending || k->generation == sp_io_pool_generation()) {
        return false;
    }
    clear(p, k);
    p->refs--;
    return true;
}

/* Let the oldest ready files go until `len` more bytes fit the budget, sparing `keep`; false
 * when they do not fit even then. Lock held. */
static bool make_room(sp_store_prefetch *p, uint64_t len, const kept_file *keep) {
    while (p->kept_bytes + len > KEPT_BYTES) {
        kept_file *oldest = NULL;
        for (int i = 0; i < KEPT_MAX; i++) {
            kept_file *k = &p->kept[i];
            if (k->path != NULL && !k->pending && k != keep &&
                (oldest == NULL || k->since < oldest->since)) {
                oldest = k;
            }
        }
        if (oldest == NULL) {
            return false;
        }
        clear(p, oldest);
    }
    return true;
}

/* An empty slot, emptying the oldest file that has come (and was never taken) if need be; NULL
 * when every slot waits for a file. Lock held. */
static kept_file *free_slot(sp_store_prefetch *p) {
    kept_file *oldest = NULL;
    for (int i = 0; i < KEPT_MAX; i++) {
        kept_file *k = &p->kept[i];
        if (k->path == NULL) {
            return k;
        }
        if (!k->pending && (oldest == NULL || k->since < oldest->since)) {
            oldest = k;
        }
    }
    if (oldest != NULL) {
        clear(p, oldest);
    }
    return oldest;
}

typedef struct fetch_job {
    sp_store_prefetch *p;
    char *path;
    size_t expected;
} fetch_job;

/* Fetch one file whole and fill its place; on any failure empty the place (its read will meet
 * the failure itself). */
static void fetch_one(void *user) {
    fetch_job *job = user;
    sp_store_prefetch *p = job->p;
    sp_source *src = NULL;
    sp_err ignored = {0};
    bool missing = false, ok = false;
    uint8_t *bytes = NULL;
    uint64_t len = 0;
    if (sp_store_open(job->path, job->expected, &src, &missing, &ignored) == SP_OK) {
        ok = true;
        if (!missing) {
            len = sp_source_size(src);
            ok = sp_alloc(&p->limits, len ? len : 1, "compressed chunk", (void **)&bytes,
                          &ignored) == SP_OK &&
                 sp_source_read(src, 0, bytes, (size_t)len, &ignored) == SP_OK;
        }
        sp_source_close(src);
    }
    pthread_mutex_lock(&p->lock);
    kept_file *k = find(p, job->path);
    if (k != NULL && k->pending) {
        if (ok && make_room(p, len, k)) {
            k->bytes = bytes;
            k->len = len;
            k->missing = missing;
            k->pending = false;
            k->since = ++p->clock;
            p->kept_bytes += len;
            bytes = NULL;
        } else {
            clear(p, k);
        }
    }
    pthread_cond_broadcast(&p->arrived);
    pthread_mutex_unlock(&p->lock);
    free(bytes);
    free(job->path);
    free(job);
    release(p);
}

static void send_for(sp_store_prefetch *p, const char *const *paths, size_t n, size_t expected) {
    if (p->parallel < 2) {
        return;
    }
    fetch_job *jobs[64]; /* at most p->parallel <= 64 */
    size_t count = 0;
    unsigned generation = sp_io_pool_generation();
    pthread_mutex_lock(&p->lock);
    for (int i = 0; i < KEPT_MAX; i++) {
        if (p->kept[i].path != NULL) {
            forget_orphan(p, &p->kept[i]);
        }
    }
    for (size_t i = 0; i < n && count < (size_t)p->parallel; i++) {
        if (find(p, paths[i]) != NULL) {
            continue;
        }
        kept_file *slot = free_slot(p);
        fetch_job *job = slot != NULL ? malloc(sizeof *job) : NULL;
        char *mine = job != NULL ? strdup(paths[i]) : NULL;
        char *theirs = mine != NULL ? strdup(paths[i]) : NULL;
        if (theirs == NULL) {
            free(job);
            free(mine);
            break;
        }
        *slot = (kept_file){.path = mine, .pending = true, .generation = generation};
        *job = (fetch_job){p, theirs, expected};
        p->refs++;
        jobs[count++] = job;
    }
    pthread_mutex_unlock(&p->lock);
    for (size_t i = 0; i < count; i++) {
        sp_io_pool_start(fetch_one, jobs[i]);
    }
}

void sp_store_prefetch_files(sp_store_prefetch *p, const char *const *paths, size_t n,
                             size_t expected) {
    if (sp_http_prefetch_pays()) {
        send_for(p, paths, n, expected);
    }
}

void sp_store_prefetch_metadata(sp_store_prefetch *p, const char *const *paths, size_t n) {
    send_for(p, paths, n, 0);
}

/* The kept file at `path` once it has come (waiting while it is on its way), or NULL when nothing
 * is kept for it. Lock held. */
static kept_file *arrived(sp_store_prefetch *p, const char *path) {
    for (;;) {
        kept_file *k = find(p, path);
        if (k != NULL && forget_orphan(p, k)) {
            k = NULL;
        }
        if (k == NULL || !k->pending) {
            return k;
        }
        pthread_cond_wait(&p->arrived, &p->lock);
    }
}

bool sp_store_prefetch_take(sp_store_prefetch *p, const char *path, uint8_t **bytes,
                            uint64_t *len, bool *missing) {
    pthread_mutex_lock(&p->lock);
    kept_file *k = arrived(p, path);
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

bool sp_store_prefetch_peek(sp_store_prefetch *p, const char *path, bool *missing) {
    pthread_mutex_lock(&p->lock);
    kept_file *k = arrived(p, path);
    if (k != NULL) {
        *missing = k->missing;
    }
    pthread_mutex_unlock(&p->lock);
    return k != NULL;
}
