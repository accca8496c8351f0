/* paths.h — where a path points: the one place that tells an http(s):// URL or an object store's
 * URI (s3://, gs://, az://, abfs(s)://) from a local path and opens either as a byte source, and
 * that answers questions about local paths (what a path is, a folder's entries), so that no
 * other layer makes file-system calls. */
#ifndef SP_IO_PATHS_H
#define SP_IO_PATHS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "io/source.h"

/* True when `path` names a remote object (http://, https://, s3://, gs://, az://, abfs:// or
 * abfss://). */
bool sp_path_is_remote(const char *path);

/* True when `path` is an object store's URI (s3://, gs://, az://, abfs://, abfss://): keys, not a
 * web server's folders, so a trailing '/' says nothing about what it names. */
bool sp_path_is_object_store(const char *path);

/* True when `path` is an Azure Blob Storage URL (az://, abfs://, abfss://). */
bool sp_path_is_azure(const char *path);

/* An http(s):// URL or object store URI to its source; `head_len` as for sp_source_open_http. */
sp_status sp_source_open_remote(const char *path, size_t head_len, sp_source **out, sp_err *err);

/* A local path, http(s):// URL or object store URI, each to its source. */
sp_status sp_source_open_any(const char *path, sp_source **out, sp_err *err);

/* What a local path is (symbolic links followed). `exists` is false when it cannot be looked at
 * (missing, no permission); `id` tells two paths of one file apart from two files. */
typedef struct sp_path_info {
    bool exists, is_file, is_directory;
    uint64_t size;
    uint64_t id[2];   /* device and inode */
    int64_t mtime_ns; /* last modification, nanoseconds since the epoch */
} sp_path_info;

sp_path_info sp_path_look(const char *path);

/* The entries of local folder `dir` but "." and "..", sorted by name (bytes), at most `max`:
 * more is SP_E_LIMIT, a folder that cannot be listed SP_E_IO, both naming `dir`. *names (free
 * it with sp_path_names_free) is NULL when *count is 0. */
sp_status sp_path_list(const char *dir, size_t max, char ***names, size_t *count, sp_err *err);
void sp_path_names_free(char **names, size_t count);

/* The absolute, canonical form of local `path` (symbolic links resolved; malloc'd), or NULL
 * when it does not exist or memory runs out. */
char *sp_path_absolute(const char *path);

/* Create folder `dir` and the folders above it that are missing (mode 0777 less the umask). */
sp_status sp_path_make_dirs(const char *dir, sp_err *err);

/* The whole of small local file `path` (at most `max` bytes, else SP_E_LIMIT), NUL-terminated
 * (malloc'd, *len without the NUL). SP_E_NOT_FOUND when it does not exist, SP_E_IO otherwise. */
sp_status sp_path_read_small(const char *path, size_t max, char **out, size_t *len, sp_err *err);

#endif
