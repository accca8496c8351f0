/* gcs_target.c — a gs://bucket/object URI resolved with the Google environment (gcs.h): the XML
 * API's URL of the object, where a DELETE goes, and the credentials; and the headers that sign
 * one request to it.
 *
 * Reads and PUTs use the XML API, the one API that takes all three kinds of credentials. A
 * DELETE goes to the XML API with HMAC keys and to the JSON API's object URL otherwise: both
 * delete the same object on Google's servers, and the JSON API's delete is the one that emulators
 * (gcp-storage-emulator) implement. The JSON API names the object as one path segment, so its
 * '/' are escaped there, unlike in the XML URL. A token from a key file is fetched when a request
 * is signed (gcs_token.c keeps it until shortly before it expires), so a long job never sends a
 * stale one.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/strings.h"
#include "io/gcs.h"
#include "io/gcs_token.h"
#include "io/http_source.h"
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

/* The object name as one percent-encoded path segment (the JSON API's): as the XML path, with
 * '/' escaped too. */
static char *json_segment(const char *xml_encoded) {
    size_t slashes = 0;
    for (const char *c = xml_encoded; *c != '\0'; c++) {
        slashes += *c == '/';
    }
    char *out = malloc(strlen(xml_encoded) + 2 * slashes + 1);
    if (out != NULL) {
        char *o = out;
        for (const char *c = xml_encoded; *c != '\0'; c++) {
            if (*c == '/') {
                memcpy(o, "%2F", 3);
                o += 3;
            } else {
                *o++ = *c;
            }
        }
        *o = '\0';
    }
    return out;
}

void sp_gcs_target_clear(sp_gcs_target *t) {
    if (t == NULL) {
        return;
    }
    if (t->token != NULL) {
        memset(t->token, 0, strlen(t->token));
    }
    sp_s3_target_clear(t->hmac);
    free(t->hmac);
    free(t->uri);
    free(t->url);
    free(t->delete_url);
    free(t->token);
    free(t->key_file);
    memset(t, 0, sizeof *t);
}

/* What SigV4 signs for HMAC keys: the Host, the encoded path, region "auto". */
static sp_s3_target *hmac_target(const char *uri, const char *host, const char *path,
                                 const char *url) {
    sp_s3_target *h = calloc(1, sizeof *h);
    if (h != NULL) {
        h->uri = strdup(uri);
        h->url = strdup(url);
        h->host = strdup(host);
        h->canonical_uri = strdup(path);
        h->access_key = strdup(env("GS_ACCESS_KEY_ID"));
        h->secret_key = strdup(env("GS_SECRET_ACCESS_KEY"));
        h->region = strdup("auto");
    }
    if (h == NULL || !h->uri || !h->url || !h->host || !h->canonical_uri || !h->access_key ||
        !h->secret_key || !h->region) {
        sp_s3_target_clear(h);
        free(h);
        return NULL;
    }
    return h;
}

/* The credentials of the environment, in the order gcs.h gives. */
static bool take_credentials(sp_gcs_target *t, const char *host, const char *path) {
    if (env("GS_ACCESS_KEY_ID") != NULL) {
        t->hmac = hmac_target(t->uri, host, path, t->url);
        return t->hmac != NULL;
    }
    const char *token = env("GOOGLE_OAUTH_ACCESS_TOKEN") != NULL
                            ? env("GOOGLE_OAUTH_ACCESS_TOKEN")
                            : env("CLOUDSDK_AUTH_ACCESS_TOKEN");
    if (token != NULL) {
        t->token = strdup(token);
        return t->token != NULL;
    }
    const char *key_file = env("GOOGLE_APPLICATION_CREDENTIALS");
    if (key_file != NULL) {
        t->key_file = strdup(key_file);
        return t->key_file != NULL;
    }
    return true;
}

sp_status sp_gcs_target_resolve(const char *uri, sp_gcs_target *t, sp_err *err) {
    memset(t, 0, sizeof *t);
    const char *bucket = uri + 5; /* after "gs://" */
    const char *slash = strncmp(uri, "gs://", 5) == 0 ? strchr(bucket, '/') : NULL;
    size_t bucket_len = slash != NULL ? (size_t)(slash - bucket) : 0;
    if (slash == NULL || slash[1] == '\0' || !valid_bucket(bucket, bucket_len)) {
        return sp_err_set(err, SP_E_INVALID_ARG,
                          "%s: expected gs://BUCKET/OBJECT with a bucket name of 3-63 characters "
                          "a-z, 0-9, '-', '_' and '.'",
                          uri);
    }
    if ((env("GS_ACCESS_KEY_ID") != NULL) != (env("GS_SECRET_ACCESS_KEY") != NULL)) {
        return sp_err_set(err, SP_E_INVALID_ARG,
                          "%s: GS_ACCESS_KEY_ID and GS_SECRET_ACCESS_KEY must be set together",
                          uri);
    }
    char scheme[8];
    char host[512];
    sp_status st =
        endpoint_of(env("STORAGE_EMULATOR_HOST"), scheme, sizeof scheme, host, sizeof host, err);
    if (st != SP_OK) {
        return st;
    }
    const char *object = slash + 1;
    size_t cap = 3 * strlen(object) + 1;
    char *encoded = malloc(cap);
    if (encoded == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory opening %s", uri);
    }
    st = sp_s3_encode_path(object, encoded, cap, err);
    if (st != SP_OK) {
        free(encoded);
        return st;
    }
    char *path = sp_strdup_printf("/%.*s/%s", (int)bucket_len, bucket, encoded);
    char *segment = json_segment(encoded);
    t->uri = strdup(uri);
    t->url = path != NULL ? sp_strdup_printf("%s://%s%s", scheme, host, path) : NULL;
    bool ok =
        t->uri != NULL && t->url != NULL && segment != NULL && take_credentials(t, host, path);
    if (ok) {
        t->delete_url = t->hmac != NULL ? strdup(t->url)
                                        : sp_strdup_printf("%s://%s/storage/v1/b/%.*s/o/%s", scheme,
                                                           host, (int)bucket_len, bucket, segment);
        ok = t->delete_url != NULL;
    }
    free(encoded);
    free(segment);
    free(path);
    if (!ok) {
        sp_gcs_target_clear(t);
        return sp_err_set(err, SP_E_NOMEM, "out of memory opening %s", uri);
    }
    return SP_OK;
}

sp_status sp_gcs_sign_headers(const sp_gcs_target *t, const char *method, const char *range,
                              const char *payload_sha256, struct curl_slist **headers,
                              sp_err *err) {
    if (t->hmac != NULL) {
        return sp_s3_sign_headers(t->hmac, method, range, payload_sha256, headers, err);
    }
    if (t->token == NULL && t->key_file == NULL) {
        return SP_OK;
    }
    char bearer[SP_GCS_TOKEN_MAX + 8] = "Bearer ";
    size_t n = strlen(bearer);
    if (t->token != NULL && strlen(t->token) >= sizeof bearer - n) {
        return sp_err_set(err, SP_E_INVALID_ARG, "%s: the access token is longer than %d bytes",
                          t->uri, SP_GCS_TOKEN_MAX - 1);
    }
    if (t->token != NULL) {
        memcpy(bearer + n, t->token, strlen(t->token) + 1);
    } else {
        sp_status st = sp_gcs_token(t->key_file, bearer + n, sizeof bearer - n, err);
        if (st != SP_OK) {
            return st;
        }
    }
    bool ok = sp_http_add_header(headers, "Authorization", bearer);
    memset(bearer, 0, sizeof bearer);
    return ok ? SP_OK : sp_err_set(err, SP_E_NOMEM, "%s: out of memory signing a request", t->uri);
}
