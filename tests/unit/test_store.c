/* test_store.c — unit tests of src/io/store.c: which files of a local store are missing (read as
 * fill) and which are errors, and that a remote store that cannot be reached is an error, never a
 * missing file. The remote cases that a server answers (404, 403, connection reuse) are tested
 * against nginx and moto in tests/cli/test_remote.py.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/strings.h"
#include "io/store.h"
#include "unit.h"

static void open_expect(const char *path, sp_status want, bool want_missing, bool want_source) {
    sp_source *src = NULL;
    bool missing = !want_missing;
    sp_err err = {0};
    sp_status st = sp_store_open(path, 0, &src, &missing, &err);
    CHECK_EQ_INT(st, want);
    CHECK(missing == want_missing);
    CHECK((src != NULL) == want_source);
    if (st != SP_OK) {
        CHECK(err.msg[0] != '\0');
    }
    sp_source_close(src);
}

static void local_store(void) {
    char tmpl[] = "/tmp/sp-store-XXXXXX";
    char *root = mkdtemp(tmpl);
    CHECK(root != NULL);
    if (root == NULL) {
        return;
    }
    char *file = sp_path_join(root, "zarr.json");
    char *folder = sp_path_join(root, "0");
    char *absent = sp_path_join(root, "no-such-chunk");
    char *through_file = sp_path_join(file, "0"); /* ENOTDIR */
    FILE *f = fopen(file, "w");
    CHECK(f != NULL);
    if (f != NULL) {
        fputs("{}", f);
        fclose(f);
    }
    CHECK(mkdir(folder, 0755) == 0);

    open_expect(file, SP_OK, false, true);
    open_expect(absent, SP_OK, true, false);
    open_expect(through_file, SP_OK, true, false);
    open_expect(folder, SP_E_IO, false, false); /* exists, but is no file: an error */

    CHECK(sp_store_has_file(root, "zarr.json"));
    CHECK(!sp_store_has_file(root, "0"));
    CHECK(!sp_store_has_file(root, "no-such-chunk"));
    CHECK(!sp_store_is_remote(root));

    unlink(file);
    rmdir(folder);
    rmdir(root);
    free(file);
    free(folder);
    free(absent);
    free(through_file);
}

static void unreachable_remote_store(void) {
    /* Port 1 on loopback refuses at once: an error, not a missing file, and no file either. */
    const char *url = "http://127.0.0.1:1/store.zarr/0/0/0";
    CHECK(sp_store_is_remote(url));
    CHECK(sp_store_is_remote("s3://bucket/store.zarr"));
    setenv("SLIDEPIPE_HTTP_TIMEOUT", "2", 1);
    sp_source *src = NULL;
    bool missing = true;
    sp_err err = {0};
    sp_status st = sp_store_open(url, 0, &src, &missing, &err);
    CHECK_EQ_INT(st, SP_E_IO);
    CHECK(!missing && src == NULL);
    CHECK(strstr(err.msg, "127.0.0.1:1") != NULL);
    CHECK(!sp_store_has_file("http://127.0.0.1:1/store.zarr", "zarr.json"));
}

void unit_run(void) {
    local_store();
    unreachable_remote_store();
}
