/* jpeg2000.c — JPEG 2000 tiles through OpenJPEG: raw codestreams (as Aperio stores them) and
 * JP2 files, decoded from memory into straight RGBA8.
 *
 * Colour follows the container, as OpenSlide does: Aperio 33003 holds YCbCr components (often
 * with 2x horizontally subsampled chroma) that are converted with the JFIF equations in 16-bit
 * fixed point, rounding like libjpeg; 33005 holds RGB (any multiple-component transform is
 * already undone by OpenJPEG). The header is checked before decoding, so a tile that claims a
 * huge image is refused before OpenJPEG allocates for it.
 */
#include <math.h>
#include <openjpeg.h>
#include <stdio.h>
#include <string.h>

#include "codecs/codec.h"

typedef struct mem_stream {
    const uint8_t *data;
    size_t len, pos;
} mem_stream;

static OPJ_SIZE_T stream_read(void *buf, OPJ_SIZE_T n, void *user) {
    mem_stream *m = user;
    if (m->pos >= m->len) {
        return (OPJ_SIZE_T)-1;
    }
    size_t avail = m->len - m->pos;
    if (n > avail) {
        n = avail;
    }
    memcpy(buf, m->data + m->pos, n);
    m->pos += n;
    return n;
}

static OPJ_OFF_T stream_skip(OPJ_OFF_T n, void *user) {
    mem_stream *m = user;
    if (n < 0 || (uint64_t)n > m->len - m->pos) {
        return -1;
    }
    m->pos += (size_t)n;
    return n;
}

static OPJ_BOOL stream_seek(OPJ_OFF_T to, void *user) {
    mem_stream *m = user;
    if (to < 0 || (uint64_t)to > m->len) {
        return OPJ_FALSE;
    }
    m->pos = (size_t)to;
    return OPJ_TRUE;
}

static void on_error(const char *msg, void *user) {
    sp_err *err = user;
    char line[256];
    snprintf(line, sizeof line, "%s", msg);
    line[strcspn(line, "\n")] = '\0';
    sp_err_set(err, SP_E_CORRUPT, "JPEG 2000: %s", line);
}

static void on_warning(const char *msg, void *user) {
    (void)msg;
    (void)user;
}

static uint8_t clamp8(int v) { return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v); }

/* One decoded component seen from image pixel coordinates: sample (x, y) of the image is
 * component sample (x / dx - off_x, y / dy - off_y), clamped to the decoded samples, where the
 * offsets say where a partial decode's samples start. */
typedef struct comp_view {
    const OPJ_INT32 *data;
    uint64_t w, h, dx, dy, off_x, off_y;
    int shift_x; /* log2(dx) when dx is a power of two, else -1: the per-pixel divide is slow */
    int add;     /* brings signed samples to the unsigned range */
} comp_view;

static void comp_view_init(comp_view *v, const opj_image_comp_t *c, uint64_t area_x0,
                           uint64_t area_y0) {
    v->data = c->data;
    v->w = c->w;
    v->h = c->h;
    v->dx = c->dx;
    v->dy = c->dy;
    v->off_x = area_x0 / c->dx;
    v->off_y = area_y0 / c->dy;
    v->shift_x = -1;
    for (int k = 0; k < 32; k++) {
        if ((uint64_t)1 << k == v->dx) {
            v->shift_x = k;
        }
    }
    v->add = c->sgnd ? 1 << (c->prec - 1) : 0;
}

/* The component's row for image row y. */
static const OPJ_INT32 *comp_row(const comp_view *v, uint64_t y) {
    uint64_t cy = y / v->dy;
    cy = cy > v->off_y ? cy - v->off_y : 0;
    return v->data + (cy < v->h ? cy : v->h - 1) * v->w;
}

static int comp_at(const comp_view *v, const OPJ_INT32 *row, uint64_t x) {
    uint64_t cx = v->shift_x >= 0 ? x >> v->shift_x : x / v->dx;
    cx = cx > v->off_x ? cx - v->off_x : 0;
    return row[cx < v->w ? cx : v->w - 1] + v->add;
}

/* Convert image pixels [x0, x1) x [y0, y1) to RGB8 or RGBA8 at dst (rows of `stride` bytes);
 * (area_x0, area_y0) is where the decoded samples start. YCbCr follows JFIF: R = Y + 1.402 Cr',
 * G = Y - 0.34414 Cb' - 0.71414 Cr', B = Y + 1.772 Cb', with the green term in 16.16 fixed
 * point and its rounding folded into Cb; the terms are tabulated once per call. */
static void to_pixels(const opj_image_t *img, sp_jpeg_space space, uint64_t area_x0,
                      uint64_t area_y0, uint64_t x0, uint64_t y0, uint64_t x1, uint64_t y1,
                      unsigned bpp, uint8_t *dst, size_t stride) {
    comp_view v[4];
    unsigned n = img->numcomps < 4 ? img->numcomps : 4;
    for (unsigned i = 0; i < n; i++) {
        comp_view_init(&v[i], &img->comps[i], area_x0, area_y0);
    }
    bool ycbcr = space == SP_JPEG_SPACE_YCBCR && n >= 3;
    int r_tab[256], g_cb[256], g_cr[256], b_tab[256];
    if (ycbcr) {
        for (int t = 0; t < 256; t++) {
            int d = t - 128;
            r_tab[t] = (int)lround(1.402 * d);
            g_cb[t] = (int)lround(65536 * (0.5 - 0.34414 * d));
            g_cr[t] = (int)lround(65536 * -0.71414 * d);
            b_tab[t] = (int)lround(1.772 * d);
        }
    }
    for (uint64_t y = y0; y < y1; y++) {
        uint8_t *o = dst + (y - y0) * stride;
        const OPJ_INT32 *rows[4];
        for (unsigned i = 0; i < n; i++) {
            rows[i] = comp_row(&v[i], y);
        }
        for (uint64_t x = x0; x < x1; x++, o += bpp) {
            uint8_t alpha = 255;
            if (n < 3) {
                o[0] = o[1] = o[2] = clamp8(comp_at(&v[0], rows[0], x));
                if (n == 2) {
                    alpha = clamp8(comp_at(&v[1], rows[1], x));
                }
            } else {
                uint8_t c0 = clamp8(comp_at(&v[0], rows[0], x));
                uint8_t c1 = clamp8(comp_at(&v[1], rows[1], x));
                uint8_t c2 = clamp8(comp_at(&v[2], rows[2], x));
                if (ycbcr) {
                    o[0] = clamp8(c0 + r_tab[c2]);
                    o[1] = clamp8(c0 + ((g_cb[c1] + g_cr[c2]) >> 16));
                    o[2] = clamp8(c0 + b_tab[c1]);
                } else {
                    o[0] = c0;
                    o[1] = c1;
                    o[2] = c2;
                }
                if (n == 4) {
                    alpha = clamp8(comp_at(&v[3], rows[3], x));
                }
            }
            if (bpp == 4) {
                o[3] = alpha;
            }
        }
    }
}

/* Whether OpenJPEG's area decoding can be trusted for this stream: a raw codestream whose main
 * header has no CAP marker (0xFF50, which announces High-Throughput JPEG 2000 code-blocks: with
 * OpenJPEG 2.5.0 an area decode of those leaves the skipped-over blocks empty, so they are
 * decoded whole). JP2 files are decoded whole too rather than walked box by box. */
static bool area_decode_safe(const uint8_t *p, size_t n) {
    if (n < 4 || p[0] != 0xFF || p[1] != 0x4F) {
        return false;
    }
    for (size_t i = 2; i + 4 <= n;) {
        unsigned marker = (unsigned)p[i] << 8 | p[i + 1];
        if (marker == 0xFF90) { /* SOT: the main header is over */
            return true;
        }
        if (marker == 0xFF50 || p[i] != 0xFF) {
            return false;
        }
        i += 2 + ((size_t)p[i + 2] << 8 | p[i + 3]);
    }
    return false;
}

/* Decode the image, or only [ax, ax+aw) x [ay, ay+ah) of it when `partial`, and write the part
 * inside the image to dst. The decoded area is widened to whole chroma samples so that every
 * output pixel sees the same samples as in a full decode. */
static sp_status j2k_decode(const uint8_t *data, size_t len, sp_jpeg_space space, uint64_t width,
                            uint64_t height, bool partial, uint64_t ax, uint64_t ay, uint64_t aw,
                            uint64_t ah, unsigned bpp, uint8_t *dst, size_t stride,
                            uint64_t *image_w, uint64_t *image_h, sp_err *err) {
    static const uint8_t jp2_signature[] = {0, 0, 0, 12, 'j', 'P', ' ', ' '};
    bool jp2 = len >= sizeof jp2_signature && memcmp(data, jp2_signature, sizeof jp2_signature) == 0;
    mem_stream m = {data, len, 0};
    opj_stream_t *stream = opj_stream_create(1 << 16, OPJ_TRUE);
    opj_codec_t *codec = opj_create_decompress(jp2 ? OPJ_CODEC_JP2 : OPJ_CODEC_J2K);
    opj_image_t *img = NULL;
    sp_status st = SP_OK;
    if (stream == NULL || codec == NULL) {
        st = sp_err_set(err, SP_E_NOMEM, "out of memory starting a JPEG 2000 decoder");
        goto done;
    }
    opj_stream_set_user_data(stream, &m, NULL);
    opj_stream_set_user_data_length(stream, len);
    opj_stream_set_read_function(stream, stream_read);
    opj_stream_set_skip_function(stream, stream_skip);
    opj_stream_set_seek_function(stream, stream_seek);
    opj_dparameters_t params;
    opj_set_default_decoder_parameters(&params);
    sp_err local = {0};
    opj_set_error_handler(codec, on_error, &local);
    opj_set_warning_handler(codec, on_warning, NULL);
    opj_set_info_handler(codec, on_warning, NULL);
    if (!opj_setup_decoder(codec, &params) || !opj_read_header(stream, codec, &img)) {
        st = sp_err_set(err, SP_E_CORRUPT, "%s",
                        local.msg[0] ? local.msg : "JPEG 2000: cannot read the header");
        goto done;
    }
    uint64_t iw = (uint64_t)img->x1 - img->x0, ih = (uint64_t)img->y1 - img->y0;
    if (img->x1 < img->x0 || img->y1 < img->y0 || iw == 0 || ih == 0 || iw > width ||
        ih > height) {
        st = sp_err_set(err, SP_E_CORRUPT, "JPEG 2000 tile is %llux%llu, expected at most %llux%llu",
                        (unsigned long long)iw, (unsigned long long)ih,
                        (unsigned long long)width, (unsigned long long)height);
        goto done;
    }
    if (img->numcomps < 1 || img->numcomps > 4 || (space == SP_JPEG_SPACE_YCBCR && img->numcomps < 3)) {
        st = sp_err_set(err, SP_E_UNSUPPORTED, "JPEG 2000 tile with %u components", img->numcomps);
        goto done;
    }
    uint64_t x0 = 0, y0 = 0, x1 = iw, y1 = ih, dec_x0 = 0, dec_y0 = 0;
    if (partial) {
        x0 = ax < iw ? ax : iw;
        y0 = ay < ih ? ay : ih;
        x1 = ax + aw < iw ? ax + aw : iw;
        y1 = ay + ah < ih ? ay + ah : ih;
        if (x0 >= x1 || y0 >= y1) {
            *image_w = iw; /* nothing of the image falls inside the area */
            *image_h = ih;
            goto done;
        }
        uint64_t mdx = 1, mdy = 1;
        for (OPJ_UINT32 i = 0; i < img->numcomps; i++) {
            mdx = img->comps[i].dx > mdx ? img->comps[i].dx : mdx;
            mdy = img->comps[i].dy > mdy ? img->comps[i].dy : mdy;
        }
        /* Otherwise the whole image is decoded and only the area converted. */
        bool area_decode = area_decode_safe(data, len);
        dec_x0 = area_decode ? x0 / mdx * mdx : 0;
        dec_y0 = area_decode ? y0 / mdy * mdy : 0;
        uint64_t dec_x1 = (x1 + mdx - 1) / mdx * mdx, dec_y1 = (y1 + mdy - 1) / mdy * mdy;
        dec_x1 = dec_x1 < iw ? dec_x1 : iw;
        dec_y1 = dec_y1 < ih ? dec_y1 : ih;
        if (area_decode &&
            !opj_set_decode_area(codec, img, (OPJ_INT32)(img->x0 + dec_x0),
                                 (OPJ_INT32)(img->y0 + dec_y0), (OPJ_INT32)(img->x0 + dec_x1),
                                 (OPJ_INT32)(img->y0 + dec_y1))) {
            st = sp_err_set(err, SP_E_CORRUPT, "%s",
                            local.msg[0] ? local.msg : "JPEG 2000: bad decode area");
            goto done;
        }
    }
    if (!opj_decode(codec, stream, img) || !opj_end_decompress(codec, stream)) {
        st = sp_err_set(err, SP_E_CORRUPT, "%s",
                        local.msg[0] ? local.msg : "JPEG 2000: decoding failed");
        goto done;
    }
    for (OPJ_UINT32 i = 0; i < img->numcomps; i++) {
        const opj_image_comp_t *c = &img->comps[i];
        if (c->data == NULL || c->dx == 0 || c->dy == 0 || c->w == 0 || c->h == 0 ||
            c->prec < 1 || c->prec > 8) {
            st = sp_err_set(err, SP_E_UNSUPPORTED,
                            "JPEG 2000 component %u: %u-bit or malformed samples", i, c->prec);
            goto done;
        }
    }
    to_pixels(img, space, dec_x0, dec_y0, x0, y0, x1, y1, bpp, dst, stride);
    *image_w = iw;
    *image_h = ih;
done:
    opj_image_destroy(img);
    opj_destroy_codec(codec);
    opj_stream_destroy(stream);
    return st;
}

sp_status sp_j2k_decode_rgba(const uint8_t *data, size_t len, sp_jpeg_space space, uint64_t width,
                             uint64_t height, uint8_t *rgba, size_t stride, sp_err *err) {
    uint64_t iw, ih;
    return j2k_decode(data, len, space, width, height, false, 0, 0, 0, 0, 4, rgba, stride, &iw, &ih,
                      err);
}

sp_status sp_j2k_decode_area(const uint8_t *data, size_t len, sp_jpeg_space space,
                             uint64_t tile_width, uint64_t tile_height, uint64_t x, uint64_t y,
                             uint64_t width, uint64_t height, unsigned bpp, uint8_t *dst,
                             size_t stride, uint64_t *image_width, uint64_t *image_height,
                             sp_err *err) {
    uint64_t dummy_w, dummy_h;
    image_width = image_width ? image_width : &dummy_w;
    image_height = image_height ? image_height : &dummy_h;
    *image_width = *image_height = 0;
    if (data == NULL || dst == NULL || (bpp != 3 && bpp != 4) || x > INT32_MAX ||
        y > INT32_MAX || width > INT32_MAX || height > INT32_MAX) {
        return sp_err_set(err, SP_E_INVALID_ARG, "JPEG 2000: bad output area");
    }
    return j2k_decode(data, len, space, tile_width, tile_height, true, x, y, width, height, bpp,
                      dst, stride, image_width, image_height, err);
}
