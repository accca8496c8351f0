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

/* One component's sample at image pixel (x, y), as an unsigned 8-bit value. */
static int sample(const opj_image_comp_t *c, uint64_t x, uint64_t y) {
    uint64_t cx = x / c->dx, cy = y / c->dy;
    if (cx >= c->w) {
        cx = c->w - 1;
    }
    if (cy >= c->h) {
        cy = c->h - 1;
    }
    int v = c->data[cy * c->w + cx];
    if (c->sgnd) {
        v += 1 << (c->prec - 1);
    }
    return v;
}

static void to_rgba(const opj_image_t *img, sp_jpeg_space space, uint64_t w, uint64_t h,
                    uint8_t *rgba, size_t stride) {
    const opj_image_comp_t *c = img->comps;
    for (uint64_t y = 0; y < h; y++) {
        uint8_t *o = rgba + y * stride;
        for (uint64_t x = 0; x < w; x++, o += 4) {
            if (img->numcomps < 3) {
                o[0] = o[1] = o[2] = clamp8(sample(&c[0], x, y));
                o[3] = img->numcomps == 2 ? clamp8(sample(&c[1], x, y)) : 255;
                continue;
            }
            int c0 = clamp8(sample(&c[0], x, y));
            int c1 = clamp8(sample(&c[1], x, y));
            int c2 = clamp8(sample(&c[2], x, y));
            if (space == SP_JPEG_SPACE_YCBCR) {
                /* JFIF: R = Y + 1.402 Cr', G = Y - 0.34414 Cb' - 0.71414 Cr', B = Y + 1.772 Cb',
                 * with the green term in 16.16 fixed point and its rounding folded into Cb. */
                int cb = c1 - 128, cr = c2 - 128;
                int r = (int)lround(1.402 * cr);
                int g = ((int)lround(65536 * (0.5 - 0.34414 * cb)) +
                         (int)lround(65536 * -0.71414 * cr)) >>
                        16;
                int b = (int)lround(1.772 * cb);
                o[0] = clamp8(c0 + r);
                o[1] = clamp8(c0 + g);
                o[2] = clamp8(c0 + b);
            } else {
                o[0] = (uint8_t)c0;
                o[1] = (uint8_t)c1;
                o[2] = (uint8_t)c2;
            }
            o[3] = img->numcomps >= 4 ? clamp8(sample(&c[3], x, y)) : 255;
        }
    }
}

sp_status sp_j2k_decode_rgba(const uint8_t *data, size_t len, sp_jpeg_space space, uint64_t width,
                             uint64_t height, uint8_t *rgba, size_t stride, sp_err *err) {
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
    to_rgba(img, space, iw, ih, rgba, stride);
done:
    opj_image_destroy(img);
    opj_destroy_codec(codec);
    opj_stream_destroy(stream);
    return st;
}
