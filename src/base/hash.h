/* hash.h — checksums of bytes in memory: SHA-256 (the content address of every file a Zarr store
 * writes, and of its manifest) and CRC-32C (the checksum of a Zarr v3 shard index, read and
 * written). Hashing a byte source, which reads it, is io/'s (io/source_hash.h).
 */
#ifndef SP_BASE_HASH_H
#define SP_BASE_HASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One piece of a file or request body, which is the concatenation of its pieces; lets a shard be
 * written and hashed from its inner chunks without joining them into one buffer. */
typedef struct sp_bytes {
    const void *data;
    size_t len;
} sp_bytes;

/* Lower-case hex SHA-256 of a buffer (out: 65 bytes). Only an allocation failure inside OpenSSL
 * can make it fail; then out is 64 '0's, a hash that matches nothing, so later comparisons fail
 * loudly rather than pass. */
void sp_sha256_hex(const void *data, size_t len, char *out);

/* Hex SHA-256 of the concatenation of `parts` (out: 65 bytes); false (out unchanged) when
 * OpenSSL cannot allocate its context. */
bool sp_sha256_parts_hex(const sp_bytes *parts, size_t nparts, char *out);

/* 32 digest bytes as 64 lower-case hex digits and a NUL (out: 65 bytes). */
void sp_hex_digest32(const unsigned char *md, char *out);

/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as Zarr v3's crc32c codec computes it. */
uint32_t sp_crc32c(const void *data, size_t len);

#endif
