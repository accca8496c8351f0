/* synth.c — sp_synth_write: the built-in example slide, rendered and written as a pyramidal,
 * JPEG-tiled TIFF in one streaming pass.
 *
 * The pyramid is produced depth-first over its quadtree: a tile of level k is the 2x2 box
 * average of the four level k-1 tiles under it, and those are made (recursively) just before
 * it. So each level needs one tile buffer, memory is O(levels x tile) whatever the slide size,
 * and every reduced level is averaged from the exact pixels of the level above, before their
 * JPEG encoding. Tiles reach the file in that depth-first order (offsets are free to be in any
 * order); the directories are written at the end, level 0 first. The only memory that grows
 * with the slide is the tile index, 16 bytes a tile (1.5 MB for a 65536-pixel slide).
 */
#include <setjmp.h>
#include <stdbool.h>
#include <stdio.h> /* before jpeglib.h, which uses FILE */
#include <stdlib.h>
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>

#include "base/err.h"
#include "jobs/synth/artifacts.h"
#include "jobs/synth/he_texture.h"
#include "tiff/tiff.h"
#include "tiff/tiff_write.h"

#define SYNTH_TILE SP_HE_MAX_TILE
#define SYNTH_MAX_SIZE (INT64_C(1) << 20)
#define SYNTH_MAX_LEVELS 16
#define SYNTH_JPEG_QUALITY 90
#define SYNTH_PIXELS_PER_CM 40000u          /* 0.25 um per pixel at level 0 */
/* Classic TIFF is kept while a generous bound on the file (a quarter of the raw RGB size of
 * every level; q90 JPEG of this picture compresses several times better) stays below this. */
#define SYNTH_CLASSIC_MAX (UINT64_C(7) << 29) /* 3.5 GiB */

typedef struct synth_level {
    int64_t width, height;
    int64_t tiles_x, tiles_y;
    uint64_t *offsets; /* per tile, row-major */
    uint64_t *counts;
    uint8_t *tile; /* the tile being built: RGB, SYNTH_TILE square, edges replicated */
} synth_level;

/* libjpeg reports errors by calling error_exit, which must not return: jump back instead. */
typedef struct synth_jpeg_err {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
    char msg[JMSG_LENGTH_MAX];
} synth_jpeg_err;

/* Compressed tile bytes go into one buffer that grows as needed and is reused. */
typedef struct synth_jpeg_dest {
    struct jpeg_destination_mgr pub;
    uint8_t *buf;
    size_t cap;
    size_t len;
} synth_jpeg_dest;

typedef struct synth_ctx {
    sp_tiff_writer *writer;
    sp_he_model *model;
    sp_he_scratch *scratch;
    synth_level levels[SYNTH_MAX_LEVELS];
    int nlevels;
    struct jpeg_compress_struct cinfo;
    bool cinfo_ready;
    synth_jpeg_err jerr;
    synth_jpeg_dest dest;
    sp_err *err;
    bool artifacts; /* paint sp_synth_artifacts into level 0 */
    sp_synth_artifact artifact[SP_SYNTH_ARTIFACT_COUNT];
    uint8_t *scratch_tile; /* blur scratch, one tile */
} synth_ctx;

static void synth_jpeg_error_exit(j_common_ptr cinfo) {
    synth_jpeg_err *e = (synth_jpeg_err *)cinfo->err;
    (*cinfo->err->format_message)(cinfo, e->msg);
    longjmp(e->jump, 1);
}

static void synth_jpeg_output_message(j_common_ptr cinfo) {
    (void)cinfo; /* the library never prints */
}

static void synth_dest_init(j_compress_ptr cinfo) {
    synth_jpeg_dest *d = (synth_jpeg_dest *)cinfo->dest;
    d->len = 0;
    d->pub.next_output_byte = d->buf;
    d->pub.free_in_buffer = d->cap;
}

static boolean synth_dest_grow(j_compress_ptr cinfo) {
    synth_jpeg_dest *d = (synth_jpeg_dest *)cinfo->dest;
    size_t used = d->cap; /* libjpeg calls this only with the buffer full */
    uint8_t *nb = realloc(d->buf, 2 * d->cap);
    if (nb == NULL) {
        cinfo->err->msg_code = JERR_OUT_OF_MEMORY;
        (*cinfo->err->error_exit)((j_common_ptr)cinfo);
    }
    d->buf = nb;
    d->cap *= 2;
    d->pub.next_output_byte = d->buf + used;
    d->pub.free_in_buffer = d->cap - used;
    return TRUE;
}

static void synth_dest_term(j_compress_ptr cinfo) {
    synth_jpeg_dest *d = (synth_jpeg_dest *)cinfo->dest;
    d->len = d->cap - d->pub.free_in_buffer;
}

static sp_status synth_jpeg_setup(synth_ctx *c) {
    c->dest.cap = 256 * 1024;
    c->dest.buf = malloc(c->dest.cap);
    if (c->dest.buf == NULL) {
        return sp_err_set(c->err, SP_E_NOMEM, "out of memory for the JPEG encoder");
    }
    c->cinfo.err = jpeg_std_error(&c->jerr.pub);
    c->jerr.pub.error_exit = synth_jpeg_error_exit;
    c->jerr.pub.output_message = synth_jpeg_output_message;
    if (setjmp(c->jerr.jump)) {
        return sp_err_set(c->err, SP_E_NOMEM, "JPEG encoder setup failed: %s", c->jerr.msg);
    }
    jpeg_create_compress(&c->cinfo);
    c->cinfo_ready = true;
    c->dest.pub.init_destination = synth_dest_init;
    c->dest.pub.empty_output_buffer = synth_dest_grow;
    c->dest.pub.term_destination = synth_dest_term;
    c->cinfo.dest = &c->dest.pub;
    c->cinfo.image_width = SYNTH_TILE;
    c->cinfo.image_height = SYNTH_TILE;
    c->cinfo.input_components = 3;
    c->cinfo.in_color_space = JCS_RGB;
    jpeg_set_defaults(&c->cinfo);
    /* TIFF-JPEG with Photometric YCbCr: plain YCbCr 4:2:0 (2x2 luma sampling, the default),
     * and no JFIF or Adobe marker, whose colour claims would compete with the TIFF tags. */
    jpeg_set_colorspace(&c->cinfo, JCS_YCbCr);
    c->cinfo.comp_info[0].h_samp_factor = 2;
    c->cinfo.comp_info[0].v_samp_factor = 2;
    c->cinfo.write_JFIF_header = FALSE;
    c->cinfo.write_Adobe_marker = FALSE;
    jpeg_set_quality(&c->cinfo, SYNTH_JPEG_QUALITY, TRUE);
    return SP_OK;
}

/* Encode one full tile as a complete baseline JPEG (its own tables, no JPEGTables tag needed)
 * into c->dest. */
static sp_status synth_jpeg_encode(synth_ctx *c, const uint8_t *rgb) {
    if (setjmp(c->jerr.jump)) {
        jpeg_abort_compress(&c->cinfo);
        return sp_err_set(c->err, SP_E_NOMEM, "JPEG encoding failed: %s", c->jerr.msg);
    }
    jpeg_start_compress(&c->cinfo, TRUE);
    while (c->cinfo.next_scanline < SYNTH_TILE) {
        JSAMPROW row = (JSAMPROW)(rgb + (size_t)c->cinfo.next_scanline * SYNTH_TILE * 3);
        jpeg_write_scanlines(&c->cinfo, &row, 1);
    }
    jpeg_finish_compress(&c->cinfo);
    return SP_OK;
}

/* Fill the part of a tile beyond the level's edge by repeating the last column and row, which
 * keeps JPEG from spending bits (and ringing) on a hard edge nobody sees. It also lets the next
 * level's 2x2 average read a replicated pixel where an odd-sized level has none, which gives the
 * average of the pixels that exist. */
static void synth_pad(uint8_t *t, int vw, int vh) {
    const size_t stride = SYNTH_TILE * 3;
    if (vw < SYNTH_TILE) {
        for (int y = 0; y < vh; y++) {
            uint8_t *row = t + (size_t)y * stride;
            const uint8_t *last = row + (size_t)(vw - 1) * 3;
            for (int x = vw; x < SYNTH_TILE; x++) {
                memcpy(row + (size_t)x * 3, last, 3);
            }
        }
    }
    for (int y = vh; y < SYNTH_TILE; y++) {
        memcpy(t + (size_t)y * stride, t + (size_t)(vh - 1) * stride, stride);
    }
}

/* Average a finished child tile into its quadrant (qx, qy) of the parent tile. */
static void synth_reduce(const uint8_t *child, int cw, int ch, uint8_t *parent, int qx, int qy) {
    const size_t stride = SYNTH_TILE * 3;
    int pw = (cw + 1) / 2, ph = (ch + 1) / 2;
    for (int y = 0; y < ph; y++) {
        const uint8_t *r0 = child + (size_t)(2 * y) * stride;
        const uint8_t *r1 = r0 + stride;
        uint8_t *dst =
            parent + (size_t)(qy * SYNTH_TILE / 2 + y) * stride + (size_t)(qx * SYNTH_TILE / 2) * 3;
        for (int x = 0; x < pw; x++) {
            for (int k = 0; k < 3; k++) {
                int s = r0[6 * x + k] + r0[6 * x + 3 + k] + r1[6 * x + k] + r1[6 * x + 3 + k];
                dst[3 * x + k] = (uint8_t)((s + 2) >> 2);
            }
        }
    }
}

/* Build tile (tx, ty) of `level` in that level's buffer (children first), then encode and
 * append it. */
static sp_status synth_tile(synth_ctx *c, int level, int64_t tx, int64_t ty) {
    synth_level *L = &c->levels[level];
    int64_t x0 = tx * SYNTH_TILE, y0 = ty * SYNTH_TILE;
    int vw = (int)(L->width - x0 < SYNTH_TILE ? L->width - x0 : SYNTH_TILE);
    int vh = (int)(L->height - y0 < SYNTH_TILE ? L->height - y0 : SYNTH_TILE);
    if (level == 0) {
        sp_he_render(c->model, c->scratch, x0, y0, vw, vh, L->tile, SYNTH_TILE * 3);
        if (c->artifacts) {
            sp_synth_paint_artifacts(c->artifact, x0, y0, vw, vh, L->tile, SYNTH_TILE * 3,
                                     c->scratch_tile);
        }
    } else {
        const synth_level *C = &c->levels[level - 1];
        for (int q = 0; q < 4; q++) {
            int64_t cx = 2 * tx + (q & 1), cy = 2 * ty + (q >> 1);
            if (cx >= C->tiles_x || cy >= C->tiles_y) {
                continue;
            }
            sp_status st = synth_tile(c, level - 1, cx, cy);
            if (st != SP_OK) {
                return st;
            }
            int cw = (int)(C->width - cx * SYNTH_TILE < SYNTH_TILE ? C->width - cx * SYNTH_TILE
                                                                   : SYNTH_TILE);
            int ch = (int)(C->height - cy * SYNTH_TILE < SYNTH_TILE ? C->height - cy * SYNTH_TILE
                                                                    : SYNTH_TILE);
            synth_reduce(C->tile, cw, ch, L->tile, q & 1, q >> 1);
        }
    }
    synth_pad(L->tile, vw, vh);
    sp_status st = synth_jpeg_encode(c, L->tile);
    if (st != SP_OK) {
        return st;
    }
    int64_t k = ty * L->tiles_x + tx;
    L->counts[k] = c->dest.len;
    return sp_tiff_writer_append(c->writer, c->dest.buf, c->dest.len, &L->offsets[k], c->err);
}

static sp_status synth_add_directories(synth_ctx *c, int64_t size, uint64_t seed) {
    char desc[128];
    snprintf(desc, sizeof desc, "slidepipe synthetic H&E slide size=%lld seed=%llu",
             (long long)size, (unsigned long long)seed);
    static const char software[] = "slidepipe";
    static const uint16_t bits[3] = {8, 8, 8};
    static const uint16_t compression = SP_COMPRESSION_JPEG, photometric = SP_PHOTOMETRIC_YCBCR;
    static const uint16_t spp = 3, planar = 1 /* chunky */, unit = 3 /* centimetre */;
    static const uint16_t subsampling[2] = {2, 2};
    static const uint32_t ref_bw[12] = {0, 1, 255, 1, 128, 1, 255, 1, 128, 1, 255, 1};
    static const uint32_t tile_size = SYNTH_TILE;
    for (int l = 0; l < c->nlevels; l++) {
        const synth_level *L = &c->levels[l];
        uint32_t subfile = l == 0 ? 0 : 1; /* 1: a reduced-resolution copy */
        uint32_t width = (uint32_t)L->width, height = (uint32_t)L->height;
        /* 40000 pixels per cm at level 0, halved per level */
        uint32_t res[2] = {SYNTH_PIXELS_PER_CM, 1u << l};
        while (res[1] > 1 && res[0] % 2 == 0) {
            res[0] /= 2;
            res[1] /= 2;
        }
        sp_tiff_wtag tags[18];
        size_t n = 0;
        tags[n++] = (sp_tiff_wtag){SP_TAG_NEW_SUBFILE_TYPE, SP_TIFF_LONG, 1, &subfile};
        tags[n++] = (sp_tiff_wtag){SP_TAG_IMAGE_WIDTH, SP_TIFF_LONG, 1, &width};
        tags[n++] = (sp_tiff_wtag){SP_TAG_IMAGE_LENGTH, SP_TIFF_LONG, 1, &height};
        tags[n++] = (sp_tiff_wtag){SP_TAG_BITS_PER_SAMPLE, SP_TIFF_SHORT, 3, bits};
        tags[n++] = (sp_tiff_wtag){SP_TAG_COMPRESSION, SP_TIFF_SHORT, 1, &compression};
        tags[n++] = (sp_tiff_wtag){SP_TAG_PHOTOMETRIC, SP_TIFF_SHORT, 1, &photometric};
        if (l == 0) {
            tags[n++] =
                (sp_tiff_wtag){SP_TAG_IMAGE_DESCRIPTION, SP_TIFF_ASCII, strlen(desc) + 1, desc};
        }
        tags[n++] = (sp_tiff_wtag){SP_TAG_SAMPLES_PER_PIXEL, SP_TIFF_SHORT, 1, &spp};
        tags[n++] = (sp_tiff_wtag){SP_TAG_X_RESOLUTION, SP_TIFF_RATIONAL, 1, res};
        tags[n++] = (sp_tiff_wtag){SP_TAG_Y_RESOLUTION, SP_TIFF_RATIONAL, 1, res};
        tags[n++] = (sp_tiff_wtag){SP_TAG_PLANAR_CONFIG, SP_TIFF_SHORT, 1, &planar};
        tags[n++] = (sp_tiff_wtag){SP_TAG_RESOLUTION_UNIT, SP_TIFF_SHORT, 1, &unit};
        tags[n++] = (sp_tiff_wtag){SP_TAG_SOFTWARE, SP_TIFF_ASCII, sizeof software, software};
        tags[n++] = (sp_tiff_wtag){SP_TAG_TILE_WIDTH, SP_TIFF_LONG, 1, &tile_size};
        tags[n++] = (sp_tiff_wtag){SP_TAG_TILE_LENGTH, SP_TIFF_LONG, 1, &tile_size};
        tags[n++] = (sp_tiff_wtag){SP_TAG_YCBCR_SUBSAMPLING, SP_TIFF_SHORT, 2, subsampling};
        tags[n++] = (sp_tiff_wtag){SP_TAG_REFERENCE_BLACK_WHITE, SP_TIFF_RATIONAL, 6, ref_bw};
        sp_status st = sp_tiff_writer_add_directory(c->writer, tags, n, SP_TAG_TILE_OFFSETS,
                                                    SP_TAG_TILE_BYTE_COUNTS, L->offsets, L->counts,
                                                    (uint64_t)(L->tiles_x * L->tiles_y), c->err);
        if (st != SP_OK) {
            return st;
        }
    }
    return SP_OK;
}

/* Level sizes (halving with rounding up until a level fits one tile) and their buffers. */
static sp_status synth_plan(synth_ctx *c, int64_t size, uint64_t *raw_bytes) {
    int64_t w = size, h = size;
    *raw_bytes = 0;
    for (;;) {
        synth_level *L = &c->levels[c->nlevels++];
        L->width = w;
        L->height = h;
        L->tiles_x = (w + SYNTH_TILE - 1) / SYNTH_TILE;
        L->tiles_y = (h + SYNTH_TILE - 1) / SYNTH_TILE;
        size_t ntiles = (size_t)(L->tiles_x * L->tiles_y);
        L->offsets = calloc(ntiles, sizeof *L->offsets);
        L->counts = calloc(ntiles, sizeof *L->counts);
        L->tile = malloc((size_t)SYNTH_TILE * SYNTH_TILE * 3);
        if (L->offsets == NULL || L->counts == NULL || L->tile == NULL) {
            return sp_err_set(c->err, SP_E_NOMEM,
                              "out of memory for the tile index of a %lld-pixel slide",
                              (long long)size);
        }
        *raw_bytes += (uint64_t)w * (uint64_t)h * 3;
        if (w <= SYNTH_TILE && h <= SYNTH_TILE) {
            return SP_OK;
        }
        w = (w + 1) / 2;
        h = (h + 1) / 2;
    }
}

sp_status sp_synth_write(const char *path, int64_t size, uint64_t seed, char *err, size_t err_len) {
    return sp_synth_write_with(path, size, seed, 0, err, err_len);
}

sp_status sp_synth_write_with(const char *path, int64_t size, uint64_t seed, uint32_t flags,
                              char *err, size_t err_len) {
    sp_err e;
    sp_err_clear(&e);
    synth_ctx *c = NULL;
    sp_status st = SP_OK;
    if (path == NULL || path[0] == '\0') {
        st = sp_err_set(&e, SP_E_INVALID_ARG, "no output path given");
    } else if ((flags & ~SP_SYNTH_ARTIFACTS) != 0) {
        st = sp_err_set(&e, SP_E_INVALID_ARG, "unknown synth flags 0x%x", (unsigned)flags);
    } else if ((flags & SP_SYNTH_ARTIFACTS) && size < 1024) {
        st = sp_err_set(&e, SP_E_INVALID_ARG,
                        "artefacts need a slide of at least 1024 pixels, not %lld",
                        (long long)size);
    } else if (size < 1 || size > SYNTH_MAX_SIZE) {
        st = sp_err_set(&e, SP_E_INVALID_ARG,
                        "slide size must be between 1 and %lld pixels, not %lld",
                        (long long)SYNTH_MAX_SIZE, (long long)size);
    } else if ((c = calloc(1, sizeof *c)) == NULL) {
        st = sp_err_set(&e, SP_E_NOMEM, "out of memory");
    }
    uint64_t raw_bytes = 0;
    if (st == SP_OK) {
        c->err = &e;
        st = synth_plan(c, size, &raw_bytes);
    }
    if (st == SP_OK && (flags & SP_SYNTH_ARTIFACTS)) {
        c->artifacts = true;
        sp_synth_artifacts(size, c->artifact);
        c->scratch_tile = malloc((size_t)SYNTH_TILE * SYNTH_TILE * 3);
        if (c->scratch_tile == NULL) {
            st = sp_err_set(&e, SP_E_NOMEM, "out of memory");
        }
    }
    if (st == SP_OK) {
        st = sp_he_model_create(size, seed, &c->model, &e);
    }
    if (st == SP_OK) {
        st = sp_he_scratch_create(&c->scratch, &e);
    }
    if (st == SP_OK) {
        st = synth_jpeg_setup(c);
    }
    if (st == SP_OK) {
        st = sp_tiff_writer_create(path, raw_bytes / 4 > SYNTH_CLASSIC_MAX, &c->writer, &e);
    }
    if (st == SP_OK) {
        st = synth_tile(c, c->nlevels - 1, 0, 0);
    }
    if (st == SP_OK) {
        st = synth_add_directories(c, size, seed);
    }
    if (st == SP_OK) {
        sp_tiff_writer *w = c->writer;
        c->writer = NULL; /* finish frees it whatever happens */
        st = sp_tiff_writer_finish(w, &e);
    }
    if (c != NULL) {
        sp_tiff_writer_abort(c->writer);
        if (c->cinfo_ready) {
            jpeg_destroy_compress(&c->cinfo);
        }
        free(c->dest.buf);
        free(c->scratch_tile);
        sp_he_scratch_destroy(c->scratch);
        sp_he_model_destroy(c->model);
        for (int l = 0; l < c->nlevels; l++) {
            free(c->levels[l].offsets);
            free(c->levels[l].counts);
            free(c->levels[l].tile);
        }
        free(c);
    }
    if (st != SP_OK) {
        sp_err_copy_out(&e, err, err_len);
    } else if (err != NULL && err_len > 0) {
        err[0] = '\0';
    }
    return st;
}
