/* tile_cache.h — the process-wide cache of decoded tiles, shared by every open slide.
 *
 * Entries are whole decoded tiles (straight RGBA8, rows of width * 4 bytes) keyed by the
 * slide's per-open id, the level, the DCT scale and the tile's column and row; or, under keys
 * of scale 0, a format's stored blocks decoded into its own layout, which it paints from (a Zarr
 * chunk's planes: sp_slide_ops.block_of in formats/slide_struct.h, slide/region.c). The cache is
 * bounded in bytes (sp_cache_set_capacity, SLIDEPIPE_CACHE_MB, default 256 MiB), split into
 * shards with their own lock and LRU list so that threads reading different tiles rarely meet.
 * Entries are reference counted: a reader holds one while it copies pixels out, so an entry
 * evicted meanwhile is freed by its last reader. Closing a slide drops its entries.
 *
 * Admission (docs/reading.md): a tile that was decoded whole anyway is always admitted; a tile
 * that could be decoded in part is decoded in part the first time it is needed and whole (and
 * admitted) when it is needed again soon, which a small table of the last few hundred keys
 * asked about ("ghosts") tells: sliding windows come back within a few tiles, random reads
 * after thousands.
 */
#ifndef SP_SLIDE_TILE_CACHE_H
#define SP_SLIDE_TILE_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "slidepipe.h"

typedef struct sp_tile_key {
    uint64_t slide;  /* sp_tile_cache_new_slide_id() of the open slide */
    int32_t level;
    uint32_t scale; /* 1, 2, 4, 8; 0 for a format's own decoded block */
    int64_t col, row;
} sp_tile_key;

typedef struct sp_cached_tile sp_cached_tile;

/* The pixels of a held entry: width x height RGBA8, rows of width * 4 bytes. */
uint8_t *sp_cached_tile_pixels(sp_cached_tile *tile);

/* A new id for an open slide, never reused in the process. */
uint64_t sp_tile_cache_new_slide_id(void);

/* Whether the cache holds anything at all (capacity > 0). */
bool sp_tile_cache_enabled(void);

/* Whether a decoded tile of width x height would be kept: it must not be larger than one
 * shard's share of the capacity (sp_tile_cache_put). Readers that would need such a tile again
 * read it once, in bands of whole tile rows, instead (the tile engine). */
bool sp_tile_cache_admits(int64_t width, int64_t height);

/* The same for an entry of `bytes` bytes (sp_tile_cache_alloc_bytes). */
bool sp_tile_cache_admits_bytes(uint64_t bytes);

/* The entry for `key`, held (release it), or NULL on a miss. Counts a hit or a miss. */
sp_cached_tile *sp_tile_cache_get(const sp_tile_key *key);

/* Whether the cache holds `key` now; a look only: no count, no hold, no change of order. */
bool sp_tile_cache_holds(const sp_tile_key *key);

/* True when `key` was asked about recently (a ghost hit); records it otherwise. */
bool sp_tile_cache_seen(const sp_tile_key *key);

/* A new, unshared entry of width x height RGBA8 pixels (not initialised: the caller's decode
 * writes every pixel), held by the caller; NULL when out of memory or when the size overflows. */
sp_cached_tile *sp_tile_cache_alloc(int64_t width, int64_t height);

/* A new, unshared entry of `bytes` bytes of a format's own decoded data (a key of scale 0, see
 * above), otherwise as sp_tile_cache_alloc; sp_cached_tile_pixels gives its bytes. */
sp_cached_tile *sp_tile_cache_alloc_bytes(uint64_t bytes);

/* Offer a held entry (from sp_tile_cache_alloc, filled) for `key`. The caller keeps its hold
 * either way; the entry is admitted unless it is larger than one shard's share of the capacity
 * or another thread admitted the same key first (then this one stays private). */
void sp_tile_cache_put(sp_cached_tile *tile, const sp_tile_key *key);

/* Drop a hold; the entry is freed when nothing (reader or cache) holds it. NULL is accepted. */
void sp_tile_cache_release(sp_cached_tile *tile);

/* Remove every entry of a slide (called when it closes). */
void sp_tile_cache_drop_slide(uint64_t slide);

#endif
