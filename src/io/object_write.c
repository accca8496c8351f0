/* object_write.c — a whole object's PUT or DELETE to an object store (see object_write.h).
 *
 * The body is read from the caller's parts as libcurl asks for it, so a chunk is never copied into
 * one buffer first; Content-Length is the parts' total. Only the first 2 KiB of an answer's body
 * is kept: it is read for the error's code or message, which is made printable before it goes
 * into a message (the answer is untrusted). The handle goes back to the pool as a plain GET.
 */
#include "io/object_write.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "io/http_source.h"

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

/* What an error answer says: the <Code> of an XML error document (S3, GCS's XML API, Azure), else
 * the error.message of a JSON one (GCS's JSON API), printable and cut to fit; "" when neither. */
static void error_detail(const char *body, char *out, size_t cap) {
    sp_http_s3_error_code(body, out, cap);
    if (out[0] != '\0') {
        return;
    }
    cJSON *doc = cJSON_Parse(body);
    const cJSON *error = cJSON_GetObjectItemCaseSensitive(doc, "error");
    const cJSON *message = cJSON_GetObjectItemCaseSensitive(error, "message");
    if (cJSON_IsString(message) && message->valuestring != NULL) {
        snprintf(out, cap, "%s", message->valuestring);
        for (char *c = out; *c != '\0'; c++) {
            *c = *c < 0x20 || *c > 0x7e ? '?' : *c;
        }
    }
    cJSON_Delete(doc);
}

static bool succeeded(const char *method, long code, const char *body) {
    if (strcmp(method, "PUT") == 0) {
        return code == 200 || code == 201;
    }
    if (code == 404) { /* already gone, unless the bucket is */
        char what[64];
        sp_http_s3_error_code(body, what, sizeof what);
        return strcmp(what, "NoSuchBucket") != 0;
    }
    return code == 200 || code == 202 || code == 204;
}

sp_status sp_object_write(const sp_object_request *r, sp_err *err) {
    sp_http_handle *h = sp_http_handle_take(err);
    if (h == NULL) {
        return SP_E_NOMEM;
    }
    bool put = strcmp(r->method, "PUT") == 0;
    uint64_t len = 0;
    for (size_t i = 0; put && i < r->nparts; i++) {
        len += r->parts[i].len;
    }
    CURL *c = h->curl;
    sp_status st = SP_OK;
    for (int attempt = 1;; attempt++) {
        struct curl_slist *headers = NULL;
        if (r->sign != NULL) {
            st = r->sign(r->sign_ctx, r->method, r->payload_sha256, &headers, err);
        }
        struct curl_slist *grown = st == SP_OK ? curl_slist_append(headers, "Expect:") : NULL;
        if (st == SP_OK && grown == NULL) {
            st = sp_err_set(err, SP_E_NOMEM, "%s: out of memory", r->uri);
        }
        headers = grown != NULL ? grown : headers;
        if (st != SP_OK) {
            curl_slist_free_all(headers);
            break;
        }
        body_reader reader = {r->parts, r->nparts, 0, 0};
        response resp = {.len = 0};
        h->error[0] = '\0';
        curl_easy_setopt(c, CURLOPT_URL, r->url);
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
            curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, r->method);
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
            st = sp_err_set(err, SP_E_IO, "%s: %s %s%s", r->uri, r->method,
                            h->error[0] ? h->error : curl_easy_strerror(rc),
                            attempt > 1 ? " (after retries)" : "");
        } else if (!succeeded(r->method, code, resp.body)) {
            char detail[256];
            error_detail(resp.body, detail, sizeof detail);
            st = sp_err_set(err, SP_E_IO, "%s: %s answered HTTP %ld%s%s%s", r->uri, r->method, code,
                            detail[0] ? " (" : "", detail, detail[0] ? ")" : "");
        }
        break;
    }
    sp_http_handle_give(h);
    return st;
}
