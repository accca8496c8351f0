/* file_source.c — a byte source over a local file, read with pread so that concurrent readers
 * share one descriptor without a file position. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/source.h"

typedef struct file_ctx {
    int fd;
} file_ctx;

static sp_status file_read_at(void *ctx, uint64_t offset, void *buf, size_t len, size_t *got,
                              sp_err *err) {
    file_ctx *f = ctx;
    for (;;) {
        ssize_t n = pread(f->fd, buf, len, (off_t)offset);
        if (n >= 0) {
            *got = (size_t)n;
            return SP_OK;
        }
        if (errno != EINTR) {
            return sp_err_set(err, SP_E_IO, "read failed at offset %llu: %s",
                              (unsigned long long)offset, strerror(errno));
        }
    }
}

static void file_close(void *ctx) {
    file_ctx *f = ctx;
    close(f->fd);
    free(f);
}

static int file_fd(void *ctx) {
    return ((file_ctx *)ctx)->fd;
}

static const sp_source_impl FILE_IMPL = {file_read_at, file_close, NULL, NULL, file_fd};

sp_status sp_source_open_file(const char *path, sp_source **out, sp_err *err) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return sp_err_set(err, SP_E_IO, "cannot open %s: %s", path, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return sp_err_set(err, SP_E_IO, "cannot stat %s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return sp_err_set(err, SP_E_IO, "%s is not a regular file", path);
    }
    file_ctx *f = malloc(sizeof *f);
    if (f == NULL) {
        close(fd);
        return sp_err_set(err, SP_E_NOMEM, "out of memory opening %s", path);
    }
    f->fd = fd;
    return sp_source_create(&FILE_IMPL, f, (uint64_t)st.st_size, path, out, err);
}
