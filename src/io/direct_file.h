/* direct_file.h — a local file opened again for a reader that does its own I/O around the page
 * cache (the GPU's cuFile, src/cuda/cuda_cufile.c): through /proc/self/fd, so it is the very file
 * a source has open even if its path now names another, with O_DIRECT where the filesystem
 * allows it. */
#ifndef SP_IO_DIRECT_FILE_H
#define SP_IO_DIRECT_FILE_H

#include <stdbool.h>
#include <stdint.h>

/* Which file a descriptor has open: its device and inode. */
typedef struct sp_file_id {
    uint64_t device, inode;
} sp_file_id;

/* The identity of the file open on `fd`; false when it cannot be had. */
bool sp_file_identity(int fd, sp_file_id *id);

/* A new read-only descriptor of the file open on `fd` (O_DIRECT unless the filesystem refuses
 * it; close-on-exec), or -1. */
int sp_direct_file_open(int fd);

/* Close a descriptor sp_direct_file_open gave; -1 is accepted. */
void sp_direct_file_close(int fd);

#endif
