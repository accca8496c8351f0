/* tiff_decode.c — turning one TIFF chunk (tile or strip) into straight RGBA8 pixels.
 *
 * This is where the TIFF pixel model meets the codecs: it reads the chunk's bytes through the
 * byte source (size checked against the file and the limits), decompresses with the codec the
 * Compression tag names, undoes the horizontal predictor, and maps the photometric
 * interpretation (grey, RGB, RGBA, YCbCr-in-JPEG) to RGBA. JPEG colour handling follows
 * OpenSlide: the Photometric tag decides whether the JPEG components are RGB or YCbCr.
 */
#include <stdlib.h>
#include <string.h>

#include "codecs/codec.h"
#include "tiff/tiff.h"

static bool is_j2k(uint16_t compression) {
    return compression == SP_COMPRESSION_APERIO_J2K_YCBCR ||
           compression == SP_COMPRESSION_APERIO_J2K_RGB || compression == SP_COMPRESSION_J2K;
}

/* JPEG 2000 tiles carry their own structure; only 8-bit grey or colour is read. */
static bool spp_is_colour_or_grey(const sp_tiff_dir *d) {
    return d->bits_per_sample == 8 && (d->planar_config == 1 || d->samples_per_pixel == 1) &&
           d->samples_per_pixel >= 1 && d->samples_per_pixel <= 4;
}

sp_status sp_tiff_check_decodable(const sp_tiff *tiff, const sp_tiff_dir *d, sp_err *err) {
    (void)tiff;
    unsigned long long off = (unsigned long long)d->offset;
    if (d->width == 0 || d->height == 0) {
        return sp_err_set(err, SP_E_CORRUPT, "TIFF directory at %llu has no image size", off);
    }
    switch (d->compression) {
    case SP_COMPRESSION_NONE:
    case SP_COMPRESSION_LZW:
    case SP_COMPRESSION_JPEG:
    case SP_COMPRESSION_ADOBE_DEFLATE:
    case SP_COMPRESSION_DEFLATE:
    case SP_COMPRESSION_ZSTD:
        break;
    case SP_COMPRESSION_APERIO_J2K_YCBCR:
    case SP_COMPRESSION_APERIO_J2K_RGB:
    case SP_COMPRESSION_J2K:
        if (spp_is_colour_or_grey(d)) {
            return SP_OK;
        }
        return sp_err_set(err, SP_E_UNSUPPORTED,
                          "unsupported JPEG 2000 TIFF layout: %u samples per pixel, %u bits",
                          d->samples_per_pixel, d->bits_per_sample);
    default:
        return sp_err_set(err, SP_E_UNSUPPORTED, "unsupported TIFF compression %u (%s)",
                          d->compression, sp_tiff_compression_name(d->compression));
    }
    if (d->bits_per_sample != 8 || (d->sample_format != 1 && d->sample_format != 4)) {
        return sp_err_set(err, SP_E_UNSUPPORTED,
                          "unsupported TIFF samples: %u bits, sample format %u (8-bit unsigned "
                          "is read)",
                          d->bits_per_sample, d->sample_format);
    }
    if (d->planar_config != 1 && d->samples_per_pixel > 1) {
        return sp_err_set(err, SP_E_UNSUPPORTED, "unsupported TIFF planar configuration %u",
                          d->planar_config);
    }
    if (d->predictor != 1 && d->predictor != 2) {
        return sp_err_set(err, SP_E_UNSUPPORTED, "unsupported TIFF predictor %u", d->predictor);
    }
    unsigned spp = d->samples_per_pixel;
    switch (d->photometric) {
    case SP_PHOTOMETRIC_MINISBLACK:
    case SP_PHOTOMETRIC_MINISWHITE:
        if (spp != 1 && spp != 2) {
            break;
        }
        return SP_OK;
    case SP_PHOTOMETRIC_RGB:
        if (spp != 3 && spp != 4) {
            break;
        }
        if (d->compression == SP_COMPRESSION_JPEG && spp != 3) {
            break;
        }
        return SP_OK;
    case SP_PHOTOMETRIC_YCBCR:
        if (d->compression == SP_COMPRESSION_JPEG && spp == 3) {
            return SP_OK;
        }
        return sp_err_set(err, SP_E_UNSUPPORTED,
                          "unsupported TIFF layout: YCbCr outside JPEG compression");
    default:
        return sp_err_set(err, SP_E_UNSUPPORTED, "unsupported TIFF photometric interpretation %u",
                          d->photometric);
    }
    return sp_err_set(err, SP_E_UNSUPPORTED,
                      "unsupported TIFF layout: photometric %u with %u samples per pixel",
                      d->photometric, spp);
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

/* Expand decoded interleaved 8-bit samples into RGBA. */
static void samples_to_rgba(const sp_tiff_dir *d, const uint8_t *src, uint64_t width,
                            uint64_t rows, uint8_t *rgba, uint64_t stride) {
    unsigned spp = d->samples_per_pixel;
    bool white_is_zero = d->photometric == SP_PHOTOMETRIC_MINISWHITE;
    for (uint64_t y = 0; y < rows; y++) {
        const uint8_t *s = src + y * width * spp;
        uint8_t *o = rgba + y * stride;
        for (uint64_t x = 0; x < width; x++, s += spp, o += 4) {
            if (spp <= 2) {
                uint8_t g = white_is_zero ? (uint8_t)(255 - s[0]) : s[0];
                o[0] = o[1] = o[2] = g;
                o[3] = spp == 2 ? s[1] : 255;
            } else {
                o[0] = s[0];
                o[1] = s[1];
                o[2] = s[2];
                o[3] = spp == 4 ? s[3] : 255;
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

static sp_jpeg_space jpeg_space(const sp_tiff_dir *d) {
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

sp_status sp_tiff_decode_chunk(const sp_tiff *tiff, const sp_tiff_dir *d, uint64_t index,
                               uint8_t *rgba, uint64_t stride, sp_err *err) {
    for (uint64_t y = 0; y < d->chunk_height; y++) {
        memset(rgba + y * stride, 0, (size_t)d->chunk_width * 4);
    }
    if (index >= d->n_chunks) {
        return sp_err_set(err, SP_E_INVALID_ARG, "chunk %llu out of range",
                          (unsigned long long)index);
    }
    uint64_t offset = d->chunk_offsets[index], length = d->chunk_byte_counts[index];
    if (offset == 0 || length == 0) {
        return SP_OK; /* a missing chunk reads as transparent */
    }
    sp_status st = sp_tiff_check_decodable(tiff, d, err);
    if (st != SP_OK) {
        return st;
    }
    uint8_t *data = NULL;
    st = sp_alloc(&tiff->limits, length, "TIFF chunk", (void **)&data, err);
    if (st == SP_OK) {
        st = sp_source_read(tiff->src, offset, data, (size_t)length, err);
    }
    uint64_t rows = chunk_rows(d, index);
    if (st == SP_OK && is_j2k(d->compression)) {
        st = sp_j2k_decode_rgba(data, (size_t)length, jpeg_space(d), d->chunk_width, rows, rgba,
                                (size_t)stride, err);
    } else if (st == SP_OK && d->compression == SP_COMPRESSION_JPEG) {
        st = sp_jpeg_decode_rgba(data, (size_t)length, d->jpeg_tables, (size_t)d->jpeg_tables_len,
                                 jpeg_space(d), d->chunk_width, rows, rgba, (size_t)stride, err);
        if (st == SP_OK && d->photometric == SP_PHOTOMETRIC_MINISWHITE) {
            for (uint64_t y = 0; y < rows; y++) {
                uint8_t *o = rgba + y * stride;
                for (uint64_t x = 0; x < d->chunk_width; x++, o += 4) {
                    o[0] = o[1] = o[2] = (uint8_t)(255 - o[0]);
                }
            }
        }
    } else if (st == SP_OK) {
        size_t row_bytes = (size_t)d->chunk_width * d->samples_per_pixel;
        uint8_t *raw = NULL;
        st = sp_alloc(&tiff->limits, (uint64_t)row_bytes * rows, "decoded TIFF chunk",
                      (void **)&raw, err);
        if (st == SP_OK) {
            st = decompress(d, data, (size_t)length, raw, row_bytes * (size_t)rows, err);
        }
        if (st == SP_OK && d->predictor == 2) {
            st = sp_predictor_undo(raw, row_bytes, d->chunk_width, rows, d->samples_per_pixel,
                                   d->bits_per_sample, tiff->big_endian, err);
        }
        if (st == SP_OK) {
            samples_to_rgba(d, raw, d->chunk_width, rows, rgba, stride);
        }
        free(raw);
    }
    free(data);
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
