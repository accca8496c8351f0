/* jpeg.c — JPEG tiles decoded through libjpeg(-turbo) into straight RGBA8.
 *
 * Slide JPEG tiles are often abbreviated streams whose tables live in a separate TIFF tag, and
 * their colour space is declared by the container rather than the stream, so both can be passed
 * in. Decoding keeps libjpeg's defaults (accurate integer IDCT, fancy upsampling, no scaling) so
 * that pixels are identical to OpenSlide's. libjpeg reports fatal errors by calling a function
 * that must not return; we longjmp back out of it, turning every error into an sp_status with
 * libjpeg's own message. Warnings (damaged entropy data, a missing end marker) are silenced and
 * the image still counts as decoded, as libjpeg intends.
 */
#include "codecs/codec.h"

#include <limits.h>
#include <setjmp.h>
#include <stdio.h> /* jpeglib.h uses FILE without including it */
#include <stdlib.h>
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>

#include "base/limits.h"

/* libjpeg needs whole-image coefficient buffers for progressive and multi-scan streams, sized
 * from the header alone. This caps them (libjpeg then fails with "Backing store not supported")
 * so a few hostile header bytes cannot claim gigabytes; 512 MiB still holds a 16k x 16k
 * progressive 4:4:4 image. */
#define SP_JPEG_MAX_WORK_MEMORY (512L << 20)

/* Each scan of a progressive stream walks every block of the image, so a small stream with
 * thousands of empty scans can keep the decoder busy for minutes. Real encoders write about ten
 * scans; libjpeg-turbo's own tools suggest a limit of this order. */
#define SP_JPEG_MAX_SCANS 1000

/* Rows decoded per jpeg_read_scanlines call in area decodes (an iMCU row is at most 16). */
#define SCRATCH_ROWS 16

typedef struct sp_jpeg_errmgr {
    struct jpeg_error_mgr pub; /* first, so libjpeg's pointer to it is a pointer to us */
    jmp_buf jump;
    sp_status status;          /* what a longjmp means; set together with msg */
    char msg[JMSG_LENGTH_MAX]; /* JMSG_LENGTH_MAX is what format_message may write */
} sp_jpeg_errmgr;

/* Everything a decode touches lives here, in the frame of the function that calls the one
 * holding setjmp, so nothing the longjmp path reads is an indeterminate local of that function. */
typedef struct sp_jpeg_job {
    struct jpeg_decompress_struct cinfo;
    sp_jpeg_errmgr jerr;
    struct jpeg_progress_mgr progress;
    const uint8_t *data;
    size_t len;
    const uint8_t *tables;
    size_t tables_len;
    sp_jpeg_space space;
    /* decode only */
    uint64_t width, height;
    uint8_t *rgba;
    size_t stride;
    uint8_t *scratch;     /* one decoded row, only when a row cannot go straight to rgba */
    uint64_t rows_dirty;  /* rows of rgba written so far, zeroed again on failure */
    size_t row_out_bytes; /* bytes per rgba row that decoding writes (the cropped width) */
    /* area decode only (see sp_jpeg_decode_area) */
    uint64_t ax, ay, aw, ah;
    unsigned scale;
    unsigned bpp;
    uint64_t image_w, image_h; /* the decoded image's size, once known */
    /* header only */
    uint32_t *out_width, *out_height;
    int *out_components;
} sp_jpeg_job;

static void jpeg_on_error(j_common_ptr cinfo) {
    sp_jpeg_errmgr *jerr = (sp_jpeg_errmgr *)cinfo->err;
    switch (jerr->pub.msg_code) {
    case JERR_OUT_OF_MEMORY:
        jerr->status = SP_E_NOMEM;
        break;
    case JERR_NO_BACKING_STORE:
        jerr->status = SP_E_LIMIT;
        break;
    case JERR_BAD_PRECISION:
    case JERR_NOT_COMPILED:
    case JERR_NOTIMPL:
    case JERR_CONVERSION_NOTIMPL:
        jerr->status = SP_E_UNSUPPORTED;
        break;
    default:
        jerr->status = SP_E_CORRUPT;
        break;
    }
    cinfo->err->format_message(cinfo, jerr->msg);
    if (jerr->status == SP_E_LIMIT) {
        /* libjpeg's own wording would send the reader looking for a missing feature */
        snprintf(jerr->msg, sizeof jerr->msg,
                 "image needs more than %ld MiB of decoder working memory",
                 SP_JPEG_MAX_WORK_MEMORY >> 20);
    }
    longjmp(jerr->jump, 1);
}

/* Warnings (msg_level -1) mean damaged data that libjpeg has already worked around; traces are
 * noise. A library must not print either, so both are only counted, as libjpeg does itself. */
static void jpeg_on_message(j_common_ptr cinfo, int msg_level) {
    if (msg_level < 0) {
        cinfo->err->num_warnings++;
    }
}

static void jpeg_on_output(j_common_ptr cinfo) {
    (void)cinfo;
}

static void jpeg_on_progress(j_common_ptr cinfo) {
    j_decompress_ptr dinfo = (j_decompress_ptr)cinfo;
    if (dinfo->input_scan_number > SP_JPEG_MAX_SCANS) {
        sp_jpeg_errmgr *jerr = (sp_jpeg_errmgr *)cinfo->err;
        jerr->status = SP_E_CORRUPT;
        snprintf(jerr->msg, sizeof jerr->msg, "stream has more than %d scans",
                 SP_JPEG_MAX_SCANS);
        longjmp(jerr->jump, 1);
    }
}

/* Set up the decompressor and read the stream's header (after the tables, when given). Must run
 * under the job's setjmp. Returns SP_OK or a status already recorded in err. */
static sp_status jpeg_begin(sp_jpeg_job *job, sp_err *err) {
    struct jpeg_decompress_struct *cinfo = &job->cinfo;
    jpeg_create_decompress(cinfo);
    cinfo->mem->max_memory_to_use = SP_JPEG_MAX_WORK_MEMORY;
    job->progress.progress_monitor = jpeg_on_progress;
    cinfo->progress = &job->progress;

    /* jpeg_mem_src takes an unsigned long length */
    if (job->len > ULONG_MAX || job->tables_len > ULONG_MAX) {
        return sp_err_set(err, SP_E_LIMIT, "JPEG: stream of %zu bytes is too long",
                          job->len > job->tables_len ? job->len : job->tables_len);
    }
    if (job->tables != NULL) {
        jpeg_mem_src(cinfo, job->tables, (unsigned long)job->tables_len);
        if (jpeg_read_header(cinfo, FALSE) != JPEG_HEADER_TABLES_ONLY) {
            return sp_err_set(err, SP_E_CORRUPT,
                              "JPEG: the tables stream holds an image, not only tables");
        }
    }
    jpeg_mem_src(cinfo, job->data, (unsigned long)job->len);
    if (jpeg_read_header(cinfo, TRUE) != JPEG_HEADER_OK) {
        return sp_err_set(err, SP_E_CORRUPT, "JPEG: no image in the stream");
    }
    return SP_OK;
}

static sp_status jpeg_header_body(sp_jpeg_job *job, sp_err *err) {
    sp_status st = jpeg_begin(job, err);
    if (st != SP_OK) {
        return st;
    }
    *job->out_width = job->cinfo.image_width;
    *job->out_height = job->cinfo.image_height;
    *job->out_components = job->cinfo.num_components;
    return SP_OK;
}

static const char *jpeg_space_name(sp_jpeg_space space) {
    switch (space) {
    case SP_JPEG_SPACE_RGB:
        return "RGB";
    case SP_JPEG_SPACE_YCBCR:
        return "YCbCr";
    case SP_JPEG_SPACE_GREY:
        return "grey";
    default:
        return "automatic";
    }
}

/* Expand n grey samples at the start of row into RGBA, in place. Going backwards, pixel i is
 * read from byte i before bytes 4i..4i+3 are written, and 4i >= i, so nothing is overwritten
 * before it is read. */
static void grey_to_rgba(uint8_t *row, const uint8_t *grey, size_t n) {
    for (size_t i = n; i-- > 0;) {
        uint8_t g = grey[i];
        row[4 * i + 0] = g;
        row[4 * i + 1] = g;
        row[4 * i + 2] = g;
        row[4 * i + 3] = 255;
    }
}

/* Choose the decompressor's colour handling for the job's declared space; returns SP_OK or a
 * status recorded in err. */
static sp_status jpeg_set_space(sp_jpeg_job *job, sp_err *err) {
    struct jpeg_decompress_struct *cinfo = &job->cinfo;
    int comps = cinfo->num_components;
    if (comps != 1 && comps != 3) {
        return sp_err_set(err, SP_E_UNSUPPORTED,
                          "JPEG: %d colour components (only grey and 3-component colour are "
                          "supported; 4 usually means CMYK)",
                          comps);
    }
    bool grey_space = job->space == SP_JPEG_SPACE_GREY;
    if (job->space != SP_JPEG_SPACE_AUTO && grey_space != (comps == 1)) {
        return sp_err_set(err, SP_E_CORRUPT,
                          "JPEG: stream has %d components but the container declares %s", comps,
                          jpeg_space_name(job->space));
    }
    if (job->space == SP_JPEG_SPACE_RGB) {
        cinfo->jpeg_color_space = JCS_RGB;
    } else if (job->space == SP_JPEG_SPACE_YCBCR) {
        cinfo->jpeg_color_space = JCS_YCbCr;
    }
    return SP_OK;
}

static sp_status jpeg_decode_body(sp_jpeg_job *job, sp_err *err) {
    struct jpeg_decompress_struct *cinfo = &job->cinfo;
    sp_status st = jpeg_begin(job, err);
    if (st == SP_OK) {
        st = jpeg_set_space(job, err);
    }
    if (st != SP_OK) {
        return st;
    }
    int comps = cinfo->num_components;
    /* libjpeg-turbo fills the alpha byte of JCS_EXT_RGBA with 255, so colour rows need no
     * second pass; grey has no alpha form and is expanded by hand. */
    cinfo->out_color_space = comps == 1 ? JCS_GRAYSCALE : JCS_EXT_RGBA;

    jpeg_start_decompress(cinfo);

    uint64_t out_w = cinfo->output_width;
    uint64_t out_h = cinfo->output_height;
    uint64_t out_comps = (uint64_t)cinfo->output_components;
    uint64_t total;
    if (out_comps != (comps == 1 ? 1u : 4u) || !sp_mul_u64(out_w, out_h, &total) ||
        !sp_mul_u64(total, out_comps, &total)) {
        return sp_err_set(err, SP_E_CORRUPT, "JPEG: unusable output geometry %llux%llu",
                          (unsigned long long)out_w, (unsigned long long)out_h);
    }

    uint64_t copy_w = out_w < job->width ? out_w : job->width;
    uint64_t rows = out_h < job->height ? out_h : job->height;
    job->row_out_bytes = (size_t)(copy_w * 4);
    /* A row goes straight into rgba when libjpeg's full row fits there; grey rows fit in the
     * first quarter of their RGBA row and are widened in place. */
    bool direct = out_w <= job->width;
    if (!direct && rows > 0) {
        job->scratch = malloc((size_t)(out_w * out_comps));
        if (job->scratch == NULL) {
            return sp_err_set(err, SP_E_NOMEM, "JPEG: out of memory for a %llu-pixel row",
                              (unsigned long long)out_w);
        }
    }
    for (uint64_t y = 0; y < rows; y++) {
        uint8_t *dst = job->rgba + y * job->stride;
        JSAMPROW row = direct ? dst : job->scratch;
        job->rows_dirty = y + 1;
        if (jpeg_read_scanlines(cinfo, &row, 1) != 1) {
            /* cannot happen with an in-memory source, which never suspends */
            return sp_err_set(err, SP_E_CORRUPT, "JPEG: decoder returned no row %llu",
                              (unsigned long long)y);
        }
        if (comps == 1) {
            grey_to_rgba(dst, row, (size_t)copy_w);
        } else if (!direct) {
            memcpy(dst, row, job->row_out_bytes);
        }
    }
    /* Rows past the area are never decoded; destroying the decompressor abandons them. */
    return SP_OK;
}

/* Expand n grey samples into RGB or RGBA (alpha 255) pixels of bpp bytes. */
static void grey_expand(uint8_t *dst, const uint8_t *grey, size_t n, unsigned bpp) {
    for (size_t i = 0; i < n; i++, dst += bpp) {
        dst[0] = dst[1] = dst[2] = grey[i];
        if (bpp == 4) {
            dst[3] = 255;
        }
    }
}

/* Decode only the rows and columns of the area, at 1/scale, with libjpeg-turbo's cropped
 * (jpeg_crop_scanline) and skipped-scanline (jpeg_skip_scanlines) decoding. Rows below the area
 * are never entropy-decoded; rows above it are entropy-decoded but not transformed.
 *
 * Exactness: fancy upsampling of subsampled chroma (4:2:2, 4:2:0) interpolates from the
 * neighbouring chroma samples, and a cropped or skipped decode treats the crop's own edge as
 * the image edge, which changes the outermost pixels. So when chroma is subsampled the crop is
 * widened by one iMCU on every side that is not the image's edge (and the rows above are read
 * from one iMCU row earlier), then only the area is copied out: the result equals the full
 * decode, cropped, bit for bit (tests/unit/test_tile_cache.c checks it on real slides). */
static sp_status jpeg_area_body(sp_jpeg_job *job, sp_err *err) {
    struct jpeg_decompress_struct *cinfo = &job->cinfo;
    sp_status st = jpeg_begin(job, err);
    if (st == SP_OK) {
        st = jpeg_set_space(job, err);
    }
    if (st != SP_OK) {
        return st;
    }
    bool grey = cinfo->num_components == 1;
    cinfo->scale_num = 1;
    cinfo->scale_denom = job->scale;
    cinfo->out_color_space = grey ? JCS_GRAYSCALE : job->bpp == 4 ? JCS_EXT_RGBA : JCS_EXT_RGB;
    /* Sampling factors come from the header; after jpeg_calc_output_dimensions the scaled
     * iMCU size is known before decoding starts. */
    jpeg_calc_output_dimensions(cinfo);
    uint64_t ow = cinfo->output_width, oh = cinfo->output_height;
    job->image_w = ow;
    job->image_h = oh;
    uint64_t x1 = job->ax + job->aw < ow ? job->ax + job->aw : ow;
    uint64_t y1 = job->ay + job->ah < oh ? job->ay + job->ah : oh;
    if (job->ax >= x1 || job->ay >= y1) {
        return SP_OK; /* nothing of the stream falls inside the area */
    }
    bool subsampled = cinfo->max_h_samp_factor > 1 || cinfo->max_v_samp_factor > 1;
    uint64_t imcu_w = (uint64_t)cinfo->max_h_samp_factor * (uint64_t)cinfo->min_DCT_scaled_size;
    uint64_t imcu_h = (uint64_t)cinfo->max_v_samp_factor * (uint64_t)cinfo->min_DCT_scaled_size;
    uint64_t margin_x = subsampled ? imcu_w : 0, margin_y = subsampled ? imcu_h : 0;
    uint64_t dx0 = job->ax > margin_x ? job->ax - margin_x : 0;
    uint64_t dx1 = x1 + margin_x < ow ? x1 + margin_x : ow;
    uint64_t dy0 = job->ay > margin_y ? job->ay - margin_y : 0;

    jpeg_start_decompress(cinfo);
    JDIMENSION xoff = (JDIMENSION)dx0, cw = (JDIMENSION)(dx1 - dx0);
    if (dx0 > 0 || dx1 < ow) {
        jpeg_crop_scanline(cinfo, &xoff, &cw); /* widens to iMCU boundaries */
    }
    uint64_t out_comps = (uint64_t)cinfo->output_components;
    if (out_comps != (grey ? 1u : job->bpp) || xoff > job->ax || xoff + (uint64_t)cw < x1) {
        return sp_err_set(err, SP_E_CORRUPT, "JPEG: unusable cropped geometry");
    }
    /* A decoded row goes straight into the caller's row when it is exactly the area's row. */
    bool direct = !grey && xoff == job->ax && (uint64_t)cw == x1 - job->ax;
    job->row_out_bytes = (size_t)((x1 - job->ax) * job->bpp);
    if (!direct || dy0 < job->ay) {
        job->scratch = malloc((size_t)((uint64_t)cw * out_comps * SCRATCH_ROWS));
        if (job->scratch == NULL) {
            return sp_err_set(err, SP_E_NOMEM, "JPEG: out of memory for a %u-pixel row", cw);
        }
    }
    if (dy0 > 0) {
        JDIMENSION skipped = jpeg_skip_scanlines(cinfo, (JDIMENSION)dy0);
        if (skipped != dy0) {
            return sp_err_set(err, SP_E_CORRUPT, "JPEG: could not skip to row %llu",
                              (unsigned long long)dy0);
        }
    }
    size_t skip_bytes = (size_t)((job->ax - xoff) * out_comps);
    /* Rows are asked for in groups (libjpeg hands out up to an iMCU row per call, which saves
     * a call and an internal row copy per row); indirect rows land in a scratch block that is
     * copied out once the group is done. */
    JSAMPROW rows[SCRATCH_ROWS];
    for (uint64_t y = dy0; y < y1;) {
        bool inside = y >= job->ay;
        uint64_t want = (inside ? y1 : job->ay) - y;
        unsigned n = want < SCRATCH_ROWS ? (unsigned)want : SCRATCH_ROWS;
        for (unsigned k = 0; k < n; k++) {
            rows[k] = direct && inside ? job->rgba + (y + k - job->ay) * job->stride
                                       : job->scratch + (size_t)k * cw * out_comps;
        }
        if (inside) {
            job->rows_dirty = y + n - job->ay;
        }
        JDIMENSION got = jpeg_read_scanlines(cinfo, rows, n);
        if (got == 0) {
            return sp_err_set(err, SP_E_CORRUPT, "JPEG: decoder returned no row %llu",
                              (unsigned long long)y);
        }
        for (unsigned k = 0; inside && !direct && k < got; k++) {
            uint8_t *dst = job->rgba + (y + k - job->ay) * job->stride;
            if (grey) {
                grey_expand(dst, rows[k] + skip_bytes, (size_t)(x1 - job->ax), job->bpp);
            } else {
                memcpy(dst, rows[k] + skip_bytes, job->row_out_bytes);
            }
        }
        y += got;
    }
    return SP_OK;
}

/* A job over one stream (and its JPEGTables, may be NULL), everything else zero. */
static void job_init(sp_jpeg_job *job, const uint8_t *data, size_t len, const uint8_t *tables,
                     size_t tables_len) {
    memset(job, 0, sizeof *job);
    job->data = data;
    job->len = len;
    job->tables = tables;
    job->tables_len = tables_len;
}

/* After a failure: zero the output rows the decoder had started to fill. */
static void zero_dirty_rows(const sp_jpeg_job *job) {
    for (uint64_t y = 0; y < job->rows_dirty; y++) {
        memset(job->rgba + y * job->stride, 0, job->row_out_bytes);
    }
}

/* Run body under setjmp, so a libjpeg error anywhere in it ends here. `job` belongs to the
 * caller's frame: this function changes none of its own locals after setjmp. */
static sp_status jpeg_run(sp_jpeg_job *job, sp_status (*body)(sp_jpeg_job *, sp_err *),
                          sp_err *err) {
    job->cinfo.err = jpeg_std_error(&job->jerr.pub);
    job->jerr.pub.error_exit = jpeg_on_error;
    job->jerr.pub.emit_message = jpeg_on_message;
    job->jerr.pub.output_message = jpeg_on_output;
    job->jerr.status = SP_OK;
    job->jerr.msg[0] = '\0';

    sp_status st;
    if (setjmp(job->jerr.jump) == 0) {
        st = body(job, err);
    } else {
        st = sp_err_set(err, job->jerr.status, "JPEG: %s", job->jerr.msg);
    }
    jpeg_destroy_decompress(&job->cinfo);
    free(job->scratch);
    job->scratch = NULL;
    return st;
}

/* Whether an output area of width x height pixels of bpp bytes, rows `stride` apart, is
 * addressable: its last byte, (height - 1) * stride + width * bpp, fits in size_t, and rows do not
 * overlap. */
static bool area_fits(uint64_t width, uint64_t height, unsigned bpp, size_t stride) {
    uint64_t row_bytes = 0, extent = 0;
    return sp_mul_u64(width, bpp, &row_bytes) &&
           (height == 0 ||
            (sp_mul_u64(height - 1, stride, &extent) && sp_add_u64(extent, row_bytes, &extent))) &&
           extent <= SIZE_MAX && (height <= 1 || stride >= row_bytes);
}

sp_status sp_jpeg_decode_rgba(const uint8_t *data, size_t len, const uint8_t *tables,
                              size_t tables_len, sp_jpeg_space space, uint64_t width,
                              uint64_t height, uint8_t *rgba, size_t stride, sp_err *err) {
    if (data == NULL || !area_fits(width, height, 4, stride) ||
        (rgba == NULL && width > 0 && height > 0)) {
        return sp_err_set(err, SP_E_INVALID_ARG, "JPEG: bad output area %llux%llu, stride %zu",
                          (unsigned long long)width, (unsigned long long)height, stride);
    }
    if ((unsigned)space > SP_JPEG_SPACE_GREY) {
        return sp_err_set(err, SP_E_INVALID_ARG, "JPEG: unknown colour space %d", (int)space);
    }
    sp_jpeg_job job;
    job_init(&job, data, len, tables, tables_len);
    job.space = space;
    job.width = width;
    job.height = height;
    job.rgba = rgba;
    job.stride = stride;
    sp_status st = jpeg_run(&job, jpeg_decode_body, err);
    if (st != SP_OK) {
        zero_dirty_rows(&job); /* never leave a half-decoded tile behind */
    }
    return st;
}

sp_status sp_jpeg_decode_area(const uint8_t *data, size_t len, const uint8_t *tables,
                              size_t tables_len, sp_jpeg_space space, unsigned scale, uint64_t x,
                              uint64_t y, uint64_t width, uint64_t height, unsigned bpp,
                              uint8_t *dst, size_t stride, uint64_t *image_width,
                              uint64_t *image_height, sp_err *err) {
    uint64_t dummy_w, dummy_h;
    image_width = image_width ? image_width : &dummy_w;
    image_height = image_height ? image_height : &dummy_h;
    *image_width = *image_height = 0;
    bool area_ok = (bpp == 3 || bpp == 4) && area_fits(width, height, bpp, stride) &&
                   x <= UINT32_MAX && y <= UINT32_MAX && width <= UINT32_MAX &&
                   height <= UINT32_MAX;
    if (data == NULL || !area_ok || (dst == NULL && width > 0 && height > 0) ||
        (scale != 1 && scale != 2 && scale != 4 && scale != 8)) {
        return sp_err_set(err, SP_E_INVALID_ARG, "JPEG: bad output area %llux%llu, stride %zu",
                          (unsigned long long)width, (unsigned long long)height, stride);
    }
    if ((unsigned)space > SP_JPEG_SPACE_GREY) {
        return sp_err_set(err, SP_E_INVALID_ARG, "JPEG: unknown colour space %d", (int)space);
    }
    if (width == 0 || height == 0) {
        return SP_OK;
    }
    sp_jpeg_job job;
    job_init(&job, data, len, tables, tables_len);
    job.space = space;
    job.ax = x;
    job.ay = y;
    job.aw = width;
    job.ah = height;
    job.scale = scale;
    job.bpp = bpp;
    job.rgba = dst;
    job.stride = stride;
    sp_status st = jpeg_run(&job, jpeg_area_body, err);
    if (st != SP_OK) {
        zero_dirty_rows(&job);
    } else {
        *image_width = job.image_w;
        *image_height = job.image_h;
    }
    return st;
}

sp_status sp_jpeg_read_header(const uint8_t *data, size_t len, const uint8_t *tables,
                              size_t tables_len, uint32_t *width, uint32_t *height,
                              int *components, sp_err *err) {
    if (data == NULL || width == NULL || height == NULL || components == NULL) {
        return sp_err_set(err, SP_E_INVALID_ARG, "JPEG: null argument");
    }
    sp_jpeg_job job;
    job_init(&job, data, len, tables, tables_len);
    job.out_width = width;
    job.out_height = height;
    job.out_components = components;
    return jpeg_run(&job, jpeg_header_body, err);
}
