/* write_target_s3.c — a write target that is an s3:// prefix (see write_target.h): each file an
 * object, put whole by one PUT and removed by DELETE (object_write.h sends them).
 *
 * S3 stores an object whole or not at all, so there is no temporary name, rename or flush: a put
 * is in place and durable once its PUT has returned, whatever the mode, and sync has nothing to
 * wait for. A PUT's Content-Length and body SHA-256 are signed, so S3 refuses a body damaged on
 * the way. Failures that another try may cure are retried; any other answer is SP_E_IO with the
 * HTTP status and S3's error code. Reading back, existence and the rest are what every
 * object-store prefix does (write_target_object.c).
 */
#include <stdlib.h>
#include <string.h>

#include "base/strings.h"
#include "io/object_write.h"
#include "io/s3.h"
#include "io/s3_sign.h"
#include "io/write_target_impl.h"

static sp_status sign(const void *ctx, const char *method, const char *payload_sha256,
                      struct curl_slist **headers, sp_err *err) {
    return sp_s3_sign_headers(ctx, method, NULL, payload_sha256, headers, err);
}

/* The object of `relpath`, resolved with the environment. */
static sp_status resolve(const sp_write_target *t, const char *relpath, sp_s3_target *out,
                         sp_err *err) {
    char *uri = sp_strdup_printf("%s/%s", t->root, relpath);
    if (uri == NULL) {
        memset(out, 0, sizeof *out);
        return sp_err_set(err, SP_E_NOMEM, "out of memory writing %s", relpath);
    }
    sp_status st = sp_s3_target_resolve(uri, out, err);
    free(uri);
    return st;
}

/* PUT `parts` (hashed here when `sha256` is NULL) or DELETE (parts NULL) the object `relpath`. */
static sp_status send_request(sp_write_target *t, const char *relpath, const char *method,
                              const sp_bytes *parts, size_t nparts, const char *sha256,
                              sp_err *err) {
    char own[65];
    if (sha256 == NULL && !sp_sha256_parts_hex(parts, nparts, own)) {
        return sp_err_set(err, SP_E_NOMEM, "hashing %s failed", relpath);
    }
    sp_s3_target obj;
    sp_status st = resolve(t, relpath, &obj, err);
    if (st == SP_OK) {
        sp_object_request r = {
            obj.uri, obj.url, method, parts, nparts, sha256 != NULL ? sha256 : own, sign, &obj};
        st = sp_object_write(&r, err);
    }
    sp_s3_target_clear(&obj);
    return st;
}

static sp_status put(sp_write_target *t, const char *relpath, const sp_bytes *parts, size_t nparts,
                     const char *sha256, sp_put_mode mode, sp_err *err) {
    (void)mode; /* a PUT that returned is in place and durable */
    return send_request(t, relpath, "PUT", parts, nparts, sha256, err);
}

static sp_status remove_object(sp_write_target *t, const char *relpath, sp_err *err) {
    /* S3 answers 204 whether or not the object existed. */
    return send_request(t, relpath, "DELETE", NULL, 0, SP_S3_EMPTY_SHA256, err);
}

static const sp_write_target_ops S3_OPS = {
    .put = put,
    .exists = sp_object_target_exists,
    .open_file = sp_object_target_open_file,
    .remove = remove_object,
    .list = sp_object_target_list,
    .sweep_temporaries = sp_object_target_nothing_to_do, /* a PUT leaves no temporary object */
    .sync = sp_object_target_nothing_to_do,
    .close = sp_object_target_close,
};

sp_status sp_write_target_init_s3(sp_write_target *t, sp_err *err) {
    /* Check the bucket name and the credentials now, before anything is written, on the name of
     * a file under the prefix (the prefix itself may be the bare bucket). */
    sp_s3_target probe;
    sp_status st = resolve(t, "slidepipe-complete", &probe, err);
    sp_s3_target_clear(&probe);
    if (st == SP_OK) {
        t->ops = &S3_OPS;
        t->impl = NULL;
    }
    return st;
}
