/* slidepipe.h — the public API of libslidepipe, the only header users include.
 *
 * slidepipe reads whole-slide images (gigapixel, pyramidal digital-pathology scans) and hands
 * their pixels to the caller. A slide is opened once into an opaque handle; its levels, tile
 * grid, properties and associated images are queried through getters, and regions are read as
 * straight (not premultiplied) RGBA8 or RGB8 into a buffer the caller owns.
 *
 * Conventions that hold for every call below:
 * - Fallible calls return sp_status: SP_OK (0) or a negative, stable error code. sp_status_str()
 *   names a code; the detail message of a slide's error is sp_slide_error().
 * - A slide's first data error (I/O, corrupt or unsupported data, out of memory) sticks: later
 *   reads on that handle return the same status at once, and sp_slide_error() keeps the first
 *   message, as OpenSlide does. Argument errors (bad level, null pointer) do not stick.
 * - The library never prints, exits or aborts on bad input; every byte read from a file is
 *   treated as untrusted and checked.
 * - Coordinates are int64_t. A region's x, y are level-0 pixels; its width and height are pixels
 *   of the level read (the OpenSlide convention).
 * - Thread safety: an open slide may be read from many threads at once; open and close are not
 *   concurrent with other calls on the same handle.
 * - Strings returned by getters belong to the slide and live until sp_slide_close().
 */
#ifndef SLIDEPIPE_H
#define SLIDEPIPE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define SP_API __attribute__((visibility("default")))
#else
#define SP_API
#endif

#define SP_VERSION_MAJOR 0
#define SP_VERSION_MINOR 1
#define SP_VERSION_PATCH 0

/* The library's version as "MAJOR.MINOR.PATCH". */
SP_API const char *sp_version(void);

/* ---- Status codes ------------------------------------------------------------------------ */

typedef enum sp_status {
    SP_OK = 0,
    SP_E_INVALID_ARG = -1,  /* a caller error: null pointer, level or size out of range */
    SP_E_IO = -2,           /* the file could not be opened or read */
    SP_E_NOT_A_SLIDE = -3,  /* no slide format recognises the file */
    SP_E_CORRUPT = -4,      /* the file claims to be a known format but its data are broken */
    SP_E_UNSUPPORTED = -5,  /* a valid file using a feature slidepipe does not read yet */
    SP_E_NOMEM = -6,        /* an allocation failed */
    SP_E_LIMIT = -7,        /* a safety limit (see sp_limit) was exceeded */
    SP_E_NOT_FOUND = -8,    /* a named property or associated image does not exist */
} sp_status;

/* A short, static, human-readable name for a status ("ok", "corrupt data", ...). */
SP_API const char *sp_status_str(sp_status status);

/* ---- Pixel formats ----------------------------------------------------------------------- */

typedef enum sp_pixel_format {
    SP_PIXEL_RGBA8 = 0, /* 4 bytes per pixel, R G B A, straight alpha */
    SP_PIXEL_RGB8 = 1,  /* 3 bytes per pixel, R G B, alpha composited over the background */
} sp_pixel_format;

/* Bytes per pixel of a format, or 0 for an unknown format. */
SP_API int sp_pixel_format_bytes(sp_pixel_format format);

/* ---- Open options and limits ------------------------------------------------------------- */

/* Safety limits applied while parsing a file. All are on by default; a file that needs more
 * fails with SP_E_LIMIT and a message naming the limit. */
typedef enum sp_limit {
    SP_LIMIT_MAX_DIRECTORIES = 0, /* TIFF directories (IFDs) in a file, default 4096 */
    SP_LIMIT_MAX_TILE_PIXELS = 1, /* pixels in one tile or strip, default 2^28 */
    SP_LIMIT_MAX_ALLOC = 2,       /* bytes in any one allocation driven by file data, default 2 GiB */
    SP_LIMIT_MAX_METADATA = 3,    /* bytes of one metadata value (a tag, a description), default 64 MiB */
    SP_LIMIT_COUNT_ = 4
} sp_limit;

typedef struct sp_options sp_options;

/* Create an options object holding the defaults. Returns SP_E_NOMEM on failure. */
SP_API sp_status sp_options_create(sp_options **out);
/* Free options; NULL is accepted. */
SP_API void sp_options_destroy(sp_options *options);
/* Set a limit. Values must be positive; SP_E_INVALID_ARG otherwise. */
SP_API sp_status sp_options_set_limit(sp_options *options, sp_limit limit, int64_t value);
/* Read a limit's current value, or -1 for an unknown limit. */
SP_API int64_t sp_options_get_limit(const sp_options *options, sp_limit limit);

/* ---- Opening a slide --------------------------------------------------------------------- */

typedef struct sp_slide sp_slide;

/* Open the slide at `path` with default options.
 * On success *out is a new handle (close it with sp_slide_close). On failure *out is NULL and,
 * when `err` is not NULL, a one-line message (NUL-terminated, truncated to `err_len`) says why. */
SP_API sp_status sp_slide_open(const char *path, sp_slide **out, char *err, size_t err_len);

/* As sp_slide_open, with options (NULL means the defaults). The options are copied. */
SP_API sp_status sp_slide_open_with(const char *path, const sp_options *options, sp_slide **out,
                                    char *err, size_t err_len);

/* Close a slide and free everything it owns; NULL is accepted. */
SP_API void sp_slide_close(sp_slide *slide);

/* The slide's sticky error message, or NULL while no data error has occurred. */
SP_API const char *sp_slide_error(const sp_slide *slide);

/* ---- Levels ------------------------------------------------------------------------------ */

/* The format that opened the slide: "aperio", "generic-tiff", ... */
SP_API const char *sp_slide_format(const sp_slide *slide);

/* Number of pyramid levels (at least 1). Level 0 is full resolution. */
SP_API int32_t sp_slide_level_count(const sp_slide *slide);

/* Width and height of a level in its own pixels. */
SP_API sp_status sp_slide_level_dimensions(const sp_slide *slide, int32_t level, int64_t *width,
                                           int64_t *height);

/* Downsample of a level relative to level 0: the mean of the width and height ratios, as
 * OpenSlide defines it (1.0 for level 0). */
SP_API sp_status sp_slide_level_downsample(const sp_slide *slide, int32_t level,
                                           double *downsample);

/* The size of a level's storage tiles (for strip images: the width by the rows per strip). */
SP_API sp_status sp_slide_level_tile_size(const sp_slide *slide, int32_t level,
                                          int64_t *tile_width, int64_t *tile_height);

/* The name of a level's compression ("jpeg", "deflate", "lzw", "none", ...), or NULL for a bad
 * level. */
SP_API const char *sp_slide_level_compression(const sp_slide *slide, int32_t level);

/* The level to read for a wanted downsample: the largest-downsample level whose downsample does
 * not exceed `downsample` (level 0 for anything below 1). */
SP_API int32_t sp_slide_best_level_for_downsample(const sp_slide *slide, double downsample);

/* ---- Properties -------------------------------------------------------------------------- */

/* Properties are key/value strings. Normalised keys present whenever known:
 *   "slidepipe.mpp-x", "slidepipe.mpp-y"      microns per pixel at level 0
 *   "slidepipe.objective-power"               the scan's objective magnification
 *   "slidepipe.vendor"                        the format name
 * plus the format's own keys ("aperio.AppMag", "tiff.ImageDescription", ...). */
SP_API int32_t sp_slide_property_count(const sp_slide *slide);
/* The name of property `index` (0 <= index < count), in sorted order; NULL when out of range. */
SP_API const char *sp_slide_property_name(const sp_slide *slide, int32_t index);
/* The value of the property `name`, or NULL when absent. */
SP_API const char *sp_slide_property_value(const sp_slide *slide, const char *name);

#define SP_PROPERTY_MPP_X "slidepipe.mpp-x"
#define SP_PROPERTY_MPP_Y "slidepipe.mpp-y"
#define SP_PROPERTY_OBJECTIVE_POWER "slidepipe.objective-power"
#define SP_PROPERTY_VENDOR "slidepipe.vendor"

/* ---- Associated images ------------------------------------------------------------------- */

/* Associated images are the small non-pyramid pictures a scanner stores: "label", "macro",
 * "thumbnail". */
SP_API int32_t sp_slide_associated_count(const sp_slide *slide);
/* The name of associated image `index`, in sorted order; NULL when out of range. */
SP_API const char *sp_slide_associated_name(const sp_slide *slide, int32_t index);
/* The size of associated image `name`; SP_E_NOT_FOUND when it does not exist. */
SP_API sp_status sp_slide_associated_dimensions(const sp_slide *slide, const char *name,
                                                int64_t *width, int64_t *height);
/* Read associated image `name` whole into `dst` (rows of `stride` bytes, at least
 * width * sp_pixel_format_bytes(format)). On error the width x height area of dst is zeroed. */
SP_API sp_status sp_slide_read_associated(sp_slide *slide, const char *name,
                                          sp_pixel_format format, void *dst, int64_t stride);

/* ---- Reading pixels ---------------------------------------------------------------------- */

/* Read a region: (x, y) in level-0 pixels, width x height in pixels of `level`, into `dst` with
 * rows of `stride` bytes (at least width * sp_pixel_format_bytes(format)).
 * The region's top-left in level coordinates is (floor(x / ds), floor(y / ds)) where ds is the
 * level's downsample. Pixels outside the level or in missing tiles are (0,0,0,0) in RGBA and the
 * background colour (white unless the slide says otherwise) in RGB.
 * On error the width x height area of dst is zeroed, never half-written. */
SP_API sp_status sp_slide_read_region(sp_slide *slide, sp_pixel_format format, void *dst,
                                      int64_t stride, int32_t level, int64_t x, int64_t y,
                                      int64_t width, int64_t height);

/* ---- Converting to OME-Zarr -------------------------------------------------------------- */

/* Options of sp_convert_to_zarr, through setters so that the layout never freezes into the ABI.
 * Defaults: OME-Zarr 0.4 (Zarr v2), 512 x 512 chunks, zstd level 3, no sharding, automatic
 * pyramid down to one chunk, layout c,y,x, threads = all cores, no resume. */
typedef struct sp_convert_options sp_convert_options;

typedef enum sp_convert_option {
    SP_CONVERT_FORMAT = 0,     /* SP_ZARR_OME_04 (Zarr v2) or SP_ZARR_OME_05 (Zarr v3) */
    SP_CONVERT_CHUNK = 1,      /* chunk side in pixels, 256 .. 4096 */
    SP_CONVERT_CODEC = 2,      /* an sp_zarr_codec */
    SP_CONVERT_LEVEL = 3,      /* codec level (zstd 1..22, blosc/gzip 1..9); 0 = the codec's default */
    SP_CONVERT_SHARD = 4,      /* Zarr v3 only: chunks per shard side (0 = no sharding) */
    SP_CONVERT_LEVELS = 5,     /* pyramid levels to write; 0 = down to one chunk */
    SP_CONVERT_LAYOUT = 6,     /* SP_ZARR_LAYOUT_CYX (OME axes c,y,x) or SP_ZARR_LAYOUT_YXC */
    SP_CONVERT_THREADS = 7,    /* worker threads; 0 = all cores */
    SP_CONVERT_RESUME = 8,     /* 1: complete an interrupted conversion into the same folder */
} sp_convert_option;

enum { SP_ZARR_OME_04 = 4, SP_ZARR_OME_05 = 5 };
enum { SP_ZARR_LAYOUT_CYX = 0, SP_ZARR_LAYOUT_YXC = 1 };
typedef enum sp_zarr_codec {
    SP_ZARR_CODEC_ZSTD = 0,
    SP_ZARR_CODEC_BLOSC_LZ4 = 1,
    SP_ZARR_CODEC_BLOSC_ZSTD = 2,
    SP_ZARR_CODEC_GZIP = 3,
    SP_ZARR_CODEC_NONE = 4,
} sp_zarr_codec;

SP_API sp_status sp_convert_options_create(sp_convert_options **out);
SP_API void sp_convert_options_destroy(sp_convert_options *options);
/* Set an option; SP_E_INVALID_ARG for an unknown option or a value out of its range. */
SP_API sp_status sp_convert_options_set(sp_convert_options *options, sp_convert_option option,
                                        int64_t value);

/* Called from the converting thread as chunks complete: `done` of `total` level-0 chunks. */
typedef void (*sp_progress_fn)(void *user, int64_t done, int64_t total);

/* Convert a whole slide into an OME-Zarr pyramid at `out_path` (a folder) in one streaming pass:
 * level 0 is the slide's level 0 as RGB8 (sp_slide_read_region), each lower level the 2x2
 * average of the one above, rounded half up. Every chunk is written to a temporary file and
 * renamed into place; metadata, the manifest of chunk hashes and the completion marker come
 * last. On success `dataset_hash` (65 bytes, may be NULL) receives the hex SHA-256 of the
 * manifest, which depends only on the slide's pixels and the options, never on threads or
 * timing. With SP_CONVERT_RESUME an interrupted conversion is completed and the result is
 * byte-identical to an uninterrupted one. On failure a message goes to `err`. */
SP_API sp_status sp_convert_to_zarr(sp_slide *slide, const char *out_path,
                                    const sp_convert_options *options, sp_progress_fn progress,
                                    void *progress_user, char *dataset_hash, char *err,
                                    size_t err_len);

/* Re-hash every file the manifest of the Zarr folder lists. `report` (may be NULL) is called for
 * each missing or changed file with its path and "missing" or "changed". On success *problems
 * holds the count; `dataset_hash` (65 bytes, may be NULL) receives the manifest's hash. */
SP_API sp_status sp_zarr_verify(const char *zarr_path, void (*report)(void *user, const char *path,
                                                                     const char *problem),
                                void *report_user, int64_t *problems, char *dataset_hash,
                                char *err, size_t err_len);

/* ---- Built-in example slide -------------------------------------------------------------- */

/* Write a synthetic H&E slide of size x size pixels to `path` as a pyramidal, JPEG-tiled TIFF
 * (BigTIFF when needed): tissue-shaped regions with nuclei and stroma coloured through
 * Beer-Lambert from haematoxylin and eosin stain vectors, on a blank background. The same
 * (size, seed) always gives the same file. The file appears atomically (written to a temporary
 * name, then renamed). On failure a message goes to `err`. */
SP_API sp_status sp_synth_write(const char *path, int64_t size, uint64_t seed, char *err,
                                size_t err_len);

/* ---- Fast reading: batches, scaled reads, the tile cache --------------------------------- */

/* One region of a batch: everything sp_slide_read_region takes. The caller owns `dst`.
 * (A plain record rather than an opaque object, like struct iovec: a batch is an array the
 * caller fills in a loop; new fields would come with a new call.) */
typedef struct sp_region_request {
    sp_slide *slide;
    int32_t level;
    int64_t x, y;          /* level-0 pixels */
    int64_t width, height; /* pixels of `level` */
    sp_pixel_format format;
    void *dst;
    int64_t stride;        /* bytes per row of dst */
} sp_region_request;

/* Read `n` regions, possibly of several slides, on up to `threads` threads (0 or less: one per
 * online core; never more threads than regions). Each region is read exactly as
 * sp_slide_read_region would read it (same bytes, same zeroing on error); `statuses` (may be
 * NULL) receives each region's own status, so one bad region (a bad level, a corrupt tile) does
 * not spoil the others. Returns SP_OK when every region was read, otherwise the status of the
 * first failed region in request order; SP_E_INVALID_ARG when reqs is NULL with n > 0 (or
 * SP_E_NOMEM when statuses is NULL and n is large and no memory is left to track them). When
 * worker threads cannot start, the calling thread reads everything itself. Thread safety: the slides may be used by other threads meanwhile; the regions' buffers
 * must not overlap each other. The call returns when every region is done. */
SP_API sp_status sp_read_regions(const sp_region_request *reqs, size_t n, int threads,
                                 sp_status *statuses);

/* Read a region at any downsample `downsample` >= 1 (relative to level 0): width x height
 * output pixels whose top-left is level-0 pixel (x, y), pixel (i, j) covering level-0 pixels
 * [x + i * downsample, x + (i + 1) * downsample) and likewise in y. The library reads the best
 * level (sp_slide_best_level_for_downsample); where the factor left over from that level is 2
 * or more and the level's tiles are JPEG, it decodes them at 1/2, 1/4 or 1/8 with libjpeg's DCT
 * scaling (docs/reading.md says how that differs from averaging); what is left after that
 * (a factor in [1, 2)) is an area average with fractional pixel weights. Output as in
 * sp_slide_read_region (pixels outside the slide transparent / background); on error the area
 * is zeroed. SP_E_INVALID_ARG for a downsample below 1 or a bad buffer; SP_E_LIMIT when the
 * source pixels under the request would exceed the slide's SP_LIMIT_MAX_ALLOC. Thread-safe like
 * sp_slide_read_region. */
SP_API sp_status sp_slide_read_region_scaled(sp_slide *slide, sp_pixel_format format, void *dst,
                                             int64_t stride, double downsample, int64_t x,
                                             int64_t y, int64_t width, int64_t height);

/* The decoded-tile cache: one per process, shared by every open slide and thread, bounded in
 * bytes. Its initial capacity is the environment variable SLIDEPIPE_CACHE_MB (a whole number of
 * MiB; 0 disables the cache) read on first use, else 256 MiB. Entries are whole decoded tiles
 * (RGBA8, plus a small header) keyed per open slide; closing a slide frees its entries, and the
 * least recently used go first when full. Admission: docs/reading.md. Memory in use is the
 * capacity plus the tiles that readers hold at that moment (at most a few per reading thread).
 * Set the capacity in bytes (0 disables caching; shrinking evicts at once). Thread-safe;
 * SP_E_INVALID_ARG when negative. */
SP_API sp_status sp_cache_set_capacity(int64_t bytes);

/* What the cache holds and has done since the process started. Set struct_size to
 * sizeof(sp_cache_stats) before the call (so that fields can be added later). */
typedef struct sp_cache_stats {
    size_t struct_size;
    int64_t capacity_bytes;
    int64_t used_bytes; /* held by listed entries, headers included */
    int64_t entries;
    int64_t hits, misses;
    int64_t insertions, evictions;
} sp_cache_stats;

/* Fill *stats (a consistent sum of each shard's figures). SP_E_INVALID_ARG when stats is NULL
 * or its struct_size is too small. Thread-safe. */
SP_API sp_status sp_cache_get_stats(sp_cache_stats *stats);

#ifdef __cplusplus
}
#endif

#endif /* SLIDEPIPE_H */
