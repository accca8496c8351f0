/* write_target_s3.c — a write target that is an s3:// prefix (see write_target.h): each file an
 * object, put whole by one PUT and removed by DELETE.
 *
 * S3 stores an object whole or not at all, so there is no temporary name, rename or flush: a put
 * is in place and durable once its PUT has returned, whatever the mode, and sync has nothing to
 * wait for. A PUT sends its body from the caller's parts without joining them, with
 * Content-Length and the body's SHA-256 signed (so S3 refuses a body damaged on the way), and
 * without "Expect: 100-continue" (one round trip less per object). Requests go through the
 * process's pool of libcurl handles and so reuse their connections. Failures that another try may
 * cure (connection failures, 5xx, 429) are retried as reads are (http_source.h); a PUT may be
 * repeated. Any other answer is SP_E_IO with the HTTP status and S3's error code, read from the
 * response body. Reading back and existence go through the store's reader (store.h), where a 404
 * is a missing file and any other failure an error. Listing is not implemented (it would need
 * ListObjectsV2); a new store's emptiness is judged by the writer from the names it uses.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/strings.h"
#include "io/http_source.h"
#include "io/s3.h"
#include "io/s3_sign.h"
#include "io/store.h"
#include "io/write_target_impl.h"

#define ERROR_BODY_MAX 2048

typedef struct body_reader {
    const sp_bytes *parts;
    size_t nparts, part, at;
} body_reader;

static size_t read_body(char *buf, size_t size, size_t count, void *user) {
    body_reader *r = user;
    size_t room = size * count, n = 0;
    while (n < room && r->part < r->nparts) {
        const sp_bytes *p = &r->parts[r->part];
        size_t take = p->len - r->at < room - n ? p->len - r->at : room - n;
        memcpy(buf + n, (const char *)p->data + r->at, take);
        n += take;
        r->at += take;
        if (r->at == p->len) {
            r->part++;
            r->at = 0;
        }
    }
    return n;
}

typedef struct response {
    char body[ERROR_BODY_MAX + 1];
    size_t len;
} response;

static size_t keep_body(char *data, size_t size, size_t count, void *user) {
    response *r = user;
    size_t n = size * count;
    size_t take = ERROR_BODY_MAX - r->len < n ? ERROR_BODY_MAX - r->len : n;
    memcpy(r->body + r->len, data, take);
    r->len += take;
    r->body[r->len] = '\0';
    return n;
}

static size_t ignore_headers(char *data, size_t size, size_t count, void *user) {
    (void)data;
    (void)user;
    return size * count;
}

/* One request to t: PUT with `parts` (total `len` bytes, SHA-256 `payload`) or DELETE. */
static sp_status request(const sp_s3_target *t, const char *method, const sp_bytes *parts,
                         size_t nparts, uint64_t len, const char *payload, sp_err *err) {
    sp_http_handle *h = sp_http_handle_take(err);
    if (h == NULL) {
        return SP_E_NOMEM;
    }
    bool put = strcmp(method, "PUT") == 0;
    CURL *c = h->curl;
    sp_status st = SP_OK;
    for (int attempt = 1;; attempt++) {
        struct curl_slist *headers = NULL;
        st = sp_s3_sign_headers(t, method, NULL, payload, &headers, err);
        struct curl_slist *grown = st == SP_OK ? curl_slist_append(headers, "Expect:") : NULL;
        if (st == SP_OK && grown == NULL) {
            st = sp_err_set(err, SP_E_NOMEM, "%s: out of memory", t->uri);
        }
        headers = grown != NULL ? grown : headers;
        if (st != SP_OK) {
            curl_slist_free_all(headers);
            break;
        }
        body_reader reader = {parts, nparts, 0, 0};
        response resp = {.len = 0};
        h->error[0] = '\0';
        curl_easy_setopt(c, CURLOPT_URL, t->url);
        curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
        curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, sp_http_stall_timeout());
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, ignore_headers);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, keep_body);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &resp);
        if (put) {
            curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
            curl_easy_setopt(c, CURLOPT_READFUNCTION, read_body);
            curl_easy_setopt(c, CURLOPT_READDATA, &reader);
            curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)len);
        } else {
            curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
        }
        CURLcode rc = curl_easy_perform(c);
        long code = 0;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
        /* Back to a plain GET for the next user of the handle. */
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, NULL);
        curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
        curl_slist_free_all(headers);
        if (sp_http_retryable(rc, code) && attempt < SP_HTTP_ATTEMPTS) {
            sp_http_backoff(attempt);
            continue;
        }
        if (rc != CURLE_OK) {
            st = sp_err_set(err, SP_E_IO, "%s: %s %s%s", t->uri, method,
                            h->error[0] ? h->error : curl_easy_strerror(rc),
                            attempt > 1 ? " (after retries)" : "");
        } else if (put ? code != 200 : code != 204 && code != 200) {
            char s3code[64];
            sp_http_s3_error_code(resp.body, s3code, sizeof s3code);
            st = sp_err_set(err, SP_E_IO, "%s: %s answered HTTP %ld%s%s%s", t->uri, method, code,
                            s3code[0] ? " (" : "", s3code, s3code[0] ? ")" : "");
        }
        break;
    }
    sp_http_handle_give(h);
    return st;
}

/* The object of `relpath`, resolved with the environment. */
static sp_status resolve(const sp_write_target *t, const char *relpath, sp_s3_target *out,
                         sp_err *err) {
    char *uri = sp_strdup_printf("%s/%s", t->root, relpath);
    if (uri == NULL) {
        memset(out, 0, sizeof *out);
        return sp_err_set(err, SP_E_NOMEM, "out of memory writing %s", relpath);
    }
    sp_status st = sp_s3_target_resolve(uri, out, err);
    free(uri);
    return st;
}

static sp_status put(sp_write_target *t, const char *relpath, const sp_bytes *parts, size_t nparts,
                     const char *sha256, sp_put_mode mode, sp_err *err) {
    (void)mode; /* a PUT that returned is in place and durable */
    char own[65];
    if (sha256 == NULL) {
        if (!sp_sha256_parts_hex(parts, nparts, own)) {
            return sp_err_set(err, SP_E_NOMEM, "hashing %s failed", relpath);
        }
        sha256 = own;
    }
    sp_s3_target obj;
    sp_status st = resolve(t, relpath, &obj, err);
    if (st == SP_OK) {
        uint64_t len = 0;
        for (size_t i = 0; i < nparts; i++) {
            len += parts[i].len;
        }
        st = request(&obj, "PUT", parts, nparts, len, sha256, err);
    }
    sp_s3_target_clear(&obj);
    return st;
}

static sp_status remove_object(sp_write_target *t, const char *relpath, sp_err *err) {
    sp_s3_target obj;
    sp_status st = resolve(t, relpath, &obj, err);
    if (st == SP_OK) {
        /* S3 answers 204 whether or not the object existed. */
        st = request(&obj, "DELETE", NULL, 0, 0, SP_S3_EMPTY_SHA256, err);
    }
    sp_s3_target_clear(&obj);
    return st;
}

static sp_status open_file(sp_write_target *t, const char *relpath, sp_source **out, bool *missing,
                           sp_err *err) {
    *out = NULL;
    char *uri = sp_strdup_printf("%s/%s", t->root, relpath);
    if (uri == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory");
    }
    sp_status st = sp_store_open(uri, 0, out, missing, err);
    free(uri);
    return st;
}

static sp_status exists(sp_write_target *t, const char *relpath, bool *yes, sp_err *err) {
    sp_source *src = NULL;
    bool missing = true;
    sp_status st = open_file(t, relpath, &src, &missing, err);
    sp_source_close(src);
    *yes = st == SP_OK && !missing;
    return st;
}

static sp_status list(sp_write_target *t,
                      bool (*fn)(void *user, const char *relpath, bool is_folder), void *user,
                      sp_err *err) {
    (void)fn, (void)user;
    return sp_err_set(err, SP_E_UNSUPPORTED, "%s: listing an S3 prefix is not supported", t->root);
}

static sp_status nothing_to_do(sp_write_target *t, sp_err *err) {
    (void)t, (void)err;
    return SP_OK;
}

static void close_s3(sp_write_target *t, bool keep) {
    (void)t, (void)keep;
}

static const sp_write_target_ops S3_OPS = {
    .put = put,
    .exists = exists,
    .open_file = open_file,
    .remove = remove_object,
    .list = list,
    .sweep_temporaries = nothing_to_do, /* a PUT leaves no temporary object */
    .sync = nothing_to_do,
    .close = close_s3,
};

sp_status sp_write_target_init_s3(sp_write_target *t, sp_err *err) {
    /* Check the bucket name and the credentials now, before anything is written, on the name of
     * a file under the prefix (the prefix itself may be the bare bucket). */
    sp_s3_target probe;
    sp_status st = resolve(t, "slidepipe-complete", &probe, err);
    sp_s3_target_clear(&probe);
    if (st == SP_OK) {
        t->ops = &S3_OPS;
        t->impl = NULL;
    }
    return st;
}
