/* write_target_impl.h — the inside of a write target (write_target.h): the table of operations a
 * kind of target fills (write_target_file.c, and write_target_object.c for every object store),
 * what each object store adds to it (write_target_s3.c, write_target_gcs.c,
 * write_target_azure.c) and the constructors that write_target.c's URL dispatch calls. Only those
 * files include it. */
#ifndef SP_IO_WRITE_TARGET_IMPL_H
#define SP_IO_WRITE_TARGET_IMPL_H

#include "io/write_target.h"

typedef struct sp_write_target_ops {
    sp_status (*put)(sp_write_target *t, const char *relpath, const sp_bytes *parts, size_t nparts,
                     const char *sha256, sp_put_mode mode, sp_err *err);
    sp_status (*exists)(sp_write_target *t, const char *relpath, bool *exists, sp_err *err);
    sp_status (*open_file)(sp_write_target *t, const char *relpath, sp_source **out, bool *missing,
                           sp_err *err);
    sp_status (*remove)(sp_write_target *t, const char *relpath, sp_err *err);
    sp_status (*list)(sp_write_target *t,
                      bool (*fn)(void *user, const char *relpath, bool is_folder), void *user,
                      sp_err *err);
    sp_status (*sweep_temporaries)(sp_write_target *t, sp_err *err);
    sp_status (*sync)(sp_write_target *t, sp_err *err);
    /* Free what the kind holds (t->impl); write_target.c frees t and its root. */
    void (*close)(sp_write_target *t, bool keep);
} sp_write_target_ops;

struct sp_write_target {
    const sp_write_target_ops *ops;
    char *root; /* without trailing '/' */
    void *impl; /* the kind's own state */
};

/* Fill t->ops and t->impl for a folder (t->root set), creating it when absent. */
sp_status sp_write_target_init_file(sp_write_target *t, sp_err *err);

/* Fill t->ops and t->impl for an s3:// prefix (t->root set). */
sp_status sp_write_target_init_s3(sp_write_target *t, sp_err *err);

/* Fill t->ops and t->impl for an az:// or abfs(s):// prefix (t->root set). */
sp_status sp_write_target_init_azure(sp_write_target *t, sp_err *err);

/* Fill t->ops and t->impl for a gs:// prefix (t->root set). */
sp_status sp_write_target_init_gcs(sp_write_target *t, sp_err *err);

/* What an object store's write target does its own way (write_target_s3.c, write_target_gcs.c,
 * write_target_azure.c); every other operation is write_target_object.c's. */
typedef struct sp_object_store {
    /* Resolve `uri`, a file under the prefix `root`, with the environment, to fail before anything
     * is written on a malformed URL or missing credentials. */
    sp_status (*check)(const char *root, const char *uri, sp_err *err);
    /* PUT parts[0..nparts) to, or DELETE (no parts), the object `uri` with sp_object_write
     * (object_write.h). `sha256` is the body's hex SHA-256, or NULL: a store that signs it
     * hashes the parts itself. */
    sp_status (*send_request)(const char *uri, const char *method, const sp_bytes *parts,
                              size_t nparts, const char *sha256, sp_err *err);
} sp_object_store;

/* Fill t->ops and t->impl for a prefix (t->root set) of `store`, a static table, once its check
 * has passed on a name under the prefix. */
sp_status sp_write_target_init_object(sp_write_target *t, const sp_object_store *store,
                                      sp_err *err);

#endif
