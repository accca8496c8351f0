/* file_target.c — atomic whole-file writes to local disk (see file_target.h). */
#include "io/file_target.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct sp_file_target {
    int fd;
    uint64_t size; /* bytes appended so far */
    char *path, *tmp_path;
};

unsigned sp_file_default_mode(void) {
    unsigned mask = 022;
    FILE *f = fopen("/proc/self/status", "re");
    if (f != NULL) {
        char line[256];
        while (fgets(line, sizeof line, f) != NULL) {
            unsigned m;
            if (sscanf(line, "Umask: %o", &m) == 1) {
                mask = m & 0777;
                break;
            }
        }
        fclose(f);
    }
    return 0666 & ~mask;
}

static void target_free(sp_file_target *t) {
    free(t->path);
    free(t->tmp_path);
    free(t);
}

void sp_file_target_abort(sp_file_target *t) {
    if (t == NULL) {
        return;
    }
    if (t->fd >= 0) {
        close(t->fd);
        unlink(t->tmp_path);
    }
    target_free(t);
}

sp_status sp_file_target_open(const char *path, sp_file_target **out, sp_err *err) {
    *out = NULL;
    sp_file_target *t = calloc(1, sizeof *t);
    size_t plen = strlen(path);
    if (t != NULL) {
        t->fd = -1;
        t->path = strdup(path);
        t->tmp_path = malloc(plen + sizeof ".tmp-XXXXXX");
    }
    if (t == NULL || t->path == NULL || t->tmp_path == NULL) {
        if (t != NULL) {
            target_free(t);
        }
        return sp_err_set(err, SP_E_NOMEM, "out of memory starting to write %s", path);
    }
    memcpy(t->tmp_path, path, plen);
    memcpy(t->tmp_path + plen, ".tmp-XXXXXX", sizeof ".tmp-XXXXXX");
    t->fd = mkstemp(t->tmp_path);
    if (t->fd < 0) {
        sp_status st = sp_err_set(err, SP_E_IO, "cannot create a temporary file for %s: %s", path,
                                  strerror(errno));
        target_free(t);
        return st;
    }
    (void)fchmod(t->fd, (mode_t)sp_file_default_mode()); /* a failure only leaves it private */
    *out = t;
    return SP_OK;
}

sp_status sp_file_target_write_at(sp_file_target *t, uint64_t offset, const void *data,
                                  size_t len, sp_err *err) {
    const uint8_t *p = data;
    while (len > 0) {
        ssize_t n = pwrite(t->fd, p, len, (off_t)offset);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            return sp_err_set(err, SP_E_IO, "write failed: %s", strerror(errno));
        }
        p += n;
        len -= (size_t)n;
        offset += (uint64_t)n;
    }
    return SP_OK;
}

sp_status sp_file_target_append(sp_file_target *t, const void *data, size_t len, sp_err *err) {
    sp_status st = sp_file_target_write_at(t, t->size, data, len, err);
    t->size += st == SP_OK ? len : 0;
    return st;
}

/* Make the rename itself durable; a failure here loses nothing already written, so it is not
 * reported. */
static void sync_parent(const char *path) {
    const char *slash = strrchr(path, '/');
    char *dir = slash == NULL ? NULL : strndup(path, slash == path ? 1 : (size_t)(slash - path));
    int fd = open(dir != NULL ? dir : ".", O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
    free(dir);
}

sp_status sp_file_target_commit(sp_file_target *t, sp_err *err) {
    sp_status st = SP_OK;
    if (fsync(t->fd) != 0) {
        st = sp_err_set(err, SP_E_IO, "write failed: %s", strerror(errno));
    }
    int fd = t->fd;
    t->fd = -1;
    if (close(fd) != 0 && st == SP_OK) {
        st = sp_err_set(err, SP_E_IO, "write failed: %s", strerror(errno));
    }
    if (st == SP_OK && rename(t->tmp_path, t->path) != 0) {
        st = sp_err_set(err, SP_E_IO, "cannot rename %s to %s: %s", t->tmp_path, t->path,
                        strerror(errno));
    }
    if (st != SP_OK) {
        unlink(t->tmp_path);
    } else {
        sync_parent(t->path);
    }
    target_free(t);
    return st;
}
