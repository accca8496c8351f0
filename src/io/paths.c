/* paths.c — URL dispatch and local path questions (see paths.h). */
#include "io/paths.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/http_source.h"

bool sp_path_is_remote(const char *path) {
    return path != NULL && (strncmp(path, "http://", 7) == 0 || strncmp(path, "https://", 8) == 0 ||
                            strncmp(path, "s3://", 5) == 0);
}

sp_status sp_source_open_remote(const char *path, size_t head_len, sp_source **out, sp_err *err) {
    if (strncmp(path, "s3://", 5) == 0) {
        return sp_source_open_s3(path, head_len, out, err);
    }
    return sp_source_open_http(path, NULL, NULL, head_len, out, err);
}

sp_status sp_source_open_any(const char *path, sp_source **out, sp_err *err) {
    return sp_path_is_remote(path) ? sp_source_open_remote(path, 0, out, err)
                                   : sp_source_open_file(path, out, err);
}

sp_path_info sp_path_look(const char *path) {
    sp_path_info info = {0};
    struct stat sb;
    if (path != NULL && stat(path, &sb) == 0) {
        info.exists = true;
        info.is_file = S_ISREG(sb.st_mode);
        info.is_directory = S_ISDIR(sb.st_mode);
        info.size = sb.st_size > 0 ? (uint64_t)sb.st_size : 0;
        info.id[0] = (uint64_t)sb.st_dev;
        info.id[1] = (uint64_t)sb.st_ino;
    }
    return info;
}

void sp_path_names_free(char **names, size_t count) {
    for (size_t i = 0; i < count; i++) {
        free(names[i]);
    }
    free(names);
}

static int name_cmp(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

sp_status sp_path_list(const char *dir, size_t max, char ***out, size_t *count, sp_err *err) {
    *out = NULL;
    *count = 0;
    DIR *dp = opendir(dir);
    if (dp == NULL) {
        return sp_err_set(err, SP_E_IO, "%s: cannot list the directory: %s", dir, strerror(errno));
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    sp_status st = SP_OK;
    struct dirent *e;
    while (st == SP_OK && (e = readdir(dp)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
            continue;
        }
        if (n == max) {
            st = sp_err_set(err, SP_E_LIMIT, "%s: more than %zu directory entries", dir, max);
        } else if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **grown = realloc(names, cap * sizeof *grown);
            st = grown != NULL ? SP_OK
                               : sp_err_set(err, SP_E_NOMEM, "out of memory listing %s", dir);
            names = grown != NULL ? grown : names;
        }
        if (st == SP_OK && (names[n] = strdup(e->d_name)) == NULL) {
            st = sp_err_set(err, SP_E_NOMEM, "out of memory listing %s", dir);
        }
        n += st == SP_OK;
    }
    closedir(dp);
    if (st != SP_OK) {
        sp_path_names_free(names, n);
        return st;
    }
    if (n > 1) {
        qsort(names, n, sizeof *names, name_cmp);
    }
    *out = names;
    *count = n;
    return SP_OK;
}
