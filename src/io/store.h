/* store.h — the files of a folder-shaped slide (a Zarr store), on disk or under a remote prefix.
 *
 * A store is a folder path, an http(s):// URL prefix or an object store prefix (s3://, gs://,
 * az://, abfs(s)://); its files are the store path joined with "/" and a relative name. Where a
 * format's files may be remote, it opens them here rather than with the file or HTTP sources
 * directly, so that "this file does not exist" means the same thing in both places: ENOENT on
 * disk, HTTP 404 remotely. Everything else (a 403, a refused connection, a short read) stays an
 * error, never a missing file.
 */
#ifndef SP_IO_STORE_H
#define SP_IO_STORE_H

#include <stdbool.h>
#include <stddef.h>

#include "io/source.h"

/* Open the file at `path`. A file that does not exist gives SP_OK with *missing set and *out
 * NULL. `expected_len` is how much of it the caller expects to read (a remote file's first
 * request fetches that much; 0 for a small default). */
sp_status sp_store_open(const char *path, size_t expected_len, sp_source **out, bool *missing,
                        sp_err *err);

/* True when `name` inside store `dir` is a file: a regular file on disk, an object that exists
 * remotely. False also when it cannot be told (a remote error). */
bool sp_store_has_file(const char *dir, const char *name);

/* True when `path` is a remote store (sp_path_is_remote). */
bool sp_store_is_remote(const char *path);

#endif
