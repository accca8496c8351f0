/* cuda_raw_tiles.c — region reads into device memory from uncompressed tiles without a CPU pass
 * over the pixels: for a TIFF level of uncompressed, tiled, 8-bit, chunky RGB (what
 * make-bench-slides.sh's raw.tif and scanners' uncompressed exports are) read as RGB8, a tile's
 * stored rows are already the destination's bytes. So the rows of each tile that the region needs
 * are read from the file straight into the context's pinned staging (one pread per tile part),
 * and 2-D asynchronous copies put them in place in the caller's rows; the two staging buffers
 * alternate, an event per buffer keeping a buffer from being refilled before its copies are done,
 * so reading the next batch of tiles overlaps the copies of the previous one.
 *
 * The level's kind and the stored rows come through the slide's raw-tile operations
 * (slide/raw_tiles.c), so this file knows nothing of TIFF. The bytes are those the CPU path gives
 * (a copy of the same stored samples). Anything else — another layout or format, RGBA8 output, a
 * missing or short tile, a read error — goes to the CPU path, which rewrites the whole
 * destination. With SLIDEPIPE_CUFILE=1 the rows are read with cuFile (GPUDirect Storage) into
 * device buffers instead, where it can register the slide's file (cuda_cufile.c), and the
 * copies run on the device. */
#include <stdbool.h>
#include <string.h>

#include "cuda/cuda_cufile.h"
#include "cuda/cuda_internal.h"
#include "cuda/jpeg_planes.h"
#include "slide/slide.h"

sp_status sp_cuda_raw_read(sp_cuda_context *ctx, sp_slide *slide, sp_pixel_format format,
                           uint8_t *dst, int64_t stride, int32_t level, int64_t x, int64_t y,
                           int64_t w, int64_t h) {
    sp_raw_level raw;
    if (!sp_slide_raw_level(slide, level, &raw) || raw.kind != SP_RAW_RGB8) {
        return SP_E_UNSUPPORTED; /* not this path's kind of level: nothing to note */
    }
    if (format != SP_PIXEL_RGB8) {
        return sp_cuda_note_fallback("uncompressed tiles are copied directly into RGB8 only");
    }
    if (sp_slide_error(slide) != NULL) {
        return sp_cuda_note_fallback("the slide has a sticky error");
    }
    const sp_level *l = &slide->levels[level];
    int64_t tw = raw.tile_width, th = raw.tile_height;
    uint64_t row_bytes = (uint64_t)tw * 3;
    if (tw > 65536 || th > 65536 || row_bytes * (uint64_t)th > SP_CUDA_STAGING_BYTES) {
        return sp_cuda_note_fallback("tile size out of the direct path's range");
    }
    sp_cuda_span span;
    if (!sp_cuda_level_span(l->width, l->height, l->downsample, x, y, w, h, &span)) {
        return SP_E_UNSUPPORTED; /* it noted why */
    }
    int64_t lx = span.lx, ly = span.ly, x0 = span.x0, y0 = span.y0, x1 = span.x1, y1 = span.y1;
    sp_status st = sp_cuda_staging(ctx);
    if (st != SP_OK) {
        return sp_cuda_note_fallback("no pinned staging: %s", ctx->message);
    }
    st = sp_cuda_fill_outside(ctx, slide, format, dst, stride, w, h, &span);
    if (st != SP_OK) {
        return st;
    }
    int64_t col0 = x0 / tw, col1 = (x1 - 1) / tw, row0 = y0 / th, row1 = (y1 - 1) / th;
    int64_t across = col1 - col0 + 1, count = across * (row1 - row0 + 1);
    /* With SLIDEPIPE_CUFILE=1 and a local file that cuFile registers, the rows go from the file
     * into the context's device buffers instead of pinned staging, and the 2-D copies run on
     * the device (cuda_cufile.c). */
    uint8_t *device[2] = {NULL, NULL};
    if (sp_cuda_cufile_wanted()) {
        int fd = -1;
        uint64_t unused = 0;
        sp_err ignored = {0};
        if (sp_slide_raw_rows_at(slide, level, col0, row0, y0 - row0 * th, y0 - row0 * th + 1, &fd,
                                 &unused, &ignored) == SP_OK &&
            (device[0] = sp_cuda_cufile_buffer(ctx, fd, 0)) != NULL) {
            device[1] = sp_cuda_cufile_buffer(ctx, fd, 1);
        }
    }
    bool by_cufile = device[0] != NULL && device[1] != NULL;
    size_t used = SP_CUDA_STAGING_BYTES; /* bytes of the current buffer filled; full: switch */
    int b = 1;
    for (int64_t k = 0; k < count && st == SP_OK; k++) {
        int64_t row = row0 + k / across, col = col0 + k % across;
        int64_t tx = col * tw, ty = row * th;
        int64_t cx0 = tx > x0 ? tx : x0, cy0 = ty > y0 ? ty : y0;
        int64_t cx1 = tx + tw < x1 ? tx + tw : x1, cy1 = ty + th < y1 ? ty + th : y1;
        /* only the tile's rows the region needs, whole rows (one read) */
        size_t part = (size_t)(row_bytes * (uint64_t)(cy1 - cy0));
        if (used + part > SP_CUDA_STAGING_BYTES) {
            /* next buffer: record the copies out of this one, wait for that one's copies */
            cudaError_t e = cudaEventRecord(ctx->uploaded[b], ctx->stream);
            b ^= 1;
            if (e == cudaSuccess) {
                e = cudaEventSynchronize(ctx->uploaded[b]);
            }
            if (e != cudaSuccess) {
                st = sp_cuda_note_fallback("staging switch failed: %s", cudaGetErrorString(e));
                break;
            }
            used = 0;
        }
        uint8_t *buf = (by_cufile ? device[b] : ctx->staging[b]) + used;
        sp_err err = {0};
        if (by_cufile) {
            int fd = -1;
            uint64_t offset = 0;
            st = sp_slide_raw_rows_at(slide, level, col, row, cy0 - ty, cy1 - ty, &fd, &offset,
                                      &err);
            if (st == SP_OK) {
                st = sp_cuda_cufile_read(ctx, b, used, offset, part);
                if (st != SP_OK) {
                    break; /* it noted why */
                }
            }
        } else {
            st = sp_slide_read_raw_rows(slide, level, col, row, cy0 - ty, cy1 - ty, buf, &err);
        }
        if (st != SP_OK) {
            st = sp_cuda_note_fallback("%s", err.msg);
            break;
        }
        cudaError_t e = cudaMemcpy2DAsync(
            dst + (cy0 - ly) * stride + (cx0 - lx) * 3, (size_t)stride, buf + (cx0 - tx) * 3,
            (size_t)row_bytes, (size_t)(cx1 - cx0) * 3, (size_t)(cy1 - cy0),
            by_cufile ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice, ctx->stream);
        if (e != cudaSuccess) {
            st = sp_cuda_note_fallback("a tile's copy failed: %s", cudaGetErrorString(e));
            break;
        }
        used += part;
    }
    /* the staging must not be reused by anyone before these copies are done */
    cudaError_t e = cudaEventRecord(ctx->uploaded[b], ctx->stream);
    cudaError_t es = cudaStreamSynchronize(ctx->stream);
    if (st == SP_OK && (e != cudaSuccess || es != cudaSuccess)) {
        st = sp_cuda_note_fallback("the copies failed: %s",
                                   cudaGetErrorString(e != cudaSuccess ? e : es));
    }
    if (st != SP_OK) {
        (void)cudaGetLastError();
        return SP_E_UNSUPPORTED;
    }
    sp_cuda_count_direct_region();
    if (by_cufile) {
        sp_cuda_count_cufile_region();
    }
    return SP_OK;
}
