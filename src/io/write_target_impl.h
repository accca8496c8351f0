/* write_target_impl.h — the inside of a write target (write_target.h): the table of operations a
 * kind of target fills (write_target_file.c, write_target_s3.c, write_target_gcs.c,
 * write_target_azure.c), the operations the object-store kinds share (write_target_object.c)
 * and the constructors that write_target.c's URL dispatch calls. Only those files include it. */
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

/* The operations of an object-store prefix that do not depend on the store
 * (write_target_object.c): open_file and exists read through the store's reader, list is
 * SP_E_UNSUPPORTED, sweep_temporaries and sync have nothing to do, close nothing to free. */
sp_status sp_object_target_open_file(sp_write_target *t, const char *relpath, sp_source **out,
                                     bool *missing, sp_err *err);
sp_status sp_object_target_exists(sp_write_target *t, const char *relpath, bool *yes, sp_err *err);
sp_status sp_object_target_list(sp_write_target *t,
                                bool (*fn)(void *user, const char *relpath, bool is_folder),
                                void *user, sp_err *err);
sp_status sp_object_target_nothing_to_do(sp_write_target *t, sp_err *err);
void sp_object_target_close(sp_write_target *t, bool keep);

#endif
