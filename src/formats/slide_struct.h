/* slide_struct.h — what an open slide is inside: levels, associated images, properties, and
 * the table of operations its format provides.
 *
 * This is the contract between a format and the slide layer above it: a format's open() fills
 * these fields (with the helpers below, slide_struct.c); everything generic (argument checks, the
 * region painter, the sticky error, the public getters) lives in src/slide and is written once
 * for all formats.
 */
#ifndef SP_FORMATS_SLIDE_STRUCT_H
#define SP_FORMATS_SLIDE_STRUCT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/limits.h"
#include "base/numbers.h"
#include "base/props.h"
#include "io/source.h"
#include "slidepipe.h"

typedef struct sp_level {
    int64_t width, height;
    double downsample;
    int64_t tile_width, tile_height;
    int64_t tiles_across, tiles_down;
    const char *compression; /* static string */
    const void *priv;        /* the format's per-level data (e.g. its TIFF directory) */
} sp_level;

typedef struct sp_associated {
    char *name;
    int64_t width, height;
    const void *priv;
} sp_associated;

typedef struct sp_tile_pos {
    int64_t col, row;
} sp_tile_pos;

/* What a level's tiles are as stored, for a backend that decodes them itself (the GPU). */
typedef enum sp_raw_kind {
    SP_RAW_NONE = 0, /* only read_tile decodes them */
    SP_RAW_JPEG,     /* 8-bit, 3-component interleaved JPEG, one stream per tile */
    SP_RAW_RGB8,     /* uncompressed interleaved 8-bit RGB, stored rows = pixel rows */
    SP_RAW_JPEG2000, /* 8-bit, 3-component JPEG 2000, one codestream or JP2 file per tile */
} sp_raw_kind;

typedef struct sp_raw_level {
    sp_raw_kind kind;
    bool ycbcr; /* JPEG, JPEG 2000: the components are Y, Cb, Cr; else R, G, B (no colour
                 * conversion; a JPEG 2000 multiple-component transform is the decoder's) */
    int64_t tile_width, tile_height; /* the stored tiles' size */
} sp_raw_level;

typedef struct sp_slide_ops {
    /* Decode tile (col, row) of `level` into `rgba` (tile_width x tile_height straight RGBA8,
     * rows of `stride` bytes). A missing tile is all zero. Must be thread-safe. */
    sp_status (*read_tile)(sp_slide *slide, const sp_level *level, int64_t col, int64_t row,
                           uint8_t *rgba, uint64_t stride, sp_err *err);
    /* Decode a whole associated image (width x height RGBA8, rows of `stride` bytes). */
    sp_status (*read_associated)(sp_slide *slide, const sp_associated *image, uint8_t *rgba,
                                 uint64_t stride, sp_err *err);
    /* Free the format's private data (slide->priv); may be NULL. */
    void (*destroy)(sp_slide *slide);
    /* Optional (NULL when the format has none): partial and scaled decoding for the region
     * painter (docs/reading.md). area_scales returns the scales (bit values 1, 2, 4, 8: 1/1 to
     * 1/8) at which read_tile_area can decode tiles of `level`, or 0, plus SP_AREA_OPAQUE when
     * those tiles never carry alpha (so RGB8 can be decoded straight into the caller's rows). */
    unsigned (*area_scales)(sp_slide *slide, const sp_level *level);
    /* Decode only the area (x, y, w, h) of tile (col, row) decoded at 1/scale, straight into
     * `dst` (rows of `stride` bytes) as RGBA8 or, for opaque tiles, RGB8: the pixels equal
     * read_tile at that scale followed by a crop. Where the tile has no pixels (a missing tile,
     * a part beyond the decoded image) the area gets `empty` (one pixel of the format: what
     * read_tile's transparent zeros become). Must be thread-safe. */
    sp_status (*read_tile_area)(sp_slide *slide, const sp_level *level, int64_t col, int64_t row,
                                unsigned scale, int64_t x, int64_t y, int64_t w, int64_t h,
                                sp_pixel_format format, uint8_t *dst, int64_t stride,
                                const uint8_t *empty, sp_err *err);
    /* Optional: the tiles that the region painter will read next, for a format whose data is
     * remote to pass their byte ranges to sp_source_prefetch (called only when the slide's
     * `prefetch` is set). Advice: it reports nothing. */
    void (*prefetch)(sp_slide *slide, const sp_level *level, const sp_tile_pos *tiles, size_t n);
    /* Optional (NULL: the level's tiles are SP_RAW_NONE), for backends that decode stored tiles
     * themselves (the GPU's nvJPEG and direct copy; slide/raw_tiles.c checks the arguments):
     * raw_level describes the level's stored tiles; read_raw_tile gives tile (col, row) of an
     * SP_RAW_JPEG or SP_RAW_JPEG2000 level as one complete stream (malloc'd; NULL and 0 for a
     * missing tile);
     * read_raw_rows copies rows [y0, y1) of tile (col, row) of an SP_RAW_RGB8 level, as stored,
     * into dst (tile_width x 3 bytes a row; SP_E_NOT_FOUND for a missing or short tile);
     * raw_rows_at says where those rows lie instead, for a reader of the file itself (the
     * GPU's cuFile): *fd is the local file's open descriptor (the slide's; not to be closed),
     * *offset the rows' first byte, contiguous for (y1 - y0) x tile_width x 3 bytes;
     * SP_E_UNSUPPORTED when the bytes are not read from a local file. Optional. */
    bool (*raw_level)(sp_slide *slide, const sp_level *level, sp_raw_level *out);
    sp_status (*read_raw_tile)(sp_slide *slide, const sp_level *level, int64_t col, int64_t row,
                               uint8_t **stream, size_t *len, sp_err *err);
    sp_status (*read_raw_rows)(sp_slide *slide, const sp_level *level, int64_t col, int64_t row,
                               int64_t y0, int64_t y1, uint8_t *dst, sp_err *err);
    sp_status (*raw_rows_at)(sp_slide *slide, const sp_level *level, int64_t col, int64_t row,
                             int64_t y0, int64_t y1, int *fd, uint64_t *offset, sp_err *err);
    /* Optional (NULL: none), for a format whose stored blocks decode into a layout of its own
     * that read_tile would turn into RGBA (a Zarr chunk's planes): the region painter then
     * caches decoded blocks rather than RGBA tiles, and paints each area straight from its
     * block (slide/region.c). block_of gives the block that holds all of tile (col, row) of
     * `level` and its decoded size, or false where no single block does or the format cannot
     * paint `format` from it (then the tile is read as usual); decode_block decodes block
     * `block` into `out` (that many bytes); paint_block paints the area (x, y, w, h) of the
     * level, which lies inside the block, from the decoded block into `dst` (rows of `stride`
     * bytes) in `format`. Each must be thread-safe. */
    bool (*block_of)(const sp_slide *slide, const sp_level *level, int64_t col, int64_t row,
                     sp_pixel_format format, sp_tile_pos *block, uint64_t *bytes);
    sp_status (*decode_block)(sp_slide *slide, const sp_level *level, sp_tile_pos block,
                              uint8_t *out, sp_err *err);
    void (*paint_block)(const sp_slide *slide, const sp_level *level, const uint8_t *decoded,
                        sp_tile_pos block, int64_t x, int64_t y, int64_t w, int64_t h,
                        sp_pixel_format format, uint8_t *dst, int64_t stride);
} sp_slide_ops;

/* The most tiles the painter announces at once. */
#define SP_PREFETCH_TILES 16

#define SP_AREA_OPAQUE 0x100u

struct sp_slide {
    sp_limits limits;
    sp_source *src;        /* owned; NULL for a slide opened from a directory */
    void *container;       /* owned by the format (e.g. sp_tiff), freed in ops->destroy */
    const char *format;    /* static name */
    const sp_slide_ops *ops;
    void *priv;
    uint64_t cache_id;     /* this open's key in the process-wide tile cache */
    bool prefetch;         /* announce tiles to ops->prefetch before reading them (remote data) */

    int32_t n_levels;
    sp_level *levels;
    int32_t n_associated;
    sp_associated *associated;
    sp_props props;
    uint8_t background[3];

    pthread_mutex_t error_lock;
    sp_status sticky;      /* SP_OK until the first data error */
    char sticky_message[SP_ERR_MSG_MAX]; /* no allocation on the error path */

    /* ICC (slide/icc.c): the embedded profile as stored (owned; NULL when the slide has none,
     * set by the format through sp_slide_set_icc_profile), the name the slide was opened by
     * (for messages), and the transform to sRGB that reads apply while it is on (NULL: off). */
    uint8_t *icc_profile;
    size_t icc_profile_len;
    char *open_name;
    void *icc_transform;

    /* Planes (z, c, t): how many the slide has (1 each unless the format sets more) and the one
     * it shows, which the slide layer sets from the open options before the format's open(),
     * and which a format with planes opens. */
    int64_t plane_count[3];
    int64_t plane[3];
};

/* Append a level / an associated image (the name is copied). */
sp_status sp_slide_add_level(sp_slide *slide, const sp_level *level, sp_err *err);
sp_status sp_slide_add_associated(sp_slide *slide, const char *name, int64_t width,
                                  int64_t height, const void *priv, sp_err *err);

/* Keep a copy of the slide's embedded ICC profile (`len` bytes, at most the metadata limit);
 * a second call keeps the first profile. An empty profile is ignored. */
sp_status sp_slide_set_icc_profile(sp_slide *slide, const uint8_t *data, size_t len, sp_err *err);

/* Set property `key` to the number v, written as the shortest text that reads back as v. */
sp_status sp_slide_set_number(sp_slide *slide, const char *key, double v, sp_err *err);

/* Sort levels by width, largest first, and set each downsample as OpenSlide does: from the
 * level sizes, unless the format set it (a downsample the vendor's metadata gives). */
void sp_slide_finish_levels(sp_slide *slide);

#endif
