/* write_target_object.c — a write target on an object-store prefix (S3, GCS, Azure Blob; see
 * write_target_impl.h): everything but how a request reaches the store, which the store's
 * sp_object_store says (write_target_s3.c, write_target_gcs.c, write_target_azure.c).
 *
 * Each file is one object under the prefix, put whole by one PUT and removed by one DELETE. An
 * object is written whole or not at all, so there is no temporary name, rename or flush: a put is
 * in place and durable once its PUT has returned, whatever the mode, there are no temporary names
 * to sweep, nothing for sync to wait for and nothing to free. Reading a file back and telling
 * whether it exists go through the store's reader (store.h), where a 404 is a missing file and any
 * other failure an error. Listing a prefix is not implemented (a new store's emptiness is judged
 * by the writer from the names it uses).
 */
#include <stdlib.h>

#include "base/strings.h"
#include "io/store.h"
#include "io/write_target_impl.h"

/* PUT `parts` (sha256 as put's) or DELETE (no parts) the object `relpath`. */
static sp_status send_request(sp_write_target *t, const char *relpath, const char *method,
                              const sp_bytes *parts, size_t nparts, const char *sha256,
                              sp_err *err) {
    const sp_object_store *store = t->impl;
    char *uri = sp_strdup_printf("%s/%s", t->root, relpath);
    if (uri == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory writing %s", relpath);
    }
    sp_status st = store->send_request(uri, method, parts, nparts, sha256, err);
    free(uri);
    return st;
}

static sp_status put(sp_write_target *t, const char *relpath, const sp_bytes *parts, size_t nparts,
                     const char *sha256, sp_put_mode mode, sp_err *err) {
    (void)mode; /* a PUT that returned is in place and durable */
    return send_request(t, relpath, "PUT", parts, nparts, sha256, err);
}

static sp_status remove_object(sp_write_target *t, const char *relpath, sp_err *err) {
    /* An object that is not there counts as removed (object_write.h). */
    return send_request(t, relpath, "DELETE", NULL, 0, NULL, err);
}

static sp_status open_file(sp_write_target *t, const char *relpath, sp_source **out, bool *missing,
                           sp_err *err) {
    *out = NULL;
    char *uri = sp_strdup_printf("%s/%s", t->root, relpath);
    if (uri == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory");
    }
    sp_status st = sp_store_open(uri, 0, out, missing, err);
    free(uri);
    return st;
}

static sp_status exists(sp_write_target *t, const char *relpath, bool *yes, sp_err *err) {
    sp_source *src = NULL;
    bool missing = true;
    sp_status st = open_file(t, relpath, &src, &missing, err);
    sp_source_close(src);
    *yes = st == SP_OK && !missing;
    return st;
}

static sp_status list(sp_write_target *t,
                      bool (*fn)(void *user, const char *relpath, bool is_folder), void *user,
                      sp_err *err) {
    (void)fn, (void)user;
    return sp_err_set(err, SP_E_UNSUPPORTED, "%s: listing an object-store prefix is not supported",
                      t->root);
}

static sp_status nothing_to_do(sp_write_target *t, sp_err *err) {
    (void)t, (void)err;
    return SP_OK;
}

static void close_object(sp_write_target *t, bool keep) {
    (void)t, (void)keep; /* t->impl is the store's static table */
}

static const sp_write_target_ops OBJECT_OPS = {
    .put = put,
    .exists = exists,
    .open_file = open_file,
    .remove = remove_object,
    .list = list,
    .sweep_temporaries = nothing_to_do, /* a PUT leaves no temporary object */
    .sync = nothing_to_do,
    .close = close_object,
};

sp_status sp_write_target_init_object(sp_write_target *t, const sp_object_store *store,
                                      sp_err *err) {
    /* Check the URL and the credentials now, before anything is written, on the name of a file
     * under the prefix (the prefix itself may be the bare bucket or container). */
    char *probe = sp_strdup_printf("%s/slidepipe-complete", t->root);
    if (probe == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory writing slidepipe-complete");
    }
    sp_status st = store->check(t->root, probe, err);
    free(probe);
    if (st == SP_OK) {
        t->ops = &OBJECT_OPS;
        t->impl = (void *)store; /* only read */
    }
    return st;
}
