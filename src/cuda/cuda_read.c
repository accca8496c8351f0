/* cuda_read.c — region reads into device memory. Regions of uncompressed RGB tiles are copied
 * straight from pinned reads (cuda_raw_tiles.c), regions of JPEG tiles go to nvJPEG
 * (cuda_nvjpeg.c), of JPEG 2000 tiles to nvJPEG2000 (cuda_nvjpeg2k.c); everything else, and
 * whatever those paths decline, takes the CPU decode path here: the region is split into bands of
 * rows that fit a pinned staging buffer; band i is decoded by sp_slide_read_region into staging[i %
 * 2] and uploaded with an asynchronous 2-D copy, so the CPU decodes band i+1 while the copy engine
 * moves band i. An event per buffer keeps a buffer from being refilled before its upload has
 * finished. On any failure the destination area is zeroed on the device. sp_cuda_read_regions takes
 * many regions at once: those at one level of JPEG tiles go to nvJPEG together (cuda_nvjpeg.c), the
 * rest one by one as above. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/level_coords.h"
#include "cuda/cuda_internal.h"
#include "cuda/jpeg_planes.h"
#include "slide/slide.h"

/* Zero the w-byte x h destination rows after a failure (best effort: the error is already set). */
static void zero_device_area(sp_cuda_context *ctx, void *dst, int64_t stride, size_t row_bytes,
                             int64_t h) {
    cudaMemset2DAsync(dst, (size_t)stride, 0, row_bytes, (size_t)h, ctx->stream);
    cudaStreamSynchronize(ctx->stream);
}

sp_status sp_cuda_read_region(sp_cuda_context *ctx, sp_slide *slide, sp_pixel_format format,
                              void *dst_device, int64_t stride, int32_t level, int64_t x, int64_t y,
                              int64_t width, int64_t height) {
    int bpp = sp_pixel_format_bytes(format);
    if (ctx == NULL || slide == NULL || dst_device == NULL || bpp == 0 || width <= 0 ||
        height <= 0 || width > INT64_MAX / 4 || stride < width * bpp) {
        return SP_E_INVALID_ARG;
    }
    size_t row_bytes = (size_t)width * (size_t)bpp;
    if (row_bytes > ctx->band_bytes) {
        snprintf(ctx->message, sizeof ctx->message,
                 "a row of %lld pixels is wider than the %zu-byte staging buffer", (long long)width,
                 ctx->band_bytes);
        return SP_E_LIMIT;
    }
    double downsample = 1.0;
    sp_status st = sp_slide_level_downsample(slide, level, &downsample);
    if (st != SP_OK) {
        return st;
    }
    cudaError_t e = cudaSetDevice(ctx->device);
    if (e != cudaSuccess) {
        return sp_cuda_fail(ctx, e, "cannot select the CUDA device");
    }
    ctx->message[0] = '\0';
    /* uncompressed RGB tiles copied straight from pinned reads; JPEG and JPEG 2000 tiles
     * decoded on the GPU when nvJPEG or nvJPEG2000 can; any other case, or any failure there,
     * reads the region on the CPU path */
    if (sp_cuda_raw_read(ctx, slide, format, dst_device, stride, level, x, y, width, height) ==
            SP_OK ||
        sp_cuda_nvjpeg2k_read(ctx, slide, format, dst_device, stride, level, x, y, width, height) ==
            SP_OK ||
        sp_cuda_nvjpeg_read(ctx, slide, format, dst_device, stride, level, x, y, width, height) ==
            SP_OK) {
        return SP_OK;
    }
    sp_cuda_nvjpeg_count_cpu_region();
    st = sp_cuda_staging(ctx);
    if (st != SP_OK) {
        return st;
    }
    int64_t band = (int64_t)(ctx->band_bytes / row_bytes);
    int64_t first_row = (int64_t)floor((double)y / downsample);
    uint8_t *dst = dst_device;
    for (int64_t row = 0, i = 0; row < height && st == SP_OK; row += band, i++) {
        int64_t rows = height - row < band ? height - row : band;
        int b = (int)(i % 2);
        e = cudaEventSynchronize(ctx->uploaded[b]); /* this buffer's previous upload is done */
        if (e != cudaSuccess) {
            st = sp_cuda_fail(ctx, e, "waiting for an upload failed");
            break;
        }
        int64_t band_y = row == 0 ? y : sp_level0_coord(first_row + row, downsample);
        st = sp_slide_read_region(slide, format, ctx->staging[b], (int64_t)row_bytes, level, x,
                                  band_y, width, rows);
        if (st != SP_OK) {
            break;
        }
        e = cudaMemcpy2DAsync(dst + row * stride, (size_t)stride, ctx->staging[b], row_bytes,
                              row_bytes, (size_t)rows, cudaMemcpyHostToDevice, ctx->stream);
        if (e == cudaSuccess) {
            e = cudaEventRecord(ctx->uploaded[b], ctx->stream);
        }
        if (e != cudaSuccess) {
            st = sp_cuda_fail(ctx, e, "uploading a band failed");
        }
    }
    if (st == SP_OK) {
        e = cudaStreamSynchronize(ctx->stream);
        if (e != cudaSuccess) {
            st = sp_cuda_fail(ctx, e, "uploading the region failed");
        }
    }
    if (st != SP_OK) {
        zero_device_area(ctx, dst_device, stride, row_bytes, height);
    }
    return st;
}

sp_status sp_cuda_read_regions(sp_cuda_context *ctx, sp_slide *slide, sp_pixel_format format,
                               sp_cuda_region *regions, size_t n) {
    int bpp = sp_pixel_format_bytes(format);
    if (ctx == NULL || slide == NULL || (regions == NULL && n > 0) || bpp == 0) {
        return SP_E_INVALID_ARG;
    }
    bool *done = calloc(n > 0 ? n : 1, sizeof *done);
    bool *grouped = calloc(n > 0 ? n : 1, sizeof *grouped);
    sp_cuda_region *group = malloc((n > 0 ? n : 1) * sizeof *group);
    size_t *where = malloc((n > 0 ? n : 1) * sizeof *where);
    if (done == NULL || grouped == NULL || group == NULL || where == NULL) {
        free(done);
        free(grouped);
        free(group);
        free(where);
        return SP_E_NOMEM;
    }
    /* Regions whose arguments sp_cuda_read_region would take, level by level, through the
     * batched nvJPEG path; the rest, and whatever it declines, one by one below. */
    if (cudaSetDevice(ctx->device) == cudaSuccess) {
        for (size_t i = 0; i < n; i++) {
            const sp_cuda_region *r = &regions[i];
            bool fits = r->dst_device != NULL && r->width > 0 && r->height > 0 &&
                        r->width <= INT64_MAX / 4 && r->stride >= r->width * bpp &&
                        (size_t)r->width * (size_t)bpp <= ctx->band_bytes;
            grouped[i] = !fits;
        }
        for (size_t i = 0; i < n; i++) {
            if (grouped[i]) {
                continue;
            }
            size_t m = 0;
            for (size_t k = i; k < n; k++) {
                if (!grouped[k] && regions[k].level == regions[i].level) {
                    grouped[k] = true;
                    group[m] = regions[k];
                    where[m++] = k;
                }
            }
            bool *got = calloc(m, sizeof *got);
            if (got != NULL &&
                sp_cuda_nvjpeg_read_many(ctx, slide, format, regions[i].level, group, m, got) > 0) {
                for (size_t k = 0; k < m; k++) {
                    done[where[k]] = got[k];
                }
            }
            free(got);
        }
    }
    sp_status first = SP_OK;
    for (size_t i = 0; i < n; i++) {
        sp_cuda_region *r = &regions[i];
        r->status = done[i] ? SP_OK
                            : sp_cuda_read_region(ctx, slide, format, r->dst_device, r->stride,
                                                  r->level, r->x, r->y, r->width, r->height);
        first = first == SP_OK ? r->status : first;
    }
    free(done);
    free(grouped);
    free(group);
    free(where);
    return first;
}

bool sp_cuda_level_span(int64_t level_width, int64_t level_height, double downsample, int64_t x,
                        int64_t y, int64_t w, int64_t h, sp_cuda_span *span) {
    double lx = floor((double)x / downsample), ly = floor((double)y / downsample);
    if (!(fabs(lx) < 9e15 && fabs(ly) < 9e15)) {
        sp_cuda_note_fallback("region origin out of range");
        return false;
    }
    span->lx = (int64_t)lx;
    span->ly = (int64_t)ly;
    span->x0 = span->lx > 0 ? span->lx : 0;
    span->y0 = span->ly > 0 ? span->ly : 0;
    span->x1 = span->lx + w < level_width ? span->lx + w : level_width;
    span->y1 = span->ly + h < level_height ? span->ly + h : level_height;
    if (span->x0 >= span->x1 || span->y0 >= span->y1) {
        sp_cuda_note_fallback("the region lies outside the level");
        return false;
    }
    return true;
}

sp_status sp_cuda_fill_outside(sp_cuda_context *ctx, const sp_slide *slide, sp_pixel_format format,
                               uint8_t *dst, int64_t stride, int64_t w, int64_t h,
                               const sp_cuda_span *span) {
    if (span->x0 == span->lx && span->y0 == span->ly && span->x1 == span->lx + w &&
        span->y1 == span->ly + h) {
        return SP_OK;
    }
    uint8_t empty[4] = {0, 0, 0, 0};
    if (format == SP_PIXEL_RGB8) {
        memcpy(empty, slide->background, 3);
    }
    int e = sp_cuda_launch_fill_pixels(dst, stride, w, h, sp_pixel_format_bytes(format), empty,
                                       ctx->stream);
    if (e != 0) {
        return sp_cuda_note_fallback("the fill kernel failed: %s",
                                     cudaGetErrorString((cudaError_t)e));
    }
    return SP_OK;
}
