/* png.c — PNG images (MIRAX levels stored as PNG) through libpng, decoded into straight RGBA8.
 *
 * The stream's size is checked against the caller's image before any row is decoded, so a
 * hostile header cannot make libpng write outside the caller's buffer or allocate for a huge
 * image. Opaque colour types become RGBA8 the way OpenSlide's PNG reader makes them: palette,
 * grey and low bit depths expanded to RGB, 16-bit samples scaled to 8 bits (png_set_scale_16),
 * alpha 255. Streams with an alpha channel or a transparency chunk are refused, as OpenSlide
 * refuses them. Gamma and colour chunks are ignored (no conversion), like OpenSlide. libpng reports
 * fatal errors through a function that must not return; we longjmp back out of it with libpng's
 * own message. Interlaced streams are decoded (libpng's interlace handling) into the caller's
 * rows directly, so no scratch image is needed.
 */
#include "codecs/codec.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <png.h>

typedef struct png_job {
    const uint8_t *data;
    size_t len, pos;
    uint64_t width, height;
    uint8_t *rgba;
    size_t stride;
    jmp_buf jump;
    char msg[160];
    sp_status status;
    png_bytep *rows; /* one pointer per output row, for png_read_image */
} png_job;

static void png_on_error(png_structp png, png_const_charp msg) {
    png_job *job = png_get_error_ptr(png);
    snprintf(job->msg, sizeof job->msg, "PNG: %s", msg);
    longjmp(job->jump, 1);
}

static void png_on_warning(png_structp png, png_const_charp msg) {
    (void)png;
    (void)msg; /* a damaged ancillary chunk: the image itself still decodes */
}

static void png_read_bytes(png_structp png, png_bytep out, png_size_t n) {
    png_job *job = png_get_io_ptr(png);
    if (n > job->len - job->pos) {
        png_error(png, "stream ends early");
    }
    memcpy(out, job->data + job->pos, n);
    job->pos += n;
}

/* The part that may longjmp: its locals are not read after the jump (everything lives in job). */
static int png_run(png_structp png, png_infop info, png_job *job) {
    if (setjmp(job->jump)) {
        return -1;
    }
    png_set_read_fn(png, job, png_read_bytes);
    png_read_info(png, info);
    png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
    if ((uint64_t)w != job->width || (uint64_t)h != job->height) {
        snprintf(job->msg, sizeof job->msg, "PNG image is %ux%u where %llux%llu was expected",
                 (unsigned)w, (unsigned)h, (unsigned long long)job->width,
                 (unsigned long long)job->height);
        job->status = SP_E_CORRUPT;
        return -1;
    }
    /* As OpenSlide: 16-bit samples scaled to 8 bits, palette and low bit depths expanded, grey
     * made RGB, then a filler byte of 255 as alpha. */
    png_set_scale_16(png);
    png_set_expand(png);
    png_set_gray_to_rgb(png);
    png_set_filler(png, 0xFF, PNG_FILLER_AFTER);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    if (png_get_color_type(png, info) != PNG_COLOR_TYPE_RGB) {
        /* an alpha channel or transparency chunk; MIRAX images are opaque, and OpenSlide
         * refuses these too */
        snprintf(job->msg, sizeof job->msg,
                 "PNG image has transparency (colour type %d), which is not supported",
                 png_get_color_type(png, info));
        job->status = SP_E_UNSUPPORTED;
        return -1;
    }
    if (png_get_rowbytes(png, info) != (size_t)job->width * 4) {
        png_error(png, "unexpected row size after conversion to RGBA");
    }
    for (uint64_t y = 0; y < job->height; y++) {
        job->rows[y] = job->rgba + y * job->stride;
    }
    png_read_image(png, job->rows);
    png_read_end(png, NULL);
    return 0;
}

/* An error: the caller's area zeroed (rows may be half-written), job's message recorded. */
static sp_status png_fail(const png_job *job, sp_err *err) {
    for (uint64_t y = 0; y < job->height; y++) {
        memset(job->rgba + y * job->stride, 0, (size_t)job->width * 4);
    }
    return sp_err_set(err, job->status, "%s", job->msg);
}

sp_status sp_png_decode_rgba(const uint8_t *data, size_t len, uint64_t width, uint64_t height,
                             uint8_t *rgba, size_t stride, sp_err *err) {
    if (data == NULL || rgba == NULL || width == 0 || height == 0 || width > PNG_UINT_31_MAX ||
        height > PNG_UINT_31_MAX || stride < width * 4) {
        return sp_err_set(err, SP_E_INVALID_ARG, "PNG: bad arguments");
    }
    png_job job = {.data = data,
                   .len = len,
                   .width = width,
                   .height = height,
                   .rgba = rgba,
                   .stride = stride,
                   .status = SP_E_CORRUPT};
    if (len < 8 || png_sig_cmp(data, 0, 8) != 0) {
        snprintf(job.msg, sizeof job.msg, "PNG: not a PNG stream (bad signature)");
        return png_fail(&job, err);
    }
    job.rows = malloc((size_t)height * sizeof *job.rows);
    if (job.rows == NULL) {
        job.status = SP_E_NOMEM;
        snprintf(job.msg, sizeof job.msg, "PNG: out of memory for %llu row pointers",
                 (unsigned long long)height);
        return png_fail(&job, err);
    }
    png_structp png =
        png_create_read_struct(PNG_LIBPNG_VER_STRING, &job, png_on_error, png_on_warning);
    png_infop info = png != NULL ? png_create_info_struct(png) : NULL;
    if (png == NULL || info == NULL) {
        png_destroy_read_struct(png != NULL ? &png : NULL, NULL, NULL);
        free(job.rows);
        job.status = SP_E_NOMEM;
        snprintf(job.msg, sizeof job.msg, "PNG: out of memory for the decoder");
        return png_fail(&job, err);
    }
    /* libpng's own cap on ancillary chunk memory; the image size is checked against ours. */
    png_set_chunk_malloc_max(png, 8u << 20);
    int rc = png_run(png, info, &job);
    png_destroy_read_struct(&png, &info, NULL);
    free(job.rows);
    return rc != 0 ? png_fail(&job, err) : SP_OK;
}
