/* write_target_object.c — what every write target on an object-store prefix (S3, GCS) does alike
 * (write_target_impl.h): reading a file back and telling whether it exists go through the store's
 * reader (store.h), where a 404 is a missing file and any other failure an error; listing a
 * prefix is not implemented (a new store's emptiness is judged by the writer from the names it
 * uses); and an object is written whole or not at all, so there are no temporary names to sweep,
 * nothing for sync to wait for and nothing to free. Only put and remove differ between stores.
 */
#include <stdlib.h>

#include "base/strings.h"
#include "io/store.h"
#include "io/write_target_impl.h"

sp_status sp_object_target_open_file(sp_write_target *t, const char *relpath, sp_source **out,
                                     bool *missing, sp_err *err) {
    *out = NULL;
    char *uri = sp_strdup_printf("%s/%s", t->root, relpath);
    if (uri == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory");
    }
    sp_status st = sp_store_open(uri, 0, out, missing, err);
    free(uri);
    return st;
}

sp_status sp_object_target_exists(sp_write_target *t, const char *relpath, bool *yes, sp_err *err) {
    sp_source *src = NULL;
    bool missing = true;
    sp_status st = sp_object_target_open_file(t, relpath, &src, &missing, err);
    sp_source_close(src);
    *yes = st == SP_OK && !missing;
    return st;
}

sp_status sp_object_target_list(sp_write_target *t,
                                bool (*fn)(void *user, const char *relpath, bool is_folder),
                                void *user, sp_err *err) {
    (void)fn, (void)user;
    return sp_err_set(err, SP_E_UNSUPPORTED, "%s: listing an object-store prefix is not supported",
                      t->root);
}

sp_status sp_object_target_nothing_to_do(sp_write_target *t, sp_err *err) {
    (void)t, (void)err;
    return SP_OK;
}

void sp_object_target_close(sp_write_target *t, bool keep) {
    (void)t, (void)keep;
}
