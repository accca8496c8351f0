/* cuda_internal.h — what the CUDA backend's files share: the context (device, stream, pinned
 * staging) and its error helper. Only built when the CUDA backend is (SLIDEPIPE_CUDA). */
#ifndef SP_CUDA_CUDA_INTERNAL_H
#define SP_CUDA_CUDA_INTERNAL_H

#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "slide/slide.h"
#include "slidepipe.h"

/* Bytes of each of the two pinned staging buffers: large enough that a band's upload runs at
 * the link's speed, small enough that a context stays cheap. */
#define SP_CUDA_STAGING_BYTES ((size_t)32 << 20)

/* A context's nvJPEG decoder (cuda_nvjpeg.c), made on the first JPEG region read. */
typedef struct sp_nvjpeg sp_nvjpeg;

/* A context's cuFile state (cuda_cufile.c), made on the first read that asks for cuFile. */
typedef struct sp_cufile sp_cufile;

/* A context's nvJPEG2000 decoder (cuda_nvjpeg2k.c), made on the first JPEG 2000 region read. */
typedef struct sp_nvjpeg2k sp_nvjpeg2k;

struct sp_cuda_context {
    int device;
    cudaStream_t stream;
    uint8_t *staging[2];     /* pinned host memory, SP_CUDA_STAGING_BYTES each, made on first use */
    cudaEvent_t uploaded[2]; /* recorded after the upload out of staging[i] */
    size_t band_bytes;       /* bytes of a band (<= SP_CUDA_STAGING_BYTES; tests lower it) */
    sp_nvjpeg *nvjpeg;       /* NULL until a region of JPEG tiles is read */
    int nvjpeg_no_hardware;  /* the hardware decoder failed once: use the default back end */
    sp_cufile *cufile;       /* NULL until a read asks for cuFile (SLIDEPIPE_CUFILE=1) */
    sp_nvjpeg2k *nvjpeg2k;   /* NULL until a region of JPEG 2000 tiles is read */
    char message[256];
};

/* Allocate the context's pinned staging buffers if they are not yet there (only region reads
 * need them, so contexts used for kernels alone never pin host memory). */
sp_status sp_cuda_staging(sp_cuda_context *ctx);

/* A function of a run-time GPU library (sp_cuda_library_found must have found it), or NULL. */
void *sp_cuda_library_symbol(sp_cuda_library library, const char *name);

/* The functions names[0..n) of a run-time GPU library into slots[0..n); false, with why it could
 * not (the library not found, or the first name it lacks) in `why`, when any is missing. */
bool sp_cuda_library_symbols(sp_cuda_library library, const char *const *names, size_t n,
                             void **slots, char *why, size_t why_len);

/* Record "what: CUDA's reason" on the context and return SP_E_IO (or SP_E_NOMEM for
 * allocation failures). */
sp_status sp_cuda_fail(sp_cuda_context *ctx, cudaError_t e, const char *what);

/* Read a region into device memory with its JPEG tiles decoded by nvJPEG (cuda_nvjpeg.c). SP_OK
 * when done; anything else means this path does not handle the region (the reason is kept for
 * sp_cuda_get_decode_stats) and the caller must read it on the CPU path, which rewrites the whole
 * destination. Arguments as sp_cuda_read_region's, already checked. */
sp_status sp_cuda_nvjpeg_read(sp_cuda_context *ctx, sp_slide *slide, sp_pixel_format format,
                              uint8_t *dst, int64_t stride, int32_t level, int64_t x, int64_t y,
                              int64_t w, int64_t h);

/* sp_cuda_nvjpeg_read for n regions of one level at once (cuda_nvjpeg.c): each distinct tile
 * under them decoded once, in large batches. done[i] says whether region i was read here; the
 * others must be read on their own (sp_cuda_read_region). Returns how many were read here. */
size_t sp_cuda_nvjpeg_read_many(sp_cuda_context *ctx, sp_slide *slide, sp_pixel_format format,
                                int32_t level, sp_cuda_region *regions, size_t n, bool *done);

/* Read a region of an uncompressed RGB TIFF level into device memory as RGB8 (cuda_raw_tiles.c):
 * the rows of each tile the region needs are read straight into pinned staging and copied to the
 * destination with 2-D copies, no pixel touched on the CPU. Same contract as
 * sp_cuda_nvjpeg_read (SP_OK, or fall back to the CPU path). */
sp_status sp_cuda_raw_read(sp_cuda_context *ctx, sp_slide *slide, sp_pixel_format format,
                           uint8_t *dst, int64_t stride, int32_t level, int64_t x, int64_t y,
                           int64_t w, int64_t h);

/* Read a region of a level of JPEG 2000 tiles (SP_RAW_JPEG2000) into device memory with the tiles
 * decoded by nvJPEG2000 (cuda_nvjpeg2k.c). Same contract as sp_cuda_nvjpeg_read; SP_E_UNSUPPORTED
 * without a note for a level of another kind. */
sp_status sp_cuda_nvjpeg2k_read(sp_cuda_context *ctx, sp_slide *slide, sp_pixel_format format,
                                uint8_t *dst, int64_t stride, int32_t level, int64_t x, int64_t y,
                                int64_t w, int64_t h);

/* Regions and tiles read through nvJPEG2000 in this process so far. */
void sp_cuda_nvjpeg2k_counts(uint64_t *regions, uint64_t *tiles);

/* Free the context's nvJPEG2000 decoder, if any (the context's device must be current). */
void sp_cuda_nvjpeg2k_destroy(sp_cuda_context *ctx);

/* Whether sp_cuda_nvjpeg_read_many decodes the tiles of this level (nvJPEG found and not turned
 * off, the level's tiles baseline JPEG of a size it takes); *raw is the level's raw layout. */
bool sp_cuda_nvjpeg_takes(sp_slide *slide, int32_t level, sp_raw_level *raw);

/* Count a region read on the CPU path / through sp_cuda_raw_read (sp_cuda_get_decode_stats). */
void sp_cuda_nvjpeg_count_cpu_region(void);
void sp_cuda_count_direct_region(void);
void sp_cuda_count_cufile_region(void);

/* A region's place in its level: the level coordinates (lx, ly) of its origin, as
 * sp_slide_read_region computes them, and the part inside the level, [x0, x1) x [y0, y1). */
typedef struct sp_cuda_span {
    int64_t lx, ly, x0, y0, x1, y1;
} sp_cuda_span;

/* Fill *span for a region at level-0 (x, y) of w x h on a level of the given size and downsample;
 * false, with the reason noted as a fallback, when the origin is out of range or the region lies
 * wholly outside the level. */
bool sp_cuda_level_span(int64_t level_width, int64_t level_height, double downsample, int64_t x,
                        int64_t y, int64_t w, int64_t h, sp_cuda_span *span);

/* Where a region reaches past its level (span narrower than w x h), fill the whole destination
 * with what lies outside a level, as the CPU reader does: transparent, or the slide's background
 * in RGB8; the tiles are painted over it afterwards. SP_OK, or the reason noted as a fallback. */
sp_status sp_cuda_fill_outside(sp_cuda_context *ctx, const sp_slide *slide, sp_pixel_format format,
                               uint8_t *dst, int64_t stride, int64_t w, int64_t h,
                               const sp_cuda_span *span);

/* Keep why the last region went to the CPU path (printf-style); returns SP_E_UNSUPPORTED. */
sp_status sp_cuda_note_fallback(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Free the context's nvJPEG decoder, if any (the context's device must be current). */
void sp_cuda_nvjpeg_destroy(sp_cuda_context *ctx);

#endif
