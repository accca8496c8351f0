/* write_target_gcs.c — a write target that is a gs:// prefix (see write_target.h): each file an
 * object, put whole by one PUT to the XML API and removed by DELETE (object_write.h sends them;
 * gcs_target.c says where they go and signs them with the credentials reads use).
 *
 * GCS stores an object whole or not at all, as S3 does, so there is no temporary name, rename or
 * flush: a put is in place and durable once its PUT has returned, whatever the mode, and sync has
 * nothing to wait for. With HMAC keys the body's SHA-256 is signed, so a body damaged on the way
 * is refused; with a token the connection's TLS is what guards it. Failures that another try may
 * cure are retried; any other answer is SP_E_IO with the HTTP status and the error's code or
 * message. Reading back, existence and the rest are what every object-store prefix does
 * (write_target_object.c).
 */
#include <stdlib.h>
#include <string.h>

#include "base/strings.h"
#include "io/gcs.h"
#include "io/object_write.h"
#include "io/s3_sign.h"
#include "io/write_target_impl.h"

static sp_status sign(const void *ctx, const char *method, const char *payload_sha256,
                      struct curl_slist **headers, sp_err *err) {
    return sp_gcs_sign_headers(ctx, method, NULL, payload_sha256, headers, err);
}

/* The object of `relpath`, resolved with the environment. */
static sp_status resolve(const sp_write_target *t, const char *relpath, sp_gcs_target *out,
                         sp_err *err) {
    char *uri = sp_strdup_printf("%s/%s", t->root, relpath);
    if (uri == NULL) {
        memset(out, 0, sizeof *out);
        return sp_err_set(err, SP_E_NOMEM, "out of memory writing %s", relpath);
    }
    sp_status st = sp_gcs_target_resolve(uri, out, err);
    free(uri);
    return st;
}

static sp_status put(sp_write_target *t, const char *relpath, const sp_bytes *parts, size_t nparts,
                     const char *sha256, sp_put_mode mode, sp_err *err) {
    (void)mode; /* a PUT that returned is in place and durable */
    sp_gcs_target obj;
    sp_status st = resolve(t, relpath, &obj, err);
    char own[65];
    if (st == SP_OK && sha256 == NULL && obj.hmac != NULL &&
        !sp_sha256_parts_hex(parts, nparts, own)) {
        st = sp_err_set(err, SP_E_NOMEM, "hashing %s failed", relpath);
    }
    if (st == SP_OK) {
        /* Only SigV4 signs the body's hash; a Bearer request does not need it computed. */
        const char *payload = sha256 != NULL ? sha256 : obj.hmac != NULL ? own : NULL;
        sp_object_request r = {obj.uri, obj.url, "PUT", parts, nparts, payload, sign, &obj};
        st = sp_object_write(&r, err);
    }
    sp_gcs_target_clear(&obj);
    return st;
}

static sp_status remove_object(sp_write_target *t, const char *relpath, sp_err *err) {
    sp_gcs_target obj;
    sp_status st = resolve(t, relpath, &obj, err);
    if (st == SP_OK) {
        /* GCS answers 404 for an object that is not there: object_write.c counts it as gone. */
        sp_object_request r = {obj.uri, obj.delete_url,     "DELETE", NULL,
                               0,       SP_S3_EMPTY_SHA256, sign,     &obj};
        st = sp_object_write(&r, err);
    }
    sp_gcs_target_clear(&obj);
    return st;
}

static const sp_write_target_ops GCS_OPS = {
    .put = put,
    .exists = sp_object_target_exists,
    .open_file = sp_object_target_open_file,
    .remove = remove_object,
    .list = sp_object_target_list,
    .sweep_temporaries = sp_object_target_nothing_to_do, /* a PUT leaves no temporary object */
    .sync = sp_object_target_nothing_to_do,
    .close = sp_object_target_close,
};

sp_status sp_write_target_init_gcs(sp_write_target *t, sp_err *err) {
    /* Check the bucket name and the environment now, before anything is written, on the name of
     * a file under the prefix (the prefix itself may be the bare bucket). */
    sp_gcs_target probe;
    sp_status st = resolve(t, "slidepipe-complete", &probe, err);
    sp_gcs_target_clear(&probe);
    if (st == SP_OK) {
        t->ops = &GCS_OPS;
        t->impl = NULL;
    }
    return st;
}
