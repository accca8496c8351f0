/* write_target_s3.c — how a write target on an s3:// prefix (write_target_object.c) reaches S3:
 * each file an object, put whole by one PUT and removed by DELETE (object_write.h sends them),
 * signed with SigV4.
 *
 * A PUT's Content-Length and body SHA-256 are signed, so S3 refuses a body damaged on the way.
 * Failures that another try may cure are retried; any other answer is SP_E_IO with the HTTP status
 * and S3's error code. S3 answers a DELETE with 204 whether or not the object existed.
 */
#include "base/hash.h"
#include "io/object_write.h"
#include "io/s3.h"
#include "io/s3_sign.h"
#include "io/write_target_impl.h"

static sp_status sign(const void *ctx, const char *method, const char *payload_sha256,
                      struct curl_slist **headers, sp_err *err) {
    return sp_s3_sign_headers(ctx, method, NULL, payload_sha256, headers, err);
}

/* The bucket's name and the credentials, before anything is written. */
static sp_status check(const char *root, const char *uri, sp_err *err) {
    (void)root;
    sp_s3_target obj;
    sp_status st = sp_s3_target_resolve(uri, &obj, err);
    sp_s3_target_clear(&obj);
    return st;
}

static sp_status send_request(const char *uri, const char *method, const sp_bytes *parts,
                              size_t nparts, const char *sha256, sp_err *err) {
    char own[65];
    if (sha256 == NULL && !sp_sha256_parts_hex(parts, nparts, own)) {
        return sp_err_set(err, SP_E_NOMEM, "hashing %s failed", uri);
    }
    sp_s3_target obj;
    sp_status st = sp_s3_target_resolve(uri, &obj, err);
    if (st == SP_OK) {
        sp_object_request r = {
            obj.uri, obj.url, method, parts, nparts, sha256 != NULL ? sha256 : own, sign, &obj};
        st = sp_object_write(&r, err);
    }
    sp_s3_target_clear(&obj);
    return st;
}

static const sp_object_store S3_STORE = {.check = check, .send_request = send_request};

sp_status sp_write_target_init_s3(sp_write_target *t, sp_err *err) {
    return sp_write_target_init_object(t, &S3_STORE, err);
}
