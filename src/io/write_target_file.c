/* write_target_file.c — a write target that is a local folder (see write_target.h).
 *
 * A put writes "<final>.tmp-XXXXXX" (mkstemp, same folder, so the rename cannot cross file
 * systems; folders on the way are made on the first ENOENT) and renames it into place. A grouped
 * put hands the closed temporary file to the durable renames (durable_renames.c), whose thread
 * renames a batch only after one syncfs() made its bytes durable: an fsync per chunk cost more
 * wall time than encoding on a busy disk. A put "now" fsyncs its file and renames it at once; a
 * durable put also flushes its folder's entry. Files get the mode a plain create would give,
 * read once when the target is opened. The sweep of a killed run's temporary files and the
 * listing walk the folder tree through file descriptors (openat), never following links, to a
 * bounded depth.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "base/strings.h"
#include "io/durable_renames.h"
#include "io/file_target.h"
#include "io/store.h"
#include "io/write_target_impl.h"

/* Deepest folder nesting a listing or sweep descends. */
#define MAX_WALK_DEPTH 32

typedef struct file_target {
    mode_t file_mode;
    sp_durable_renames *renames; /* grouped files waiting for a flush and their rename */
} file_target;

static file_target *impl(sp_write_target *t) {
    return t->impl;
}

/* mkdir every folder on the way to `full` below the root, accepting ones that exist, so that
 * threads creating the same folder at once all succeed. */
static sp_status make_parents(const sp_write_target *t, char *full, sp_err *err) {
    size_t root_len = strlen(t->root);
    for (char *c = full + root_len + 1; *c; c++) {
        if (*c != '/') {
            continue;
        }
        *c = '\0';
        int r = mkdir(full, 0777);
        int e = errno;
        *c = '/';
        if (r != 0 && e != EEXIST) {
            *c = '\0';
            sp_err_set(err, SP_E_IO, "cannot create folder %s: %s", full, strerror(e));
            *c = '/';
            return SP_E_IO;
        }
    }
    return SP_OK;
}

static sp_status mkdir_p(char *path, sp_err *err) {
    for (char *c = path + 1;; c++) {
        if (*c != '/' && *c != '\0') {
            continue;
        }
        char saved = *c;
        *c = '\0';
        int r = mkdir(path, 0777);
        int e = errno;
        *c = saved;
        if (r != 0 && e != EEXIST) {
            return sp_err_set(err, SP_E_IO, "cannot create folder %s: %s", path, strerror(e));
        }
        if (saved == '\0') {
            return SP_OK;
        }
    }
}

/* Flush the entry of the folder holding `full` (its rename), so the name survives a power cut. */
static sp_status fsync_parent(const char *full, sp_err *err) {
    const char *slash = strrchr(full, '/');
    char *dir =
        slash == NULL ? strdup(".") : strndup(full, slash == full ? 1 : (size_t)(slash - full));
    if (dir == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory");
    }
    sp_status st = SP_OK;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        st = sp_err_set(err, SP_E_IO, "cannot open folder %s: %s", dir, strerror(errno));
    } else {
        int r = fsync(fd);
        int e = errno;
        close(fd);
        /* Some file systems cannot fsync a folder; that is not a failure of the write. */
        if (r != 0 && e != EINVAL && e != EROFS) {
            st = sp_err_set(err, SP_E_IO, "cannot flush folder %s: %s", dir, strerror(e));
        }
    }
    free(dir);
    return st;
}

static sp_status put(sp_write_target *t, const char *relpath, const sp_bytes *parts, size_t nparts,
                     const char *sha256, sp_put_mode mode, sp_err *err) {
    (void)sha256; /* a local file needs no checksum to be written */
    file_target *f = impl(t);
    char *full = sp_strdup_printf("%s/%s", t->root, relpath);
    char *tmp = sp_strdup_printf("%s/%s.tmp-XXXXXX", t->root, relpath);
    sp_status st = SP_OK;
    int fd = -1;
    if (full == NULL || tmp == NULL) {
        st = sp_err_set(err, SP_E_NOMEM, "out of memory writing %s", relpath);
        goto done;
    }
    size_t tmp_len = strlen(tmp);
    fd = mkstemp(tmp);
    if (fd < 0 && errno == ENOENT) {
        st = make_parents(t, full, err);
        if (st != SP_OK) {
            goto done;
        }
        memcpy(tmp + tmp_len - 6, "XXXXXX", 6);
        fd = mkstemp(tmp);
    }
    if (fd < 0) {
        st = sp_err_set(err, SP_E_IO, "cannot create %s: %s", tmp, strerror(errno));
        goto done;
    }
    if (fchmod(fd, f->file_mode) != 0) {
        st = sp_err_set(err, SP_E_IO, "cannot write %s: %s", full, strerror(errno));
        goto fail;
    }
    for (size_t i = 0; i < nparts; i++) {
        const uint8_t *p = parts[i].data;
        for (size_t off = 0; off < parts[i].len;) {
            ssize_t n = write(fd, p + off, parts[i].len - off);
            if (n < 0) {
                if (errno == EINTR) {
                    continue;
                }
                st = sp_err_set(err, SP_E_IO, "cannot write %s: %s", full, strerror(errno));
                goto fail;
            }
            off += (size_t)n;
        }
    }
    if (mode != SP_PUT_GROUPED && fsync(fd) != 0) {
        st = sp_err_set(err, SP_E_IO, "cannot write %s: %s", full, strerror(errno));
        goto fail;
    }
    int r = close(fd);
    fd = -1;
    if (r != 0) {
        st = sp_err_set(err, SP_E_IO, "cannot write %s: %s", full, strerror(errno));
        goto fail;
    }
    if (mode == SP_PUT_GROUPED) {
        st = sp_durable_renames_add(f->renames, tmp, full, err); /* takes both names */
        tmp = full = NULL;
        goto done;
    }
    if (rename(tmp, full) != 0) {
        st = sp_err_set(err, SP_E_IO, "cannot rename %s to %s: %s", tmp, full, strerror(errno));
        goto fail;
    }
    if (mode == SP_PUT_DURABLE) {
        st = fsync_parent(full, err);
    }
    goto done;
fail:
    if (fd >= 0) {
        close(fd);
    }
    unlink(tmp);
done:
    free(full);
    free(tmp);
    return st;
}

static bool is_regular(const char *path) {
    struct stat info;
    return stat(path, &info) == 0 && S_ISREG(info.st_mode);
}

static sp_status exists(sp_write_target *t, const char *relpath, bool *yes, sp_err *err) {
    char *full = sp_strdup_printf("%s/%s", t->root, relpath);
    if (full == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory");
    }
    *yes = is_regular(full);
    free(full);
    return SP_OK;
}

static sp_status open_file(sp_write_target *t, const char *relpath, sp_source **out, bool *missing,
                           sp_err *err) {
    *out = NULL;
    *missing = true;
    char *full = sp_strdup_printf("%s/%s", t->root, relpath);
    if (full == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory");
    }
    sp_status st = SP_OK;
    if (is_regular(full)) {
        st = sp_store_open(full, 0, out, missing, err);
    }
    free(full);
    return st;
}

static sp_status remove_file(sp_write_target *t, const char *relpath, sp_err *err) {
    char *p = sp_strdup_printf("%s/%s", t->root, relpath);
    if (p == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory");
    }
    sp_status st = SP_OK;
    if (unlink(p) != 0 && errno != ENOENT) {
        st = sp_err_set(err, SP_E_IO, "cannot remove %s: %s", p, strerror(errno));
    }
    free(p);
    return st;
}

/* ---- walking the tree ----------------------------------------------------------------------- */

/* Called for each entry of the walk with the folder's descriptor, the entry's name in it and its
 * path below the root; returns false to stop (then sets *st when that is an error). */
typedef bool (*visit_fn)(void *user, int dirfd, const char *name, const char *relpath,
                         bool is_folder, sp_status *st, sp_err *err);

/* Walk the folder open as `dirfd` (taken), whose path below the root is `rel` ("" for the root)
 * and whose path for messages is `where`. */
static sp_status walk(int dirfd, const char *where, const char *rel, int depth, visit_fn visit,
                      void *user, bool *stop, sp_err *err) {
    if (depth > MAX_WALK_DEPTH) {
        close(dirfd);
        return sp_err_set(err, SP_E_IO, "%s: folders nested too deep", where);
    }
    DIR *d = fdopendir(dirfd);
    if (d == NULL) {
        close(dirfd);
        return sp_err_set(err, SP_E_IO, "cannot list %s: %s", where, strerror(errno));
    }
    sp_status st = SP_OK;
    struct dirent *ent;
    while (st == SP_OK && !*stop && (errno = 0, ent = readdir(d)) != NULL) {
        const char *name = ent->d_name;
        if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
            continue;
        }
        struct stat sb;
        if (fstatat(dirfd, name, &sb, AT_SYMLINK_NOFOLLOW) != 0) {
            continue; /* vanished meanwhile */
        }
        bool folder = S_ISDIR(sb.st_mode);
        char *path = rel[0] ? sp_strdup_printf("%s/%s", rel, name) : strdup(name);
        if (path == NULL) {
            st = sp_err_set(err, SP_E_NOMEM, "out of memory");
            break;
        }
        if (!visit(user, dirfd, name, path, folder, &st, err)) {
            *stop = true;
        } else if (folder) {
            int sub = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            char *subwhere = sp_strdup_printf("%s/%s", where, name);
            if (sub < 0) {
                st =
                    sp_err_set(err, SP_E_IO, "cannot open %s/%s: %s", where, name, strerror(errno));
            } else if (subwhere == NULL) {
                close(sub);
                st = sp_err_set(err, SP_E_NOMEM, "out of memory");
            } else {
                st = walk(sub, subwhere, path, depth + 1, visit, user, stop, err);
            }
            free(subwhere);
        }
        free(path);
    }
    if (st == SP_OK && !*stop && errno != 0) {
        st = sp_err_set(err, SP_E_IO, "cannot list %s: %s", where, strerror(errno));
    }
    closedir(d);
    return st;
}

static sp_status walk_root(sp_write_target *t, visit_fn visit, void *user, sp_err *err) {
    int fd = open(t->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        return sp_err_set(err, SP_E_IO, "cannot open %s: %s", t->root, strerror(errno));
    }
    bool stop = false;
    return walk(fd, t->root, "", 0, visit, user, &stop, err);
}

typedef struct list_user {
    bool (*fn)(void *user, const char *relpath, bool is_folder);
    void *user;
} list_user;

static bool list_visit(void *user, int dirfd, const char *name, const char *relpath, bool is_folder,
                       sp_status *st, sp_err *err) {
    (void)dirfd, (void)name, (void)st, (void)err;
    list_user *u = user;
    return u->fn(u->user, relpath, is_folder);
}

static sp_status list(sp_write_target *t,
                      bool (*fn)(void *user, const char *relpath, bool is_folder), void *user,
                      sp_err *err) {
    list_user u = {fn, user};
    return walk_root(t, list_visit, &u, err);
}

/* "NAME.tmp-XXXXXX", the temporary name of a put (six letters or digits, as mkstemp makes). */
static bool is_temporary(const char *name) {
    size_t n = strlen(name);
    if (n < 12 || memcmp(name + n - 11, ".tmp-", 5) != 0) {
        return false;
    }
    for (size_t i = n - 6; i < n; i++) {
        char c = name[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) {
            return false;
        }
    }
    return true;
}

static bool sweep_visit(void *user, int dirfd, const char *name, const char *relpath,
                        bool is_folder, sp_status *st, sp_err *err) {
    const sp_write_target *t = user;
    if (is_folder || !is_temporary(name)) {
        return true;
    }
    if (unlinkat(dirfd, name, 0) != 0 && errno != ENOENT) {
        *st =
            sp_err_set(err, SP_E_IO, "cannot remove %s/%s: %s", t->root, relpath, strerror(errno));
        return false;
    }
    return true;
}

static sp_status sweep_temporaries(sp_write_target *t, sp_err *err) {
    return walk_root(t, sweep_visit, t, err);
}

static sp_status sync_all(sp_write_target *t, sp_err *err) {
    sp_status st = sp_durable_renames_drain(impl(t)->renames, err);
    return st == SP_OK ? sp_sync_fs(t->root, err) : st;
}

static void close_file(sp_write_target *t, bool keep) {
    file_target *f = impl(t);
    if (f == NULL) {
        return;
    }
    /* Without keep the files not yet renamed are removed: they were never part of the store. */
    sp_durable_renames_destroy(f->renames, keep);
    free(f);
}

static const sp_write_target_ops FILE_OPS = {
    .put = put,
    .exists = exists,
    .open_file = open_file,
    .remove = remove_file,
    .list = list,
    .sweep_temporaries = sweep_temporaries,
    .sync = sync_all,
    .close = close_file,
};

sp_status sp_write_target_init_file(sp_write_target *t, sp_err *err) {
    file_target *f = calloc(1, sizeof *f);
    if (f == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory");
    }
    t->ops = &FILE_OPS;
    t->impl = f;
    f->file_mode = (mode_t)sp_file_default_mode();
    sp_status st = sp_durable_renames_create(t->root, &f->renames, err);
    if (st == SP_OK) {
        struct stat sb;
        if (stat(t->root, &sb) == 0) {
            if (!S_ISDIR(sb.st_mode)) {
                st = sp_err_set(err, SP_E_INVALID_ARG, "%s exists and is not a folder", t->root);
            }
        } else if (errno == ENOENT) {
            st = mkdir_p(t->root, err);
        } else {
            st = sp_err_set(err, SP_E_IO, "cannot open %s: %s", t->root, strerror(errno));
        }
    }
    if (st != SP_OK) {
        close_file(t, false);
        t->impl = NULL;
    }
    return st;
}
