/* gcs_source.c — gs://bucket/key as a byte source: the object's XML API URL and its credentials
 * from the usual Google environment, handed to the HTTP source (http_source.h), so GCS reads get
 * the same ranged requests, retries, ETag pinning and pipelining as HTTP and S3.
 *
 * Where: STORAGE_EMULATOR_HOST (host:port or http(s)://host:port, what Google's client libraries
 * read for an emulator) or else https://storage.googleapis.com; path-style URLs,
 * ENDPOINT/bucket/key. How signed: HMAC keys (GS_ACCESS_KEY_ID and GS_SECRET_ACCESS_KEY, boto's
 * and gsutil's names) sign with AWS Signature Version 4, which the XML API accepts for HMAC keys
 * (region "auto"), through s3_target.c's signer; or an OAuth 2 access token
 * (GOOGLE_OAUTH_ACCESS_TOKEN or CLOUDSDK_AUTH_ACCESS_TOKEN, as `gcloud auth print-access-token`
 * gives it) goes as a Bearer header; with neither, requests are unsigned (a public bucket, an
 * emulator). A service-account key file is not read here: mint a token from it first.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/strings.h"
#include "io/http_source.h"
#include "io/s3.h"
#include "io/s3_sign.h"

static const char *env(const char *name) {
    const char *v = getenv(name);
    return v != NULL && v[0] != '\0' ? v : NULL;
}

/* GCS bucket names: 3-63 characters (222 with dots) of a-z, 0-9, '-', '_' and '.'. */
static bool valid_bucket(const char *b, size_t n) {
    bool dotted = memchr(b, '.', n) != NULL;
    if (n < 3 || n > (dotted ? 222u : 63u)) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        char c = b[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
              c == '.')) {
            return false;
        }
    }
    return true;
}

/* "scheme://authority" of STORAGE_EMULATOR_HOST, or Google's; SP_E_INVALID_ARG for a path or an
 * empty host. */
static sp_status endpoint_of(const char *emulator, char *scheme, size_t scheme_cap, char *host,
                             size_t host_cap, sp_err *err) {
    const char *rest = emulator;
    snprintf(scheme, scheme_cap, emulator != NULL ? "http" : "https");
    if (emulator == NULL) {
        snprintf(host, host_cap, "storage.googleapis.com");
        return SP_OK;
    }
    if (strncmp(emulator, "http://", 7) == 0) {
        rest = emulator + 7;
    } else if (strncmp(emulator, "https://", 8) == 0) {
        snprintf(scheme, scheme_cap, "https");
        rest = emulator + 8;
    }
    size_t n = strcspn(rest, "/");
    if (n == 0 || n >= host_cap || (rest[n] != '\0' && strcmp(rest + n, "/") != 0)) {
        return sp_err_set(err, SP_E_INVALID_ARG,
                          "STORAGE_EMULATOR_HOST %s: expected host:port or http(s)://host:port "
                          "without a path",
                          emulator);
    }
    memcpy(host, rest, n);
    host[n] = '\0';
    return SP_OK;
}

typedef struct bearer {
    char *header; /* "Bearer TOKEN" */
} bearer;

static void bearer_free(void *ctx) {
    bearer *b = ctx;
    if (b != NULL && b->header != NULL) {
        memset(b->header, 0, strlen(b->header));
        free(b->header);
    }
    free(b);
}

static sp_status sign_bearer(void *ctx, const char *method, const char *range,
                             struct curl_slist **headers, sp_err *err) {
    (void)method;
    (void)range;
    const bearer *b = ctx;
    return sp_http_add_header(headers, "Authorization", b->header)
               ? SP_OK
               : sp_err_set(err, SP_E_NOMEM, "out of memory signing a GCS request");
}

static void hmac_free(void *ctx) {
    sp_s3_target_clear(ctx);
    free(ctx);
}

static sp_status sign_hmac(void *ctx, const char *method, const char *range,
                           struct curl_slist **headers, sp_err *err) {
    return sp_s3_sign_headers(ctx, method, range, SP_S3_EMPTY_SHA256, headers, err);
}

/* The HMAC signer's target: what s3_target.c signs (Host, the encoded path, region "auto"). */
static sp_status hmac_target(const char *uri, const char *host, const char *path, const char *url,
                             sp_s3_target **out, sp_err *err) {
    sp_s3_target *t = calloc(1, sizeof *t);
    if (t != NULL) {
        t->uri = strdup(uri);
        t->url = strdup(url);
        t->host = strdup(host);
        t->canonical_uri = strdup(path);
        t->access_key = strdup(env("GS_ACCESS_KEY_ID"));
        t->secret_key = strdup(env("GS_SECRET_ACCESS_KEY"));
        t->region = strdup("auto");
    }
    if (t == NULL || !t->uri || !t->url || !t->host || !t->canonical_uri || !t->access_key ||
        !t->secret_key || !t->region) {
        hmac_free(t);
        return sp_err_set(err, SP_E_NOMEM, "out of memory opening %s", uri);
    }
    *out = t;
    return SP_OK;
}

sp_status sp_source_open_gcs(const char *uri, size_t head_len, sp_source **out, sp_err *err) {
    *out = NULL;
    const char *bucket = uri + 5; /* after "gs://" */
    const char *slash = strncmp(uri, "gs://", 5) == 0 ? strchr(bucket, '/') : NULL;
    size_t bucket_len = slash != NULL ? (size_t)(slash - bucket) : 0;
    if (slash == NULL || slash[1] == '\0' || !valid_bucket(bucket, bucket_len)) {
        return sp_err_set(err, SP_E_INVALID_ARG,
                          "%s: expected gs://BUCKET/OBJECT with a bucket name of 3-63 characters "
                          "a-z, 0-9, '-', '_' and '.'",
                          uri);
    }
    bool hmac = env("GS_ACCESS_KEY_ID") != NULL;
    if (hmac != (env("GS_SECRET_ACCESS_KEY") != NULL)) {
        return sp_err_set(err, SP_E_INVALID_ARG,
                          "%s: GS_ACCESS_KEY_ID and GS_SECRET_ACCESS_KEY must be set together",
                          uri);
    }
    const char *token = env("GOOGLE_OAUTH_ACCESS_TOKEN") != NULL
                            ? env("GOOGLE_OAUTH_ACCESS_TOKEN")
                            : env("CLOUDSDK_AUTH_ACCESS_TOKEN");
    char scheme[8];
    char host[512];
    sp_status st =
        endpoint_of(env("STORAGE_EMULATOR_HOST"), scheme, sizeof scheme, host, sizeof host, err);
    if (st != SP_OK) {
        return st;
    }
    const char *key = slash + 1;
    size_t cap = 3 * strlen(key) + 1;
    char *encoded = malloc(cap);
    if (encoded == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory opening %s", uri);
    }
    st = sp_s3_encode_path(key, encoded, cap, err);
    char *path =
        st == SP_OK ? sp_strdup_printf("/%.*s/%s", (int)bucket_len, bucket, encoded) : NULL;
    char *url = path != NULL ? sp_strdup_printf("%s://%s%s", scheme, host, path) : NULL;
    free(encoded);
    if (st == SP_OK && url == NULL) {
        st = sp_err_set(err, SP_E_NOMEM, "out of memory opening %s", uri);
    }
    sp_http_signer signer = {0};
    if (st == SP_OK && hmac) {
        sp_s3_target *t = NULL;
        st = hmac_target(uri, host, path, url, &t, err);
        signer = (sp_http_signer){sign_hmac, t, hmac_free};
    } else if (st == SP_OK && token != NULL) {
        bearer *b = calloc(1, sizeof *b);
        if (b != NULL) {
            b->header = sp_strdup_printf("Bearer %s", token);
        }
        if (b == NULL || b->header == NULL) {
            bearer_free(b);
            st = sp_err_set(err, SP_E_NOMEM, "out of memory opening %s", uri);
        } else {
            signer = (sp_http_signer){sign_bearer, b, bearer_free};
        }
    }
    if (st == SP_OK) {
        st = sp_source_open_http(url, uri, &signer, head_len, out, err);
    } else if (signer.free_ctx != NULL) {
        signer.free_ctx(signer.ctx);
    }
    free(path);
    free(url);
    return st;
}
