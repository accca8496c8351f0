/* write_target_gcs.c — how a write target on a gs:// prefix (write_target_object.c) reaches GCS:
 * each file an object, put whole by one PUT to the XML API and removed by DELETE (object_write.h
 * sends them; gcs_target.c says where they go and signs them with the credentials reads use).
 *
 * With HMAC keys the body's SHA-256 is signed, so a body damaged on the way is refused; with a
 * token the connection's TLS is what guards it. Failures that another try may cure are retried;
 * any other answer is SP_E_IO with the HTTP status and the error's code or message. GCS answers
 * 404 to a DELETE of an object that is not there, which object_write.c counts as gone.
 */
#include <string.h>

#include "base/hash.h"
#include "io/gcs.h"
#include "io/object_write.h"
#include "io/write_target_impl.h"

static sp_status sign(const void *ctx, const char *method, const char *payload_sha256,
                      struct curl_slist **headers, sp_err *err) {
    return sp_gcs_sign_headers(ctx, method, NULL, payload_sha256, headers, err);
}

/* The bucket's name and the environment, before anything is written. */
static sp_status check(const char *root, const char *uri, sp_err *err) {
    (void)root;
    sp_gcs_target obj;
    sp_status st = sp_gcs_target_resolve(uri, &obj, err);
    sp_gcs_target_clear(&obj);
    return st;
}

static sp_status send_request(const char *uri, const char *method, const sp_bytes *parts,
                              size_t nparts, const char *sha256, sp_err *err) {
    sp_gcs_target obj;
    sp_status st = sp_gcs_target_resolve(uri, &obj, err);
    char own[65];
    if (st == SP_OK && sha256 == NULL && obj.hmac != NULL &&
        !sp_sha256_parts_hex(parts, nparts, own)) {
        st = sp_err_set(err, SP_E_NOMEM, "hashing %s failed", uri);
    }
    if (st == SP_OK) {
        /* Only SigV4 signs the body's hash; a Bearer request does not need it computed. */
        const char *payload = sha256 != NULL ? sha256 : obj.hmac != NULL ? own : NULL;
        const char *url = strcmp(method, "PUT") == 0 ? obj.url : obj.delete_url;
        sp_object_request r = {obj.uri, url, method, parts, nparts, payload, sign, &obj};
        st = sp_object_write(&r, err);
    }
    sp_gcs_target_clear(&obj);
    return st;
}

static const sp_object_store GCS_STORE = {.check = check, .send_request = send_request};

sp_status sp_write_target_init_gcs(sp_write_target *t, sp_err *err) {
    return sp_write_target_init_object(t, &GCS_STORE, err);
}
