/* direct_writes.h — writes of large encoded chunks into their temporary files by background
 * threads, with O_DIRECT where the file system takes it, each file then handed to the durable
 * renames.
 *
 * A buffered write copies every byte into the page cache: for the 16384² Sobel benchmark (1.6 GB
 * of compressed float32) that copy was 1.3 of 8.5 CPU-seconds. O_DIRECT hands the caller's pages
 * to the disk instead, but each write then waits for the device, so the writes run on threads of
 * their own while the encoding threads go on. The bytes are copied into buffers that the writers
 * keep and reuse (a copy in user space costs a tenth of the kernel's). A file system that refuses
 * O_DIRECT (tmpfs, some network file systems) gets an ordinary write of the same bytes. Bytes
 * queued are bounded; the first failure sticks and is reported by later hand-overs and by the
 * drain.
 */
#ifndef SP_ZARR_DIRECT_WRITES_H
#define SP_ZARR_DIRECT_WRITES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "zarr/durable_renames.h"

/* Encoded chunks this large or larger are worth a background O_DIRECT write; smaller ones cost
 * little to copy and are written at once by the encoding thread. */
#define SP_DIRECT_MIN_BYTES ((size_t)1 << 20)

typedef struct sp_direct_writes sp_direct_writes;

/* Writer threads whose written files go to `renames` (which must outlive them). */
sp_status sp_direct_writes_create(sp_durable_renames *renames, sp_direct_writes **out, sp_err *err);

/* Queue a copy of the `len` bytes at `data` for the open temporary file `fd` named `tmp`, whose
 * final path is `full`. The file and both names are taken in every case: on failure the file is
 * removed. Waits while too much is queued. Reports an earlier write's failure. */
sp_status sp_direct_writes_add(sp_direct_writes *w, int fd, char *tmp, char *full, const void *data,
                               size_t len, sp_err *err);

/* Wait until every file handed over is written and passed to the renames; reports the first
 * failure. */
sp_status sp_direct_writes_drain(sp_direct_writes *w, sp_err *err);

/* Stop the threads. Without keep, queued files are removed unwritten. NULL is accepted. */
void sp_direct_writes_destroy(sp_direct_writes *w, bool keep);

#endif
