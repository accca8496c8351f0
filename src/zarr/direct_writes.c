/* direct_writes.c — background O_DIRECT writes of large chunk files (see direct_writes.h).
 *
 * A FIFO of jobs, a few writer threads and a pool of buffers mapped from the kernel (page-aligned,
 * as O_DIRECT wants, and outside malloc's heaps, which grew by hundreds of megabytes when large
 * buffers were allocated by one thread and freed by another). A hand-over takes a buffer
 * from the pool (growing it if it is too small), copies the bytes in and queues the job; a writer
 * pads the buffer with zeros to the alignment O_DIRECT asks for, writes it, cuts the file back to
 * its true length and returns the buffer to the pool. When O_DIRECT cannot be set, or a direct
 * write fails for any reason (an unaligned length on an odd file system, a full disk), the file is
 * emptied and written again the ordinary way, so that the error reported, if any, is the one an
 * ordinary write gets. Two writers keep two requests in flight; they spend their time waiting for
 * the device, not on a core.
 */
#define _GNU_SOURCE /* O_DIRECT */
#include "zarr/direct_writes.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define N_WRITERS 2
#define ALIGN 4096
/* Bytes queued before hand-overs wait (a larger job still goes when the queue is empty), and the
 * bytes of all buffers, busy or idle, past which a returned buffer is unmapped rather than kept:
 * in a steady run every buffer is kept and reused, so pages are faulted in once. */
#define MAX_QUEUED_BYTES ((size_t)64 << 20)
#define MAX_HELD_BYTES ((size_t)96 << 20)
/* Files queued before hand-overs wait: bounds open descriptors. */
#define MAX_QUEUED_FILES 64

typedef struct buffer {
    struct buffer *next; /* in the pool */
    uint8_t *bytes;      /* ALIGN-aligned */
    size_t cap;          /* a multiple of ALIGN */
} buffer;

typedef struct job {
    struct job *next;
    int fd;
    char *tmp, *full;
    buffer *buf;
    size_t len;
} job;

struct sp_direct_writes {
    sp_durable_renames *renames;
    pthread_mutex_t lock;
    pthread_cond_t changed; /* a job was queued or finished, or stop */
    pthread_t threads[N_WRITERS];
    int nthreads;
    job *head, *tail;
    size_t queued_bytes, queued_files;
    int busy;          /* jobs the writers hold */
    buffer *pool;      /* idle buffers */
    size_t held_bytes; /* of all buffers */
    bool stop;
    sp_err failure; /* the first failure; status SP_OK while there is none */
};

/* Unmap a buffer (under the lock). */
static void buffer_free(sp_direct_writes *w, buffer *b) {
    if (b != NULL) {
        munmap(b->bytes, b->cap);
        w->held_bytes -= b->cap;
        free(b);
    }
}

/* An idle buffer of at least `len` bytes plus padding (under the lock), or NULL: the first large
 * enough in the pool, else the pool's first one grown, else a new one. */
static buffer *take_buffer(sp_direct_writes *w, size_t len) {
    size_t need = (len / ALIGN + 1) * ALIGN;
    buffer **link = &w->pool;
    while (*link != NULL && (*link)->cap < need) {
        link = &(*link)->next;
    }
    if (*link == NULL) {
        link = &w->pool;
    }
    buffer *b = *link;
    if (b != NULL) {
        *link = b->next;
        if (b->cap >= need) {
            return b;
        }
        munmap(b->bytes, b->cap);
        w->held_bytes -= b->cap;
    } else if ((b = malloc(sizeof *b)) == NULL) {
        return NULL;
    }
    /* Room for a little growth, so that chunks of similar sizes reuse one mapping. */
    size_t cap = need + need / 8 / ALIGN * ALIGN;
    void *p = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        free(b);
        return NULL;
    }
    b->bytes = p;
    b->cap = cap;
    w->held_bytes += cap;
    return b;
}

/* Back to the pool, or unmapped when the buffers hold too much (under the lock). */
static void give_buffer(sp_direct_writes *w, buffer *b) {
    if (w->held_bytes > MAX_HELD_BYTES) {
        buffer_free(w, b);
        return;
    }
    b->next = w->pool;
    w->pool = b;
}

/* Remove a job's file unwritten. Frees the names; the buffer is the caller's. */
static void discard_file(int fd, char *tmp, char *full) {
    if (fd >= 0) {
        close(fd);
    }
    unlink(tmp);
    free(tmp);
    free(full);
}

/* pwrite all of buf at offset 0; false with errno set on failure. */
static bool write_all(int fd, const uint8_t *buf, size_t len) {
    for (size_t off = 0; off < len;) {
        ssize_t n = pwrite(fd, buf + off, len - off, (off_t)off);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            if (n == 0) {
                errno = EIO;
            }
            return false;
        }
        off += (size_t)n;
    }
    return true;
}

static bool write_direct(int fd, uint8_t *buf, size_t len) {
    size_t padded = (len + ALIGN - 1) / ALIGN * ALIGN;
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_DIRECT) != 0) {
        return false;
    }
    memset(buf + len, 0, padded - len);
    bool ok = write_all(fd, buf, padded) && ftruncate(fd, (off_t)len) == 0;
    fcntl(fd, F_SETFL, flags);
    return ok;
}

/* Write the job's bytes and close its file; on failure the message names the file. */
static sp_status write_job(job *j, sp_err *err) {
    bool ok = write_direct(j->fd, j->buf->bytes, j->len);
    if (!ok) {
        ok = ftruncate(j->fd, 0) == 0 && write_all(j->fd, j->buf->bytes, j->len);
    }
    int e = errno;
    int r = close(j->fd);
    j->fd = -1;
    if (ok && r != 0) {
        ok = false;
        e = errno;
    }
    if (!ok) {
        return sp_err_set(err, SP_E_IO, "cannot write %s: %s", j->full, strerror(e));
    }
    return SP_OK;
}

static void *writer_main(void *arg) {
    sp_direct_writes *w = arg;
    pthread_mutex_lock(&w->lock);
    for (;;) {
        while (!w->stop && w->head == NULL) {
            pthread_cond_wait(&w->changed, &w->lock);
        }
        job *j = w->head;
        if (j == NULL) {
            break; /* stopping, and nothing is left */
        }
        w->head = j->next;
        if (w->head == NULL) {
            w->tail = NULL;
        }
        w->busy++;
        bool failed = w->failure.status != SP_OK;
        pthread_mutex_unlock(&w->lock);

        sp_err e = {0};
        sp_status st = SP_OK;
        if (failed) {
            discard_file(j->fd, j->tmp, j->full); /* after a failure nothing more is written */
        } else if ((st = write_job(j, &e)) == SP_OK) {
            st = sp_durable_renames_add(w->renames, j->tmp, j->full, &e); /* takes both */
        } else {
            discard_file(-1, j->tmp, j->full);
        }

        pthread_mutex_lock(&w->lock);
        w->busy--;
        w->queued_bytes -= j->len;
        w->queued_files--;
        give_buffer(w, j->buf);
        free(j);
        if (st != SP_OK && w->failure.status == SP_OK) {
            w->failure = e;
        }
        pthread_cond_broadcast(&w->changed);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

static sp_status report_failure(const sp_direct_writes *w, sp_err *err) {
    if (w->failure.status == SP_OK) {
        return SP_OK;
    }
    return sp_err_set(err, w->failure.status, "%s", w->failure.msg);
}

sp_status sp_direct_writes_create(sp_durable_renames *renames, sp_direct_writes **out,
                                  sp_err *err) {
    *out = NULL;
    sp_direct_writes *w = calloc(1, sizeof *w);
    if (w == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory");
    }
    w->renames = renames;
    if (pthread_mutex_init(&w->lock, NULL) != 0) {
        free(w);
        return sp_err_set(err, SP_E_NOMEM, "cannot create a mutex");
    }
    if (pthread_cond_init(&w->changed, NULL) != 0) {
        pthread_mutex_destroy(&w->lock);
        free(w);
        return sp_err_set(err, SP_E_NOMEM, "cannot create a condition variable");
    }
    for (; w->nthreads < N_WRITERS; w->nthreads++) {
        int e = pthread_create(&w->threads[w->nthreads], NULL, writer_main, w);
        if (e != 0) {
            sp_direct_writes_destroy(w, false);
            return sp_err_set(err, SP_E_NOMEM, "cannot start a writing thread: %s", strerror(e));
        }
    }
    *out = w;
    return SP_OK;
}

sp_status sp_direct_writes_add(sp_direct_writes *w, int fd, char *tmp, char *full, const void *data,
                               size_t len, sp_err *err) {
    job *j = malloc(sizeof *j);
    if (j == NULL) {
        discard_file(fd, tmp, full);
        return sp_err_set(err, SP_E_NOMEM, "out of memory");
    }
    *j = (job){NULL, fd, tmp, full, NULL, len};
    pthread_mutex_lock(&w->lock);
    /* Nothing queued or being written: the job goes, however large. */
    while (w->failure.status == SP_OK && w->queued_files > 0 &&
           (w->queued_bytes + len > MAX_QUEUED_BYTES || w->queued_files >= MAX_QUEUED_FILES)) {
        pthread_cond_wait(&w->changed, &w->lock);
    }
    sp_status st = report_failure(w, err);
    if (st == SP_OK && (j->buf = take_buffer(w, len)) == NULL) {
        st = sp_err_set(err, SP_E_NOMEM, "out of memory for a %zu-byte chunk", len);
    }
    if (st == SP_OK) { /* counted now, so that waiting hand-overs see the room taken */
        w->queued_bytes += len;
        w->queued_files++;
    }
    pthread_mutex_unlock(&w->lock);
    if (st != SP_OK) {
        discard_file(fd, tmp, full);
        free(j);
        return st;
    }
    memcpy(j->buf->bytes, data, len);
    pthread_mutex_lock(&w->lock);
    if (w->tail != NULL) {
        w->tail->next = j;
    } else {
        w->head = j;
    }
    w->tail = j;
    pthread_cond_broadcast(&w->changed);
    pthread_mutex_unlock(&w->lock);
    return SP_OK;
}

sp_status sp_direct_writes_drain(sp_direct_writes *w, sp_err *err) {
    pthread_mutex_lock(&w->lock);
    while (w->queued_files > 0) {
        pthread_cond_wait(&w->changed, &w->lock);
    }
    sp_status st = report_failure(w, err);
    pthread_mutex_unlock(&w->lock);
    return st;
}

void sp_direct_writes_destroy(sp_direct_writes *w, bool keep) {
    if (w == NULL) {
        return;
    }
    if (keep) {
        sp_err ignored = {0};
        sp_direct_writes_drain(w, &ignored);
    }
    pthread_mutex_lock(&w->lock);
    job *j = w->head;
    w->head = w->tail = NULL;
    w->stop = true;
    pthread_cond_broadcast(&w->changed);
    pthread_mutex_unlock(&w->lock);
    while (j != NULL) {
        job *next = j->next;
        discard_file(j->fd, j->tmp, j->full);
        buffer_free(w, j->buf);
        free(j);
        j = next;
    }
    for (int i = 0; i < w->nthreads; i++) {
        pthread_join(w->threads[i], NULL);
    }
    while (w->pool != NULL) {
        buffer *b = w->pool;
        w->pool = b->next;
        buffer_free(w, b);
    }
    pthread_cond_destroy(&w->changed);
    pthread_mutex_destroy(&w->lock);
    free(w);
}
