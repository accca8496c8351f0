/* s3_write.c — PUT and DELETE of whole S3 objects (s3.h), for the Zarr writer.
 *
 * A PUT sends its body from the caller's parts without joining them, with Content-Length and the
 * body's SHA-256 signed (so S3 refuses a body damaged on the way), and without "Expect:
 * 100-continue" (one round trip less per object). Requests go through the process's pool of
 * libcurl handles and so reuse their connections. Failures that another try may cure are retried
 * as reads are (http_source.h); a response body is read only to name S3's error code.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/http_source.h"
#include "io/s3.h"
#include "io/s3_sign.h"

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

sp_status sp_s3_put(const char *uri, const sp_bytes *parts, size_t nparts, const char *sha256_hex,
                    sp_err *err) {
    sp_s3_target t;
    sp_status st = sp_s3_target_resolve(uri, &t, err);
    if (st != SP_OK) {
        return st;
    }
    uint64_t len = 0;
    for (size_t i = 0; i < nparts; i++) {
        len += parts[i].len;
    }
    st = request(&t, "PUT", parts, nparts, len, sha256_hex, err);
    sp_s3_target_clear(&t);
    return st;
}

sp_status sp_s3_delete(const char *uri, sp_err *err) {
    sp_s3_target t;
    sp_status st = sp_s3_target_resolve(uri, &t, err);
    if (st != SP_OK) {
        return st;
    }
    st = request(&t, "DELETE", NULL, 0, 0, SP_S3_EMPTY_SHA256, err);
    sp_s3_target_clear(&t);
    return st;
}
