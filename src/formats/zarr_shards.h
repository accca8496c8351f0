/* zarr_shards.h — open shards of sharded Zarr v3 arrays, shared by every thread and every open
 * slide of the process: each shard's byte source and its checked index, kept so that reading a
 * tile costs one read of its inner chunk rather than an open, an index read and the chunk read
 * (three requests for a remote store).
 *
 * The table is process-wide and bounded (ZARR_OPEN_SHARDS), so a training job with thousands of
 * sharded slides open holds a bounded number of files or connections; the least recently used
 * shard that no thread is reading is closed to make room, and closing a slide closes its shards.
 * Entries are keyed by the slide's open (its owner id) and the shard's path. A shard that does
 * not exist is never kept, so one written later is seen. A kept remote source goes on sending
 * If-Match with the shard's ETag, so a shard replaced while the slide is open is an error, never
 * a mix of the old index and the new bytes.
 */
#ifndef SP_FORMATS_ZARR_SHARDS_H
#define SP_FORMATS_ZARR_SHARDS_H

#include <stdint.h>

#include "io/source.h"

#define ZARR_OPEN_SHARDS 128

typedef struct zarr_shard zarr_shard;

/* Shard `path` of slide `owner`, borrowed until zarr_shards_release, or NULL when not open. */
zarr_shard *zarr_shards_get(uint64_t owner, const char *path);

/* Hand over a shard just opened (path, source and index are taken over, also on failure) and
 * borrow it: the table's own entry when another thread put one meanwhile (what was handed over is
 * then closed), a new entry, or one kept apart when every entry is in use. NULL only when out of
 * memory. */
zarr_shard *zarr_shards_put(uint64_t owner, char *path, sp_source *src, uint8_t *index);

void zarr_shards_release(zarr_shard *s);

/* Close the shards of slide `owner` (being closed: none is in use). */
void zarr_shards_drop(uint64_t owner);

sp_source *zarr_shard_source(const zarr_shard *s);
const uint8_t *zarr_shard_index(const zarr_shard *s);

#endif
