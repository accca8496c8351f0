/* jpeg_restart.h — a JPEG stream cut at its restart markers into tiles, each decoded as its own
 * small JPEG (Hamamatsu NDPI levels and VMS images: hamamatsu_ndpi.c, hamamatsu_vms.c).
 *
 * A stream with a restart interval of N MCUs holds, after its header, intervals of N MCUs each
 * ended by a restart marker (FF D0 .. FF D7). When N MCUs divide a row of MCUs, each interval is
 * a tile N MCUs wide and one MCU tall; its JPEG is the stream's header with the frame size set
 * to the tile's, then the interval's entropy-coded bytes, then an end-of-image marker (what
 * OpenSlide decodes too). This file reads the header, finds where the intervals start and
 * builds one tile's JPEG; the formats say which stream, where its bytes lie and how tiles are
 * placed.
 */
#ifndef SP_FORMATS_JPEG_RESTART_H
#define SP_FORMATS_JPEG_RESTART_H

#include <stddef.h>
#include <stdint.h>

#include "base/limits.h"
#include "io/source.h"

/* The most header bytes (SOI to the end of SOS) before the first interval. */
#define SP_JPEG_RESTART_MAX_HEADER (64u << 10)

/* What a stream's header says about its layout. */
typedef struct sp_jpeg_restart_layout {
    size_t header_len;    /* SOI .. the end of the SOS segment */
    size_t frame_size_at; /* offset of the SOF segment's height field (then the width) */
    unsigned width, height, components; /* as the frame header gives them */
    unsigned mcu_width, mcu_height, restart_interval;
} sp_jpeg_restart_layout;

/* Walk the markers of `h` (len bytes, the stream's first bytes) from SOI to the end of SOS:
 * baseline or extended Huffman, 8-bit, 1 or 3 components. `where` names the stream in
 * messages. */
sp_status sp_jpeg_restart_parse_header(const uint8_t *h, size_t len, const char *where,
                                       sp_jpeg_restart_layout *out, sp_err *err);

/* Set the frame size in `header` (laid out as `lay`) to width x height (each at most 65535). */
void sp_jpeg_restart_set_frame_size(uint8_t *header, const sp_jpeg_restart_layout *lay,
                                    uint64_t width, uint64_t height);

/* Where each of `n` intervals starts, read from `src` between `first` (the first interval's
 * start, right after the header) and `end` (the stream's end): starts[0] = first, starts[i] the
 * byte after the i-th restart marker (a stuffed FF 00 in entropy-coded data is never one), and
 * starts[n] = end. SP_E_CORRUPT naming `where` when the stream holds fewer markers. */
sp_status sp_jpeg_restart_scan(sp_source *src, uint64_t first, uint64_t end, uint64_t n,
                               uint64_t *starts, const char *where, sp_err *err);

/* The interval [begin, end) of `src` as a complete JPEG stream (malloc'd, to free): `header`
 * (with the tile's frame size), the interval's bytes less the restart marker that ends them,
 * then an end-of-image marker. */
sp_status sp_jpeg_restart_tile(sp_source *src, const sp_limits *limits, const uint8_t *header,
                               size_t header_len, uint64_t begin, uint64_t end, uint8_t **out,
                               size_t *len, sp_err *err);

/* Decode the part (x, y, w, h) of the interval [begin, end)'s tile, seen at 1/scale (1, 2, 4 or
 * 8), into dst (bpp bytes a pixel, rows `stride` apart), filling with `empty` what the decode
 * does not cover: a tile read of the formats built on these streams. */
/* The DCT scales (bits 1, 2, 4, 8) a level made of these tiles seen at 1/scale can still be
 * read at (the product at most 8), and SP_AREA_OPAQUE: a level's area_scales. */
unsigned sp_jpeg_restart_area_scales(unsigned scale);

sp_status sp_jpeg_restart_decode_area(sp_source *src, const sp_limits *limits,
                                      const uint8_t *header, size_t header_len, uint64_t begin,
                                      uint64_t end, unsigned scale, int64_t x, int64_t y, int64_t w,
                                      int64_t h, int bpp, uint8_t *dst, int64_t stride,
                                      const uint8_t *empty, sp_err *err);

#endif
