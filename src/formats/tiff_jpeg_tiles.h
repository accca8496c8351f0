/* tiff_jpeg_tiles.h — a TIFF level's JPEG tiles as complete, self-contained JPEG streams, for
 * decoders that take whole streams and know nothing of TIFF (nvJPEG on the GPU): which levels
 * qualify, and each tile's bytes with the level's JPEGTables spliced in. The CPU decoders do not
 * use this; they load the tables into libjpeg themselves. */
#ifndef SP_FORMATS_TIFF_JPEG_TILES_H
#define SP_FORMATS_TIFF_JPEG_TILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "formats/slide_struct.h"
#include "tiff/tiff.h"

typedef struct sp_tiff_jpeg_level {
    const sp_tiff *tiff;
    const sp_tiff_dir *dir;
    bool ycbcr; /* the components are Y, Cb, Cr (Photometric YCbCr), else R, G, B (Photometric
                 * RGB: no colour conversion, as the CPU decoder does, after OpenSlide) */
} sp_tiff_jpeg_level;

/* Whether `level` of `slide` is a TIFF directory of tiled, 8-bit, 3-sample, interleaved JPEG
 * (Compression 7) whose Photometric names the components (RGB or YCbCr): the levels whose tiles
 * sp_tiff_jpeg_tile_stream can give. Fills *out when so. */
bool sp_tiff_jpeg_level_of(const sp_slide *slide, int32_t level, sp_tiff_jpeg_level *out);

/* The complete JPEG stream of tile (col, row): the tile's bytes, with the level's JPEGTables
 * (an abbreviated tables-only stream) inserted after the tile's start-of-image marker when the
 * level has them. *stream (to free) is NULL and *len 0 for a missing tile. SP_E_INVALID_ARG for a
 * tile outside the grid; SP_E_CORRUPT when the tile or the tables are not JPEG streams (no SOI;
 * tables without their EOI). */
sp_status sp_tiff_jpeg_tile_stream(const sp_tiff_jpeg_level *level, int64_t col, int64_t row,
                                   uint8_t **stream, size_t *len, sp_err *err);

#endif
