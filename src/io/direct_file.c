/* direct_file.c — a local file opened again for a reader that does its own I/O (see
 * direct_file.h). */
#define _GNU_SOURCE /* O_DIRECT */
#include "io/direct_file.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

bool sp_file_identity(int fd, sp_file_id *id) {
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        return false;
    }
    *id = (sp_file_id){(uint64_t)st.st_dev, (uint64_t)st.st_ino};
    return true;
}

int sp_direct_file_open(int fd) {
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    int again = open(path, O_RDONLY | O_CLOEXEC | O_DIRECT);
    return again >= 0 ? again : open(path, O_RDONLY | O_CLOEXEC);
}

void sp_direct_file_close(int fd) {
    if (fd >= 0) {
        close(fd);
    }
}
