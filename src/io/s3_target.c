/* s3_target.c — an s3://bucket/key URI resolved with the AWS environment (s3.h): the request
 * URL, the Host header and encoded path that are signed, and the credentials; and the SigV4
 * headers of one request to it (s3_sign.c computes the signature).
 *
 * With an endpoint (a local or non-Amazon S3 server) requests are path-style,
 * ENDPOINT/bucket/key; without one they go to Amazon, virtual-hosted
 * (https://bucket.s3.REGION.amazonaws.com/key). Each request is signed when it is sent, so retries
 * and long jobs never carry a stale date. The Host header is set here, not by libcurl, so that
 * what is signed is exactly what is sent.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/strings.h"
#include "io/http_source.h"
#include "io/s3.h"
#include "io/s3_sign.h"

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

void sp_s3_target_clear(sp_s3_target *t) {
    if (t == NULL) {
        return;
    }
    if (t->secret_key != NULL) {
        memset(t->secret_key, 0, strlen(t->secret_key));
    }
    free(t->uri);
    free(t->url);
    free(t->host);
    free(t->canonical_uri);
    free(t->access_key);
    free(t->secret_key);
    free(t->session_token);
    free(t->region);
    memset(t, 0, sizeof *t);
}

sp_status sp_s3_target_resolve(const char *uri, sp_s3_target *t, sp_err *err) {
    memset(t, 0, sizeof *t);
    const char *bucket = uri + 5; /* after "s3://" */
    const char *slash = strncmp(uri, "s3://", 5) == 0 ? strchr(bucket, '/') : NULL;
    size_t bucket_len = slash != NULL ? (size_t)(slash - bucket) : 0;
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
    if (st == SP_OK) {
        const char *token = env("AWS_SESSION_TOKEN");
        t->uri = strdup(uri);
        t->host = strdup(host);
        t->canonical_uri = path_style ? sp_strdup_printf("/%s/%s", bucket_name, encoded_key)
                                      : sp_strdup_printf("/%s", encoded_key);
        t->url = t->canonical_uri != NULL
                     ? sp_strdup_printf("%s://%s%s", scheme, host, t->canonical_uri)
                     : NULL;
        t->region = strdup(region);
        bool ok = t->uri && t->host && t->canonical_uri && t->url && t->region;
        if (access != NULL) {
            t->access_key = strdup(access);
            t->secret_key = strdup(secret);
            t->session_token = token != NULL ? strdup(token) : NULL;
            ok = ok && t->access_key && t->secret_key && (token == NULL || t->session_token);
        }
        if (!ok) {
            sp_s3_target_clear(t);
            st = sp_err_set(err, SP_E_NOMEM, "out of memory opening %s", uri);
        }
    }
    free(encoded_key);
    return st;
}

sp_status sp_s3_sign_headers(const sp_s3_target *t, const char *method, const char *range,
                             const char *payload_sha256, struct curl_slist **headers, sp_err *err) {
    if (t->access_key == NULL) {
        return SP_OK;
    }
    char date[17];
    char authorization[1024];
    sp_s3_amz_date(time(NULL), date);
    sp_s3_credentials cred = {t->access_key, t->secret_key, t->session_token, t->region};
    sp_status st =
        sp_s3_authorization_payload(method, t->host, t->canonical_uri, range, payload_sha256, date,
                                    &cred, authorization, sizeof authorization, err);
    if (st != SP_OK) {
        return st;
    }
    bool ok = sp_http_add_header(headers, "Host", t->host) &&
              sp_http_add_header(headers, "x-amz-content-sha256", payload_sha256) &&
              sp_http_add_header(headers, "x-amz-date", date) &&
              (t->session_token == NULL ||
               sp_http_add_header(headers, "x-amz-security-token", t->session_token)) &&
              sp_http_add_header(headers, "Authorization", authorization);
    return ok ? SP_OK : sp_err_set(err, SP_E_NOMEM, "out of memory signing an S3 request");
}
