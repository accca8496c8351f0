/* codec.h — the tile codecs: each decodes one compressed chunk into a caller buffer.
 *
 * Every decoder treats its input as untrusted: it never reads past `in_len`, never writes past
 * `out_len`, and reports malformed data as SP_E_CORRUPT with a message. Working memory is
 * bounded: small for the byte codecs; for JPEG, libjpeg's buffers (progressive streams need a
 * whole-image coefficient buffer) are capped at 512 MiB (SP_E_LIMIT beyond); JPEG 2000 refuses
 * a codestream larger than its tile before OpenJPEG allocates. On error, *written (where there
 * is one) counts the bytes decoded before the error, and pixel outputs are left zeroed.
 */
#ifndef SP_CODECS_CODEC_H
#define SP_CODECS_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

/* The colour space of a JPEG stream's components, as the container declares it. */
typedef enum sp_jpeg_space {
    SP_JPEG_SPACE_AUTO = 0, /* let libjpeg decide from the stream's markers */
    SP_JPEG_SPACE_RGB,      /* components are R, G, B: no colour conversion (Aperio) */
    SP_JPEG_SPACE_YCBCR,    /* components are Y, Cb, Cr: convert to RGB */
    SP_JPEG_SPACE_GREY,     /* one component */
} sp_jpeg_space;

/* Decode a JPEG stream into straight RGBA8 (alpha 255; grey is replicated into R, G, B).
 * `tables` (may be NULL) is an abbreviated tables-only stream (TIFF JPEGTables) loaded first.
 * The decoded image is written into the top-left of a `width` x `height` area of `rgba` (rows of
 * `stride` bytes); a decoded image larger than the area is cropped, a smaller one leaves the
 * rest untouched. Uses libjpeg's default (accurate integer) IDCT and fancy upsampling, as
 * OpenSlide does, so pixels are identical. The component count must match `space` (3 for RGB
 * and YCbCr, 1 for grey; AUTO accepts both), else SP_E_CORRUPT. libjpeg warnings (a damaged but
 * decodable stream) are tolerated, where OpenSlide fails the read. */
sp_status sp_jpeg_decode_rgba(const uint8_t *data, size_t len, const uint8_t *tables,
                              size_t tables_len, sp_jpeg_space space, uint64_t width,
                              uint64_t height, uint8_t *rgba, size_t stride, sp_err *err);

/* Decode only the area (x, y, width, height) of a JPEG stream decoded at 1/scale (scale 1, 2, 4
 * or 8: libjpeg's DCT scaling, whose output is ceil(image / scale) pixels), straight into `dst`
 * as RGB8 (bpp 3) or RGBA8 with alpha 255 (bpp 4), rows of `stride` bytes. The pixels equal
 * those of a full decode at the same scale followed by a crop, bit for bit; parts of the area
 * outside the decoded image are left untouched; *image_width x *image_height (may be NULL)
 * receive the size of the decoded image (0 x 0 on failure). Rows below the area are never
 * decoded. */
sp_status sp_jpeg_decode_area(const uint8_t *data, size_t len, const uint8_t *tables,
                              size_t tables_len, sp_jpeg_space space, unsigned scale, uint64_t x,
                              uint64_t y, uint64_t width, uint64_t height, unsigned bpp,
                              uint8_t *dst, size_t stride, uint64_t *image_width,
                              uint64_t *image_height, sp_err *err);

/* Read a JPEG stream's dimensions and component count without decoding. */
sp_status sp_jpeg_read_header(const uint8_t *data, size_t len, const uint8_t *tables,
                              size_t tables_len, uint32_t *width, uint32_t *height,
                              int *components, sp_err *err);

/* Decode a JPEG 2000 codestream (or JP2 file) into straight RGBA8, like sp_jpeg_decode_rgba.
 * `space` YCBCR converts YCbCr components to RGB (Aperio 33003); RGB and AUTO copy components
 * (Aperio 33005; a multiple-component transform is undone by OpenJPEG). An image larger than
 * the width x height area is refused before decoding; 1 to 4 components of up to 8 bits. */
sp_status sp_j2k_decode_rgba(const uint8_t *data, size_t len, sp_jpeg_space space, uint64_t width,
                             uint64_t height, uint8_t *rgba, size_t stride, sp_err *err);

/* Decode only the area (x, y, width, height) of a JPEG 2000 image, like sp_jpeg_decode_area at
 * scale 1: OpenJPEG decodes only the code-blocks the area needs (opj_set_decode_area). The
 * image must fit in tile_width x tile_height, as for sp_j2k_decode_rgba. */
sp_status sp_j2k_decode_area(const uint8_t *data, size_t len, sp_jpeg_space space,
                             uint64_t tile_width, uint64_t tile_height, uint64_t x, uint64_t y,
                             uint64_t width, uint64_t height, unsigned bpp, uint8_t *dst,
                             size_t stride, uint64_t *image_width, uint64_t *image_height,
                             sp_err *err);

/* Decode a JPEG XR stream (jxrlib) of 8-bit pixels (grey, or BGR/RGB in 24 or 32 bits, the
 * fourth byte dropped) into `out` (rows of `stride` bytes) as grey (samples 1) or B, G, R bytes
 * (samples 3), the order CZI's Gray8 and Bgr24 store. The stream must be width x height and
 * grey exactly when samples is 1, else SP_E_CORRUPT; other pixel formats are SP_E_UNSUPPORTED. */
sp_status sp_jxr_decode(const uint8_t *data, size_t len, uint32_t width, uint32_t height,
                        unsigned samples, uint8_t *out, size_t stride, sp_err *err);

/* Whether the build has jxrlib (else sp_jxr_decode answers SP_E_UNSUPPORTED). */
bool sp_jxr_available(void);

/* TIFF LZW (MSB-first codes, early change). Writes at most out_len bytes; *written says how
 * many. Output longer than out_len is cut (as libtiff does); a stream ending early is accepted
 * and reported through *written. */
sp_status sp_lzw_decode(const uint8_t *in, size_t in_len, uint8_t *out, size_t out_len,
                        size_t *written, sp_err *err);

/* zlib-wrapped Deflate (TIFF compressions 8 and 32946) through libdeflate. Unlike LZW, data
 * that decode to more than out_len are an error (SP_E_CORRUPT), not cut. */
sp_status sp_deflate_decode(const uint8_t *in, size_t in_len, uint8_t *out, size_t out_len,
                            size_t *written, sp_err *err);

/* Zstandard (TIFF compression 50000). Output over out_len, or empty input, is SP_E_CORRUPT. */
sp_status sp_zstd_decode(const uint8_t *in, size_t in_len, uint8_t *out, size_t out_len,
                         size_t *written, sp_err *err);

/* The calling thread's zstd compression context (a ZSTD_CCtx), kept until the thread ends; NULL
 * when out of memory. Whoever compresses with it sets every parameter each time (as
 * ZSTD_compressCCtx does). */
struct ZSTD_CCtx_s *sp_zstd_thread_cctx(void);

/* PackBits run-length data (TIFF compression 32773); output beyond out_len is cut. */
sp_status sp_packbits_decode(const uint8_t *in, size_t in_len, uint8_t *out, size_t out_len,
                             size_t *written, sp_err *err);

/* A WebP stream into straight RGBA8 (alpha 255 when the stream has none), into the top-left of
 * a width x height area; a larger stream is refused before decoding. */
sp_status sp_webp_decode_rgba(const uint8_t *data, size_t len, uint64_t width, uint64_t height,
                              uint8_t *rgba, size_t stride, sp_err *err);

/* A PNG stream into straight RGBA8 (alpha 255), filling exactly a width x height area: a stream
 * of another size is refused before decoding (SP_E_CORRUPT), and so is one with transparency
 * (SP_E_UNSUPPORTED), as OpenSlide refuses it. Palette, grey and 16-bit samples are converted as
 * OpenSlide converts them (src/codecs/png.c). */
sp_status sp_png_decode_rgba(const uint8_t *data, size_t len, uint64_t width, uint64_t height,
                             uint8_t *rgba, size_t stride, sp_err *err);

/* A Windows bitmap of exactly width x height into straight RGBA8 (alpha 255): 24-bit BGR,
 * BITMAPINFOHEADER, uncompressed, bottom-up or top-down. Any other kind is SP_E_UNSUPPORTED,
 * sizes that do not fit the stream SP_E_CORRUPT, each with a message naming what was found. */
sp_status sp_bmp_decode_rgba(const uint8_t *data, size_t len, uint64_t width, uint64_t height,
                             uint8_t *rgba, size_t stride, sp_err *err);

/* Undo TIFF horizontal differencing (Predictor 2) in place on `rows` rows of `width` pixels of
 * `samples` interleaved samples of `bits` (8 or 16) bits, stored in the file byte order
 * (`big_endian` matters for 16-bit). Returns SP_E_UNSUPPORTED for other bit depths. */
sp_status sp_predictor_undo(uint8_t *buf, size_t row_bytes, uint64_t width, uint64_t rows,
                            unsigned samples, unsigned bits, bool big_endian, sp_err *err);

#endif
