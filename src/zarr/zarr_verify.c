/* zarr_verify.c — the file half of sp_zarr_verify (jobs/verify/verify.c adds the pixel hash):
 * re-hash every file a converted Zarr folder's manifest lists, on disk or under an http(s):// or
 * s3:// prefix (io/store.h), so an uploaded store can be checked where it lies.
 *
 * The manifest is untrusted input: each line must be exactly 64 lowercase hex digits, two
 * spaces, and a relative path that stays inside the folder (no leading '/', no "." or ".."
 * component, no empty component, no control character), ending in '\n'. Anything else is
 * SP_E_CORRUPT before a single file is opened. Files are hashed in blocks through the source
 * layer, so memory does not grow with chunk or shard size. A folder without the completion
 * marker is an interrupted conversion; a marker that does not hold the manifest's hash means the
 * manifest itself was changed, which is reported as a problem on the manifest's own name.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/hash.h"
#include "base/strings.h"
#include "io/paths.h"
#include "io/source.h"
#include "io/source_hash.h"
#include "io/store.h"
#include "zarr/zarr_store.h"

/* A manifest lists every chunk; even a terapixel slide stays far below this. */
#define MAX_MANIFEST_BYTES ((uint64_t)1 << 30)

/* Read a whole small file into a malloc'd, NUL-terminated buffer; a file that does not exist sets
 * *missing. */
static sp_status read_all(const char *path, uint64_t max, char **out, size_t *out_len,
                          bool *missing, sp_err *err) {
    *out = NULL;
    *out_len = 0;
    sp_source *src = NULL;
    sp_status st = sp_store_open(path, 0, &src, missing, err);
    if (st != SP_OK || *missing) {
        return st;
    }
    return sp_source_read_whole(src, path, max, out, out_len, err);
}

/* Compare the file at `path` with its manifest hash: *problem becomes "missing", "changed" (also
 * for a local path that is no regular file) or stays NULL. A file that cannot be read is an
 * error. */
static sp_status check_file(const char *path, const char *want, const char **problem, sp_err *err) {
    *problem = NULL;
    sp_source *src = NULL;
    bool missing = false;
    sp_err local = {0};
    /* Most chunk files are under 1 MiB: a remote one is then fetched by one request. */
    sp_status st = sp_store_open(path, (size_t)1 << 20, &src, &missing, &local);
    if (st != SP_OK) {
        sp_path_info info = sp_path_look(path);
        if (!sp_store_is_remote(path) && info.exists && !info.is_file) {
            *problem = "changed";
            return SP_OK;
        }
        return sp_err_set(err, st, "cannot open %s: %s", path, local.msg);
    }
    if (missing) {
        *problem = "missing";
        return SP_OK;
    }
    char got[65];
    st = sp_sha256_source(src, got, err);
    sp_source_close(src);
    if (st == SP_OK && memcmp(got, want, 64) != 0) {
        *problem = "changed";
    }
    return st;
}

static bool path_safe(const char *p, size_t n) {
    if (n == 0 || p[0] == '/') {
        return false;
    }
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i == n || p[i] == '/') {
            size_t len = i - start;
            if (len == 0 || (len == 1 && p[start] == '.') ||
                (len == 2 && p[start] == '.' && p[start + 1] == '.')) {
                return false;
            }
            start = i + 1;
        } else if ((unsigned char)p[i] < 0x20 || p[i] == 0x7f) {
            return false;
        }
    }
    return true;
}

static bool is_hex64(const char *p) {
    for (int i = 0; i < 64; i++) {
        char c = p[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
            return false;
        }
    }
    return true;
}

/* Check every line before touching any file, so a hostile manifest is refused as a whole. */
static sp_status check_manifest(const char *text, size_t len, sp_err *err) {
    size_t lineno = 1;
    for (size_t pos = 0; pos < len; lineno++) {
        const char *line = text + pos;
        const char *nl = memchr(line, '\n', len - pos);
        if (nl == NULL) {
            return sp_err_set(err, SP_E_CORRUPT, "manifest line %zu: no end of line", lineno);
        }
        size_t n = (size_t)(nl - line);
        if (n < 67 || !is_hex64(line) || line[64] != ' ' || line[65] != ' ') {
            return sp_err_set(err, SP_E_CORRUPT, "manifest line %zu: malformed", lineno);
        }
        if (!path_safe(line + 66, n - 66)) {
            return sp_err_set(err, SP_E_CORRUPT, "manifest line %zu: unsafe path", lineno);
        }
        pos += n + 1;
    }
    return SP_OK;
}

sp_status sp_zarr_verify_files(const char *zarr_path,
                               void (*report)(void *user, const char *path, const char *problem),
                               void *report_user, int64_t *problems, char *dataset_hash,
                               sp_err *err) {
    sp_err e = {0};
    if (problems != NULL) {
        *problems = 0;
    }
    if (dataset_hash != NULL) {
        dataset_hash[0] = '\0';
    }
    if (zarr_path == NULL || problems == NULL) {
        return sp_err_set(err, SP_E_INVALID_ARG, "sp_zarr_verify: null argument");
    }
    char *manifest_path = NULL, *marker_path = NULL, *text = NULL, *marker = NULL, *file = NULL;
    size_t len = 0, marker_len = 0;
    int64_t count = 0;
    char hash[65];
    sp_status st = SP_OK;
    /* sp_path_join adds no second '/' after a trailing one: on S3 "a//b" is another key. */
    manifest_path = sp_path_join(zarr_path, SP_ZARR_MANIFEST);
    marker_path = sp_path_join(zarr_path, SP_ZARR_COMPLETE);
    if (manifest_path == NULL || marker_path == NULL) {
        st = sp_err_set(&e, SP_E_NOMEM, "out of memory");
        goto done;
    }
    bool no_manifest = false, no_marker = false;
    st = read_all(manifest_path, MAX_MANIFEST_BYTES, &text, &len, &no_manifest, &e);
    if (st == SP_OK && !no_manifest) {
        st = read_all(marker_path, 4096, &marker, &marker_len, &no_marker, &e);
    }
    if (st == SP_OK && (no_manifest || no_marker)) {
        st = sp_err_set(&e, SP_E_CORRUPT, "%s: incomplete conversion (no manifest)", zarr_path);
    }
    if (st == SP_OK && strlen(text) != len) {
        st = sp_err_set(&e, SP_E_CORRUPT, "manifest: NUL byte");
    }
    if (st == SP_OK) {
        st = check_manifest(text, len, &e);
    }
    if (st != SP_OK) {
        goto done;
    }
    sp_sha256_hex(text, len, hash);
    if (marker_len != 65 || memcmp(marker, hash, 64) != 0 || marker[64] != '\n') {
        count++;
        if (report != NULL) {
            report(report_user, SP_ZARR_MANIFEST, "changed");
        }
    }
    for (char *line = text; *line != '\0';) {
        char *nl = strchr(line, '\n');
        *nl = '\0';
        const char *rel = line + 66;
        free(file);
        if ((file = sp_path_join(zarr_path, rel)) == NULL) {
            st = sp_err_set(&e, SP_E_NOMEM, "out of memory");
            goto done;
        }
        const char *problem = NULL;
        st = check_file(file, line, &problem, &e);
        if (st != SP_OK) {
            goto done;
        }
        if (problem != NULL) {
            count++;
            if (report != NULL) {
                report(report_user, rel, problem);
            }
        }
        line = nl + 1;
    }
    *problems = count;
    if (dataset_hash != NULL) {
        memcpy(dataset_hash, hash, 65);
    }
done:
    free(file);
    free(text);
    free(marker);
    free(manifest_path);
    free(marker_path);
    if (st != SP_OK) {
        sp_err_set(err, st, "%s", e.msg);
    }
    return st;
}
