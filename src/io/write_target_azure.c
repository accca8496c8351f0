/* write_target_azure.c — a write target that is an az:// or abfs(s):// prefix (see
 * write_target.h): each file a block blob, put whole by one Put Blob and removed by Delete Blob.
 *
 * A Put Blob stores the blob whole or not at all, so there is no temporary name, rename or flush:
 * a put is in place and durable once its PUT has returned, whatever the mode, and sync has
 * nothing to wait for. A PUT sends its body from the caller's parts without joining them, with
 * Content-Length and Content-MD5 (Azure refuses a body that does not match it: 400 Md5Mismatch),
 * both signed with Shared Key when a key is used (a SAS token needs write permission, 'w' or
 * 'c', and 'd' to remove), and without "Expect: 100-continue". Requests go through the process's
 * pool of libcurl handles and so reuse their connections. Failures that another try may cure
 * (connection failures, 5xx, 429) are retried as reads are (http_source.h); a PUT may be
 * repeated. Any other answer is SP_E_IO with the HTTP status and Azure's error code, read from
 * the response body. Reading back and existence go through the store's reader (store.h), where a
 * 404 is a missing file and any other failure an error. Listing is not implemented (it would need
 * List Blobs), as for S3.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "base/strings.h"
#include "io/azure.h"
#include "io/http_source.h"
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

/* Base64 of the MD5 of the concatenated parts (the Content-MD5 value) into out[25]. */
static bool md5_base64(const sp_bytes *parts, size_t nparts, char out[25]) {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    bool ok = md != NULL && EVP_DigestInit_ex(md, EVP_md5(), NULL) == 1;
    for (size_t i = 0; ok && i < nparts; i++) {
        ok = parts[i].len == 0 || EVP_DigestUpdate(md, parts[i].data, parts[i].len) == 1;
    }
    ok = ok && EVP_DigestFinal_ex(md, digest, &n) == 1 && n == 16;
    EVP_MD_CTX_free(md);
    if (ok) {
        EVP_EncodeBlock((unsigned char *)out, digest, 16);
    }
    return ok;
}

/* The request headers a PUT of `len` bytes with Content-MD5 `md5` (NULL: a DELETE) sends and
 * signs. */
static sp_status request_headers(const sp_azure_target *t, const char *method, uint64_t len,
                                 const char *md5, struct curl_slist **headers, sp_err *err) {
    char length[24];
    snprintf(length, sizeof length, "%llu", (unsigned long long)len);
    bool ok = md5 == NULL || (sp_http_add_header(headers, "Content-Length", length) &&
                              sp_http_add_header(headers, "Content-MD5", md5) &&
                              sp_http_add_header(headers, "x-ms-blob-type", "BlockBlob"));
    struct curl_slist *grown = ok ? curl_slist_append(*headers, "Expect:") : NULL;
    if (grown == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "%s: out of memory", t->uri);
    }
    *headers = grown;
    return sp_azure_sign_headers(t, method, headers, err);
}

/* One request to t: PUT with `parts` (total `len` bytes) or DELETE. */
static sp_status request(const sp_azure_target *t, const char *method, const sp_bytes *parts,
                         size_t nparts, uint64_t len, const char *md5, sp_err *err) {
    sp_http_handle *h = sp_http_handle_take(err);
    if (h == NULL) {
        return SP_E_NOMEM;
    }
    bool put = strcmp(method, "PUT") == 0;
    CURL *c = h->curl;
    sp_status st = SP_OK;
    for (int attempt = 1;; attempt++) {
        struct curl_slist *headers = NULL;
        st = request_headers(t, method, len, put ? md5 : NULL, &headers, err);
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
        /* Put Blob answers 201; Delete Blob 202, or 404 for a blob already gone. */
        bool done = put ? code == 201 : code == 202 || code == 200 || code == 404;
        if (rc != CURLE_OK) {
            st = sp_err_set(err, SP_E_IO, "%s: %s %s%s", t->uri, method,
                            h->error[0] ? h->error : curl_easy_strerror(rc),
                            attempt > 1 ? " (after retries)" : "");
        } else if (!done) {
            char code_name[64];
            sp_http_s3_error_code(resp.body, code_name, sizeof code_name);
            st = sp_err_set(err, SP_E_IO, "%s: %s answered HTTP %ld%s%s%s", t->uri, method, code,
                            code_name[0] ? " (" : "", code_name, code_name[0] ? ")" : "");
        }
        break;
    }
    sp_http_handle_give(h);
    return st;
}

/* The blob of `relpath`, resolved with the environment. */
static sp_status resolve(const sp_write_target *t, const char *relpath, sp_azure_target *out,
                         sp_err *err) {
    char *uri = sp_strdup_printf("%s/%s", t->root, relpath);
    if (uri == NULL) {
        memset(out, 0, sizeof *out);
        return sp_err_set(err, SP_E_NOMEM, "out of memory writing %s", relpath);
    }
    sp_status st = sp_azure_target_resolve(uri, out, err);
    free(uri);
    return st;
}

static sp_status put(sp_write_target *t, const char *relpath, const sp_bytes *parts, size_t nparts,
                     const char *sha256, sp_put_mode mode, sp_err *err) {
    (void)mode;   /* a PUT that returned is in place and durable */
    (void)sha256; /* Azure checks the body against its MD5 instead */
    char md5[25];
    if (!md5_base64(parts, nparts, md5)) {
        return sp_err_set(err, SP_E_NOMEM, "hashing %s failed", relpath);
    }
    sp_azure_target blob;
    sp_status st = resolve(t, relpath, &blob, err);
    if (st == SP_OK) {
        uint64_t len = 0;
        for (size_t i = 0; i < nparts; i++) {
            len += parts[i].len;
        }
        st = request(&blob, "PUT", parts, nparts, len, md5, err);
    }
    sp_azure_target_clear(&blob);
    return st;
}

static sp_status remove_blob(sp_write_target *t, const char *relpath, sp_err *err) {
    sp_azure_target blob;
    sp_status st = resolve(t, relpath, &blob, err);
    if (st == SP_OK) {
        st = request(&blob, "DELETE", NULL, 0, 0, NULL, err);
    }
    sp_azure_target_clear(&blob);
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
    return sp_err_set(err, SP_E_UNSUPPORTED, "%s: listing an Azure prefix is not supported",
                      t->root);
}

static sp_status nothing_to_do(sp_write_target *t, sp_err *err) {
    (void)t, (void)err;
    return SP_OK;
}

static void close_azure(sp_write_target *t, bool keep) {
    (void)t, (void)keep;
}

static const sp_write_target_ops AZURE_OPS = {
    .put = put,
    .exists = exists,
    .open_file = open_file,
    .remove = remove_blob,
    .list = list,
    .sweep_temporaries = nothing_to_do, /* a Put Blob leaves no temporary blob */
    .sync = nothing_to_do,
    .close = close_azure,
};

sp_status sp_write_target_init_azure(sp_write_target *t, sp_err *err) {
    /* Check the URL and the credentials now, before anything is written, on the name of a file
     * under the prefix (the prefix itself may be the bare container). */
    sp_azure_target probe;
    sp_status st = resolve(t, "slidepipe-complete", &probe, err);
    if (st == SP_OK && probe.key_len == 0 && !probe.sas) {
        st = sp_err_set(err, SP_E_INVALID_ARG,
                        "%s: writing to Azure needs an account key (AZURE_STORAGE_KEY) or a SAS "
                        "token with write permission (AZURE_STORAGE_SAS_TOKEN), or a connection "
                        "string with either",
                        t->root);
    }
    sp_azure_target_clear(&probe);
    if (st == SP_OK) {
        t->ops = &AZURE_OPS;
        t->impl = NULL;
    }
    return st;
}
