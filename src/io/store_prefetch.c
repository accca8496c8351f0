/* store_prefetch.c — files of a store fetched ahead of their reads, and the table of files in
 * flight that readers share (see store_prefetch.h).
 *
 * One table of KEPT_MAX places per slide: a place is pending (its file is on its way, fetched
 * by the pool for an announcement or by a reader that claimed it), ready (its bytes, or missing)
 * or failed (the error, kept only while readers wait for it). A reader that finds the file it
 * needs pending counts itself as a waiter and sleeps on the table's condition variable; when the
 * file comes, every reader gets the same bytes, held by a reference count, or the error. A file
 * read stays kept after its read, so that a reader arriving a little later (another region of
 * the batch, still decoding the chunks before) needs no request either; such files are let go
 * first when room is needed, oldest first. A place with waiters is never let go, and whoever
 * fetches always settles its place, whatever happens, so no waiter is left behind. */
#include "io/store_prefetch.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "io/http_source.h"
#include "io/io_pool.h"
#include "io/store.h"

#define KEPT_MAX 192
#define KEPT_BYTES ((uint64_t)64 << 20)
struct sp_store_file {
    atomic_int refs;
    uint64_t len;
    uint8_t *bytes;
};

/* A file of `len` bytes (malloc'd, taken over), held once; NULL when out of memory (the bytes
 * freed). */
static sp_store_file *file_new(uint8_t *bytes, uint64_t len) {
    sp_store_file *f = malloc(sizeof *f);
    if (f == NULL) {
        free(bytes);
        return NULL;
    }
    atomic_init(&f->refs, 1);
    f->len = len;
    f->bytes = bytes;
    return f;
}

static sp_store_file *file_hold(sp_store_file *f) {
    atomic_fetch_add(&f->refs, 1);
    return f;
}

void sp_store_file_release(sp_store_file *f) {
    if (f != NULL && atomic_fetch_sub(&f->refs, 1) == 1) {
        free(f->bytes);
        free(f);
    }
}

const uint8_t *sp_store_file_bytes(const sp_store_file *f) {
    return f->bytes;
}

uint64_t sp_store_file_len(const sp_store_file *f) {
    return f->len;
}

typedef struct kept_file {
    char *path;          /* NULL: empty slot */
    sp_store_file *file; /* its bytes once it has come; NULL while on its way or missing */
    uint64_t len;
    bool missing, pending;
    bool read;   /* a reader has had it: let go before the files not read yet */
    bool pooled; /* fetched on the pool (holding a reference), not by a reader that claimed it */
    bool failed; /* the fetch failed: `status` says how, for the readers waiting for it */
    int waiters; /* readers waiting for it: never let go while there are any */
    sp_status status; /* how it failed, and the message (malloc'd; NULL when out of memory) */
    char *message;
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
    free(k->message);
    sp_store_file_release(k->file);
    *k = (kept_file){0};
}

static void release(sp_store_prefetch *p) {
    pthread_mutex_lock(&p->lock);
    bool last = --p->refs == 0;
    if (p->refs == 1) {
        pthread_cond_broadcast(&p->arrived); /* the owner may be waiting in free */
    }
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

static bool forget_orphan(sp_store_prefetch *p, kept_file *k);

void sp_store_prefetch_free(sp_store_prefetch *p) {
    if (p == NULL) {
        return;
    }
    /* Wait for the files on their way: nothing of the table may still run once its owner is
     * gone (the process may be exiting, its libraries tearing down). */
    pthread_mutex_lock(&p->lock);
    for (int i = 0; i < KEPT_MAX; i++) {
        if (p->kept[i].path != NULL) {
            forget_orphan(p, &p->kept[i]);
        }
    }
    while (p->refs > 1) {
        pthread_cond_wait(&p->arrived, &p->lock);
    }
    pthread_mutex_unlock(&p->lock);
    release(p);
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
    bool pooled = k->pooled;
    clear(p, k);
    p->refs -= pooled;
    return true;
}

/* Whether k may be let go to make room: it has come and nobody waits for it. */
static bool evictable(const kept_file *k) {
    return k->path != NULL && !k->pending && k->waiters == 0;
}

/* Whether k should be let go before `than` (NULL: any): files read before files not read yet,
 * then the oldest. */
static bool sooner(const kept_file *k, const kept_file *than) {
    return than == NULL || (k->read != than->read ? k->read : k->since < than->since);
}

/* Let ready files go (sooner's order) until `len` more bytes fit the budget, sparing `keep`; false
 * when they do not fit even then. Lock held. */
static bool make_room(sp_store_prefetch *p, uint64_t len, const kept_file *keep) {
    while (p->kept_bytes + len > KEPT_BYTES) {
        kept_file *oldest = NULL;
        for (int i = 0; i < KEPT_MAX; i++) {
            kept_file *k = &p->kept[i];
            if (evictable(k) && k != keep && sooner(k, oldest)) {
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

/* An empty slot, emptying a file that has come if need be (sooner's order); NULL when every slot
 * waits for a file. Lock held. */
static kept_file *free_slot(sp_store_prefetch *p) {
    kept_file *oldest = NULL;
    for (int i = 0; i < KEPT_MAX; i++) {
        kept_file *k = &p->kept[i];
        if (k->path == NULL) {
            return k;
        }
        if (evictable(k) && sooner(k, oldest)) {
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
    bool untimed; /* a store's metadata at its opening: not timed (sp_http_untimed) */
} fetch_job;

/* Fetch the file at `path` whole: *file (held once), or *missing. A remote file fetched whole
 * by its opening request is taken over from the source, not copied. */
static sp_status fetch_file(const sp_limits *limits, const char *path, size_t expected,
                            sp_store_file **file, bool *missing, sp_err *err) {
    *file = NULL;
    *missing = false;
    sp_source *src = NULL;
    sp_status st = sp_store_open(path, expected, &src, missing, err);
    if (st == SP_OK && !*missing) {
        uint64_t n = sp_source_size(src);
        size_t got = 0;
        uint8_t *bytes = sp_source_take_whole(src, &got);
        if (bytes == NULL) {
            st = sp_alloc(limits, n ? n : 1, "compressed chunk", (void **)&bytes, err);
            if (st == SP_OK) {
                st = sp_source_read(src, 0, bytes, (size_t)n, err);
            }
        }
        if (st == SP_OK && (*file = file_new(bytes, n)) == NULL) {
            st = sp_err_set(err, SP_E_NOMEM, "out of memory reading %s", path);
        } else if (st != SP_OK) {
            free(bytes);
        }
    }
    sp_source_close(src);
    return st;
}

/* Settle the pending place k with what its fetch gave (st; file, held by the caller, or
 * missing; err when st failed) and wake whoever waits. A file must fit the budget unless
 * readers wait for it (they take it at once); a failure is kept only for its waiters. `read`
 * says the fetching reader has it already. Lock held. */
static void settle(sp_store_prefetch *p, kept_file *k, sp_status st, sp_store_file *file,
                   bool missing, const sp_err *err, bool read) {
    uint64_t len = file != NULL ? file->len : 0;
    if (st == SP_OK && (k->waiters > 0 || make_room(p, len, k))) {
        k->file = file != NULL ? file_hold(file) : NULL;
        k->len = len;
        k->missing = missing;
        k->read = read;
        k->pending = false;
        k->since = ++p->clock;
        p->kept_bytes += k->len;
    } else if (st != SP_OK && k->waiters > 0) {
        k->pending = false;
        k->failed = true;
        k->status = err->status;
        k->message = strdup(err->msg);
    } else {
        clear(p, k);
    }
    pthread_cond_broadcast(&p->arrived);
}

/* Fetch one file whole and fill its place; on a failure nobody waits for, empty the place (its
 * read will meet the failure itself). */
static void fetch_one(void *user) {
    fetch_job *job = user;
    sp_store_prefetch *p = job->p;
    sp_err err = {0};
    bool missing = false;
    sp_store_file *file = NULL;
    sp_http_untimed(job->untimed);
    sp_status st = fetch_file(&p->limits, job->path, job->expected, &file, &missing, &err);
    sp_http_untimed(false);
    pthread_mutex_lock(&p->lock);
    kept_file *k = find(p, job->path);
    if (k != NULL && k->pending && k->pooled) {
        settle(p, k, st, file, missing, &err, false);
    }
    pthread_mutex_unlock(&p->lock);
    sp_store_file_release(file);
    free(job->path);
    free(job);
    release(p);
}

/* Send for up to `most` (<= 64) of paths[0..n) that are neither kept nor on their way; `untimed`
 * leaves their requests out of the process's timing (sp_http_untimed). */
static void send_for(sp_store_prefetch *p, const char *const *paths, size_t n, size_t expected,
                     int most, bool untimed) {
    if (p->parallel < 2) {
        return;
    }
    fetch_job *jobs[64]; /* at most `most` <= 64 */
    size_t count = 0;
    unsigned generation = sp_io_pool_generation();
    pthread_mutex_lock(&p->lock);
    for (int i = 0; i < KEPT_MAX; i++) {
        if (p->kept[i].path != NULL) {
            forget_orphan(p, &p->kept[i]);
        }
    }
    for (size_t i = 0; i < n && count < (size_t)most; i++) {
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
        *slot =
            (kept_file){.path = mine, .pending = true, .pooled = true, .generation = generation};
        *job = (fetch_job){p, theirs, expected, untimed};
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
    send_for(p, paths, n, expected, p->parallel, false);
}

void sp_store_prefetch_metadata(sp_store_prefetch *p, const char *const *paths, size_t n) {
    send_for(p, paths, n, 0, 64, false);
}

void sp_store_prefetch_guesses(sp_store_prefetch *p, const char *const *paths, size_t n) {
    send_for(p, paths, n, 0, 64, true);
}

/* The place kept for `path`, or NULL (forgetting one its parent process sent for). Lock held. */
static kept_file *lookup(sp_store_prefetch *p, const char *path) {
    kept_file *k = find(p, path);
    return k != NULL && forget_orphan(p, k) ? NULL : k;
}

/* Wait, as one of its waiters, until k has come or failed. Lock held. */
static void wait_for(sp_store_prefetch *p, kept_file *k) {
    k->waiters++;
    while (k->pending) {
        pthread_cond_wait(&p->arrived, &p->lock);
    }
    k->waiters--;
}

/* Hand the settled k to a reader: the error it failed with (the place emptied when no one else
 * waits for it), or its bytes, held once more for the reader, or *missing. Lock held. */
static sp_status share(sp_store_prefetch *p, kept_file *k, sp_store_file **file, bool *missing,
                       sp_err *err) {
    *file = NULL;
    *missing = false;
    if (k->failed) {
        sp_status st =
            sp_err_set(err, k->status, "%s", k->message != NULL ? k->message : "out of memory");
        if (k->waiters == 0) {
            clear(p, k);
        }
        return st;
    }
    *missing = k->missing;
    *file = k->file != NULL ? file_hold(k->file) : NULL;
    k->read = true;
    return SP_OK;
}

sp_status sp_store_prefetch_get(sp_store_prefetch *p, const char *path, size_t expected,
                                sp_store_file **file, bool *missing, sp_err *err) {
    pthread_mutex_lock(&p->lock);
    kept_file *k = lookup(p, path);
    if (k != NULL) {
        wait_for(p, k);
        sp_status st = share(p, k, file, missing, err);
        pthread_mutex_unlock(&p->lock);
        return st;
    }
    /* Claim a place, so that readers needing the file meanwhile wait for this fetch. With every
     * place waited for, fetch it unshared. */
    k = free_slot(p);
    char *claim = k != NULL ? strdup(path) : NULL;
    if (claim != NULL) {
        *k = (kept_file){.path = claim, .pending = true, .generation = sp_io_pool_generation()};
    }
    pthread_mutex_unlock(&p->lock);
    sp_store_file *mine = NULL;
    sp_status st = fetch_file(&p->limits, path, expected, &mine, missing, err);
    if (claim != NULL) {
        pthread_mutex_lock(&p->lock);
        k = find(p, path);
        if (k != NULL && k->pending && !k->pooled) {
            settle(p, k, st, mine, *missing, err, true);
        }
        pthread_mutex_unlock(&p->lock);
    }
    *file = mine;
    return st;
}

bool sp_store_prefetch_take(sp_store_prefetch *p, const char *path, sp_store_file **file,
                            bool *missing) {
    pthread_mutex_lock(&p->lock);
    kept_file *k = lookup(p, path);
    bool got = false;
    if (k != NULL) {
        wait_for(p, k);
        sp_err ignored = {0};
        got = share(p, k, file, missing, &ignored) == SP_OK;
    }
    pthread_mutex_unlock(&p->lock);
    return got;
}

bool sp_store_prefetch_peek(sp_store_prefetch *p, const char *path, bool *missing) {
    pthread_mutex_lock(&p->lock);
    kept_file *k = lookup(p, path);
    bool known = false;
    if (k != NULL) {
        wait_for(p, k);
        known = !k->failed;
        *missing = k->missing;
        if (k->failed && k->waiters == 0) {
            clear(p, k);
        }
    }
    pthread_mutex_unlock(&p->lock);
    return known;
}
