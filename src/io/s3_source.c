/* s3_source.c — s3://bucket/key as a byte source: the object's URL and a request signer built from
 * the usual AWS environment variables, handed to the HTTP source (http_source.h says which).
 *
 * With an endpoint (a local or non-Amazon S3 server) requests are path-style,
 * ENDPOINT/bucket/key; without one they go to Amazon, virtual-hosted
 * (https://bucket.s3.REGION.amazonaws.com/key). Each request is signed with SigV4 (s3_sign.c) at
 * the time it is sent, so retries and long reads never carry a stale date. The Host header is set
 * here, not by libcurl, so that what is signed is exactly what is sent.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/strings.h"
#include "io/http_source.h"
#include "io/s3_sign.h"

typedef struct s3_signer {
    char *host;
    char *canonical_uri;
    char *access_key;
    char *secret_key;
    char *session_token; /* NULL when none */
    char *region;
} s3_signer;

static void s3_signer_free(void *ctx) {
    s3_signer *s = ctx;
    if (s == NULL) {
        return;
    }
    free(s->host);
    free(s->canonical_uri);
    free(s->access_key);
    if (s->secret_key != NULL) {
        memset(s->secret_key, 0, strlen(s->secret_key));
    }
    free(s->secret_key);
    free(s->session_token);
    free(s->region);
    free(s);
}

static sp_status s3_sign_request(void *ctx, const char *method, const char *range,
                                 struct curl_slist **headers, sp_err *err) {
    const s3_signer *s = ctx;
    char date[17];
    char authorization[1024];
    sp_s3_amz_date(time(NULL), date);
    sp_s3_credentials cred = {s->access_key, s->secret_key, s->session_token, s->region};
    sp_status st = sp_s3_authorization(method, s->host, s->canonical_uri, range, date, &cred,
                                       authorization, sizeof authorization, err);
    if (st != SP_OK) {
        return st;
    }
    bool ok = sp_http_add_header(headers, "Host", s->host) &&
              sp_http_add_header(headers, "x-amz-content-sha256", SP_S3_EMPTY_SHA256) &&
              sp_http_add_header(headers, "x-amz-date", date) &&
              (s->session_token == NULL ||
               sp_http_add_header(headers, "x-amz-security-token", s->session_token)) &&
              sp_http_add_header(headers, "Authorization", authorization);
    return ok ? SP_OK : sp_err_set(err, SP_E_NOMEM, "out of memory signing an S3 request");
}

static const char *env(const char *name) {
    const char *v = getenv(name);
    return v != NULL && v[0] != '\0' ? v : NULL;
}

static bool valid_bucket(const char *b, size_t n) {
    if (n < 3 || n > 63) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        char c = b[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.')) {
            return false;
        }
    }
    return true;
}

/* Split "scheme://authority[/]" into its scheme ("http" or "https") and authority. */
static sp_status parse_endpoint(const char *endpoint, char *scheme, size_t scheme_cap,
                                char *authority, size_t authority_cap, sp_err *err) {
    const char *rest = NULL;
    if (strncmp(endpoint, "http://", 7) == 0) {
        snprintf(scheme, scheme_cap, "http");
        rest = endpoint + 7;
    } else if (strncmp(endpoint, "https://", 8) == 0) {
        snprintf(scheme, scheme_cap, "https");
        rest = endpoint + 8;
    }
    size_t n = rest != NULL ? strcspn(rest, "/") : 0;
    bool path_ok = rest != NULL && (rest[n] == '\0' || strcmp(rest + n, "/") == 0);
    if (rest == NULL || n == 0 || n >= authority_cap || !path_ok) {
        return sp_err_set(err, SP_E_INVALID_ARG,
                          "S3 endpoint %s: expected http(s)://host[:port] without a path",
                          endpoint);
    }
    memcpy(authority, rest, n);
    authority[n] = '\0';
    return SP_OK;
}

sp_status sp_source_open_s3(const char *uri, size_t head_len, sp_source **out, sp_err *err) {
    *out = NULL;
    const char *bucket = uri + 5; /* after "s3://" */
    const char *slash = strchr(bucket, '/');
    size_t bucket_len = slash != NULL ? (size_t)(slash - bucket) : strlen(bucket);
    if (slash == NULL || slash[1] == '\0' || !valid_bucket(bucket, bucket_len)) {
        return sp_err_set(err, SP_E_INVALID_ARG,
                          "%s: expected s3://BUCKET/KEY with a bucket name of 3-63 characters "
                          "a-z, 0-9, '.' and '-'",
                          uri);
    }
    const char *key = slash + 1;
    const char *access = env("AWS_ACCESS_KEY_ID");
    const char *secret = env("AWS_SECRET_ACCESS_KEY");
    if ((access == NULL) != (secret == NULL)) {
        return sp_err_set(err, SP_E_INVALID_ARG,
                          "%s: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set together",
                          uri);
    }
    const char *region = env("AWS_REGION") != NULL ? env("AWS_REGION") : env("AWS_DEFAULT_REGION");
    region = region != NULL ? region : "us-east-1";
    const char *endpoint =
        env("AWS_ENDPOINT_URL_S3") != NULL ? env("AWS_ENDPOINT_URL_S3") : env("AWS_ENDPOINT_URL");

    size_t cap = 3 * strlen(key) + 1;
    char *encoded_key = malloc(cap);
    if (encoded_key == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory opening %s", uri);
    }
    sp_status st = sp_s3_encode_path(key, encoded_key, cap, err);
    char scheme[8] = "https";
    char host[512];
    char bucket_name[64];
    memcpy(bucket_name, bucket, bucket_len);
    bucket_name[bucket_len] = '\0';
    bool path_style = true;
    if (st == SP_OK && endpoint != NULL) {
        st = parse_endpoint(endpoint, scheme, sizeof scheme, host, sizeof host, err);
    } else if (st == SP_OK) {
        /* Amazon: the bucket in the host name, unless a dot in it would break the certificate. */
        path_style = strchr(bucket_name, '.') != NULL;
        if (path_style) {
            snprintf(host, sizeof host, "s3.%s.amazonaws.com", region);
        } else {
            snprintf(host, sizeof host, "%s.s3.%s.amazonaws.com", bucket_name, region);
        }
    }
    char *canonical_uri = NULL;
    char *url = NULL;
    if (st == SP_OK) {
        canonical_uri = path_style ? sp_strdup_printf("/%s/%s", bucket_name, encoded_key)
                                   : sp_strdup_printf("/%s", encoded_key);
        url = canonical_uri != NULL ? sp_strdup_printf("%s://%s%s", scheme, host, canonical_uri)
                                    : NULL;
        if (url == NULL) {
            st = sp_err_set(err, SP_E_NOMEM, "out of memory opening %s", uri);
        }
    }
    free(encoded_key);
    if (st != SP_OK) {
        free(canonical_uri);
        free(url);
        return st;
    }
    sp_http_signer signer = {0};
    if (access != NULL) {
        s3_signer *s = calloc(1, sizeof *s);
        const char *token = env("AWS_SESSION_TOKEN");
        if (s != NULL) {
            s->host = strdup(host);
            s->canonical_uri = canonical_uri;
            canonical_uri = NULL;
            s->access_key = strdup(access);
            s->secret_key = strdup(secret);
            s->session_token = token != NULL ? strdup(token) : NULL;
            s->region = strdup(region);
        }
        if (s == NULL || s->host == NULL || s->access_key == NULL || s->secret_key == NULL ||
            s->region == NULL || (token != NULL && s->session_token == NULL)) {
            s3_signer_free(s);
            free(canonical_uri);
            free(url);
            return sp_err_set(err, SP_E_NOMEM, "out of memory opening %s", uri);
        }
        signer = (sp_http_signer){s3_sign_request, s, s3_signer_free};
    }
    free(canonical_uri);
    st = sp_source_open_http(url, uri, &signer, head_len, out, err);
    free(url);
    return st;
}
