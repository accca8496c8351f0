/* tiff_raw_tiles.h — a TIFF level's tiles as stored, for backends that decode them themselves
 * (the GPU's nvJPEG and its direct copy or cuFile read of uncompressed tiles): the raw-tile
 * operations of the TIFF slide ops (formats/slide_struct.h), reached through slide/raw_tiles.c. The
 * CPU decoders do not use them; they load JPEGTables into libjpeg themselves. */
#ifndef SP_FORMATS_TIFF_RAW_TILES_H
#define SP_FORMATS_TIFF_RAW_TILES_H

#include "formats/slide_struct.h"

/* SP_RAW_JPEG for a tiled, 8-bit, 3-sample, interleaved JPEG level (Compression 7) whose
 * Photometric names the components (RGB or YCbCr); SP_RAW_JPEG2000 for such a level of JPEG 2000
 * tiles (Aperio's 33003, YCbCr, and 33005, RGB; 34712 with Photometric RGB or YCbCr);
 * SP_RAW_RGB8 for tiled, uncompressed, 8-bit chunky RGB without predictor or extra samples;
 * false otherwise. */
bool sp_tiff_raw_level(sp_slide *slide, const sp_level *level, sp_raw_level *out);

/* The complete JPEG stream of tile (col, row): the tile's bytes, with the level's JPEGTables
 * (an abbreviated tables-only stream) inserted after the tile's start-of-image marker when the
 * level has them. SP_E_CORRUPT when the tile or the tables are not JPEG streams. A JPEG 2000
 * tile's bytes as stored (not checked: the decoder parses them). */
sp_status sp_tiff_read_raw_tile(sp_slide *slide, const sp_level *level, int64_t col, int64_t row,
                                uint8_t **stream, size_t *len, sp_err *err);

/* Stored rows [y0, y1) of uncompressed tile (col, row), one read; or, for sp_tiff_raw_rows_at,
 * where they start in the local file (SP_E_UNSUPPORTED for a remote or in-memory slide, and
 * SP_E_CORRUPT when they would run past the file's end). */
sp_status sp_tiff_read_raw_rows(sp_slide *slide, const sp_level *level, int64_t col, int64_t row,
                                int64_t y0, int64_t y1, uint8_t *dst, sp_err *err);
sp_status sp_tiff_raw_rows_at(sp_slide *slide, const sp_level *level, int64_t col, int64_t row,
                              int64_t y0, int64_t y1, int *fd, uint64_t *offset, sp_err *err);

#endif
