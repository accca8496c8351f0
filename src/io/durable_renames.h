/* durable_renames.h — renames of written temporary files into place, each only after its bytes
 * are on stable storage, by a background flusher thread.
 *
 * A writer writes a file under a temporary name in its final folder and hands both names over.
 * The flusher makes the file system durable (syncfs) and then renames every file that was handed
 * over before that flush began, so a final name never shows bytes that a power cut could lose.
 * Writers go on encoding while the disk catches up; they wait only when very many files are
 * waiting. The first failure sticks: later hand-overs and the drain report it, and files not
 * renamed are removed.
 */
#ifndef SP_IO_DURABLE_RENAMES_H
#define SP_IO_DURABLE_RENAMES_H

#include <stdbool.h>

#include "base/err.h"

typedef struct sp_durable_renames sp_durable_renames;

/* For the files under `root` (the folder whose file system is flushed). */
sp_status sp_durable_renames_create(const char *root, sp_durable_renames **out, sp_err *err);

/* Hand over a written temporary file and its final path (both malloc'd; taken in every case). */
sp_status sp_durable_renames_add(sp_durable_renames *r, char *tmp, char *full, sp_err *err);

/* Flush and rename everything handed over so far, and wait for it; reports the first failure. */
sp_status sp_durable_renames_drain(sp_durable_renames *r, sp_err *err);

/* Stop the flusher. With keep, what was handed over is flushed and renamed first; without, the
 * files not yet renamed are removed. */
void sp_durable_renames_destroy(sp_durable_renames *r, bool keep);

/* Make everything written on the file system holding `root` durable (syncfs). */
sp_status sp_sync_fs(const char *root, sp_err *err);

#endif
