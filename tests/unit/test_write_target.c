/* test_write_target.c — unit tests of the folder write target (src/io/write_target_file.c behind
 * src/io/write_target.h), on real folders under /tmp.
 *
 * A put of several pieces lands whole under its name, its folders made on the way, with no
 * temporary name left; a grouped put is in place after sync, and one still waiting when the
 * target is closed without keep is removed. exists tells files from folders and absent names;
 * open_file reads back what was put; list walks folders before what they hold and stops when
 * asked; the sweep removes only names of the temporary form; remove accepts a missing name. A
 * path that is a file, an http(s) URL, and a put whose folder cannot be made are clean errors.
 * The S3 target is tested against a real S3 server in tests/cli/test_remote.py.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <ftw.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/strings.h"
#include "io/write_target.h"
#include "unit.h"

static char *make_root(void) {
    char tmpl[] = "/tmp/sp-target-XXXXXX";
    char *d = mkdtemp(tmpl);
    return d ? strdup(d) : NULL;
}

static int remove_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

static void remove_tree(const char *root) {
    nftw(root, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* The whole content of `root/rel` (malloc'd, NUL-terminated), or NULL when it cannot be read. */
static char *slurp(const char *root, const char *rel) {
    char *path = sp_strdup_printf("%s/%s", root, rel);
    FILE *f = path ? fopen(path, "rb") : NULL;
    free(path);
    if (f == NULL) {
        return NULL;
    }
    char *buf = calloc(1, 4096);
    size_t n = buf ? fread(buf, 1, 4095, f) : 0;
    (void)n;
    fclose(f);
    return buf;
}

static bool is_file(const char *root, const char *rel) {
    char *path = sp_strdup_printf("%s/%s", root, rel);
    struct stat sb;
    bool yes = path != NULL && stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
    free(path);
    return yes;
}

static int temporaries;

static int count_tmp(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag;
    temporaries += strstr(path + ftw->base, ".tmp-") != NULL;
    return 0;
}

static int count_temporaries(const char *root) {
    temporaries = 0;
    nftw(root, count_tmp, 16, FTW_PHYS);
    return temporaries;
}

static void touch(const char *root, const char *rel) {
    char *path = sp_strdup_printf("%s/%s", root, rel);
    FILE *f = path ? fopen(path, "w") : NULL;
    if (f != NULL) {
        fputs("x", f);
        fclose(f);
    }
    free(path);
}

static void test_put_exists_read_remove(void) {
    char *base = make_root();
    CHECK(base != NULL);
    if (base == NULL) {
        return;
    }
    /* The target's folder does not exist yet, nor its parent: open makes both. */
    char *root = sp_strdup_printf("%s/new/store.zarr/", base);
    sp_write_target *t = NULL;
    sp_err e = {0};
    CHECK(sp_write_target_open(root, &t, &e) == SP_OK);
    if (t == NULL) {
        free(root);
        free(base);
        return;
    }
    char *want_root = sp_strdup_printf("%s/new/store.zarr", base);
    CHECK(strcmp(sp_write_target_root(t), want_root) == 0);

    sp_bytes parts[3] = {{"hello, ", 7}, {"", 0}, {"world", 5}};
    CHECK(sp_write_target_put(t, "a/b/c", parts, 3, NULL, SP_PUT_NOW, &e) == SP_OK);
    char *got = slurp(want_root, "a/b/c");
    CHECK(got != NULL && strcmp(got, "hello, world") == 0);
    free(got);
    CHECK(sp_write_target_put(t, "top", parts, 1, NULL, SP_PUT_DURABLE, &e) == SP_OK);
    CHECK(is_file(want_root, "top"));

    /* Overwriting replaces the whole content. */
    sp_bytes shorter = {"bye", 3};
    CHECK(sp_write_target_put(t, "a/b/c", &shorter, 1, NULL, SP_PUT_NOW, &e) == SP_OK);
    got = slurp(want_root, "a/b/c");
    CHECK(got != NULL && strcmp(got, "bye") == 0);
    free(got);

    bool there = false;
    CHECK(sp_write_target_exists(t, "a/b/c", &there, &e) == SP_OK && there);
    CHECK(sp_write_target_exists(t, "a/b", &there, &e) == SP_OK && !there); /* a folder */
    CHECK(sp_write_target_exists(t, "a/nothing", &there, &e) == SP_OK && !there);

    sp_source *src = NULL;
    bool missing = true;
    CHECK(sp_write_target_open_file(t, "a/b/c", &src, &missing, &e) == SP_OK && !missing);
    char buf[8] = {0};
    CHECK(src != NULL && sp_source_size(src) == 3 && sp_source_read(src, 0, buf, 3, &e) == SP_OK &&
          memcmp(buf, "bye", 3) == 0);
    sp_source_close(src);
    src = NULL;
    CHECK(sp_write_target_open_file(t, "a/none", &src, &missing, &e) == SP_OK && missing &&
          src == NULL);

    CHECK(sp_write_target_remove(t, "a/b/c", &e) == SP_OK && !is_file(want_root, "a/b/c"));
    CHECK(sp_write_target_remove(t, "a/b/c", &e) == SP_OK); /* already gone: not an error */
    CHECK(e.status == SP_OK);
    CHECK_EQ_INT(count_temporaries(want_root), 0);
    sp_write_target_close(t, false);
    remove_tree(base);
    free(want_root);
    free(root);
    free(base);
}

static void test_grouped_puts(void) {
    char *root = make_root();
    sp_write_target *t = NULL;
    sp_err e = {0};
    CHECK(root != NULL && sp_write_target_open(root, &t, &e) == SP_OK);
    if (t == NULL) {
        free(root);
        return;
    }
    char name[32];
    for (int i = 0; i < 100; i++) {
        snprintf(name, sizeof name, "0/%d/%d", i / 10, i % 10);
        sp_bytes one = {name, strlen(name)};
        CHECK(sp_write_target_put(t, name, &one, 1, NULL, SP_PUT_GROUPED, &e) == SP_OK);
    }
    CHECK(sp_write_target_sync(t, &e) == SP_OK);
    int whole = 0;
    for (int i = 0; i < 100; i++) {
        snprintf(name, sizeof name, "0/%d/%d", i / 10, i % 10);
        char *got = slurp(root, name);
        whole += got != NULL && strcmp(got, name) == 0;
        free(got);
    }
    CHECK_EQ_INT(whole, 100);
    CHECK_EQ_INT(count_temporaries(root), 0);
    /* One grouped put (fewer than a flush batch) still waiting when the target is closed without
     * keep is removed, temporary name and all. */
    sp_bytes late = {"late", 4};
    CHECK(sp_write_target_put(t, "late", &late, 1, NULL, SP_PUT_GROUPED, &e) == SP_OK);
    sp_write_target_close(t, false);
    CHECK(!is_file(root, "late"));
    CHECK_EQ_INT(count_temporaries(root), 0);
    /* With keep it is brought into place. */
    t = NULL;
    CHECK(sp_write_target_open(root, &t, &e) == SP_OK);
    if (t != NULL) {
        CHECK(sp_write_target_put(t, "kept", &late, 1, NULL, SP_PUT_GROUPED, &e) == SP_OK);
        sp_write_target_close(t, true);
        CHECK(is_file(root, "kept"));
    }
    remove_tree(root);
    free(root);
}

typedef struct seen {
    char names[16][64];
    bool folder[16];
    int n, stop_after;
} seen;

static bool note(void *user, const char *relpath, bool is_folder) {
    seen *s = user;
    if (s->n < 16) {
        snprintf(s->names[s->n], sizeof s->names[s->n], "%s", relpath);
        s->folder[s->n] = is_folder;
    }
    s->n++;
    return s->stop_after == 0 || s->n < s->stop_after;
}

static int index_of(const seen *s, const char *name) {
    for (int i = 0; i < s->n && i < 16; i++) {
        if (strcmp(s->names[i], name) == 0) {
            return i;
        }
    }
    return -1;
}

static void test_list_and_sweep(void) {
    char *root = make_root();
    sp_write_target *t = NULL;
    sp_err e = {0};
    CHECK(root != NULL && sp_write_target_open(root, &t, &e) == SP_OK);
    if (t == NULL) {
        free(root);
        return;
    }
    sp_bytes one = {"1", 1};
    CHECK(sp_write_target_put(t, "d/e/f", &one, 1, NULL, SP_PUT_NOW, &e) == SP_OK);
    touch(root, "d/x.tmp-AbC123");   /* what a killed put leaves */
    touch(root, "d/e/y.tmp-zz9999"); /* deeper */
    touch(root, "d/keep.tmp-12");    /* not the temporary form: kept */
    seen s = {.n = 0};
    CHECK(sp_write_target_list(t, note, &s, &e) == SP_OK);
    CHECK_EQ_INT(s.n, 6);
    int d = index_of(&s, "d"), de = index_of(&s, "d/e"), def = index_of(&s, "d/e/f");
    CHECK(d >= 0 && de > d && def > de);
    CHECK(d >= 0 && s.folder[d] && de >= 0 && s.folder[de] && def >= 0 && !s.folder[def]);
    seen first = {.n = 0, .stop_after = 1};
    CHECK(sp_write_target_list(t, note, &first, &e) == SP_OK);
    CHECK_EQ_INT(first.n, 1);

    CHECK(sp_write_target_sweep_temporaries(t, &e) == SP_OK);
    CHECK(!is_file(root, "d/x.tmp-AbC123") && !is_file(root, "d/e/y.tmp-zz9999"));
    CHECK(is_file(root, "d/keep.tmp-12") && is_file(root, "d/e/f"));
    CHECK(e.status == SP_OK);
    sp_write_target_close(t, false);
    remove_tree(root);
    free(root);
}

static void test_errors(void) {
    char *root = make_root();
    CHECK(root != NULL);
    if (root == NULL) {
        return;
    }
    touch(root, "plain");
    char *plain = sp_strdup_printf("%s/plain", root);
    sp_write_target *t = NULL;
    sp_err e = {0};
    CHECK(sp_write_target_open(plain, &t, &e) == SP_E_INVALID_ARG && t == NULL);
    CHECK(strstr(e.msg, "is not a folder") != NULL);
    sp_err h = {0};
    CHECK(sp_write_target_open("https://example.org/out.zarr", &t, &h) == SP_E_INVALID_ARG);
    CHECK(strstr(h.msg, "read-only") != NULL);
    sp_err empty = {0};
    CHECK(sp_write_target_open("", &t, &empty) == SP_E_INVALID_ARG);

    /* A put whose folder would have to be made where a file is: an error naming the path, and
     * nothing left behind. */
    sp_err p = {0};
    CHECK(sp_write_target_open(root, &t, &p) == SP_OK);
    if (t != NULL) {
        sp_bytes one = {"1", 1};
        CHECK(sp_write_target_put(t, "plain/sub/f", &one, 1, NULL, SP_PUT_NOW, &p) == SP_E_IO);
        CHECK(strstr(p.msg, "plain") != NULL);
        CHECK_EQ_INT(count_temporaries(root), 0);
        sp_write_target_close(t, false);
    }
    remove_tree(root);
    free(plain);
    free(root);
}

void unit_run(void) {
    test_put_exists_read_remove();
    test_grouped_puts();
    test_list_and_sweep();
    test_errors();
}
