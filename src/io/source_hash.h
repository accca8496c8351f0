/* source_hash.h — the SHA-256 of everything a byte source holds, read in blocks: how a Zarr store
 * hashes a chunk it finds already written (resume) and how verify re-hashes a store's files. */
#ifndef SP_IO_SOURCE_HASH_H
#define SP_IO_SOURCE_HASH_H

#include "base/err.h"
#include "io/source.h"

/* Hex SHA-256 of a source's bytes, read in blocks of 1 MiB (out: 65 bytes, "" on failure). */
sp_status sp_sha256_source(sp_source *src, char *out, sp_err *err);

#endif
