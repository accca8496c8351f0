/* zarr_codec.h — the chunk codecs of Zarr stores, shared by the writer and the reader: zstd,
 * blosc (lz4 or zstd inside, byte shuffle), gzip and none, with their numcodecs (Zarr v2) and
 * Zarr v3 names and configuration, so that other readers decode what we write and we decode what
 * they write. Decoding treats its input as untrusted (sizes checked, never writes past out_len). */
#ifndef SP_ZARR_ZARR_CODEC_H
#define SP_ZARR_ZARR_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "slidepipe.h"

/* Encode `len` bytes of elements of `typesize` bytes (blosc shuffles by it). *out is malloc'd,
 * *out_len its size. Deterministic: the same input and settings give the same bytes. */
sp_status sp_zarr_encode(sp_zarr_codec codec, int level, size_t typesize, const void *in,
                         size_t len, uint8_t **out, size_t *out_len, sp_err *err);

/* Decode into exactly `out_len` bytes (a whole chunk); a stream that decodes to another size is
 * SP_E_CORRUPT. */
sp_status sp_zarr_decode(sp_zarr_codec codec, const uint8_t *in, size_t in_len, void *out,
                         size_t out_len, sp_err *err);

/* SP_E_INVALID_ARG naming the problem unless `codec` is known and `level` is 0 (the default) or
 * within its range (zstd 1..22, blosc and gzip 1..9; none ignores it). */
sp_status sp_zarr_codec_check(sp_zarr_codec codec, int level, sp_err *err);

/* The codec's default level (zstd 1, blosc 5, gzip 6, none 0). zstd's own default is 3; on slide
 * pixels level 1 compresses 1.5x faster for 0.7-1.6% more bytes (docs/zarr.md, "Codec level"), and
 * a conversion's time is mostly compression. */
int sp_zarr_codec_default_level(sp_zarr_codec codec);

/* Zarr v2 "compressor" object as JSON text (e.g. {"id": "zstd", "level": 3}), or "null". The
 * string is malloc'd. */
char *sp_zarr_codec_v2_json(sp_zarr_codec codec, int level, size_t typesize);
/* Zarr v3 codec entry appended after {"name": "bytes"} (e.g. {"name": "zstd", "configuration":
 * {"level": 3, "checksum": false}}), or NULL for none. The string is malloc'd. */
char *sp_zarr_codec_v3_json(sp_zarr_codec codec, int level, size_t typesize);

/* Recognise a codec from parsed metadata: a v2 compressor id ("zstd", "blosc" + cname, "gzip",
 * "zlib"?) or a v3 codec name. Returns SP_E_UNSUPPORTED naming it otherwise. The *_name and
 * cname strings come from the JSON. */
sp_status sp_zarr_codec_from_v2(const char *id, const char *cname, sp_zarr_codec *out,
                                sp_err *err);
sp_status sp_zarr_codec_from_v3(const char *name, const char *cname, sp_zarr_codec *out,
                                sp_err *err);

#endif
