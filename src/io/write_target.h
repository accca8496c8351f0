/* write_target.h — where a writer of many files (a Zarr store) puts them: a local folder or an
 * object-store prefix (s3://, gs://), behind one interface, so that the writer holds no
 * file-system or HTTP code and injected I/O faults reach it like every reader.
 *
 * A target is opened on a root (a folder path, s3://bucket/prefix or gs://bucket/prefix; the URL
 * dispatch is in write_target.c) and names its files by paths relative to that root ("0/c/1/2").
 * Every put is atomic: the file appears under its name whole, or not at all, never torn. On disk
 * a file goes to a temporary name beside its final one ("NAME.tmp-XXXXXX") and is renamed into
 * place; on S3 and GCS a PUT stores an object whole or not at all. How durable a put is when it
 * returns is the caller's choice (see sp_put_mode); sync is the group commit that makes
 * everything put so far durable and in place.
 *
 * Thread-safety: put, exists, open_file and remove may be called from many threads at once on
 * one target; open, sync, sweep_temporaries, list and close from one thread at a time.
 */
#ifndef SP_IO_WRITE_TARGET_H
#define SP_IO_WRITE_TARGET_H

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"
#include "base/hash.h"
#include "io/source.h"

typedef struct sp_write_target sp_write_target;

typedef enum sp_put_mode {
    /* In place, durably, by the next sp_write_target_sync (sooner when enough files wait to
     * fill a flush): a group shares one file-system flush. Until it is in place a crash loses
     * it, never tears it. For the many chunks. */
    SP_PUT_GROUPED = 0,
    /* In place when put returns, its bytes on stable storage; its name becomes durable with the
     * next sync. */
    SP_PUT_NOW = 1,
    /* As SP_PUT_NOW, and the folder entry is flushed too, so the name survives a power cut: for
     * the files whose presence means something (a manifest, a completion marker). When only that
     * last flush fails the file may be in place: the caller decides whether to remove it. */
    SP_PUT_DURABLE = 2,
} sp_put_mode;

/* Open the target at `root` for writing: a folder (created, parents included, when absent; an
 * existing path that is not a folder is SP_E_INVALID_ARG), an s3:// or gs:// prefix (checked
 * against the AWS or Google environment, nothing requested) or an az:// or abfs(s):// prefix
 * (checked against the Azure environment: credentials are needed). Other URLs are read-only:
 * SP_E_INVALID_ARG. Trailing '/' are dropped from `root`. */
sp_status sp_write_target_open(const char *root, sp_write_target **out, sp_err *err);

/* The root as opened (without trailing '/'); for messages and for reading files back. */
const char *sp_write_target_root(const sp_write_target *t);

/* Put the concatenation of `parts` as file `relpath` (its folders are created as needed), with
 * `sha256` its hex SHA-256 when the caller has it (S3, and GCS with HMAC keys, sign it and check
 * the body against it; NULL: computed when needed). On failure nothing is left under a temporary
 * name and the final name keeps its previous content, if any (but see SP_PUT_DURABLE). */
sp_status sp_write_target_put(sp_write_target *t, const char *relpath, const sp_bytes *parts,
                              size_t nparts, const char *sha256, sp_put_mode mode, sp_err *err);

/* Set *exists to whether `relpath` is a file (a regular file, an object); a remote error is an
 * error, not a missing file. */
sp_status sp_write_target_exists(sp_write_target *t, const char *relpath, bool *exists,
                                 sp_err *err);

/* Open file `relpath` for reading back (e.g. to hash a chunk a killed run left). A file that is
 * not there gives SP_OK with *missing set and *out NULL. */
sp_status sp_write_target_open_file(sp_write_target *t, const char *relpath, sp_source **out,
                                    bool *missing, sp_err *err);

/* Remove file `relpath`; one that is not there is not an error. */
sp_status sp_write_target_remove(sp_write_target *t, const char *relpath, sp_err *err);

/* Call `fn` for each entry under the root (files and folders, a folder before what it holds),
 * with its path relative to the root, until fn returns false. SP_E_UNSUPPORTED for a target that
 * cannot list (S3 and GCS here: object listing is not implemented). */
sp_status sp_write_target_list(sp_write_target *t,
                               bool (*fn)(void *user, const char *relpath, bool is_folder),
                               void *user, sp_err *err);

/* Remove the temporary files a killed writer left under the root (on S3 and GCS, which have
 * none, there is nothing to do). */
sp_status sp_write_target_sweep_temporaries(sp_write_target *t, sp_err *err);

/* The group commit: wait until every grouped put so far is in place, then make everything put so
 * far durable (one file-system flush). The first failure of a grouped put sticks and is reported
 * here (and by later puts); grouped files not yet in place are then removed. */
sp_status sp_write_target_sync(sp_write_target *t, sp_err *err);

/* Close the target; NULL is accepted. With keep, grouped puts are first brought into place (best
 * effort, as after an error: what was written stays for a resume); without, those not yet in
 * place are removed. */
void sp_write_target_close(sp_write_target *t, bool keep);

#endif
