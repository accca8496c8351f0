/* slide.h — the slide layer's own calls for the layers above it (engine, cuda, jobs) and for
 * tests: opening over a byte source, the region painter at a level and DCT scale, prefetch
 * advice, the sticky error, and two readings of a slide's metadata. The handle's fields are
 * formats/slide_struct.h; the public calls are in slidepipe.h. */
#ifndef SP_SLIDE_SLIDE_H
#define SP_SLIDE_SLIDE_H

#include "formats/slide_struct.h"
#include "slide/tile_cache.h"

/* Open a slide over an already opened byte source (taken over, closed on failure too), or over
 * the directory `name` when src is NULL; `name` labels messages. sp_slide_open_with is this over
 * a file or directory; tests and fuzz targets use memory. */
sp_status sp_slide_open_source(sp_source *src, const char *name, const sp_limits *limits,
                               sp_slide **out, sp_err *err);

/* sp_slide_open_source showing plane (z, c, t) = plane[0..2] (sp_options_set_plane). */
sp_status sp_slide_open_source_at(sp_source *src, const char *name, const sp_limits *limits,
                                  const int64_t plane[3], sp_slide **out, sp_err *err);

/* The region painter behind every region read (region.c): w x h pixels of `level` seen at
 * 1/scale (scale 1, or one the level's area_scales allows with tiles divisible by it), from
 * (lx, ly) in those pixels, into dst. Same contract as sp_slide_read_region. A reader that will
 * ask again for the pixels within `shared` (> 0) of the request's edges (the tile engine: its
 * neighbouring blocks overlap through their halos) has the tiles there decoded whole and offered
 * to the cache at once, instead of in part, so that each is decoded once; 0 for other reads. */
sp_status sp_slide_read_level_area(sp_slide *slide, sp_pixel_format format, void *dst,
                                   int64_t stride, int32_t level, unsigned scale, int64_t lx,
                                   int64_t ly, int64_t w, int64_t h, int64_t shared);

/* A level's tiles as stored, for a backend that decodes them itself (raw_tiles.c, over the
 * format's raw-tile operations in formats/slide_struct.h): whether and how `level`'s tiles are
 * stored raw (false for no level, a format without the operations, or tiles of no raw kind);
 * tile (col, row) of an SP_RAW_JPEG level as one complete stream (malloc'd, *stream NULL for a
 * missing tile); rows [y0, y1) of tile (col, row) of an SP_RAW_RGB8 level as stored, into dst.
 * sp_slide_raw_rows_at gives where those rows lie in the local file they are read from (its
 * open descriptor, the slide's, and the first byte; SP_E_UNSUPPORTED for a remote or in-memory
 * slide or a format that cannot say). A call that does not fit the level's kind or grid is
 * SP_E_INVALID_ARG. Thread-safe. */
bool sp_slide_raw_level(sp_slide *slide, int32_t level, sp_raw_level *out);
sp_status sp_slide_read_raw_tile(sp_slide *slide, int32_t level, int64_t col, int64_t row,
                                 uint8_t **stream, size_t *len, sp_err *err);
sp_status sp_slide_read_raw_rows(sp_slide *slide, int32_t level, int64_t col, int64_t row,
                                 int64_t y0, int64_t y1, uint8_t *dst, sp_err *err);
sp_status sp_slide_raw_rows_at(sp_slide *slide, int32_t level, int64_t col, int64_t row, int64_t y0,
                               int64_t y1, int *fd, uint64_t *offset, sp_err *err);

/* Where a streaming read hands its output rows: row j (w pixels of the read's format, valid
 * only during the call), in order from j = 0. */
typedef void (*sp_row_sink)(void *user, int64_t j, const uint8_t *row);

/* sp_slide_read_region_scaled handing each output row to sink instead of writing a buffer, so a
 * caller can convert rows as they come (sp_slide_read_image). On error some rows may have been
 * handed over already; the caller clears what it wrote. */
sp_status sp_slide_read_scaled_rows(sp_slide *slide, sp_pixel_format format, double downsample,
                                    int64_t x, int64_t y, int64_t w, int64_t h, sp_row_sink sink,
                                    void *user);

/* Announce the tiles of several regions of slide `s` at one level (reqs[0]'s; others are
 * skipped) that will be read soon, up to SP_PREFETCH_TILES, so that a remote slide sends for
 * them at once (batched reads, batch.c); returns without waiting for them. Advice only; nothing
 * when the slide's data is local (or s is NULL). */
void sp_slide_prefetch_regions(sp_slide *s, const sp_region_request *reqs, size_t n);

/* Where the format decodes tile (col, row) of `level` seen at 1/scale as part of a block of its
 * own (sp_slide_ops.block_of) that it can paint `fmt` from: the block's cache key (scale 0) and
 * decoded size; false where it does not (region.c). */
bool sp_slide_block_key(const sp_slide *s, int32_t level, unsigned scale, int64_t col, int64_t row,
                        sp_pixel_format fmt, sp_tile_key *key, uint64_t *bytes);

/* The level coordinates (*lx, *ly) of level-0 point (x, y) on level l, as region reads take
 * them (floor of x / downsample); false for a far-off point, whose coordinates would not fit
 * (*lx and *ly are then 0). */
bool sp_level_origin(const sp_level *l, int64_t x, int64_t y, int64_t *lx, int64_t *ly);

/* The Z-order (Morton) index of place (x, y): their bits interleaved, x's in the even places;
 * batches read in this order so that neighbours come together (batch.c). */
uint64_t sp_z_order(uint32_t x, uint32_t y);

/* Read, block by block, the regions of reqs[0..n) that lie inside one level of a slide whose
 * format decodes blocks of its own (batch_blocks.c): done[i] is set for each region read so,
 * with statuses[i] its status; the others are left to the caller. `threads` as
 * sp_read_regions's (at most that many). Returns how many were read. */
size_t sp_read_regions_by_block(const sp_region_request *reqs, size_t n, size_t threads,
                                sp_status *statuses, bool *done);

/* Record a data error on the slide if none is recorded yet (thread-safe). */
void sp_slide_record_error(sp_slide *slide, const sp_err *err);

/* A positive, finite microns-per-pixel property of the slide (e.g. SP_PROPERTY_MPP_X), or 0. */
double sp_slide_mpp_property(const sp_slide *slide, const char *key);

/* The slide's file name without folders, or NULL when the slide has no file. */
const char *sp_slide_file_name(const sp_slide *slide);

/* The path or URL the slide was opened from, or NULL when the slide has no file. */
const char *sp_slide_source_path(const sp_slide *slide);

#endif
