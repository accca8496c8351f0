/* test_direct_writes.c — unit tests of the background O_DIRECT chunk writes
 * (src/zarr/direct_writes.c), which hand their files on to the durable renames.
 *
 * Three threads hand over files of odd lengths around a megabyte (none a multiple of the 4 KiB
 * that O_DIRECT pads to, one empty, enough to fill the queue so that hand-overs wait): after both
 * drains every final name holds exactly its bytes and no temporary name is left. The same runs on
 * tmpfs (/dev/shm), where O_DIRECT may be refused and the ordinary write must take over. A write
 * the operating system refuses (EFBIG past RLIMIT_FSIZE, with SIGXFSZ ignored) is reported by the
 * drain and by the next hand-over, naming the file and the reason, and leaves no temporary file.
 * The tests also run under ThreadSanitizer (make test).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/strings.h"
#include "unit.h"
#include "zarr/direct_writes.h"

#define WRITERS 3
#define FILES_EACH 12

/* The bytes of file `id`: a length that is never a multiple of 4096 (and 0 for id 0), and
 * content that differs per file and per position. */
static size_t file_len(int id) {
    return id == 0 ? 0 : ((size_t)1 << 20) + (size_t)id * 40961 + 7;
}

static uint8_t file_byte(int id, size_t i) {
    return (uint8_t)(i * 31 + (size_t)id * 7 + (i >> 12));
}

static uint8_t *file_bytes(int id) {
    size_t n = file_len(id);
    uint8_t *b = malloc(n ? n : 1);
    for (size_t i = 0; b != NULL && i < n; i++) {
        b[i] = file_byte(id, i);
    }
    return b;
}

static bool file_holds(const char *path, int id) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        return false;
    }
    size_t n = file_len(id), got = 0;
    bool same = true;
    uint8_t buf[65536];
    for (size_t r; (r = fread(buf, 1, sizeof buf, f)) > 0; got += r) {
        for (size_t i = 0; i < r && same; i++) {
            same = got + i < n && buf[i] == file_byte(id, got + i);
        }
    }
    fclose(f);
    return same && got == n;
}

static int count_tmp(const char *dir) {
    DIR *d = opendir(dir);
    if (d == NULL) {
        return -1;
    }
    int n = 0;
    for (struct dirent *ent; (ent = readdir(d)) != NULL;) {
        n += strstr(ent->d_name, ".tmp-") != NULL;
    }
    closedir(d);
    return n;
}

static void remove_tree(const char *dir) {
    DIR *d = opendir(dir);
    if (d != NULL) {
        for (struct dirent *ent; (ent = readdir(d)) != NULL;) {
            if (strcmp(ent->d_name, ".") != 0 && strcmp(ent->d_name, "..") != 0) {
                unlinkat(dirfd(d), ent->d_name, 0);
            }
        }
        closedir(d);
    }
    rmdir(dir);
}

/* The pair of writers for a fresh folder under `parent`, or false (a failed check). */
typedef struct fixture {
    char *root;
    sp_durable_renames *renames;
    sp_direct_writes *writes;
} fixture;

static bool open_fixture(const char *parent, fixture *f) {
    memset(f, 0, sizeof *f);
    char *tmpl = sp_strdup_printf("%s/sp-direct-XXXXXX", parent);
    if (tmpl == NULL || mkdtemp(tmpl) == NULL) {
        free(tmpl);
        return false;
    }
    f->root = tmpl;
    sp_err e = {0};
    CHECK_EQ_INT(sp_durable_renames_create(f->root, &f->renames, &e), SP_OK);
    CHECK_EQ_INT(sp_direct_writes_create(f->renames, &f->writes, &e), SP_OK);
    return f->renames != NULL && f->writes != NULL;
}

static void close_fixture(fixture *f) {
    sp_direct_writes_destroy(f->writes, true);
    sp_durable_renames_destroy(f->renames, true);
    if (f->root != NULL) {
        remove_tree(f->root);
    }
    free(f->root);
}

/* Hand file `id` over; its final name is "f<id>". */
static sp_status hand_over(fixture *f, int id, sp_err *e) {
    char *full = sp_strdup_printf("%s/f%d", f->root, id);
    char *tmp = sp_strdup_printf("%s/f%d.tmp-XXXXXX", f->root, id);
    int fd = tmp != NULL ? mkstemp(tmp) : -1;
    uint8_t *bytes = file_bytes(id);
    if (full == NULL || fd < 0 || bytes == NULL) {
        free(full);
        free(tmp);
        free(bytes);
        return sp_err_set(e, SP_E_NOMEM, "test set-up failed");
    }
    sp_status st = sp_direct_writes_add(f->writes, fd, tmp, full, bytes, file_len(id), e);
    free(bytes); /* copied by the hand-over */
    return st;
}

typedef struct writer_arg {
    fixture *f;
    int first;
    int failures;
} writer_arg;

static void *writer(void *p) {
    writer_arg *w = p;
    for (int i = 0; i < FILES_EACH; i++) {
        sp_err e = {0};
        if (hand_over(w->f, w->first + i, &e) != SP_OK) {
            w->failures++;
        }
    }
    return NULL;
}

static void check_many_writers(const char *parent) {
    fixture f;
    if (!open_fixture(parent, &f)) {
        printf("note: no folder under %s; direct-write test there skipped\n", parent);
        close_fixture(&f);
        return;
    }
    pthread_t th[WRITERS];
    writer_arg args[WRITERS];
    for (int i = 0; i < WRITERS; i++) {
        args[i] = (writer_arg){&f, i * FILES_EACH, 0};
        pthread_create(&th[i], NULL, writer, &args[i]);
    }
    for (int i = 0; i < WRITERS; i++) {
        pthread_join(th[i], NULL);
        CHECK_EQ_INT(args[i].failures, 0);
    }
    sp_err e = {0};
    CHECK_EQ_INT(sp_direct_writes_drain(f.writes, &e), SP_OK);
    CHECK_EQ_INT(sp_durable_renames_drain(f.renames, &e), SP_OK);
    int right = 0;
    for (int id = 0; id < WRITERS * FILES_EACH; id++) {
        char *full = sp_strdup_printf("%s/f%d", f.root, id);
        right += full != NULL && file_holds(full, id);
        free(full);
    }
    CHECK_EQ_INT(right, WRITERS * FILES_EACH);
    CHECK_EQ_INT(count_tmp(f.root), 0);
    close_fixture(&f);
}

static void test_many_writers(void) {
    check_many_writers("/tmp");
}

static void test_tmpfs(void) {
    struct stat sb;
    if (stat("/dev/shm", &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        printf("note: no /dev/shm; tmpfs direct-write test skipped\n");
        return;
    }
    check_many_writers("/dev/shm");
}

static void test_write_error(void) {
    fixture f;
    if (!open_fixture("/tmp", &f)) {
        close_fixture(&f);
        return;
    }
    struct rlimit old;
    getrlimit(RLIMIT_FSIZE, &old);
    struct rlimit small = old;
    small.rlim_cur = 65536;
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    if (setrlimit(RLIMIT_FSIZE, &small) != 0) {
        printf("note: EFBIG test skipped: setrlimit failed (%s)\n", strerror(errno));
    } else {
        sp_err e = {0};
        sp_status st = hand_over(&f, 1, &e);
        if (st == SP_OK) {
            st = sp_direct_writes_drain(f.writes, &e);
        }
        setrlimit(RLIMIT_FSIZE, &old);
        CHECK_EQ_INT(st, SP_E_IO);
        CHECK(strstr(e.msg, "/f1") != NULL && strstr(e.msg, strerror(EFBIG)) != NULL);
        sp_err e2 = {0};
        CHECK_EQ_INT(hand_over(&f, 2, &e2), SP_E_IO); /* the failure sticks */
        CHECK_EQ_INT(sp_durable_renames_drain(f.renames, &e2), SP_OK);
        CHECK_EQ_INT(count_tmp(f.root), 0);
        char *f1 = sp_strdup_printf("%s/f1", f.root), *f2 = sp_strdup_printf("%s/f2", f.root);
        CHECK(f1 != NULL && access(f1, F_OK) != 0);
        CHECK(f2 != NULL && access(f2, F_OK) != 0);
        free(f1);
        free(f2);
    }
    signal(SIGXFSZ, old_handler);
    close_fixture(&f);
}

void unit_run(void) {
    test_many_writers();
    test_tmpfs();
    test_write_error();
}
