/* paths.c — URL dispatch and local path questions (see paths.h). */
#include "io/paths.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/http_source.h"

bool sp_path_is_azure(const char *path) {
    return path != NULL && (strncmp(path, "az://", 5) == 0 || strncmp(path, "abfs://", 7) == 0 ||
                            strncmp(path, "abfss://", 8) == 0);
}

bool sp_path_is_object_store(const char *path) {
    return path != NULL && (strncmp(path, "s3://", 5) == 0 || strncmp(path, "gs://", 5) == 0 ||
                            sp_path_is_azure(path));
}

bool sp_path_is_remote(const char *path) {
    return path != NULL && (strncmp(path, "http://", 7) == 0 || strncmp(path, "https://", 8) == 0 ||
                            sp_path_is_object_store(path));
}

sp_status sp_source_open_remote(const char *path, size_t head_len, sp_source **out, sp_err *err) {
    if (strncmp(path, "s3://", 5) == 0) {
        return sp_source_open_s3(path, head_len, out, err);
    }
    if (strncmp(path, "gs://", 5) == 0) {
        return sp_source_open_gcs(path, head_len, out, err);
    }
    if (sp_path_is_azure(path)) {
        return sp_source_open_azure(path, head_len, out, err);
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
        info.mtime_ns = (int64_t)sb.st_mtim.tv_sec * 1000000000 + (int64_t)sb.st_mtim.tv_nsec;
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

char *sp_path_absolute(const char *path) {
    return path != NULL ? realpath(path, NULL) : NULL;
}

sp_status sp_path_make_dirs(const char *dir, sp_err *err) {
    size_t n = dir != NULL ? strlen(dir) : 0;
    if (n == 0 || n >= PATH_MAX) {
        return sp_err_set(err, SP_E_INVALID_ARG, "bad folder name");
    }
    char buf[PATH_MAX];
    memcpy(buf, dir, n + 1);
    /* Each prefix ending before a '/', then the whole; existing ones are fine. */
    for (size_t i = 1; i <= n; i++) {
        if (i < n && buf[i] != '/') {
            continue;
        }
        char keep = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST) {
            int e = errno;
            buf[i] = keep;
            return sp_err_set(err, SP_E_IO, "cannot create the folder %s: %s", dir, strerror(e));
        }
        buf[i] = keep;
    }
    sp_path_info info = sp_path_look(dir);
    return info.is_directory ? SP_OK : sp_err_set(err, SP_E_IO, "%s is not a folder", dir);
}

sp_status sp_path_read_small(const char *path, size_t max, char **out, size_t *len, sp_err *err) {
    *out = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return sp_err_set(err, errno == ENOENT ? SP_E_NOT_FOUND : SP_E_IO, "cannot open %s: %s",
                          path, strerror(errno));
    }
    char *buf = malloc(max + 1);
    size_t n = 0;
    sp_status st =
        buf != NULL ? SP_OK : sp_err_set(err, SP_E_NOMEM, "out of memory reading %s", path);
    while (st == SP_OK) {
        if (n == max) {
            char extra;
            ssize_t r = read(fd, &extra, 1);
            if (r != 0) {
                st = r > 0 ? sp_err_set(err, SP_E_LIMIT, "%s is larger than %zu bytes", path, max)
                           : sp_err_set(err, SP_E_IO, "cannot read %s: %s", path, strerror(errno));
            }
            break;
        }
        ssize_t r = read(fd, buf + n, max - n);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r < 0) {
            st = sp_err_set(err, SP_E_IO, "cannot read %s: %s", path, strerror(errno));
        } else if (r == 0) {
            break;
        } else {
            n += (size_t)r;
        }
    }
    close(fd);
    if (st != SP_OK) {
        free(buf);
        return st;
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return SP_OK;
}
