/* store.c — opening the files of a local or remote store (store.h). On disk a file that cannot
 * be opened is missing when stat says it does not exist (ENOENT, or ENOTDIR for a path through a
 * file); remotely when the server answers 404. */
#include "io/store.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/strings.h"
#include "io/paths.h"

bool sp_store_is_remote(const char *path) {
    return sp_path_is_remote(path);
}

sp_status sp_store_open(const char *path, size_t expected_len, sp_source **out, bool *missing,
                        sp_err *err) {
    *out = NULL;
    *missing = false;
    sp_err local = {0};
    if (sp_store_is_remote(path)) {
        sp_status st = sp_source_open_remote(path, expected_len, out, &local);
        if (st == SP_E_NOT_FOUND) {
            *missing = true;
            return SP_OK;
        }
        return st == SP_OK ? SP_OK : sp_err_set(err, st, "%s", local.msg);
    }
    if (sp_source_open_file(path, out, &local) == SP_OK) {
        return SP_OK;
    }
    struct stat info;
    if (stat(path, &info) != 0 && (errno == ENOENT || errno == ENOTDIR)) {
        *missing = true;
        return SP_OK;
    }
    return sp_err_set(err, local.status, "%s", local.msg);
}

bool sp_store_has_file(const char *dir, const char *name) {
    char *path = sp_path_join(dir, name);
    if (path == NULL) {
        return false;
    }
    bool yes = false;
    if (sp_store_is_remote(path)) {
        sp_source *src = NULL;
        sp_err ignored = {0};
        yes = sp_source_open_remote(path, 0, &src, &ignored) == SP_OK;
        sp_source_close(src);
    } else {
        struct stat info;
        yes = stat(path, &info) == 0 && S_ISREG(info.st_mode);
    }
    free(path);
    return yes;
}
