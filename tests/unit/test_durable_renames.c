/* test_durable_renames.c — unit tests of the background flush-then-rename of chunk files
 * (src/io/durable_renames.c).
 *
 * Four threads hand over a few hundred written files (several batches, so writers also wait for
 * room): after the drain every final name holds its bytes and no temporary name is left. A rename
 * that fails (its folder removed meanwhile) is reported by the drain and by the next hand-over,
 * and removes the temporary files not renamed. Destroying without keep removes what was handed
 * over and not yet renamed. The tests also run under ThreadSanitizer (make test).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/strings.h"
#include "io/durable_renames.h"
#include "unit.h"

#define WRITERS 4
#define FILES_EACH 50

static char *make_root(void) {
    char tmpl[] = "/tmp/sp-durable-XXXXXX";
    char *d = mkdtemp(tmpl);
    return d ? strdup(d) : NULL;
}

/* Write `text` to a fresh temporary name in `dir`; returns that name (malloc'd). */
static char *write_tmp(const char *dir, const char *text) {
    char *tmp = sp_strdup_printf("%s/f.tmp-XXXXXX", dir);
    int fd = tmp ? mkstemp(tmp) : -1;
    if (fd < 0) {
        free(tmp);
        return NULL;
    }
    size_t n = strlen(text);
    bool ok = write(fd, text, n) == (ssize_t)n;
    close(fd);
    if (!ok) {
        unlink(tmp);
        free(tmp);
        return NULL;
    }
    return tmp;
}

static bool file_holds(const char *path, const char *text) {
    char buf[64] = {0};
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        return false;
    }
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    return n == strlen(text) && memcmp(buf, text, n) == 0;
}

/* Temporary names left in `dir` (the tests keep every file directly in it). */
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

/* A fresh folder and renames for it, or NULL (a failed check) with *root NULL. */
static sp_durable_renames *open_fresh(char **root) {
    *root = make_root();
    sp_durable_renames *r = NULL;
    sp_err e = {0};
    CHECK(*root != NULL && sp_durable_renames_create(*root, &r, &e) == SP_OK);
    if (r == NULL) {
        free(*root);
        *root = NULL;
    }
    return r;
}

typedef struct writer_arg {
    sp_durable_renames *r;
    const char *root;
    int id;
    int failures;
} writer_arg;

static void *writer(void *p) {
    writer_arg *w = p;
    for (int i = 0; i < FILES_EACH; i++) {
        char text[32];
        snprintf(text, sizeof text, "w%d-f%d", w->id, i);
        char *tmp = write_tmp(w->root, text);
        char *full = sp_strdup_printf("%s/%s", w->root, text);
        sp_err e = {0};
        if (tmp == NULL || full == NULL || sp_durable_renames_add(w->r, tmp, full, &e) != SP_OK) {
            w->failures++;
        }
    }
    return NULL;
}

static void test_many_writers(void) {
    char *root;
    sp_durable_renames *r = open_fresh(&root);
    if (r == NULL) {
        return;
    }
    sp_err e = {0};
    pthread_t th[WRITERS];
    writer_arg args[WRITERS];
    for (int i = 0; i < WRITERS; i++) {
        args[i] = (writer_arg){r, root, i, 0};
        pthread_create(&th[i], NULL, writer, &args[i]);
    }
    for (int i = 0; i < WRITERS; i++) {
        pthread_join(th[i], NULL);
        CHECK_EQ_INT(args[i].failures, 0);
    }
    CHECK_EQ_INT(sp_durable_renames_drain(r, &e), SP_OK);
    int present = 0;
    for (int w = 0; w < WRITERS; w++) {
        for (int i = 0; i < FILES_EACH; i++) {
            char text[32];
            snprintf(text, sizeof text, "w%d-f%d", w, i);
            char *full = sp_strdup_printf("%s/%s", root, text);
            present += full != NULL && file_holds(full, text);
            free(full);
        }
    }
    CHECK_EQ_INT(present, WRITERS * FILES_EACH);
    CHECK_EQ_INT(count_tmp(root), 0);
    sp_durable_renames_destroy(r, true);
    remove_tree(root);
    free(root);
}

/* Final names in a folder that is gone by flush time: the rename fails. */
static void test_failure_sticks(void) {
    char *root;
    sp_durable_renames *r = open_fresh(&root);
    if (r == NULL) {
        return;
    }
    char *gone = sp_strdup_printf("%s/gone", root);
    sp_err e = {0};
    char *tmp = write_tmp(root, "x");
    char *full = sp_strdup_printf("%s/x", gone);
    CHECK_EQ_INT(sp_durable_renames_add(r, tmp, full, &e), SP_OK);
    CHECK_EQ_INT(sp_durable_renames_drain(r, &e), SP_E_IO);
    CHECK(strstr(e.msg, "cannot rename") != NULL);
    CHECK_EQ_INT(count_tmp(root), 0);
    sp_err e2 = {0};
    tmp = write_tmp(root, "y");
    full = sp_strdup_printf("%s/y", root);
    CHECK_EQ_INT(sp_durable_renames_add(r, tmp, full, &e2), SP_E_IO); /* the failure sticks */
    CHECK_EQ_INT(count_tmp(root), 0);
    sp_durable_renames_destroy(r, true);
    remove_tree(root);
    free(gone);
    free(root);
}

static void test_destroy_discards(void) {
    char *root;
    sp_durable_renames *r = open_fresh(&root);
    if (r == NULL) {
        return;
    }
    sp_err e = {0};
    char *tmp = write_tmp(root, "z");
    char *full = sp_strdup_printf("%s/z", root);
    CHECK_EQ_INT(sp_durable_renames_add(r, tmp, full, &e), SP_OK);
    sp_durable_renames_destroy(r, false);
    char *z = sp_strdup_printf("%s/z", root);
    CHECK(z != NULL && access(z, F_OK) != 0);
    CHECK_EQ_INT(count_tmp(root), 0);
    free(z);
    remove_tree(root);
    free(root);
}

void unit_run(void) {
    test_many_writers();
    test_failure_sticks();
    test_destroy_discards();
}
