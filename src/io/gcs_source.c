/* gcs_source.c — gs://bucket/object as a byte source: the object resolved with the Google
 * environment (gcs.h: the XML API's URL and the credentials) and handed to the HTTP source
 * (http_source.h) with a signer, so GCS reads get the same ranged requests, retries, ETag pinning
 * and pipelining as HTTP and S3. Each request is signed as it is sent (gcs_target.c), so a token
 * minted from a service-account key is refreshed under a long read.
 */
#include <stdlib.h>
#include <string.h>

#include "io/gcs.h"
#include "io/http_source.h"
#include "io/s3_sign.h"

static void target_free(void *ctx) {
    sp_gcs_target_clear(ctx);
    free(ctx);
}

static sp_status sign(void *ctx, const char *method, const char *range, struct curl_slist **headers,
                      sp_err *err) {
    return sp_gcs_sign_headers(ctx, method, range, SP_S3_EMPTY_SHA256, headers, err);
}

sp_status sp_source_open_gcs(const char *uri, size_t head_len, sp_source **out, sp_err *err) {
    *out = NULL;
    sp_gcs_target *t = calloc(1, sizeof *t);
    if (t == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory opening %s", uri);
    }
    sp_status st = sp_gcs_target_resolve(uri, t, err);
    if (st != SP_OK) {
        free(t);
        return st;
    }
    /* The signer owns the target from here on, also when opening fails, so the source is given
     * copies of what its messages may name after freeing it. */
    char *url = strdup(t->url);
    char *name = strdup(t->uri);
    sp_http_signer signer = {sign, t, target_free};
    if (url == NULL || name == NULL) {
        target_free(t);
        st = sp_err_set(err, SP_E_NOMEM, "out of memory opening %s", uri);
    } else {
        st = sp_source_open_http(url, name, &signer, head_len, out, err);
    }
    free(url);
    free(name);
    return st;
}
