/* s3_source.c — s3://bucket/key as a byte source: the object resolved by s3_target.c and a
 * request signer over it, handed to the HTTP source (http_source.h says which requests). Every
 * request is signed when it is sent, retries included.
 */
#include <stdlib.h>

#include "io/http_source.h"
#include "io/s3.h"
#include "io/s3_sign.h"

static void target_free(void *ctx) {
    sp_s3_target_clear(ctx);
    free(ctx);
}

static sp_status sign_request(void *ctx, const char *method, const char *range,
                              struct curl_slist **headers, sp_err *err) {
    return sp_s3_sign_headers(ctx, method, range, SP_S3_EMPTY_SHA256, headers, err);
}

sp_status sp_source_open_s3(const char *uri, size_t head_len, sp_source **out, sp_err *err) {
    *out = NULL;
    sp_s3_target *t = calloc(1, sizeof *t);
    if (t == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory opening %s", uri);
    }
    sp_status st = sp_s3_target_resolve(uri, t, err);
    if (st != SP_OK) {
        free(t);
        return st;
    }
    sp_http_signer signer = {0};
    if (t->access_key != NULL) {
        signer = (sp_http_signer){sign_request, t, target_free};
    }
    st = sp_source_open_http(t->url, uri, &signer, head_len, out, err);
    if (signer.sign == NULL) {
        target_free(t);
    }
    return st;
}
