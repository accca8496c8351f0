/* azure_source.c — az:// and abfs(s):// blobs as byte sources: the blob resolved by
 * azure_target.c and a request signer over it, handed to the HTTP source (http_source.h), so
 * Azure reads get the same ranged requests, retries, ETag pinning and pipelining as HTTP, S3 and
 * GCS. Every request is signed when it is sent, retries included, over the headers it carries
 * (Range, and If-Match once the ETag is known).
 */
#include <stdlib.h>

#include "io/azure.h"
#include "io/http_source.h"

static void target_free(void *ctx) {
    sp_azure_target_clear(ctx);
    free(ctx);
}

static sp_status sign_request(void *ctx, const char *method, const char *range,
                              struct curl_slist **headers, sp_err *err) {
    (void)range; /* the Range header is in *headers already, as it is sent */
    return sp_azure_sign_headers(ctx, method, headers, err);
}

sp_status sp_source_open_azure(const char *uri, size_t head_len, sp_source **out, sp_err *err) {
    *out = NULL;
    sp_azure_target *t = calloc(1, sizeof *t);
    if (t == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory opening %s", uri);
    }
    sp_status st = sp_azure_target_resolve(uri, t, err);
    if (st != SP_OK) {
        free(t);
        return st;
    }
    /* The signer always adds x-ms-version; it owns t from here on, also on failure. */
    sp_http_signer signer = {sign_request, t, target_free};
    return sp_source_open_http(t->url, uri, &signer, head_len, out, err);
}
