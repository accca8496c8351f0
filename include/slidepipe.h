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
    SP_E_NOT_FOUND = -8,    /* no such property, associated image or remote object */
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
 * Defaults: OME-Zarr 0.4 (Zarr v2), 512 x 512 chunks, zstd level 1, no sharding, automatic
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

/* The one list of Zarr chunk codecs, for every front end: the codec's name ("zstd", "blosc-lz4",
 * "blosc-zstd", "gzip", "none"), or NULL for a value that is no codec. */
SP_API const char *sp_zarr_codec_name(sp_zarr_codec codec);
/* The codec called `name` into *codec; SP_E_INVALID_ARG for any other name (or NULL). */
SP_API sp_status sp_zarr_codec_from_name(const char *name, sp_zarr_codec *codec);
/* The levels the codec takes: *min..*max (0..0 for "none") and *fallback, what level 0 means.
 * SP_E_INVALID_ARG for a value that is no codec; any pointer may be NULL. */
SP_API sp_status sp_zarr_codec_levels(sp_zarr_codec codec, int *min, int *max, int *fallback);

SP_API sp_status sp_convert_options_create(sp_convert_options **out);
SP_API void sp_convert_options_destroy(sp_convert_options *options);
/* Set an option; SP_E_INVALID_ARG for an unknown option or a value out of its range. */
SP_API sp_status sp_convert_options_set(sp_convert_options *options, sp_convert_option option,
                                        int64_t value);
/* An option's default (*def) and valid range (*lo..*hi), the one place front ends read them;
 * any pointer may be NULL. SP_E_INVALID_ARG for an unknown option. (The same for process and
 * spectrum options below.) */
SP_API sp_status sp_convert_option_range(sp_convert_option option, int64_t *def, int64_t *lo,
                                         int64_t *hi);

/* Called as chunks complete, one call at a time, from the converting thread or one of its
 * workers: `done` of `total` level-0 chunks, never decreasing. */
typedef void (*sp_progress_fn)(void *user, int64_t done, int64_t total);

/* Convert a whole slide into an OME-Zarr pyramid at `out_path` (a folder, or an s3://bucket/prefix
 * written with PUTs, docs/remote.md) in one streaming pass:
 * level 0 is the slide's level 0 as RGB8 (sp_slide_read_region), each lower level the 2x2
 * average of the one above, rounded half up. Every chunk is written to a temporary file and
 * renamed into place; metadata, the manifest of chunk hashes and the completion marker come
 * last. On success `dataset_hash` (65 bytes, may be NULL) receives the hex SHA-256 of the
 * manifest, which depends only on the slide's pixels and the options, never on threads or
 * timing. With SP_CONVERT_RESUME an interrupted conversion is completed and the result is
 * byte-identical to an uninterrupted one. When the slide's reads convert its ICC profile to sRGB
 * (sp_slide_set_icc_transform), the converted pixels are written and the group attributes record
 * it (slidepipe.icc: the transform and the profile's SHA-256; docs/zarr.md). On failure a message
 * goes to `err`. */
SP_API sp_status sp_convert_to_zarr(sp_slide *slide, const char *out_path,
                                    const sp_convert_options *options, sp_progress_fn progress,
                                    void *progress_user, char *dataset_hash, char *err,
                                    size_t err_len);

/* Re-hash every file the manifest of the Zarr folder (or http(s):// or s3:// prefix) lists.
 * `report` (may be NULL) is called for each missing or changed file with its path and "missing"
 * or "changed". When the store records a pixel hash (stores of sp_convert_to_zarr, and of
 * sp_process_to_zarr with uint8 output), the store is then opened as a slide and its pixel hash
 * recomputed from the pixels (sp_pixel_hash on all cores): a different hash is reported as
 * ("pixel_hash", "changed"), pixels that cannot be read back as ("pixel_hash", "unreadable").
 * On success *problems holds the count; `dataset_hash` (65 bytes, may be NULL) receives the
 * manifest's hash and `pixel_hash` (65 bytes, may be NULL) the recomputed pixel hash, or "" when
 * the store records none or its pixels could not be read. */
SP_API sp_status sp_zarr_verify(const char *zarr_path, void (*report)(void *user, const char *path,
                                                                     const char *problem),
                                void *report_user, int64_t *problems, char *dataset_hash,
                                char *pixel_hash, char *err, size_t err_len);

/* ---- Pixel hash -------------------------------------------------------------------------- */

/* The definition the pixel hash follows; its first bytes are hashed, so a future definition
 * gives other hashes (docs/pixel-hash.md). */
#define SP_PIXEL_HASH_DEFINITION "slidepipe-pixels-v1"

/* The pixel hash of a slide or store: a SHA-256 of its levels' decoded pixels alone, so it does
 * not change with the file name, properties, codec, compression level, chunk or tile size,
 * container format or slidepipe version (the dataset hash does). Each level is read as RGB8
 * exactly as sp_slide_read_region returns it (alpha is not part of it), in a fixed grid of
 * 256 x 256 blocks from (0, 0), edge blocks cut to the level, so no pixel from outside a level
 * enters; each block's SHA-256 goes, in row-major order after the level's width and height, into
 * a level digest, and the level digests, after SP_PIXEL_HASH_DEFINITION and the level count, into
 * the pixel hash. docs/pixel-hash.md gives the exact bytes.
 * The blocks are read on up to `threads` threads (<= 0: one per core), each holding at most one
 * 1024 x 1024 cell at a time; the result does not depend on the thread count. `progress` (may be
 * NULL) is called, one call at a time, from worker threads with the blocks done of their total.
 * On success `hex` (65 bytes) receives 64 lowercase hex digits; on failure it is "" and a message
 * goes to `err` (the slide's read error, SP_E_NOMEM, or SP_E_INVALID_ARG for a NULL argument).
 * Thread-safe like sp_slide_read_region. */
SP_API sp_status sp_pixel_hash(sp_slide *slide, int threads, char *hex, sp_progress_fn progress,
                               void *progress_user, char *err, size_t err_len);

/* ---- Built-in example slide -------------------------------------------------------------- */

/* Write a synthetic H&E slide of size x size pixels to `path` as a pyramidal, JPEG-tiled TIFF
 * (BigTIFF when needed): tissue-shaped regions with nuclei and stroma coloured through
 * Beer-Lambert from haematoxylin and eosin stain vectors, on a blank background. The same
 * (size, seed) always gives the same file. The file appears atomically (written to a temporary
 * name, then renamed). On failure a message goes to `err`. */
SP_API sp_status sp_synth_write(const char *path, int64_t size, uint64_t seed, char *err,
                                size_t err_len);

/* Artefacts sp_synth_write_with can paint into the example slide, for testing tile QC
 * (docs/qc.md): pen strokes of three inks (the ink multiplies the pixel), a region blurred by a
 * box filter, and a tissue fold (optical density doubled and a half). */
typedef enum sp_synth_artifact_kind {
    SP_ARTIFACT_PEN_BLUE = 0,
    SP_ARTIFACT_PEN_GREEN = 1,
    SP_ARTIFACT_PEN_BLACK = 2,
    SP_ARTIFACT_BLUR = 3,
    SP_ARTIFACT_FOLD = 4
} sp_synth_artifact_kind;

/* One artefact: a rectangle of level-0 pixels [x, x + width) x [y, y + height), painted in full. */
typedef struct sp_synth_artifact {
    int32_t kind; /* an sp_synth_artifact_kind */
    int64_t x, y, width, height;
} sp_synth_artifact;

#define SP_SYNTH_ARTIFACT_COUNT 5
#define SP_SYNTH_ARTIFACTS 1u /* flag of sp_synth_write_with */

/* Where the artefacts of a size x size slide go (the same for every seed): fills out[0 ..
 * SP_SYNTH_ARTIFACT_COUNT), one per kind in kind order. SP_E_INVALID_ARG for a NULL out or a
 * size below 1024 (the artefacts need room). */
SP_API sp_status sp_synth_artifacts(int64_t size, sp_synth_artifact *out);

/* sp_synth_write with options: flags 0 gives exactly sp_synth_write's file; SP_SYNTH_ARTIFACTS
 * paints the artefacts of sp_synth_artifacts into level 0 (the other levels are reduced from
 * it as always). SP_E_INVALID_ARG for unknown flags, and for artefacts on a slide below 1024. */
SP_API sp_status sp_synth_write_with(const char *path, int64_t size, uint64_t seed, uint32_t flags,
                                     char *err, size_t err_len);

/* ---- Processing a level tile by tile (the engine) --------------------------------------- */

/* Options of sp_process_to_zarr, through setters like sp_convert_options.
 * Defaults: level 0, 1024 x 1024 chunks, OME-Zarr 0.4 (Zarr v2), blosc-lz4 with byte shuffle at
 * codec level 1 (float32 output is four times the input's bytes, so the codec's speed matters
 * more than its ratio; see docs/ops.md), threads = two per core (at most 32), input tiles in flight =
 * 2 x threads, tile mode. */
typedef struct sp_process_options sp_process_options;

typedef enum sp_process_option {
    SP_PROCESS_LEVEL = 0,       /* the slide level to process, 0 .. levels - 1 */
    SP_PROCESS_CHUNK = 1,       /* output chunk (and tile) side in pixels, 16 .. 4096 */
    SP_PROCESS_CODEC = 2,       /* an sp_zarr_codec */
    SP_PROCESS_CODEC_LEVEL = 3, /* codec level (zstd 1..22, blosc/gzip 1..9); 0 = the codec's
                                   own default; process's default is 1 */
    SP_PROCESS_FORMAT = 4,      /* SP_ZARR_OME_04 (Zarr v2) or SP_ZARR_OME_05 (Zarr v3) */
    SP_PROCESS_THREADS = 5,     /* worker threads, 0 = two per core (at most 32) */
    SP_PROCESS_IN_FLIGHT = 6,   /* input tiles held at once, 0 = 2 x threads */
    SP_PROCESS_MODE = 7,        /* SP_PROCESS_TILED or SP_PROCESS_GLOBAL */
    SP_PROCESS_DEVICE = 8,      /* SP_DEVICE_CPU or SP_DEVICE_CUDA (tile mode only) */
    SP_PROCESS_DTYPE = 9,       /* what is stored: SP_PROCESS_DTYPE_OP (default) or _UINT8 */
} sp_process_option;

/* SP_PROCESS_TILED streams tiles with halos in bounded memory; SP_PROCESS_GLOBAL loads the whole
 * level and runs the op over it at once (the baseline; the output is the same). */
enum { SP_PROCESS_TILED = 0, SP_PROCESS_GLOBAL = 1 };

/* Where the op runs. SP_DEVICE_CUDA runs it on the GPU (docs/gpu.md): each worker uploads its
 * tile with halo, runs the op's kernel and downloads the planes; the output equals the CPU's bit
 * for bit, so the dataset hash is the same. Without a usable GPU the call fails at once with
 * SP_E_UNSUPPORTED and the reason, before anything is written. */
enum { SP_DEVICE_CPU = 0, SP_DEVICE_CUDA = 1 };

/* What is stored. SP_PROCESS_DTYPE_OP stores the op's own type (float32 for od, sobel and
 * gaussian). SP_PROCESS_DTYPE_UINT8 stores a float op's values as uint8, each rounded half up and
 * clipped to 0..255 (floor(v + 0.5), in float): a quarter of the bytes, for results meant to be
 * looked at or kept small (docs/ops.md). Ops that compute uint8 store it either way. */
enum { SP_PROCESS_DTYPE_OP = 0, SP_PROCESS_DTYPE_UINT8 = 1 };

SP_API sp_status sp_process_options_create(sp_process_options **out);
SP_API void sp_process_options_destroy(sp_process_options *options);
/* Set an option; SP_E_INVALID_ARG for an unknown option or a value out of its range. */
SP_API sp_status sp_process_options_set(sp_process_options *options, sp_process_option option,
                                        int64_t value);
SP_API sp_status sp_process_option_range(sp_process_option option, int64_t *def, int64_t *lo,
                                         int64_t *hi);

/* Check an op spec without running it: "grey", "od", "sobel", "gaussian:SIGMA" or "macenko"
 * (docs/ops.md defines each). SP_E_INVALID_ARG with a message in `err` for anything else. */
SP_API sp_status sp_op_check(const char *op_spec, char *err, size_t err_len);

/* Run the op `op_spec` over one level of the slide, tile by tile with halos (or at once in the
 * global mode), and write the result as OME-Zarr at `out_path` (a new folder or s3:// prefix): one
 * array "0" with
 * axes c,y,x (1 channel for grey, uint8; 3 for od, sobel, gaussian, float32 unless
 * SP_PROCESS_DTYPE asks for uint8; 3 for macenko, uint8), the op and its
 * parameters in the group attributes, a manifest and a dataset hash as sp_convert_to_zarr
 * writes them. The input is the level as RGB8 (alpha composited over the background colour);
 * outside the level, neighbourhood ops see the level reflected (scipy.ndimage mode 'reflect').
 * The result does not depend on the mode, chunk reading order or thread count.
 * `progress` (may be NULL) is called one call at a time, from the calling thread or a worker,
 * with chunks done of the total.
 * On success `dataset_hash` (65 bytes, may be NULL) receives the manifest's hash; on failure a
 * message goes to `err`. macenko (3 channels, uint8) first estimates the slide's stains
 * (sp_stains_estimate) and fails before writing anything when it cannot. */
SP_API sp_status sp_process_to_zarr(sp_slide *slide, const char *op_spec, const char *out_path,
                                    const sp_process_options *options, sp_progress_fn progress,
                                    void *progress_user, char *dataset_hash, char *err,
                                    size_t err_len);

/* ---- GPU (CUDA) backend ------------------------------------------------------------------
 *
 * Present in every build made where nvcc was found (SLIDEPIPE_CUDA=AUTO|ON|OFF); usable when a
 * CUDA driver and device are present at run time. Without either, every call below fails
 * cleanly (SP_E_UNSUPPORTED, with the reason) and the CPU path is unaffected. Device pointers
 * are plain CUDA device addresses (cudaMalloc or sp_cuda_alloc). nvJPEG, nvJPEG2000, cuFile and
 * cuFFT are never linked: they are looked up at run time (dlopen) and used when found. */

typedef struct sp_cuda_context sp_cuda_context;

/* Number of usable CUDA devices (0 when none or when built without CUDA); when 0 and `why` is
 * not NULL, a one-line reason goes there ("built without CUDA", "no CUDA driver", ...). */
SP_API int sp_cuda_device_count(char *why, size_t why_len);

/* Name, compute capability and memory of device `device`. */
SP_API sp_status sp_cuda_device_info(int device, char *name, size_t name_len, int *cc_major,
                                     int *cc_minor, uint64_t *memory_bytes);

/* The NUMA node of `device`'s PCI slot (Linux sysfs), or -1 when unknown, without CUDA or a
 * device. */
SP_API int sp_cuda_device_numa_node(int device);

/* The run-time GPU libraries slidepipe looks for. */
typedef enum sp_cuda_library {
    SP_CUDA_LIB_NVJPEG = 0,   /* JPEG decoding on the GPU */
    SP_CUDA_LIB_CUFILE = 1,   /* GPUDirect Storage */
    SP_CUDA_LIB_CUFFT = 2,    /* FFTs for the spectral statistics on the GPU */
    SP_CUDA_LIB_NVJPEG2K = 3, /* JPEG 2000 decoding on the GPU (nvJPEG2000) */
} sp_cuda_library;

/* Whether `library` was found and loaded (1) or not (0); `detail` receives its file and version,
 * or why it was not found (searched: SLIDEPIPE_CUDA_LIBS, then the loader's usual path, then
 * /usr/local/cuda/lib64). */
SP_API int sp_cuda_library_found(sp_cuda_library library, char *detail, size_t detail_len);

/* A context on one device (-1: the device chosen by sp_cuda_default_device): a CUDA stream and
 * two pinned host staging buffers of 32 MiB (made by the first region read), so that decoding the
 * next band of a read overlaps the upload of the previous one. Use a context from one thread at a time (one context per thread for
 * parallel reads). On failure *out is NULL and `err` says why. */
SP_API sp_status sp_cuda_context_create(int device, sp_cuda_context **out, char *err,
                                        size_t err_len);

/* Free a context (NULL accepted). Device memory allocated through it must be freed before. */
SP_API void sp_cuda_context_destroy(sp_cuda_context *ctx);

/* The device a context uses. */
SP_API int sp_cuda_context_device(const sp_cuda_context *ctx);

/* The message of the context's last failure ("" when none). */
SP_API const char *sp_cuda_context_error(const sp_cuda_context *ctx);

/* The device a process should use when it has not said: SLIDEPIPE_CUDA_DEVICE if set, else the
 * node-local rank of an MPI or Slurm job (OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID, ...) modulo
 * the device count, else 0. -1 when there is no usable device. */
SP_API int sp_cuda_default_device(void);

/* Allocate / free device memory on the context's device; copy device memory to the host
 * (synchronous). */
SP_API sp_status sp_cuda_alloc(sp_cuda_context *ctx, size_t bytes, void **device_ptr);
SP_API void sp_cuda_free(sp_cuda_context *ctx, void *device_ptr);
SP_API sp_status sp_cuda_copy_to_host(sp_cuda_context *ctx, void *host, const void *device_ptr,
                                      size_t bytes);

/* sp_slide_read_region into device memory: the same pixels, with `dst_device` a device pointer
 * (rows of `stride` bytes). The region is decoded in bands into pinned staging and uploaded
 * asynchronously, the next band decoding while the previous one uploads; the call returns when
 * the pixels are on the device. On failure the destination area is zeroed and the slide's or
 * the context's error says why. */
SP_API sp_status sp_cuda_read_region(sp_cuda_context *ctx, sp_slide *slide,
                                     sp_pixel_format format, void *dst_device, int64_t stride,
                                     int32_t level, int64_t x, int64_t y, int64_t width,
                                     int64_t height);

/* One region of a batch read into device memory (sp_cuda_read_regions): where and what, as
 * sp_cuda_read_region takes them, and, after the call, how its read went. */
typedef struct sp_cuda_region {
    int32_t level;
    int64_t x, y, width, height; /* level-0 origin, level pixels */
    void *dst_device;            /* rows of `stride` bytes */
    int64_t stride;
    sp_status status; /* out */
} sp_cuda_region;

/* n regions of one slide into device memory, in one pixel format: the same pixels as n calls of
 * sp_cuda_read_region, with the JPEG tiles under regions of one level decoded by nvJPEG in large
 * batches, each distinct tile once per call (regions that overlap share their tiles' decodes).
 * Regions the batched path does not take are read one by one as sp_cuda_read_region reads them.
 * Each region's status is set; returns SP_OK when all are SP_OK, else the first failure's. */
SP_API sp_status sp_cuda_read_regions(sp_cuda_context *ctx, sp_slide *slide,
                                      sp_pixel_format format, sp_cuda_region *regions, size_t n);

/* ---- How region reads into GPU memory decode (nvJPEG, direct copies) ------------------------ */

/* sp_cuda_read_region decodes the JPEG tiles of TIFF levels (generic TIFF, Aperio SVS, OME-TIFF;
 * baseline 8-bit, 4:4:4, 4:2:2 or 4:2:0) on the GPU with nvJPEG when it is found (the hardware
 * decoder where the GPU has one). nvJPEG's inverse DCT is not libjpeg-turbo's: these pixels are
 * close to the CPU path's, not identical (docs/gpu.md states the difference). The environment
 * variable SLIDEPIPE_NVJPEG=0 forces the CPU path (exact); SLIDEPIPE_NVJPEG=default uses nvJPEG's
 * default back end instead of the hardware decoder. Everything else (other codecs, progressive or
 * 12-bit JPEG, missing tiles, nvJPEG absent or failing) takes the CPU path. Uncompressed 8-bit RGB
 * TIFF tiles read as RGB8 skip the CPU pass: the rows needed are read straight into pinned memory
 * and copied to the destination (the same bytes as the CPU path). What happened in this process
 * so far (set struct_size to sizeof(sp_cuda_decode_stats) before the call, so that fields can be
 * added later): */
typedef struct sp_cuda_decode_stats {
    size_t struct_size;
    uint64_t nvjpeg_regions; /* regions read through nvJPEG */
    uint64_t nvjpeg_tiles;   /* tiles nvJPEG decoded for them */
    uint64_t direct_regions; /* regions of uncompressed RGB tiles read straight into pinned
                              * memory and copied (no CPU pass over the pixels; RGB8 only) */
    uint64_t cpu_regions;    /* regions read on the CPU path */
    char last_fallback[200]; /* why the last region read on the CPU path was ("" if none) */
    uint64_t cufile_regions; /* of direct_regions, those read from the file into device memory
                              * with cuFile (SLIDEPIPE_CUFILE=1, docs/gpu.md) */
    uint64_t nvjpeg2k_regions; /* regions of JPEG 2000 tiles read through nvJPEG2000 */
    uint64_t nvjpeg2k_tiles;   /* tiles nvJPEG2000 decoded for them */
} sp_cuda_decode_stats;

/* Fill *out (zeros and "" in a build without CUDA). SP_E_INVALID_ARG when out is NULL or its
 * struct_size is too small. Thread-safe. */
SP_API sp_status sp_cuda_get_decode_stats(sp_cuda_decode_stats *out);

/* ---- Spectral statistics ----------------------------------------------------------------- */

/* Log-magnitude spectra of a slide (docs/ops.md, "spectrum"): a level is cut into full P x P
 * patches on its own pixel grid; each patch's grey image (BT.601 luma in float32,
 * (0.299 R + 0.587 G) + 0.114 B) is Fourier transformed (FFTW, single precision); every value of
 * the full P x P complex spectrum becomes dB = 20 log10(|F| + 1e-6). The statistics are a
 * histogram of those values from -40 to 160 dB in 800 bins of 0.25 dB (bin i holds
 * -40 + i/4 <= dB < -40 + (i+1)/4; the last bin also holds 160), and the sum and sum of squares
 * of all values (in range or not), from which the mean and standard deviation follow. */
#define SP_SPECTRUM_BINS 800
#define SP_SPECTRUM_DB_MIN (-40.0)
#define SP_SPECTRUM_DB_MAX 160.0

/* Options of sp_spectrum_compute, through setters. Defaults: level 0, patch 256, block 1024,
 * threads = all cores. */
typedef struct sp_spectrum_options sp_spectrum_options;

typedef enum sp_spectrum_option {
    SP_SPECTRUM_LEVEL = 0,   /* the pyramid level to analyse, >= 0 (checked against the slide) */
    SP_SPECTRUM_PATCH = 1,   /* patch side P, 4 .. 4096 */
    SP_SPECTRUM_BLOCK = 2,   /* the read-ahead in rows, B: a multiple of P, at most 16384; it
                                changes how far the level is read ahead, never the statistics */
    SP_SPECTRUM_THREADS = 3, /* worker threads, 0 = all cores, at most 1024 */
    SP_SPECTRUM_DEVICE = 4,  /* SP_DEVICE_CPU (FFTW) or SP_DEVICE_CUDA (cuFFT, docs/gpu.md) */
} sp_spectrum_option;

SP_API sp_status sp_spectrum_options_create(sp_spectrum_options **out);
/* Free options; NULL is accepted. */
SP_API void sp_spectrum_options_destroy(sp_spectrum_options *options);
/* Set an option; SP_E_INVALID_ARG for an unknown option or a value out of its range (the block
 * is checked against the patch by sp_spectrum_compute, since either may be set first). */
SP_API sp_status sp_spectrum_options_set(sp_spectrum_options *options, sp_spectrum_option option,
                                         int64_t value);
SP_API sp_status sp_spectrum_option_range(sp_spectrum_option option, int64_t *def, int64_t *lo,
                                          int64_t *hi);
/* An option's current value, or -1 for an unknown option. */
SP_API int64_t sp_spectrum_options_get(const sp_spectrum_options *options,
                                       sp_spectrum_option option);

/* The statistics of one slide or of many merged. A plain struct (it travels between MPI ranks as
 * bytes) that starts with its own size: call sp_spectrum_stats_init before any other use. */
typedef struct sp_spectrum_stats {
    uint64_t size;                         /* sizeof(sp_spectrum_stats), set by init */
    int64_t patches;                       /* P x P patches analysed */
    int64_t values;                        /* dB values: patches x P x P */
    int64_t below, above;                  /* values under -40 dB / over 160 dB (not binned) */
    int64_t histogram[SP_SPECTRUM_BINS];   /* counts per 0.25 dB bin from -40 dB */
    double sum, sum_squares;               /* of all dB values, accumulated in double */
    double read_seconds;    /* thread-seconds outside the transforms: reading, decoding, grey */
    double compute_seconds; /* thread-seconds spent on the FFT, dB, histogram and sums */
} sp_spectrum_stats;

/* Zero the statistics and set their size. */
SP_API void sp_spectrum_stats_init(sp_spectrum_stats *stats);

/* Add `from` into `into` (counts, sums, seconds). Floating-point addition is not associative,
 * so merging the same results in the same order always gives the same bits: merge per-slide
 * results in list order and a corpus total does not depend on threads or on how slides were
 * spread over processes. SP_E_INVALID_ARG when either was not initialised. */
SP_API sp_status sp_spectrum_stats_merge(sp_spectrum_stats *into, const sp_spectrum_stats *from);

/* The mean and standard deviation of all values in dB (sqrt(sum_squares / n - mean^2), as the
 * reference py_spectrum.py computes it); NaN when there are none. */
SP_API double sp_spectrum_stats_mean(const sp_spectrum_stats *stats);
SP_API double sp_spectrum_stats_std(const sp_spectrum_stats *stats);

/* Compute the statistics of one slide into `out` (initialised here). The level is streamed
 * through the tile engine in chunks of about 1024 columns on a pool of threads that reads up to
 * B rows of chunks ahead of the transforms (docs/spectrum.md). Only the full patches are used (a
 * W x H level gives floor(W/P) x floor(H/P) patches). The result does not depend on the thread
 * count or the block. `progress` (may be NULL) is called one call at a time, from the calling
 * thread or a worker, with the chunks done and their total. Fails with SP_E_INVALID_ARG for a level out of range or one smaller than
 * a patch, or with the slide's read error; a message goes to `err`. */
SP_API sp_status sp_spectrum_compute(sp_slide *slide, const sp_spectrum_options *options,
                                     sp_progress_fn progress, void *progress_user,
                                     sp_spectrum_stats *out, char *err, size_t err_len);

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

/* Where slidepipe runs its parallel work (the tile engine's workers, pyramid reductions, batched
 * reads, the training loader's patches). By default each parallel call starts its threads and
 * joins them before it returns, so nothing outlives a call. A host program with a pool of its
 * own (c-blosc2's idea) may supply it instead: run(host, n, threads, work, arg) must call
 * work(arg, i) exactly once for every i in [0, n), on up to `threads` threads of its choice (its
 * calling thread may take part), and return when every call has returned. Items of one call may
 * wait for one another, so a host with several threads free should run them at once; one that
 * runs them in turn on one thread is also correct (slidepipe's items then finish without
 * waiting). Calls may nest (an item may call run again) and come from several threads at once.
 * Process-wide; set it (or NULL, for slidepipe's own threads again) while no slidepipe call is
 * running. */
typedef void (*sp_parallel_for_fn)(void *host, size_t n, int threads,
                                   void (*work)(void *arg, size_t i), void *arg);
SP_API void sp_set_thread_pool(sp_parallel_for_fn run, void *host);

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

/* ---- Training: tissue masks, foreground tiles, stain normalization, augmentation -------- */

/* A tissue mask: which pixels of a low-resolution image of the whole slide show tissue
 * (docs/train.md defines the image, the chroma score, the Otsu threshold and the clean-up).
 * Mask pixel (i, j) covers level-0 pixels [i * downsample, (i + 1) * downsample) across and
 * [j * downsample, (j + 1) * downsample) down. */
typedef struct sp_tissue_mask {
    int64_t width, height;  /* mask pixels */
    double downsample;      /* level-0 pixels per mask pixel, >= 1 */
    int threshold;          /* chroma above this is tissue (before the clean-up) */
    double tissue_fraction; /* tissue pixels / all mask pixels */
    uint8_t *pixels;        /* width * height, row-major, 1 = tissue, 0 = background */
} sp_tissue_mask;

/* Compute the tissue mask of `slide` on its image whose longer side is `max_side` pixels (0 means
 * 2048; at most 16384), read with sp_slide_read_region_scaled. On success *out owns `pixels`
 * (free it with sp_tissue_mask_free). A slide with no tissue gives an empty mask, not an error.
 * On failure *out is zeroed and `err` says why. Thread-safe like a region read. */
SP_API sp_status sp_tissue_mask_compute(sp_slide *slide, int64_t max_side, sp_tissue_mask *out,
                                        char *err, size_t err_len);

/* Free a mask's pixels and zero it; NULL is accepted. */
SP_API void sp_tissue_mask_free(sp_tissue_mask *mask);

/* One tile of a grid: its top-left in level-0 pixels and the fraction of it that is tissue. */
typedef struct sp_tile {
    int64_t x, y;
    double tissue;
} sp_tile;

/* The tiles of a grid over `level`: size x size pixels of that level, one every `stride` pixels
 * of it (0 means size) across and down from (0, 0), each wholly inside the level, whose tissue
 * fraction under `mask` (docs/train.md) is at least `min_tissue` (0 keeps every tile), in
 * row-major order. *tiles is allocated by the library (free it with sp_tiles_free; NULL when
 * *count is 0). SP_E_INVALID_ARG for a bad level, size, stride or fraction outside [0, 1]. */
SP_API sp_status sp_tissue_tiles(const sp_slide *slide, const sp_tissue_mask *mask, int32_t level,
                                 int64_t size, int64_t stride, double min_tissue, sp_tile **tiles,
                                 size_t *count);

/* Free a tile list from sp_tissue_tiles; NULL is accepted. */
SP_API void sp_tiles_free(sp_tile *tiles);

/* The stains of an H&E slide by Macenko's method (docs/train.md): the unit optical-density
 * vectors of haematoxylin and eosin over R, G, B, and each stain's 99th-percentile
 * concentration. */
typedef struct sp_stains {
    double h[3], e[3];
    double max_h, max_e;
    int64_t pixels; /* stained pixels the estimate used (0 for the reference) */
} sp_stains;

/* The reference stains that normalization maps to by default (docs/train.md lists the values). */
SP_API void sp_stains_reference(sp_stains *out);

/* Estimate the stains of `slide` from its image with longer side `max_side` (0 means 2048), read
 * as sp_tissue_mask_compute reads it. SP_E_UNSUPPORTED with a message when too few pixels are
 * stained to estimate from (a blank or unstained slide). Thread-safe like a region read. */
SP_API sp_status sp_stains_estimate(sp_slide *slide, int64_t max_side, sp_stains *out, char *err,
                                    size_t err_len);

/* Normalize `npixels` RGB8 pixels in place from the `source` stains to the `target` stains
 * (docs/train.md gives the arithmetic). SP_E_INVALID_ARG for NULL arguments or stains with a
 * non-finite or non-positive concentration. Thread-safe (pure). */
SP_API sp_status sp_stains_normalize(const sp_stains *source, const sp_stains *target, uint8_t *rgb,
                                     int64_t npixels);

/* Seeded augmentation of one square RGB8 patch in place (size x size pixels, rows of size * 3
 * bytes): when `dihedral` is nonzero, one of the 8 flips and quarter turns; when `hed_sigma` >
 * 0, a jitter of the haematoxylin, eosin and DAB channels (docs/train.md). Every random choice
 * comes from `seed` alone, so a patch's augmentation does not depend on the thread or the order
 * patches are processed in. SP_E_INVALID_ARG for a NULL patch, size < 1 or hed_sigma outside
 * [0, 1]. Thread-safe (pure). */
SP_API sp_status sp_augment_patch(uint8_t *rgb, int64_t size, uint64_t seed, int dihedral,
                                  double hed_sigma);

/* sp_augment_patch over `count` patches stored one after another (patch i at
 * rgb + i * size * size * 3), patch i with seeds[i], on up to `threads` threads (0 or less: one
 * per core). The result does not depend on the thread count. Errors as sp_augment_patch, and
 * SP_E_INVALID_ARG for count < 0 or a NULL seeds with count > 0; nothing is changed then. */
SP_API sp_status sp_augment_patches(uint8_t *rgb, int64_t count, int64_t size,
                                    const uint64_t *seeds, int dihedral, double hed_sigma,
                                    int threads);

/* ---- Training: batches in a model's layout, and a loader that keeps them coming --------- */

/* A batch's element type and layout. Floats are ((v / 255) - mean[c]) / std[c] evaluated in
 * float32 for each 8-bit value v of channel c (torchvision's ToTensor then Normalize); float16
 * is that float32 rounded to the nearest half (ties to even). NHWC is (n, height, width, 3),
 * NCHW is (n, 3, height, width), both C-contiguous. */
typedef enum sp_batch_dtype {
    SP_BATCH_UINT8 = 0,
    SP_BATCH_FLOAT16 = 1,
    SP_BATCH_FLOAT32 = 2,
} sp_batch_dtype;

typedef enum sp_batch_layout {
    SP_BATCH_NHWC = 0,
    SP_BATCH_NCHW = 1,
} sp_batch_layout;

/* How RGB8 pixels become a batch's values. */
typedef struct sp_batch_format {
    sp_batch_dtype dtype;
    sp_batch_layout layout;
    float mean[3], std[3]; /* floats only; std must be finite and nonzero */
} sp_batch_format;

/* Bytes of one element of `dtype` (1, 2 or 4); 0 for an unknown dtype. */
SP_API int sp_batch_dtype_bytes(sp_batch_dtype dtype);

/* Write `count` RGB8 images of width x height pixels (image i at rgb + i * width * height * 3)
 * into dst in `format`, image i at dst + i * width * height * 3 * sp_batch_dtype_bytes(dtype).
 * SP_E_INVALID_ARG for NULL buffers, sizes below 1, an unknown dtype or layout, or a float std
 * that is zero or not finite. Thread-safe (pure). */
SP_API sp_status sp_batch_convert(const uint8_t *rgb, int64_t count, int64_t width, int64_t height,
                                  const sp_batch_format *format, void *dst);

/* Read a region at `downsample` (as sp_slide_read_region_scaled, RGB8) straight into one image in
 * `format` (width x height, layout and dtype as a batch of one): the region is read in bands of
 * rows, so host memory beyond dst stays a few megabytes whatever the region's size. Errors as
 * sp_slide_read_region_scaled and sp_batch_convert; on error dst is zeroed. Thread-safe like a
 * region read. */
SP_API sp_status sp_slide_read_image(sp_slide *slide, double downsample, int64_t x, int64_t y,
                                     int64_t width, int64_t height, const sp_batch_format *format,
                                     void *dst);

/* One patch a loader reads: `slide` indexes the loader's slides; a `level` >= 0 reads that
 * level (size x size pixels of it), -1 reads at `downsample` (sp_slide_read_region_scaled);
 * (x, y) is the top-left in level-0 pixels; `seed` drives its augmentation (sp_augment_patch). */
typedef struct sp_patch_request {
    int32_t slide;
    int32_t level;
    double downsample;
    int64_t x, y;
    uint64_t seed;
} sp_patch_request;

/* What a loader does to every patch, in this order: read size x size RGB8 pixels; normalize
 * their stains (`normalize`: SP_NORMALIZE_MACENKO from source_stains[slide] to `target`,
 * sp_stains_normalize; SP_NORMALIZE_REINHARD from source_reinhard[slide] to *reinhard_target,
 * sp_reinhard_normalize); with `geometry`, resample them once through the patch's crop, affine
 * and elastic map (sp_augment_geometry); flip and HED-jitter them (`dihedral`, `hed_sigma`:
 * sp_augment_patch) when either is on; with `stain_sigma` > 0, augment their stains
 * (sp_stains_augment) in the target's stains once Macenko-normalized, else in
 * source_stains[slide]; with `photometric`, colour-jitter, blur and add noise
 * (sp_augment_photometric); write them into the batch in `format`. Every step draws from the
 * request's seed on a stream of its own. Batches hold `batch_size` consecutive requests (the
 * last one fewer). `prefetch` batches (at least 1) are kept ready ahead of the consumer, made
 * on `threads` threads (0: one per core). With `pinned` nonzero, batch memory is page-locked
 * through the CUDA runtime where a GPU is present; elsewhere it is ordinary memory and
 * sp_loader_stats says so. With `numa_place` nonzero and a machine of several NUMA nodes, the
 * loader's threads run on the CPUs of node `numa_node` (so the batch memory they write is that
 * node's: put it on the GPU's node, sp_cuda_device_numa_node); on one node it does nothing.
 * With `cuda` nonzero each batch is made in page-locked host memory and copied to memory of CUDA
 * device `cuda_device` before it is handed over (sp_batch.device says where it is). Set
 * struct_size to sizeof(sp_loader_config). */
typedef enum sp_normalizer {
    SP_NORMALIZE_NONE = 0,
    SP_NORMALIZE_MACENKO = 1,
    SP_NORMALIZE_REINHARD = 2,
} sp_normalizer;

typedef struct sp_loader_config {
    size_t struct_size;
    int64_t size;
    int64_t batch_size;
    sp_batch_format format;
    int dihedral;
    double hed_sigma;
    sp_normalizer normalize;
    const sp_stains *source_stains; /* one per slide (Macenko, stain augmentation) or NULL */
    sp_stains target;
    const struct sp_reinhard_stats *source_reinhard; /* one per slide (Reinhard) or NULL */
    const struct sp_reinhard_stats *reinhard_target;
    double stain_sigma;
    int prefetch;
    int threads;
    int pinned;
    int numa_place, numa_node;
    int cuda, cuda_device;
    const struct sp_geometry_params *geometry;       /* NULL: none */
    const struct sp_photometric_params *photometric; /* NULL: none */
    /* Everything pointed at is copied at creation. */
} sp_loader_config;

typedef struct sp_loader sp_loader;

/* The loader's work for `n_requests` patches done now, without a thread of its own: patch i into
 * dst + i * (size * size * 3 * element bytes), its status into statuses[i] (both required when
 * n_requests > 0), on config->threads threads (prefetch and pinned are not used). Returns SP_OK,
 * the refusal sp_loader_create would give (message in err), or the first patch's failure (the
 * failed patches are zeroed, the others made). Thread-safe like a region read. */
SP_API sp_status sp_patches_read(sp_slide *const *slides, size_t n_slides,
                                 const sp_patch_request *requests, size_t n_requests,
                                 const sp_loader_config *config, void *dst, sp_status *statuses,
                                 char *err, size_t err_len);

/* A filled batch: `count` patches from requests [first, first + count) of the loader, in
 * cfg.format; statuses[i] is patch i's own status (a failed patch is zeroed, the others are
 * good). The memory belongs to the batch until sp_batch_free; the loader never touches it
 * again once handed over. `device` is -1 for host memory, else the CUDA device holding it. */
typedef struct sp_batch {
    void *data;
    size_t bytes;
    int64_t first, count;
    const sp_status *statuses;
    int pinned; /* data is page-locked */
    int device;
} sp_batch;

/* A loader over `slides` (which must stay open while it lives) and `requests` (copied). It
 * starts making batches at once on its own thread. SP_E_INVALID_ARG, with a message in err, for
 * a bad config or a request naming a slide outside [0, n_slides), a level of -1 with a downsample
 * below 1, or a level the slide lacks (the message names the request and the slide's level
 * count); SP_E_UNSUPPORTED when a CUDA device is asked for that this build or machine lacks. */
SP_API sp_status sp_loader_create(sp_slide *const *slides, size_t n_slides,
                                  const sp_patch_request *requests, size_t n_requests,
                                  const sp_loader_config *config, sp_loader **out, char *err,
                                  size_t err_len);

/* The next batch in request order, waiting for it if it is not ready; *out is NULL after the
 * last batch. SP_E_NOMEM when its memory could not be allocated, or the GPU's failure (SP_E_IO,
 * SP_E_NOMEM) when a CUDA loader's steps failed on the device; the loader stops then, and
 * sp_loader_error says why. One consumer at a time. */
SP_API sp_status sp_loader_next(sp_loader *loader, sp_batch **out);

/* Why the loader stopped, once sp_loader_next has returned its failure; "" before. */
SP_API const char *sp_loader_error(sp_loader *loader);

/* Free a batch handed out by sp_loader_next (it may outlive its loader); NULL is accepted. */
SP_API void sp_batch_free(sp_batch *batch);

/* What a loader holds and has done. Set struct_size to sizeof(sp_loader_stats). */
typedef struct sp_loader_stats {
    size_t struct_size;
    int64_t batches_made, batches_taken;
    int64_t bytes_held, bytes_held_peak; /* batch memory the loader holds (not yet taken) */
    int64_t patches_failed;
    double wait_seconds; /* time sp_loader_next spent waiting for a batch */
    int pinned;          /* batches are page-locked */
    int numa_node;       /* the node the loader's threads run on, or -1 (not placed) */
    int64_t patches_read_on_device; /* a CUDA loader's patches read (and decoded) on the GPU */
} sp_loader_stats;

SP_API sp_status sp_loader_get_stats(sp_loader *loader, sp_loader_stats *stats);

/* Stop making batches, wait for the loader's thread and free what it holds (batches already
 * handed out stay valid). NULL is accepted. */
SP_API void sp_loader_destroy(sp_loader *loader);

/* ---- Annotations: labels for training ---------------------------------------------------- */

/* Annotations drawn on a slide (QuPath's GeoJSON export, ASAP's XML), turned into label maps for
 * training (docs/labels.md). An annotation set is a list of features in file order, each with a
 * class name and an area: one or more polygons, each an exterior ring and any holes, in level-0
 * pixel coordinates. Classes are numbered 1..n in the order their names first appear among the
 * kept features; 0 is the background. Point and line features carry no area: they are skipped
 * and counted (sp_annotations_skipped). A loaded set is read-only: every getter and
 * sp_annotations_rasterize may be called from many threads at once. */
typedef struct sp_annotations sp_annotations;

/* Load the annotations in the file at `path` (a local path, http(s):// URL or s3:// URI). The
 * format is told by the content: JSON is GeoJSON (a FeatureCollection, an array of Features or
 * one Feature), XML is ASAP's. On success *out is a new set (free it with sp_annotations_free).
 * On failure *out is NULL and `err` (when not NULL; NUL-terminated, truncated to `err_len`)
 * says why; an invalid feature's message names the file and the feature (its 0-based index in
 * the file, its name and its class). SP_E_IO when the file cannot be read, SP_E_CORRUPT for
 * malformed JSON or XML or an invalid geometry (a ring with fewer than 3 distinct points, a
 * coordinate that is not finite or exceeds 2^40 in magnitude, a missing or mistyped member),
 * SP_E_UNSUPPORTED for a file that is neither format or an unknown geometry type, SP_E_LIMIT
 * past the limits docs/labels.md lists (file size, features, points, 255 classes). */
SP_API sp_status sp_annotations_load(const char *path, sp_annotations **out, char *err,
                                     size_t err_len);

/* Free an annotation set; NULL is accepted. */
SP_API void sp_annotations_free(sp_annotations *ann);

/* The number of classes n (the background not counted); -1 for NULL. */
SP_API int64_t sp_annotations_class_count(const sp_annotations *ann);

/* The name of class `index`: 1..n as numbered above, 0 gives "background"; NULL for any other
 * index or a NULL set. The string belongs to the set and lives until sp_annotations_free. */
SP_API const char *sp_annotations_class_name(const sp_annotations *ann, int64_t index);

/* The number of features kept (those with an area); -1 for NULL. */
SP_API int64_t sp_annotations_feature_count(const sp_annotations *ann);

/* The class index (1..n) of kept feature `index` (0-based, file order among kept features), or
 * -1 for an index out of range or a NULL set. */
SP_API int64_t sp_annotations_feature_class(const sp_annotations *ann, int64_t index);

/* The number of features skipped because they carry no area (points, lines, a null geometry);
 * -1 for NULL. */
SP_API int64_t sp_annotations_skipped(const sp_annotations *ann);

/* The bounding box of every kept polygon's vertices in level-0 pixels. SP_E_NOT_FOUND (and
 * zeros) when the set has no feature, SP_E_INVALID_ARG for NULL pointers. */
SP_API sp_status sp_annotations_bounds(const sp_annotations *ann, double *x_min, double *y_min,
                                       double *x_max, double *y_max);

/* Paint the label map of a window: `width` x `height` bytes, row j at labels + j * stride. Pixel
 * (i, j) stands for level-0 point (x0 + (i + 0.5) * downsample, y0 + (j + 0.5) * downsample),
 * its centre; it takes the class index of the last feature in file order with a polygon that
 * contains that point by the even-odd rule over the polygon's rings (so holes are cut out),
 * and 0 where none does. An edge counts for the rows whose centre y lies in [min(ya, yb),
 * max(ya, yb)), and a centre lies inside when an odd number of the polygon's edge crossings of
 * its row lie strictly right of it (docs/labels.md). The time is O(edges x rows) at most, plus
 * the pixels painted. SP_E_INVALID_ARG for a NULL set, a downsample that is not finite and
 * positive, an origin that is not finite, a negative size, stride < width or NULL labels with
 * a non-empty window; SP_E_NOMEM when scratch memory cannot be had (the window is then zero).
 * Thread-safe (the set is only read). */
SP_API sp_status sp_annotations_rasterize(const sp_annotations *ann, double downsample, double x0,
                                          double y0, int64_t width, int64_t height,
                                          uint8_t *labels, int64_t stride);

/* ---- Augmentation: colour, noise, blur -------------------------------------------------- */

/* Photometric augmentation of RGB8 patches (docs/augment-color.md has the exact definitions).
 * Per patch, in this order: a colour jitter (torchvision's ColorJitter: brightness, contrast,
 * saturation and hue in a random order, each step on uint8 values as torchvision computes it for
 * a uint8 tensor), a Gaussian blur, additive Gaussian noise. Each stage is applied with its own
 * probability. Every random number comes from the patch's 64-bit seed: ten uniform draws of
 * splitmix64 started at seed ^ 0x70686f746f6d6574 ("photomet"), always all ten in a fixed order
 * whatever is switched on, and the noise's normal numbers from a counter-based generator keyed by
 * (seed, element), so a patch's result depends on nothing but its seed and these parameters.
 * Set struct_size to sizeof(sp_photometric_params); zero everything else for "off". The three
 * factor spreads must be finite and at most 1e6. */
typedef struct sp_photometric_params {
    size_t struct_size;
    double jitter_p;   /* probability in [0, 1] that the colour jitter is applied */
    double brightness; /* >= 0: factor uniform in [max(0, 1 - brightness), 1 + brightness] */
    double contrast;   /* >= 0: factor uniform in [max(0, 1 - contrast), 1 + contrast] */
    double saturation; /* >= 0: factor uniform in [max(0, 1 - saturation), 1 + saturation] */
    double hue;        /* in [0, 0.5]: hue shift uniform in [-hue, hue] (of a full turn) */
    double blur_p;     /* probability in [0, 1] of the Gaussian blur */
    double blur_sigma_min, blur_sigma_max; /* pixels, 0 < min <= max <= 40: sigma uniform */
    int32_t blur_kernel_size; /* odd, 1..255; 0: 2 * ceil(3 sigma) + 1 for the drawn sigma */
    double noise_p;           /* probability in [0, 1] of the additive Gaussian noise */
    double noise_sigma_min, noise_sigma_max; /* 8-bit units, 0 <= min <= max <= 255: uniform */
} sp_photometric_params;

/* What the seed draws for a patch (sp_photometric_draw). A stage not applied has its identity
 * values (factors 1, hue 0, sigma 0). */
typedef struct sp_photometric_draws {
    size_t struct_size;
    int32_t jitter;   /* 1 when the jitter is applied */
    int32_t order[4]; /* the steps in the order applied: 0 brightness, 1 contrast, 2 saturation,
                         3 hue (a step whose range is zero is skipped) */
    double brightness, contrast, saturation, hue;
    int32_t blur;        /* 1 when the blur is applied */
    double blur_sigma;   /* pixels */
    int32_t blur_kernel; /* odd kernel size */
    int32_t noise;       /* 1 when the noise is applied */
    double noise_sigma;  /* 8-bit units */
} sp_photometric_draws;

/* Fill `out` (struct_size set by the caller) with the draws of `seed` under `p`. SP_E_INVALID_ARG
 * for NULL pointers, a struct_size too small, or a parameter outside the ranges documented on
 * sp_photometric_params. Thread-safe (pure). */
SP_API sp_status sp_photometric_draw(uint64_t seed, const sp_photometric_params *p,
                                     sp_photometric_draws *out);

/* Augment one width x height RGB8 patch (rows of width * 3 bytes) in place with the draws of
 * `seed`. SP_E_INVALID_ARG for a NULL patch, a size outside [1, 2^20] per side, or bad parameters
 * (as sp_photometric_draw); SP_E_NOMEM when the blur's scratch memory cannot be had. The patch is
 * unchanged on any error. Thread-safe (pure). */
SP_API sp_status sp_augment_photometric(uint8_t *rgb, int64_t width, int64_t height,
                                        uint64_t seed, const sp_photometric_params *p);

/* sp_augment_photometric over `count` patches stored one after another (patch i at
 * rgb + i * width * height * 3, seed seeds[i]) on up to `threads` threads (0 or less: one per
 * core). The bytes do not depend on the thread count or on how a batch is split. Errors as
 * sp_augment_photometric, and SP_E_INVALID_ARG for count < 0 or NULL seeds with count > 0
 * (nothing is changed then); on SP_E_NOMEM the patches whose blur could not get memory are left
 * unchanged and the others are augmented. */
SP_API sp_status sp_augment_photometric_batch(uint8_t *rgb, int64_t count, int64_t width,
                                              int64_t height, const uint64_t *seeds,
                                              const sp_photometric_params *p, int threads);

/* ---- Tile QC ----------------------------------------------------------------------------- */

/* Quality scores of one tile (docs/qc.md gives every rule exactly). Fractions are in [0, 1].
 * blur: variance of the 3x3 Laplacian [0,1,0; 1,-4,1; 0,1,0] of the 8-bit luma
 *   Y = (77 R + 150 G + 29 B + 128) >> 8, over the tile's interior pixels (one pixel in from
 *   each edge, so no border rule is needed) that are tissue; low means blurred, 0 when the
 *   tile has no such pixel.
 * pen_blue, pen_green, pen_black: the fraction of the tile's pixels that are ink of that colour;
 *   pen: their sum (a pixel has at most one ink colour).
 * fold: the fraction of the tile's tissue pixels that are dark and saturated and not ink (a
 *   folded, double-layer section); 0 when the tile has no tissue pixel.
 * background: the fraction of the tile's pixels that are white or grey glass. */
typedef struct sp_tile_qc {
    double blur, pen, pen_blue, pen_green, pen_black, fold, background;
} sp_tile_qc;

/* The largest tile side sp_tile_qc_compute takes. */
#define SP_TILE_QC_MAX_SIZE 8192

/* Score n tiles of `level`: tile i is the size x size pixels of that level whose top-left is
 * (tiles[i].x, tiles[i].y) in level-0 pixels (the grid of sp_tissue_tiles; the tissue field is
 * not used). The tiles are read with sp_slide_read_region (RGB8) on up to `threads` threads
 * (<= 0: one per core), one tile per thread at a time; the scores do not depend on the thread
 * count. out[i] receives tile i's scores; the caller owns `out` (n entries). SP_E_INVALID_ARG
 * for a NULL slide, tiles or out with n > 0, a bad level, or size outside
 * [1, SP_TILE_QC_MAX_SIZE]; a read error of the first failing tile otherwise. On failure `out`
 * is zeroed and `err` says why. n == 0 is a success that does nothing. Thread-safe like
 * sp_slide_read_region. */
SP_API sp_status sp_tile_qc_compute(sp_slide *slide, int32_t level, int64_t size,
                                    const sp_tile *tiles, size_t n, int threads, sp_tile_qc *out,
                                    char *err, size_t err_len);

/* Score one tile already in memory: size x size RGB8 pixels, rows `stride` bytes apart (the
 * rules of sp_tile_qc_compute without the read). SP_E_INVALID_ARG for NULL pointers, size
 * outside [1, SP_TILE_QC_MAX_SIZE] or stride < 3 * size, SP_E_NOMEM when the scratch (2 bytes
 * a pixel) cannot be had; *out is zeroed then. Thread-safe. */
SP_API sp_status sp_tile_qc_pixels(const uint8_t *rgb, int64_t stride, int64_t size,
                                   sp_tile_qc *out);

/* ---- Augmentation: geometry (one resampling) ----------------------------------------- */

/* Seeded geometric augmentation of an RGB8 patch: a random resized crop, a random affine map
 * (rotation, scale, anisotropic scale, shear, translation) and an elastic deformation, composed
 * into one map from each output pixel to a source point, which is then sampled once, bilinearly
 * (docs/augment-geometry.md defines every step). Pixel (x, y) has its centre at (x, y). The
 * numbers come from splitmix64 started at seed ^ SP_GEOMETRY_STREAM, drawn in a fixed order
 * whatever is switched on, so a patch's geometry depends on its seed and these parameters only.
 *
 * Each range [lo, hi] is sampled uniformly, v = lo + (hi - lo) u with u in [0, 1); lo == hi
 * gives that value. The identity is rotation {0, 0}, scale, scale_x and scale_y {1, 1}, shear
 * and translate {0, 0}, crop and elastic off: sp_geometry_params_default fills it in. */
#define SP_GEOMETRY_STREAM 0x67656f6d65747279ull /* "geometry" in ASCII */

typedef enum sp_geometry_border {
    SP_BORDER_REFLECT = 0,  /* mirror about the edge pixels' centres (reflect-101: 2 1 | 0 1 2) */
    SP_BORDER_CONSTANT = 1, /* points outside the image take `fill` */
} sp_geometry_border;

typedef struct sp_geometry_params {
    size_t struct_size; /* sizeof(sp_geometry_params) */
    /* The affine map, about the patch centre ((width - 1) / 2, (height - 1) / 2): */
    double rotation[2];    /* degrees, counter-clockwise as displayed (y down); any finite range */
    double scale[2];       /* isotropic zoom factor, > 0 (2 shows the content twice as large) */
    double scale_x[2];     /* anisotropic factor along x, > 0, times scale */
    double scale_y[2];     /* anisotropic factor along y, > 0, times scale */
    double shear_x[2];     /* degrees, in (-45, 45): x' = x + tan(shear_x) y */
    double shear_y[2];     /* degrees, in (-45, 45): y' = y + tan(shear_y) x */
    double translate_x[2]; /* fraction of width, in [-1, 1] (0.1: 10 % of the width to the right) */
    double translate_y[2]; /* fraction of height, in [-1, 1] (positive: down) */
    /* The random resized crop (torchvision's RandomResizedCrop.get_params), resized back to
     * width x height: */
    int crop;             /* 0: off (the whole patch) */
    double crop_scale[2]; /* area fraction, 0 < lo <= hi <= 1 */
    double crop_ratio[2]; /* width / height, 0 < lo <= hi; sampled log-uniformly */
    /* The elastic deformation (Kornia's elastic_transform2d with align_corners=True): */
    int elastic;             /* 0: off */
    double elastic_alpha[2]; /* {x, y}: >= 0, the displacement in units of half the size - 1 */
    double elastic_sigma;    /* > 0 (and <= 1000), Gaussian standard deviation in pixels */
    int elastic_kernel;      /* odd kernel size in [1, 1023]; 0: 2 * ceil(3 sigma) + 1 */
    int border;              /* sp_geometry_border */
    uint8_t fill[3];         /* R, G, B outside the image when border is SP_BORDER_CONSTANT */
} sp_geometry_params;

/* Fill *p with the identity parameters (struct_size included), border reflect, fill 0; the
 * crop's ranges as torchvision's RandomResizedCrop (scale (0.08, 1), ratio (3/4, 4/3)) and the
 * elastic field's as Kornia's RandomElasticTransform (alpha (1, 1), sigma 32, kernel 63), both
 * off. */
SP_API void sp_geometry_params_default(sp_geometry_params *p);

/* The numbers drawn for one patch, in source pixels (sp_geometry_draw). */
typedef struct sp_geometry_drawn {
    size_t struct_size;
    double rotation, scale, scale_x, scale_y, shear_x, shear_y; /* degrees or factors */
    double translate_x, translate_y;                            /* pixels */
    /* The forward affine map, source point to output point: x' = m[0] x + m[1] y + m[2],
     * y' = m[3] x + m[4] y + m[5] (what kornia's warp_affine takes). */
    double matrix[6];
    int64_t crop_top, crop_left, crop_height, crop_width; /* the whole patch when crop is off */
} sp_geometry_drawn;

/* The numbers a patch of width x height with `seed` draws under `p` (struct_size set by the
 * caller in *out). SP_E_INVALID_ARG for NULL pointers, sizes outside [1, 2^20] or bad ranges. */
SP_API sp_status sp_geometry_draw(int64_t width, int64_t height, uint64_t seed,
                                  const sp_geometry_params *p, sp_geometry_drawn *out);

/* The elastic noise field of a patch: 2 planes of width x height doubles in [-1, 1) (x
 * displacements, then y), before smoothing. SP_E_INVALID_ARG as sp_geometry_draw. */
SP_API sp_status sp_geometry_elastic_noise(int64_t width, int64_t height, uint64_t seed,
                                           const sp_geometry_params *p, double *noise);

/* Augment one RGB8 patch in place (rows of width * 3 bytes). It needs a scratch copy of the
 * patch (and 3 planes of doubles with elastic on). SP_E_INVALID_ARG for a NULL pointer, a size
 * outside [1, 2^20] or bad parameters (the patch is untouched); SP_E_NOMEM when scratch cannot
 * be had (untouched). Thread-safe for distinct patches. */
SP_API sp_status sp_augment_geometry(uint8_t *rgb, int64_t width, int64_t height, uint64_t seed,
                                     const sp_geometry_params *p);

/* sp_augment_geometry over `count` patches stored one after another, patch i with seeds[i], on
 * up to `threads` threads (<= 0: one per core). The result does not depend on the thread count
 * or on how a set of patches is split into calls. SP_E_INVALID_ARG as above (nothing touched);
 * SP_E_NOMEM when a patch's scratch could not be had (that patch is left untouched, the others
 * are done). */
SP_API sp_status sp_augment_geometry_batch(uint8_t *rgb, int64_t count, int64_t width,
                                           int64_t height, const uint64_t *seeds,
                                           const sp_geometry_params *p, int threads);

/* ---- Stains: Reinhard, stain augmentation, cached estimates ---- */

/* Reinhard colour statistics (docs/stains.md): the mean and the standard deviation (population,
 * as numpy.std) of CIELAB L*, a*, b* (D65, L* in [0, 100], as scikit-image's rgb2lab) over a set
 * of pixels. Valid statistics have finite means with L* in [0, 100] and a*, b* in [-200, 200],
 * and finite standard deviations in [1e-6, 200]. */
typedef struct sp_reinhard_stats {
    double mean[3], std[3];
    int64_t pixels; /* pixels the statistics come from (0 for the reference) */
} sp_reinhard_stats;

/* The reference statistics Reinhard normalization maps to by default (docs/stains.md lists
 * them). */
SP_API void sp_reinhard_reference(sp_reinhard_stats *out);

/* The statistics of `npixels` interleaved RGB8 pixels: of all of them when `tissue_only` is 0,
 * else of those with some channel <= 219 (not background). SP_E_INVALID_ARG for NULL arguments
 * or npixels < 0, SP_E_UNSUPPORTED when no pixel is counted; *out zeroed on error. Thread-safe
 * (pure). */
SP_API sp_status sp_reinhard_stats_compute(const uint8_t *rgb, int64_t npixels, int tissue_only,
                                           sp_reinhard_stats *out);

/* The statistics of the tissue pixels of `slide`'s image with longer side `max_side` (0 means
 * 2048), read as sp_stains_estimate reads it. SP_E_UNSUPPORTED with a message when fewer than
 * 1000 pixels are tissue. Thread-safe like a region read. */
SP_API sp_status sp_reinhard_estimate(sp_slide *slide, int64_t max_side, sp_reinhard_stats *out,
                                      char *err, size_t err_len);

/* Reinhard normalization of `npixels` RGB8 pixels in place: each pixel to CIELAB, each channel
 * (x - source.mean) / source.std * target.std + target.mean, back to sRGB, clipped and rounded
 * (docs/stains.md). SP_E_INVALID_ARG (pixels untouched) for NULL arguments, npixels < 0 or
 * invalid statistics. Thread-safe (pure). */
SP_API sp_status sp_reinhard_normalize(const sp_reinhard_stats *source,
                                       const sp_reinhard_stats *target, uint8_t *rgb,
                                       int64_t npixels);

/* Stain augmentation in the slide's own Macenko stain space (docs/stains.md): every pixel's
 * haematoxylin and eosin concentrations under `slide_stains` are changed to c * alpha + beta,
 * alpha in [1 - sigma, 1 + sigma] and beta in [-sigma, sigma] for each stain, drawn from `seed`
 * (splitmix64, state seed ^ 0x737461696e617567, draws alpha_h, alpha_e, beta_h, beta_e), and the
 * change is applied to the pixel's optical density, so what the stains do not explain is kept.
 * `npixels` interleaved RGB8 pixels, in place. SP_E_INVALID_ARG (pixels untouched) for NULL
 * arguments, npixels < 0, sigma outside [0, 1] or invalid stains. Thread-safe (pure). */
SP_API sp_status sp_stains_augment(const sp_stains *slide_stains, uint8_t *rgb, int64_t npixels,
                                   uint64_t seed, double sigma);

/* sp_stains_augment over `count` patches of `patch_pixels` pixels each stored one after another,
 * patch i with seeds[i], on up to `threads` threads (0 or less: one per core). The result does
 * not depend on the thread count. Errors as sp_stains_augment, and SP_E_INVALID_ARG for
 * count < 0, patch_pixels < 0 or NULL seeds; nothing is changed then. */
SP_API sp_status sp_stains_augment_patches(const sp_stains *slide_stains, uint8_t *rgb,
                                           int64_t count, int64_t patch_pixels,
                                           const uint64_t *seeds, double sigma, int threads);

/* sp_stains_estimate and sp_reinhard_estimate with a cache on disk keyed by the slide's identity
 * (docs/stains.md): $XDG_CACHE_HOME/slidepipe/stains/KEY.json (or ~/.cache/...), KEY the SHA-256
 * of the slide's pixel hash property when it has one, else of its absolute path, size and
 * modification time, with max_side and the definitions' version. A valid entry is returned
 * without reading the slide; a missing, unreadable or invalid one is recomputed and rewritten
 * (atomically). The environment variable SLIDEPIPE_STAIN_CACHE=0 turns the cache off. Either
 * output may be NULL, but not both; with `stains` NULL a slide whose stains cannot be estimated
 * still gets its Reinhard statistics (not cached then). `*from_cache` (may be NULL) says whether the result was read
 * from the cache. A failure to write the cache is not an error. Errors as the two estimates. */
SP_API sp_status sp_stains_estimate_cached(sp_slide *slide, int64_t max_side, sp_stains *stains,
                                           sp_reinhard_stats *reinhard, int *from_cache,
                                           char *err, size_t err_len);

/* ---- ICC profiles (issue #27) --------------------------------------------------------------- */

/* The ICC profile embedded in the slide, as stored: TIFF tag 34675 (ICCProfile) of the first
 * level that carries one (Aperio, generic TIFF, NDPI, Philips and the other TIFF formats), or
 * the ICC Profile (0028,2000) of the first item of a DICOM level's Optical Path Sequence.
 * *data points into the slide and stays valid until sp_slide_close; *len is its size in bytes.
 * SP_E_NOT_FOUND (*data NULL, *len 0) when the slide has none; SP_E_INVALID_ARG for NULL
 * arguments. The profile is not checked here (sp_slide_set_icc_transform parses it).
 * Thread-safe. */
SP_API sp_status sp_slide_icc_profile(const sp_slide *slide, const uint8_t **data, size_t *len);

/* With `enable` non-zero, every later read of the slide's levels (sp_slide_read_region,
 * sp_read_regions, sp_slide_read_region_scaled, sp_slide_read_image, and conversion and
 * processing, which read through them) converts its pixels from the embedded profile to sRGB
 * through LittleCMS, with the profile's own rendering intent (as OpenSlide's examples with
 * Pillow's ImageCms do); alpha is kept, and transparent pixels stay (0,0,0,0). Associated
 * images are not converted. The transform is built once here and then shared by every thread
 * reading the slide. `enable` 0 turns conversion off again. Errors (the slide unchanged):
 * SP_E_NOT_FOUND when the slide embeds no profile, SP_E_CORRUPT when LittleCMS cannot read it,
 * SP_E_UNSUPPORTED for a profile that is not of RGB data; the message, naming the file, goes to
 * err (may be NULL). Not thread-safe against reads of the same slide running at the time:
 * call it after open, before reading. */
SP_API sp_status sp_slide_set_icc_transform(sp_slide *slide, int enable, char *err,
                                            size_t err_len);

/* ---- Planes: focal planes, channels, time points (issue #27) --------------------------------- */

typedef enum sp_plane_axis { SP_PLANE_Z = 0, SP_PLANE_C = 1, SP_PLANE_T = 2 } sp_plane_axis;

/* Open the slide's plane (z, c, t) instead of (0, 0, 0): focal plane z, channel plane c (an RGB
 * page's three samples are one channel plane) and time point t, each from 0. Formats with
 * planes: OME-TIFF (its first Image's planes), DICOM (focal planes and optical paths of a
 * TILED_FULL instance), Zeiss CZI (Z, C, T) and Hamamatsu NDPI (focal planes: the one at Z
 * offset 0 first, then the others by increasing offset). A slide of another format, or a plane
 * beyond the
 * slide's, fails to open with SP_E_INVALID_ARG and a message naming the file and the sizes.
 * SP_E_INVALID_ARG for a negative index or NULL options. */
SP_API sp_status sp_options_set_plane(sp_options *options, int64_t z, int64_t c, int64_t t);

/* How many planes the slide has along `axis` (1 for a format without planes, 0 for NULL or a bad
 * axis), and which one it shows. Thread-safe. */
SP_API int64_t sp_slide_plane_count(const sp_slide *slide, sp_plane_axis axis);
SP_API int64_t sp_slide_plane(const sp_slide *slide, sp_plane_axis axis);

#ifdef __cplusplus
}
#endif

#endif /* SLIDEPIPE_H */
