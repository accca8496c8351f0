/* file_target.h — a new local file, written whole and then put in place atomically: the bytes
 * go to a temporary file beside the destination, which is synced and renamed over it only when
 * complete, so a reader sees the old file or the whole new one, never a part. The temporary file
 * gets the mode a plain create would give (0666 less the umask). */
#ifndef SP_IO_FILE_TARGET_H
#define SP_IO_FILE_TARGET_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

typedef struct sp_file_target sp_file_target;

/* Start writing `path` (its folder must exist). */
sp_status sp_file_target_open(const char *path, sp_file_target **out, sp_err *err);

/* Append `len` bytes. */
sp_status sp_file_target_append(sp_file_target *t, const void *data, size_t len, sp_err *err);

/* Overwrite `len` bytes at `offset`, within what was appended. */
sp_status sp_file_target_write_at(sp_file_target *t, uint64_t offset, const void *data, size_t len,
                                  sp_err *err);

/* Sync the file, close it and rename it into place, then sync the folder's entry (best effort:
 * its failure loses nothing written). On failure the temporary file is removed. Frees t. */
sp_status sp_file_target_commit(sp_file_target *t, sp_err *err);

/* Remove the temporary file and free; NULL is accepted. */
void sp_file_target_abort(sp_file_target *t);

/* The mode a plain create gives (0666 less the umask), read from Linux's status file: umask()
 * cannot be read without changing it, which races with other threads. */
unsigned sp_file_default_mode(void);

#endif
