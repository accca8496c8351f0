/* zarr_shard_writer.h — the write side of Zarr v3 sharding: collecting the encoded inner chunks
 * of each shard as they arrive from any thread, and laying out a complete shard (its chunks, then
 * the index and its CRC-32C) for the store to write. The read side is formats/zarr_shards.c.
 *
 * One sp_zarr_shards per sharded array holds the shards in flight (a hash table keyed by the
 * shard's linear index) and a bitmap of the shards done (written, or found written when
 * resuming); it has its own lock, so the store's lock guards only the store's tables. Memory
 * holds only the shards in flight, never the array.
 */
#ifndef SP_ZARR_ZARR_SHARD_WRITER_H
#define SP_ZARR_ZARR_SHARD_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "base/hash.h"

typedef struct sp_zarr_shards sp_zarr_shards;

/* One shard being collected; handed to the caller by sp_zarr_shards_add when complete. */
typedef struct sp_zarr_shard sp_zarr_shard;

/* Where an inner chunk goes. */
typedef struct sp_zarr_shard_place {
    int64_t coord[3]; /* the shard's coordinates in the shard grid */
    int64_t key;      /* its linear index */
    int64_t slot;     /* the inner chunk's slot in it, C order over the shard's inner grid */
    int64_t expected; /* inner chunks of this shard that lie in the array */
} sp_zarr_shard_place;

/* For an array of ndim dimensions with nchunks inner chunks and per_shard inner chunks per shard
 * side (both checked by the caller: positive, shard and grid counts within limits). */
sp_status sp_zarr_shards_create(int ndim, const int64_t nchunks[3], const int64_t per_shard[3],
                                sp_zarr_shards **out, sp_err *err);

/* Free, with every shard still in flight; NULL is accepted. */
void sp_zarr_shards_free(sp_zarr_shards *s);

/* Inner chunks per shard. */
int64_t sp_zarr_shards_inner(const sp_zarr_shards *s);

/* Shards collecting now (0 once every shard was completed). */
size_t sp_zarr_shards_in_flight(sp_zarr_shards *s);

/* The shard and slot of inner chunk `index`. */
void sp_zarr_shards_place(const sp_zarr_shards *s, const int64_t index[3], sp_zarr_shard_place *p);

/* Whether shard `key` is done, and whether it is collecting. */
void sp_zarr_shards_state(sp_zarr_shards *s, int64_t key, bool *done, bool *collecting);

/* Mark shard `key` done (found written) unless it is done or collecting already; true when this
 * call marked it, so that only one thread adopts the shard it found. */
bool sp_zarr_shards_claim(sp_zarr_shards *s, int64_t key);

/* Add the encoded inner chunk `enc` (malloc'd, taken in every case) at p's slot. When it was the
 * shard's last, the shard leaves the table, is marked done and is returned in *complete (NULL
 * otherwise) for the caller to lay out, write and free. */
sp_status sp_zarr_shards_add(sp_zarr_shards *s, const sp_zarr_shard_place *p, uint8_t *enc,
                             size_t enc_len, sp_zarr_shard **complete, sp_err *err);

/* The bytes of a complete shard as pieces: the inner chunks present, in slot order, then the
 * index of (offset, nbytes) little-endian uint64 pairs, all-ones for an absent slot, then the
 * index's CRC-32C (index_location "end", index_codecs bytes + crc32c). The pieces point into the
 * shard and into *index (malloc'd, the caller frees it and *parts). */
sp_status sp_zarr_shard_layout(const sp_zarr_shards *s, const sp_zarr_shard *sh, sp_bytes **parts,
                               size_t *nparts, uint8_t **index, sp_err *err);

/* Free a shard sp_zarr_shards_add returned; NULL is accepted. */
void sp_zarr_shard_free(const sp_zarr_shards *s, sp_zarr_shard *sh);

#endif
