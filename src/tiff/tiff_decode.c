/* tiff_decode.c — turning one TIFF chunk (tile or strip) into straight RGBA8 pixels.
 *
 * This is where the TIFF pixel model meets the codecs. A chunk's bytes are read through the byte
 * source (size checked against the file and the limits) and handed to the codec the Compression
 * tag names. Image codecs (JPEG, JPEG 2000, WebP) decode straight to RGBA; byte codecs (none,
 * LZW, Deflate, Zstandard, PackBits) give samples, which then have the horizontal predictor
 * undone, separate planes interleaved, 16-bit and signed samples brought to 8 bits, YCbCr data
 * units converted, and the photometric interpretation mapped to RGBA.
 *
 * Sample mapping (docs/formats.md): 16-bit v becomes round(v / 257), the nearest 8-bit value on
 * the same scale; signed samples are offset to unsigned first (int8 v -> v + 128). Grey is
 * replicated into R, G, B; the first extra sample is alpha, and associated (premultiplied)
 * alpha is converted to straight. JPEG colour follows OpenSlide: the Photometric tag says
 * whether the components are RGB or YCbCr. Orientation is not applied: pixels are returned as
 * stored, as OpenSlide and libvips do by default.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/fill.h"
#include "codecs/codec.h"
#include "tiff/tiff.h"

static bool is_j2k(uint16_t compression) {
    return compression == SP_COMPRESSION_APERIO_J2K_YCBCR ||
           compression == SP_COMPRESSION_APERIO_J2K_RGB || compression == 33004 ||
           compression == SP_COMPRESSION_J2K;
}

/* Codecs that decode whole images to RGBA themselves. */
static bool is_image_codec(uint16_t compression) {
    return compression == SP_COMPRESSION_JPEG || compression == SP_COMPRESSION_WEBP ||
           is_j2k(compression);
}

static bool is_byte_codec(uint16_t compression) {
    switch (compression) {
    case SP_COMPRESSION_NONE:
    case SP_COMPRESSION_LZW:
    case SP_COMPRESSION_ADOBE_DEFLATE:
    case SP_COMPRESSION_DEFLATE:
    case SP_COMPRESSION_ZSTD:
    case SP_COMPRESSION_PACKBITS:
        return true;
    default:
        return false;
    }
}

/* YCbCr stored as data units (byte codecs only): h x v luma samples then Cb, Cr. */
static bool is_ycbcr_units(const sp_tiff_dir *d) {
    return d->photometric == SP_PHOTOMETRIC_YCBCR && !is_image_codec(d->compression);
}

sp_status sp_tiff_check_decodable(const sp_tiff *tiff, const sp_tiff_dir *d, sp_err *err) {
    (void)tiff;
    unsigned spp = d->samples_per_pixel, bits = d->bits_per_sample;
    if (d->width == 0 || d->height == 0) {
        return sp_err_set(err, SP_E_CORRUPT, "TIFF directory at %llu has no image size",
                          (unsigned long long)d->offset);
    }
    if (!is_byte_codec(d->compression) && !is_image_codec(d->compression)) {
        return sp_err_set(err, SP_E_UNSUPPORTED, "unsupported TIFF compression %u (%s)",
                          d->compression, sp_tiff_compression_name(d->compression));
    }
    if (d->sample_format != 1 && d->sample_format != 2 && d->sample_format != 4) {
        return sp_err_set(err, SP_E_UNSUPPORTED,
                          "unsupported TIFF sample format %u (integer samples are read)",
                          d->sample_format);
    }
    bool image_codec = is_image_codec(d->compression);
    if (bits != 8 && (bits != 16 || image_codec)) {
        return sp_err_set(err, SP_E_UNSUPPORTED,
                          "unsupported TIFF samples: %u bits with %s compression (8 bits, or 16 "
                          "with lossless byte codecs, are read)",
                          bits, sp_tiff_compression_name(d->compression));
    }
    if (d->planar_config != 1 && d->planar_config != 2) {
        return sp_err_set(err, SP_E_CORRUPT, "TIFF planar configuration %u", d->planar_config);
    }
    if (d->planar_config == 2 && spp > 1 && (image_codec || is_ycbcr_units(d))) {
        return sp_err_set(err, SP_E_UNSUPPORTED,
                          "unsupported TIFF layout: separate planes with %s compression",
                          sp_tiff_compression_name(d->compression));
    }
    if (d->predictor != 1 && (d->predictor != 2 || image_codec)) {
        return sp_err_set(err, SP_E_UNSUPPORTED, "unsupported TIFF predictor %u", d->predictor);
    }
    if (spp == 0 || spp > 16) {
        return sp_err_set(err, SP_E_UNSUPPORTED, "unsupported TIFF layout: %u samples per pixel",
                          spp);
    }
    switch (d->photometric) {
    case SP_PHOTOMETRIC_MINISBLACK:
    case SP_PHOTOMETRIC_MINISWHITE:
        if (d->compression == SP_COMPRESSION_JPEG && spp != 1) {
            break;
        }
        return SP_OK;
    case SP_PHOTOMETRIC_RGB:
        if (spp < 3 || (d->compression == SP_COMPRESSION_JPEG && spp != 3)) {
            break;
        }
        return SP_OK;
    case SP_PHOTOMETRIC_YCBCR:
        if (spp != 3 || (is_ycbcr_units(d) && bits != 8)) {
            break;
        }
        if (is_ycbcr_units(d) &&
            (d->ycbcr_sub_h == 0 || d->ycbcr_sub_v == 0 || d->ycbcr_sub_h == 3 ||
             d->ycbcr_sub_v == 3 || d->ycbcr_sub_v > d->ycbcr_sub_h)) {
            return sp_err_set(err, SP_E_UNSUPPORTED, "unsupported YCbCr subsampling %ux%u",
                              d->ycbcr_sub_h, d->ycbcr_sub_v);
        }
        return SP_OK;
    default:
        return sp_err_set(err, SP_E_UNSUPPORTED, "unsupported TIFF photometric interpretation %u",
                          d->photometric);
    }
    return sp_err_set(err, SP_E_UNSUPPORTED,
                      "unsupported TIFF layout: photometric %u with %u samples per pixel and %s "
                      "compression",
                      d->photometric, spp, sp_tiff_compression_name(d->compression));
}

/* Rows actually stored in chunk `index`: full chunks, except the last strip of a strip image. */
static uint64_t chunk_rows(const sp_tiff_dir *d, uint64_t index) {
    if (d->tiled) {
        return d->chunk_height;
    }
    uint64_t row0 = (index % d->chunks_down) * d->chunk_height;
    uint64_t left = d->height - row0;
    return left < d->chunk_height ? left : d->chunk_height;
}

static uint8_t clamp8(int v) { return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v); }

/* Read one sample as 8 bits: 16-bit values rounded to the 8-bit scale, signed ones offset. */
static uint8_t sample8(const sp_tiff *t, const sp_tiff_dir *d, const uint8_t *p) {
    if (d->bits_per_sample == 8) {
        return d->sample_format == 2 ? (uint8_t)(p[0] ^ 0x80) : p[0];
    }
    unsigned v = t->big_endian ? (unsigned)(p[0] << 8 | p[1]) : (unsigned)(p[1] << 8 | p[0]);
    if (d->sample_format == 2) {
        v ^= 0x8000;
    }
    return (uint8_t)((v * 255 + 32767) / 65535);
}

/* Associated alpha to straight: c * 255 / a, rounded, at most 255. */
static void unpremultiply(uint8_t *px) {
    unsigned a = px[3];
    for (int c = 0; c < 3; c++) {
        unsigned v = a == 0 ? 0 : (px[c] * 255u + a / 2) / a;
        px[c] = (uint8_t)(v > 255 ? 255 : v);
    }
}

/* Map interleaved samples (spp per pixel, bits each) of `rows` rows to RGBA. */
static void samples_to_rgba(const sp_tiff *t, const sp_tiff_dir *d, const uint8_t *src,
                            uint64_t width, uint64_t rows, uint8_t *rgba, uint64_t stride) {
    unsigned spp = d->samples_per_pixel, bytes = d->bits_per_sample / 8;
    bool grey = d->photometric == SP_PHOTOMETRIC_MINISBLACK ||
                d->photometric == SP_PHOTOMETRIC_MINISWHITE;
    unsigned colours = grey ? 1 : 3;
    bool has_alpha = d->extra_samples > 0 && spp > colours;
    bool premultiplied = has_alpha && d->extra_sample0 == 1;
    for (uint64_t y = 0; y < rows; y++) {
        const uint8_t *s = src + y * width * spp * bytes;
        uint8_t *o = rgba + y * stride;
        for (uint64_t x = 0; x < width; x++, s += spp * bytes, o += 4) {
            if (grey) {
                uint8_t g = sample8(t, d, s);
                o[0] = o[1] = o[2] = d->photometric == SP_PHOTOMETRIC_MINISWHITE ? 255 - g : g;
            } else {
                o[0] = sample8(t, d, s);
                o[1] = sample8(t, d, s + bytes);
                o[2] = sample8(t, d, s + 2 * bytes);
            }
            o[3] = has_alpha ? sample8(t, d, s + colours * bytes) : 255;
            if (premultiplied) {
                unpremultiply(o);
            }
        }
    }
}

/* YCbCr data units (TIFF 6.0 section 21) to RGBA, with the JFIF equations (the default
 * ReferenceBlackWhite and coefficients, which is what writers use). */
static void ycbcr_units_to_rgba(const sp_tiff_dir *d, const uint8_t *src, uint64_t width,
                                uint64_t rows, uint8_t *rgba, uint64_t stride) {
    unsigned h = d->ycbcr_sub_h, v = d->ycbcr_sub_v;
    uint64_t units_across = (width + h - 1) / h;
    const uint8_t *u = src;
    for (uint64_t uy = 0; uy * v < rows; uy++) {
        for (uint64_t ux = 0; ux < units_across; ux++, u += h * v + 2) {
            int cb = u[h * v] - 128, cr = u[h * v + 1] - 128;
            int r = (int)lround(1.402 * cr);
            int g = (int)lround(-0.344136 * cb - 0.714136 * cr);
            int b = (int)lround(1.772 * cb);
            for (unsigned j = 0; j < v; j++) {
                for (unsigned i = 0; i < h; i++) {
                    uint64_t x = ux * h + i, y = uy * v + j;
                    if (x >= width || y >= rows) {
                        continue;
                    }
                    int luma = u[j * h + i];
                    uint8_t *o = rgba + y * stride + x * 4;
                    o[0] = clamp8(luma + r);
                    o[1] = clamp8(luma + g);
                    o[2] = clamp8(luma + b);
                    o[3] = 255;
                }
            }
        }
    }
}

static sp_status decompress(const sp_tiff_dir *d, const uint8_t *in, size_t in_len, uint8_t *out,
                            size_t out_len, sp_err *err) {
    size_t written = 0;
    sp_status st;
    switch (d->compression) {
    case SP_COMPRESSION_NONE:
        written = in_len < out_len ? in_len : out_len;
        memcpy(out, in, written);
        st = SP_OK;
        break;
    case SP_COMPRESSION_LZW:
        st = sp_lzw_decode(in, in_len, out, out_len, &written, err);
        break;
    case SP_COMPRESSION_ADOBE_DEFLATE:
    case SP_COMPRESSION_DEFLATE:
        st = sp_deflate_decode(in, in_len, out, out_len, &written, err);
        break;
    case SP_COMPRESSION_ZSTD:
        st = sp_zstd_decode(in, in_len, out, out_len, &written, err);
        break;
    case SP_COMPRESSION_PACKBITS:
        st = sp_packbits_decode(in, in_len, out, out_len, &written, err);
        break;
    default:
        return sp_err_set(err, SP_E_UNSUPPORTED, "unsupported TIFF compression %u",
                          d->compression);
    }
    if (st == SP_OK && written < out_len) {
        /* Short chunks happen in real files; the missing part reads as zero, as in libtiff. */
        memset(out + written, 0, out_len - written);
    }
    return st;
}

static sp_jpeg_space image_space(const sp_tiff_dir *d) {
    if (d->compression == SP_COMPRESSION_APERIO_J2K_YCBCR) {
        return SP_JPEG_SPACE_YCBCR;
    }
    if (d->compression == SP_COMPRESSION_APERIO_J2K_RGB) {
        return SP_JPEG_SPACE_RGB;
    }
    switch (d->photometric) {
    case SP_PHOTOMETRIC_YCBCR: return SP_JPEG_SPACE_YCBCR;
    case SP_PHOTOMETRIC_RGB: return SP_JPEG_SPACE_RGB;
    default: return SP_JPEG_SPACE_AUTO;
    }
}

sp_status sp_tiff_read_chunk(const sp_tiff *t, const sp_tiff_dir *d, uint64_t index,
                             uint8_t **data, uint64_t *length, sp_err *err) {
    *data = NULL;
    uint64_t offset = d->chunk_offsets[index];
    *length = d->chunk_byte_counts[index];
    if (offset == 0 || *length == 0) {
        return SP_OK;
    }
    sp_status st = sp_alloc(&t->limits, *length, "TIFF chunk", (void **)data, err);
    if (st == SP_OK) {
        st = sp_source_read(t->src, offset, *data, (size_t)*length, err);
    }
    if (st != SP_OK) {
        free(*data);
        *data = NULL;
    }
    return st;
}

static sp_status decode_image_codec(const sp_tiff_dir *d, const uint8_t *data, uint64_t length,
                                    uint64_t rows, uint8_t *rgba, uint64_t stride, sp_err *err) {
    sp_status st;
    if (is_j2k(d->compression)) {
        st = sp_j2k_decode_rgba(data, (size_t)length, image_space(d), d->chunk_width, rows, rgba,
                                (size_t)stride, err);
    } else if (d->compression == SP_COMPRESSION_WEBP) {
        st = sp_webp_decode_rgba(data, (size_t)length, d->chunk_width, rows, rgba, (size_t)stride,
                                 err);
    } else {
        st = sp_jpeg_decode_rgba(data, (size_t)length, d->jpeg_tables, (size_t)d->jpeg_tables_len,
                                 image_space(d), d->chunk_width, rows, rgba, (size_t)stride, err);
    }
    if (st == SP_OK && d->photometric == SP_PHOTOMETRIC_MINISWHITE) {
        for (uint64_t y = 0; y < rows; y++) {
            uint8_t *o = rgba + y * stride;
            for (uint64_t x = 0; x < d->chunk_width; x++, o += 4) {
                o[0] = o[1] = o[2] = (uint8_t)(255 - o[0]);
            }
        }
    }
    return st;
}

/* Bytes of decoded samples in one chunk (of one plane when planes are separate) of `rows` rows. */
static uint64_t decoded_bytes(const sp_tiff_dir *d, uint64_t rows, bool one_plane) {
    if (is_ycbcr_units(d)) {
        uint64_t h = d->ycbcr_sub_h, v = d->ycbcr_sub_v;
        return ((d->chunk_width + h - 1) / h) * ((rows + v - 1) / v) * (h * v + 2);
    }
    uint64_t samples = one_plane ? 1 : d->samples_per_pixel;
    return d->chunk_width * rows * samples * (d->bits_per_sample / 8);
}

/* Decompress chunk `index` (and, for separate planes, the same chunk of each used plane) into
 * interleaved samples in `raw`. */
static sp_status decode_samples(const sp_tiff *t, const sp_tiff_dir *d, uint64_t index,
                                uint64_t rows, uint8_t *raw, sp_err *err) {
    unsigned bytes = d->bits_per_sample / 8, spp = d->samples_per_pixel;
    bool planar = d->planar_config == 2 && spp > 1;
    unsigned planes = planar ? spp : 1;
    unsigned per_chunk = planar ? 1 : spp;
    uint64_t row_bytes = d->chunk_width * per_chunk * bytes;
    uint64_t out_len = decoded_bytes(d, rows, planar);
    uint64_t per_plane = d->chunks_across * d->chunks_down;
    uint8_t *plane = NULL;
    sp_status st = SP_OK;
    if (planar) {
        st = sp_alloc(&t->limits, out_len, "TIFF plane", (void **)&plane, err);
    }
    for (unsigned p = 0; st == SP_OK && p < planes; p++) {
        uint8_t *data;
        uint64_t length;
        st = sp_tiff_read_chunk(t, d, index + p * per_plane, &data, &length, err);
        uint8_t *dst = planar ? plane : raw;
        if (st == SP_OK && data == NULL) {
            memset(dst, 0, (size_t)out_len); /* a missing plane reads as zero */
        } else if (st == SP_OK) {
            st = decompress(d, data, (size_t)length, dst, (size_t)out_len, err);
        }
        free(data);
        if (st == SP_OK && d->predictor == 2) {
            st = sp_predictor_undo(dst, (size_t)row_bytes, d->chunk_width, rows, per_chunk,
                                   d->bits_per_sample, t->big_endian, err);
        }
        if (st == SP_OK && planar) {
            for (uint64_t i = 0; i < d->chunk_width * rows; i++) {
                memcpy(raw + (i * spp + p) * bytes, plane + i * bytes, bytes);
            }
        }
    }
    free(plane);
    return st;
}

sp_status sp_tiff_decode_chunk(const sp_tiff *tiff, const sp_tiff_dir *d, uint64_t index,
                               uint8_t *rgba, uint64_t stride, sp_err *err) {
    for (uint64_t y = 0; y < d->chunk_height; y++) {
        memset(rgba + y * stride, 0, (size_t)d->chunk_width * 4);
    }
    uint64_t per_plane = d->chunks_across * d->chunks_down;
    if (index >= per_plane) {
        return sp_err_set(err, SP_E_INVALID_ARG, "chunk %llu out of range",
                          (unsigned long long)index);
    }
    if (d->chunk_offsets[index] == 0 || d->chunk_byte_counts[index] == 0) {
        return SP_OK; /* a missing chunk (its first plane) reads as transparent */
    }
    sp_status st = sp_tiff_check_decodable(tiff, d, err);
    if (st != SP_OK) {
        return st;
    }
    uint64_t rows = chunk_rows(d, index);
    if (is_image_codec(d->compression)) {
        uint8_t *data;
        uint64_t length;
        st = sp_tiff_read_chunk(tiff, d, index, &data, &length, err);
        if (st == SP_OK) {
            st = decode_image_codec(d, data, length, rows, rgba, stride, err);
        }
        free(data);
    } else {
        uint64_t raw_len = decoded_bytes(d, rows, false);
        uint8_t *raw = NULL;
        st = sp_alloc(&tiff->limits, raw_len, "decoded TIFF chunk", (void **)&raw, err);
        if (st == SP_OK) {
            st = decode_samples(tiff, d, index, rows, raw, err);
        }
        if (st == SP_OK && is_ycbcr_units(d)) {
            ycbcr_units_to_rgba(d, raw, d->chunk_width, rows, rgba, stride);
        } else if (st == SP_OK) {
            samples_to_rgba(tiff, d, raw, d->chunk_width, rows, rgba, stride);
        }
        free(raw);
    }
    if (st != SP_OK) {
        for (uint64_t y = 0; y < d->chunk_height; y++) {
            memset(rgba + y * stride, 0, (size_t)d->chunk_width * 4);
        }
    }
    return st;
}

sp_status sp_tiff_decode_image(const sp_tiff *tiff, const sp_tiff_dir *d, uint8_t *rgba,
                               uint64_t stride, sp_err *err) {
    sp_status st = sp_tiff_check_decodable(tiff, d, err);
    if (st != SP_OK) {
        return st;
    }
    uint64_t cw = d->chunk_width, ch = d->chunk_height;
    uint8_t *chunk = NULL;
    st = sp_calloc(&tiff->limits, cw * ch, 4, "TIFF chunk pixels", (void **)&chunk, err);
    for (uint64_t r = 0; st == SP_OK && r < d->chunks_down; r++) {
        for (uint64_t c = 0; st == SP_OK && c < d->chunks_across; c++) {
            st = sp_tiff_decode_chunk(tiff, d, r * d->chunks_across + c, chunk, cw * 4, err);
            uint64_t x0 = c * cw, y0 = r * ch;
            uint64_t w = d->width - x0 < cw ? d->width - x0 : cw;
            uint64_t h = d->height - y0 < ch ? d->height - y0 : ch;
            for (uint64_t y = 0; st == SP_OK && y < h; y++) {
                memcpy(rgba + (y0 + y) * stride + x0 * 4, chunk + y * cw * 4, (size_t)w * 4);
            }
        }
    }
    free(chunk);
    return st;
}

unsigned sp_tiff_area_scales(const sp_tiff *tiff, const sp_tiff_dir *d) {
    sp_err ignored = {0};
    if (d->photometric == SP_PHOTOMETRIC_MINISWHITE ||
        sp_tiff_check_decodable(tiff, d, &ignored) != SP_OK) {
        return 0;
    }
    if (d->compression == SP_COMPRESSION_JPEG) {
        return 1u | 2u | 4u | 8u;
    }
    return is_j2k(d->compression) ? 1u : 0u;
}

sp_status sp_tiff_decode_chunk_area(const sp_tiff *tiff, const sp_tiff_dir *d, uint64_t index,
                                    unsigned scale, uint64_t x, uint64_t y, uint64_t w,
                                    uint64_t h, unsigned bpp, uint8_t *dst, uint64_t stride,
                                    const uint8_t empty[4], sp_err *err) {
    if (index >= d->chunks_across * d->chunks_down || (sp_tiff_area_scales(tiff, d) & scale) == 0) {
        return sp_err_set(err, SP_E_INVALID_ARG, "chunk %llu cannot be decoded in part",
                          (unsigned long long)index);
    }
    uint8_t *data;
    uint64_t length;
    sp_status st = sp_tiff_read_chunk(tiff, d, index, &data, &length, err);
    if (st != SP_OK) {
        return st;
    }
    uint64_t vw = 0, vh = 0; /* the part of the area the decoded image covers */
    if (data != NULL && is_j2k(d->compression)) {
        st = sp_j2k_decode_area(data, (size_t)length, image_space(d), d->chunk_width,
                                chunk_rows(d, index), x, y, w, h, bpp, dst, (size_t)stride, &vw,
                                &vh, err);
    } else if (data != NULL) {
        /* A decoded image larger than the chunk (a padded last strip) is cut at the chunk, as
         * in the whole-chunk decode. */
        uint64_t rows = (chunk_rows(d, index) + scale - 1) / scale;
        uint64_t cols = (d->chunk_width + scale - 1) / scale;
        uint64_t hh = y >= rows ? 0 : (y + h <= rows ? h : rows - y);
        uint64_t ww = x >= cols ? 0 : (x + w <= cols ? w : cols - x);
        st = sp_jpeg_decode_area(data, (size_t)length, d->jpeg_tables, (size_t)d->jpeg_tables_len,
                                 image_space(d), scale, x, y, ww, hh, bpp, dst, (size_t)stride,
                                 &vw, &vh, err);
        vw = vw < cols ? vw : cols;
        vh = vh < rows ? vh : rows;
    }
    free(data);
    if (st == SP_OK) {
        sp_fill_uncovered(dst, (int64_t)stride, x, y, w, h, vw, vh, (int)bpp, empty);
    }
    return st;
}
