/* http_source.c — a byte source over an HTTP(S) object: its requests, through libcurl.
 *
 * Opening reads the object's head (64 KiB, or what the caller expects to need: a whole Zarr
 * chunk, say), which is kept, and learns the object's size and ETag from that response; every
 * later request sends If-Match with the ETag, so an object replaced while it is read is an error,
 * not a mix of two objects' bytes. Every response is checked before its bytes are used
 * (http_source.h). libcurl handles, and with them their open connections, are pooled for the
 * whole process, so opening one object after another (the chunks of a remote Zarr store) does not
 * connect and shake hands again each time. What reads do with the requests (a block cache,
 * requests sent ahead) is in http_cache.c.
 */
#include "io/http_source.h"

#include "io/http_internal.h"
#include "io/least_wait.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define POOL_MAX 64 /* idle handles (connections) kept by the process */
#define ERROR_BODY_MAX 2048
#define PARALLEL_DEFAULT 16
#define PREFETCH_MIN_WAIT_US 1000 /* send requests ahead only where one waits this long */

/* What one response delivered. */
typedef struct transfer {
    CURL *curl;
    unsigned char *buf;
    size_t want;
    size_t got;
    bool overflow;
    bool have_range;
    uint64_t first, last, total;
    bool bad_range_header;
    char etag[SP_HTTP_ETAG_MAX];
    char error_body[ERROR_BODY_MAX + 1];
    size_t error_len;
} transfer;

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_result = CURLE_FAILED_INIT;

static void init_curl(void) {
    curl_init_result = curl_global_init(CURL_GLOBAL_DEFAULT);
}

bool sp_http_parse_content_range(const char *value, size_t len, uint64_t *first, uint64_t *last,
                                 uint64_t *total) {
    uint64_t numbers[3] = {0, 0, 0};
    const char seps[3] = {'-', '/', '\0'};
    size_t i = 0;
    if (len < 6 || strncasecmp(value, "bytes ", 6) != 0) {
        return false;
    }
    i = 6;
    for (int k = 0; k < 3; k++) {
        size_t digits = 0;
        while (i < len && value[i] >= '0' && value[i] <= '9') {
            uint64_t d = (uint64_t)(value[i] - '0');
            if (numbers[k] > (UINT64_MAX - d) / 10) {
                return false;
            }
            numbers[k] = numbers[k] * 10 + d;
            i++;
            digits++;
        }
        if (digits == 0 || digits > 19) {
            return false;
        }
        if (seps[k] != '\0') {
            if (i >= len || value[i] != seps[k]) {
                return false;
            }
            i++;
        }
    }
    if (i != len || numbers[0] > numbers[1] || numbers[1] >= numbers[2]) {
        return false;
    }
    *first = numbers[0];
    *last = numbers[1];
    *total = numbers[2];
    return true;
}

/* The value of header line `line` (n bytes, CRLF included) when its name is `name`, trimmed. */
static bool header_value(const char *line, size_t n, const char *name, const char **value,
                         size_t *value_len) {
    size_t name_len = strlen(name);
    if (n <= name_len || strncasecmp(line, name, name_len) != 0 || line[name_len] != ':') {
        return false;
    }
    size_t a = name_len + 1;
    while (a < n && (line[a] == ' ' || line[a] == '\t')) {
        a++;
    }
    size_t b = n;
    while (b > a && (line[b - 1] == '\r' || line[b - 1] == '\n' || line[b - 1] == ' ')) {
        b--;
    }
    *value = line + a;
    *value_len = b - a;
    return true;
}

static size_t on_header(char *line, size_t size, size_t count, void *userdata) {
    transfer *t = userdata;
    size_t n = size * count;
    const char *v;
    size_t vn;
    if (n >= 5 && strncmp(line, "HTTP/", 5) == 0) {
        /* A new response (after a redirect or a 100 Continue): forget the previous one's. */
        t->have_range = false;
        t->bad_range_header = false;
        t->etag[0] = '\0';
    } else if (header_value(line, n, "Content-Range", &v, &vn)) {
        t->have_range = sp_http_parse_content_range(v, vn, &t->first, &t->last, &t->total);
        t->bad_range_header = !t->have_range;
    } else if (header_value(line, n, "ETag", &v, &vn)) {
        if (vn < SP_HTTP_ETAG_MAX) {
            memcpy(t->etag, v, vn);
            t->etag[vn] = '\0';
        }
    }
    return n;
}

static size_t on_body(char *data, size_t size, size_t count, void *userdata) {
    transfer *t = userdata;
    size_t n = size * count;
    long code = 0;
    curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &code);
    if (code != 206) {
        /* Keep the start of an error document for the message; stop reading a body that is not
         * the range (a server that ignores Range would send the whole object). */
        size_t keep = n < ERROR_BODY_MAX - t->error_len ? n : ERROR_BODY_MAX - t->error_len;
        memcpy(t->error_body + t->error_len, data, keep);
        t->error_len += keep;
        t->error_body[t->error_len] = '\0';
        return keep == n ? n : 0;
    }
    if (n > t->want - t->got) {
        t->overflow = true;
        return 0;
    }
    memcpy(t->buf + t->got, data, n);
    t->got += n;
    return n;
}

/* Idle handles of the whole process, each with the connections it keeps open. */
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static sp_http_handle *pool[POOL_MAX];
static int n_pool;

/* fork() copies the pool, and with it the parent's open connections: a child that used them
 * would share their sockets with its parent and its siblings, and read answers meant for another
 * process. The child forgets them and opens its own. It does not close them: a TLS goodbye on a
 * shared socket would end the parent's connection too. */
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
static void pool_before_fork(void) { pthread_mutex_lock(&pool_lock); }
static void pool_after_fork_parent(void) { pthread_mutex_unlock(&pool_lock); }
static void pool_after_fork_child(void) {
    n_pool = 0;
    pthread_mutex_unlock(&pool_lock);
}
static void watch_forks(void) {
    pthread_atfork(pool_before_fork, pool_after_fork_parent, pool_after_fork_child);
}

sp_http_handle *sp_http_handle_take(sp_err *err) {
    pthread_once(&fork_once, watch_forks);
    pthread_mutex_lock(&pool_lock);
    sp_http_handle *p = n_pool > 0 ? pool[--n_pool] : NULL;
    pthread_mutex_unlock(&pool_lock);
    if (p != NULL) {
        return p;
    }
    p = calloc(1, sizeof *p);
    CURL *c = p != NULL ? curl_easy_init() : NULL;
    if (c == NULL) {
        free(p);
        sp_err_set(err, SP_E_NOMEM, "cannot create an HTTP handle");
        return NULL;
    }
    p->curl = c;
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, p->error);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "slidepipe/0.1");
    /* Receive in pieces of up to 128 KiB, not 16: a third of the receive calls for a Zarr chunk
     * file (5-13% more MP/s reading a remote store on 2 threads, docs/benchmarks.md). */
    curl_easy_setopt(c, CURLOPT_BUFFERSIZE, 128L * 1024);
    return p;
}

void sp_http_handle_give(sp_http_handle *p) {
    if (p == NULL) {
        return;
    }
    pthread_mutex_lock(&pool_lock);
    if (n_pool < POOL_MAX) {
        pool[n_pool++] = p;
        p = NULL;
    }
    pthread_mutex_unlock(&pool_lock);
    if (p != NULL) {
        curl_easy_cleanup(p->curl);
        free(p);
    }
}

/* A handle set up for requests to h's object. A server that stops sending is a timeout, not a
 * hang. A signed request is for one host; a plain URL may redirect (to a CDN, say). */
static sp_http_handle *borrow_handle(http_ctx *h, sp_err *err) {
    sp_http_handle *p = sp_http_handle_take(err);
    if (p != NULL) {
        curl_easy_setopt(p->curl, CURLOPT_URL, h->url);
        curl_easy_setopt(p->curl, CURLOPT_LOW_SPEED_TIME, h->stall_timeout_s);
        curl_easy_setopt(p->curl, CURLOPT_FOLLOWLOCATION, h->signer.sign == NULL ? 1L : 0L);
        curl_easy_setopt(p->curl, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(p->curl, CURLOPT_WRITEFUNCTION, on_body);
    }
    return p;
}

bool sp_http_retryable(CURLcode rc, long code) {
    if (rc == CURLE_OK) {
        return code >= 500 || code == 429;
    }
    switch (rc) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR: return true;
    default: return false;
    }
}

void sp_http_backoff(int attempt) {
    long ms = 100L << (2 * (attempt - 1)); /* 0.1, 0.4, 1.6 s */
    struct timespec pause = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&pause, NULL);
}

void sp_http_s3_error_code(const char *body, char *out, size_t cap) {
    out[0] = '\0';
    const char *a = strstr(body, "<Code>");
    const char *b = a != NULL ? strstr(a, "</Code>") : NULL;
    if (b != NULL && (size_t)(b - a - 6) < cap) {
        size_t n = (size_t)(b - a - 6);
        memcpy(out, a + 6, n);
        out[n] = '\0';
        for (size_t i = 0; i < n; i++) {
            if (out[i] < 0x20 || out[i] > 0x7e) {
                out[i] = '?';
            }
        }
    }
}

static sp_status http_status_error(const http_ctx *h, long code, const transfer *t,
                                   const char *range, sp_err *err) {
    char s3code[64];
    sp_http_s3_error_code(t->error_body, s3code, sizeof s3code);
    const char *what = code == 404   ? "not found"
                       : code == 403 ? "access denied"
                       : code == 401 ? "authentication required"
                       : code == 412 ? "the object changed while it was being read"
                       : code == 416 ? "range not satisfiable"
                       : code == 200
                           ? "the server ignored the Range request; slidepipe reads remote "
                             "slides only from servers that support ranges"
                           : "unexpected response";
    return sp_err_set(err, code == 404 ? SP_E_NOT_FOUND : SP_E_IO, "%s: HTTP %ld (%s%s%s) for %s",
                      h->name, code, what, s3code[0] ? ": " : "", s3code, range);
}

bool sp_http_add_header(struct curl_slist **list, const char *name, const char *value) {
    char line[2048];
    int n = snprintf(line, sizeof line, "%s: %s", name, value);
    if (n < 0 || (size_t)n >= sizeof line) {
        return false;
    }
    struct curl_slist *grown = curl_slist_append(*list, line);
    if (grown == NULL) {
        return false;
    }
    *list = grown;
    return true;
}

/* The headers of one request for `range`: Range, If-Match once the ETag is known, the signer's. */
static sp_status request_headers(http_ctx *h, const char *range, struct curl_slist **headers,
                                 sp_err *err) {
    *headers = NULL;
    bool ok = sp_http_add_header(headers, "Range", range) &&
              (h->etag[0] == '\0' || sp_http_add_header(headers, "If-Match", h->etag));
    sp_status st = ok ? SP_OK : sp_err_set(err, SP_E_NOMEM, "%s: out of memory", h->name);
    if (st == SP_OK && h->signer.sign != NULL) {
        st = h->signer.sign(h->signer.ctx, "GET", range, headers, err);
    }
    if (st != SP_OK) {
        curl_slist_free_all(*headers);
        *headers = NULL;
    }
    return st;
}

/* How long this process's requests wait for their first byte (the round trip and the server's
 * own time, not the transfer, which sending requests at once would not shorten): an average
 * that follows the recent ones (7/8 the old value, 1/8 the new), in microseconds; 0 before the
 * first. */
static _Atomic uint64_t recent_request_us;
/* The least of those waits among the recent requests, for a busy machine (least_wait.h). */
static sp_least_wait least_request_wait;
static _Thread_local bool untimed; /* sp_http_untimed: this thread's requests are not timed */

void sp_http_untimed(bool on) {
    untimed = on;
}

static void note_request_time(CURL *c) {
    curl_off_t us = 0;
    if (untimed) {
        return;
    }
    if (curl_easy_getinfo(c, CURLINFO_STARTTRANSFER_TIME_T, &us) == CURLE_OK && us >= 0) {
        uint64_t old = atomic_load_explicit(&recent_request_us, memory_order_relaxed);
        uint64_t now = old == 0 ? (uint64_t)us + 1 : (7 * old + (uint64_t)us) / 8;
        atomic_store_explicit(&recent_request_us, now, memory_order_relaxed);
        sp_least_wait_note(&least_request_wait, (uint64_t)us);
    }
}

bool sp_http_prefetch_pays(void) {
    return atomic_load_explicit(&recent_request_us, memory_order_relaxed) >= PREFETCH_MIN_WAIT_US;
}

bool sp_http_prefetch_pays_busy(void) {
    return sp_least_wait_us(&least_request_wait) >= PREFETCH_MIN_WAIT_US;
}

bool sp_http_guessing_pays(void) {
    uint64_t us = atomic_load_explicit(&recent_request_us, memory_order_relaxed);
    return us == 0 || us >= PREFETCH_MIN_WAIT_US;
}

sp_status sp_http_fetch(http_ctx *h, uint64_t offset, size_t len, void *buf, bool open,
                        int attempts, size_t *got, sp_err *err) {
    char range[64];
    snprintf(range, sizeof range, "bytes=%llu-%llu", (unsigned long long)offset,
             (unsigned long long)(offset + len - 1));
    sp_http_handle *p = borrow_handle(h, err);
    if (p == NULL) {
        return SP_E_NOMEM;
    }
    sp_status st = SP_OK;
    for (int attempt = 1;; attempt++) {
        transfer t = {.curl = p->curl, .buf = buf, .want = len};
        struct curl_slist *headers = NULL;
        st = request_headers(h, range, &headers, err);
        if (st != SP_OK) {
            break;
        }
        p->error[0] = '\0';
        curl_easy_setopt(p->curl, CURLOPT_HTTPHEADER, headers);
        curl_easy_setopt(p->curl, CURLOPT_WRITEDATA, &t);
        curl_easy_setopt(p->curl, CURLOPT_HEADERDATA, &t);
        CURLcode rc = curl_easy_perform(p->curl);
        curl_easy_setopt(p->curl, CURLOPT_HTTPHEADER, NULL);
        curl_slist_free_all(headers);
        long code = 0;
        curl_easy_getinfo(p->curl, CURLINFO_RESPONSE_CODE, &code);
        if (t.overflow) {
            st = sp_err_set(err, SP_E_IO, "%s: the server sent more than the %zu bytes of %s",
                            h->name, len, range);
            break;
        }
        if (rc == CURLE_WRITE_ERROR && code != 206) {
            rc = CURLE_OK; /* we stopped reading an error or non-range body ourselves */
        }
        if (sp_http_retryable(rc, code) && attempt < attempts) {
            sp_http_backoff(attempt);
            continue;
        }
        if (rc != CURLE_OK) {
            st = sp_err_set(err, SP_E_IO, "%s: %s for %s%s", h->name,
                            p->error[0] ? p->error : curl_easy_strerror(rc), range,
                            attempt > 1 ? " (after retries)" : "");
            break;
        }
        if (code != 206) {
            st = http_status_error(h, code, &t, range, err);
            break;
        }
        /* A 206 must say which bytes it holds, and they must be the ones asked for. */
        bool range_ok = t.have_range && t.first == offset && t.got == t.last - t.first + 1 &&
                        (open ? t.last <= offset + len - 1 : t.last == offset + len - 1) &&
                        (open || t.total == h->size);
        if (!range_ok) {
            st = sp_err_set(err, SP_E_IO,
                            "%s: the server's answer to %s is not that range (%s, %zu bytes)",
                            h->name, range,
                            t.bad_range_header ? "malformed Content-Range"
                            : t.have_range     ? "another range or object size"
                                               : "no Content-Range",
                            t.got);
            break;
        }
        if (h->etag[0] != '\0' && t.etag[0] != '\0' && strcmp(h->etag, t.etag) != 0) {
            st =
                sp_err_set(err, SP_E_IO, "%s: the object changed while it was being read", h->name);
            break;
        }
        if (open) {
            h->size = t.total;
            /* If-Match compares strongly: a weak validator would fail every request. */
            if (strncmp(t.etag, "W/", 2) != 0) {
                memcpy(h->etag, t.etag, sizeof h->etag);
            }
        }
        note_request_time(p->curl);
        *got = t.got;
        break;
    }
    sp_http_handle_give(p);
    return st;
}

void sp_http_ctx_release(http_ctx *h) {
    pthread_mutex_lock(&h->lock);
    bool last = --h->refs == 0;
    if (h->refs == 1) {
        pthread_cond_broadcast(&h->arrived); /* the source may be waiting in its close */
    }
    pthread_mutex_unlock(&h->lock);
    if (!last) {
        return;
    }
    free(h->head);
    for (int i = 0; i < SP_HTTP_CACHE_BLOCKS; i++) {
        free(h->blocks[i].data);
    }
    for (int i = 0; i < SP_HTTP_HELD_MAX; i++) {
        free(h->held[i].data);
    }
    if (h->signer.free_ctx != NULL) {
        h->signer.free_ctx(h->signer.ctx);
    }
    pthread_cond_destroy(&h->arrived);
    pthread_mutex_destroy(&h->lock);
    free(h->url);
    free(h->name);
    free(h);
}

/* The source lets go of its object once the requests it sent ahead are answered: none of its
 * work may still run after it (at a process's exit, its libraries tearing down). */
static void http_close(void *ctx) {
    http_ctx *h = ctx;
    pthread_mutex_lock(&h->lock);
    sp_http_forget_orphans(h);
    while (h->refs > 1) {
        pthread_cond_wait(&h->arrived, &h->lock);
    }
    pthread_mutex_unlock(&h->lock);
    sp_http_ctx_release(h);
}

/* The head, when it is the whole object: a Zarr chunk file fetched whole by its opening request
 * goes to its reader without a copy. Reads after this go to the server (and the block cache). */
static void *http_take_whole(void *ctx, size_t *len) {
    http_ctx *h = ctx;
    if (h->head == NULL || h->head_len != h->size) {
        return NULL;
    }
    void *whole = h->head;
    *len = h->head_len;
    h->head = NULL;
    h->head_len = 0;
    return whole;
}

static const sp_source_impl HTTP_IMPL = {sp_http_read_at, http_close, sp_http_prefetch,
                                         http_take_whole, NULL};

int sp_http_parallel(void) {
    const char *v = getenv("SLIDEPIPE_HTTP_PARALLEL");
    char *end = NULL;
    long n = v != NULL ? strtol(v, &end, 10) : 0;
    return (v != NULL && end != v && *end == '\0' && n >= 1 && n <= 64) ? (int)n : PARALLEL_DEFAULT;
}

long sp_http_stall_timeout(void) {
    const char *v = getenv("SLIDEPIPE_HTTP_TIMEOUT");
    char *end = NULL;
    long s = v != NULL ? strtol(v, &end, 10) : 0;
    return (v != NULL && end != v && *end == '\0' && s > 0 && s <= 3600) ? s : 30;
}

sp_status sp_source_open_http(const char *url, const char *name, const sp_http_signer *signer,
                              size_t head_len, sp_source **out, sp_err *err) {
    *out = NULL;
    sp_http_signer none = {0};
    const sp_http_signer *sg = signer != NULL ? signer : &none;
    head_len = head_len < SP_HTTP_BLOCK ? SP_HTTP_BLOCK : head_len;
    pthread_once(&curl_once, init_curl);
    http_ctx *h = calloc(1, sizeof *h);
    unsigned char *head = malloc(head_len);
    if (h != NULL) {
        h->url = strdup(url);
        h->name = strdup(name != NULL ? name : url);
    }
    if (h == NULL || head == NULL || h->url == NULL || h->name == NULL) {
        if (h != NULL) {
            free(h->url);
            free(h->name);
        }
        free(h);
        free(head);
        if (sg->free_ctx != NULL) {
            sg->free_ctx(sg->ctx);
        }
        /* `name`, not `url`: a URL may carry a SAS token in its query. */
        return sp_err_set(err, SP_E_NOMEM, "out of memory opening %s", name ? name : url);
    }
    h->signer = *sg;
    h->stall_timeout_s = sp_http_stall_timeout();
    h->parallel = sp_http_parallel();
    h->refs = 1;
    pthread_mutex_init(&h->lock, NULL);
    pthread_cond_init(&h->arrived, NULL);
    if (curl_init_result != CURLE_OK) {
        free(head);
        http_close(h);
        return sp_err_set(err, SP_E_IO, "%s: libcurl failed to initialise", name ? name : url);
    }
    size_t got = 0;
    sp_status st = sp_http_fetch(h, 0, head_len, head, true, SP_HTTP_ATTEMPTS, &got, err);
    if (st != SP_OK) {
        free(head);
        http_close(h);
        return st;
    }
    /* A shorter object than expected keeps only what it holds. */
    unsigned char *fitted = got < head_len ? realloc(head, got ? got : 1) : head;
    h->head = fitted != NULL ? fitted : head;
    h->head_len = got;
    return sp_source_create(&HTTP_IMPL, h, h->size, h->name, out, err);
}
