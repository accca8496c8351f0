/* write_target.c — the write-target interface (write_target.h): choosing the kind of target from
 * the root's form (the one place where a written store's URL is dispatched) and passing each call
 * to the kind's table of operations. Paths are checked by the writer; here only the kind
 * differs. */
#include "io/write_target.h"

#include <stdlib.h>
#include <string.h>

#include "io/paths.h"
#include "io/store.h"
#include "io/write_target_impl.h"

sp_status sp_write_target_open(const char *root, sp_write_target **out, sp_err *err) {
    *out = NULL;
    if (root == NULL || *root == '\0') {
        return sp_err_set(err, SP_E_INVALID_ARG, "write target: empty path");
    }
    sp_write_target *t = calloc(1, sizeof *t);
    if (t == NULL || (t->root = strdup(root)) == NULL) {
        free(t);
        return sp_err_set(err, SP_E_NOMEM, "out of memory");
    }
    for (size_t n = strlen(t->root); n > 1 && t->root[n - 1] == '/'; n--) {
        t->root[n - 1] = '\0';
    }
    sp_status st;
    if (!sp_store_is_remote(t->root)) {
        st = sp_write_target_init_file(t, err);
    } else if (strncmp(t->root, "s3://", 5) == 0) {
        st = sp_write_target_init_s3(t, err);
    } else if (sp_path_is_azure(t->root)) {
        st = sp_write_target_init_azure(t, err);
    } else if (strncmp(t->root, "gs://", 5) == 0) {
        st = sp_write_target_init_gcs(t, err);
    } else {
        st = sp_err_set(err, SP_E_INVALID_ARG,
                        "%s: stores are written to a folder or an s3://, gs://, az:// or "
                        "abfs(s):// prefix; other URLs are read-only",
                        t->root);
    }
    if (st != SP_OK) {
        free(t->root);
        free(t);
        return st;
    }
    *out = t;
    return SP_OK;
}

const char *sp_write_target_root(const sp_write_target *t) {
    return t->root;
}

sp_status sp_write_target_put(sp_write_target *t, const char *relpath, const sp_bytes *parts,
                              size_t nparts, const char *sha256, sp_put_mode mode, sp_err *err) {
    return t->ops->put(t, relpath, parts, nparts, sha256, mode, err);
}

sp_status sp_write_target_exists(sp_write_target *t, const char *relpath, bool *exists,
                                 sp_err *err) {
    return t->ops->exists(t, relpath, exists, err);
}

sp_status sp_write_target_open_file(sp_write_target *t, const char *relpath, sp_source **out,
                                    bool *missing, sp_err *err) {
    return t->ops->open_file(t, relpath, out, missing, err);
}

sp_status sp_write_target_remove(sp_write_target *t, const char *relpath, sp_err *err) {
    return t->ops->remove(t, relpath, err);
}

sp_status sp_write_target_list(sp_write_target *t,
                               bool (*fn)(void *user, const char *relpath, bool is_folder),
                               void *user, sp_err *err) {
    return t->ops->list(t, fn, user, err);
}

sp_status sp_write_target_sweep_temporaries(sp_write_target *t, sp_err *err) {
    return t->ops->sweep_temporaries(t, err);
}

sp_status sp_write_target_sync(sp_write_target *t, sp_err *err) {
    return t->ops->sync(t, err);
}

void sp_write_target_close(sp_write_target *t, bool keep) {
    if (t == NULL) {
        return;
    }
    t->ops->close(t, keep);
    free(t->root);
    free(t);
}
