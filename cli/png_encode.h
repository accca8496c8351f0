/* png_encode.h — 8-bit PNG encoding into memory, for the commands that write pictures
 * (cli_write_image) and for `slidepipe serve`'s PNG tiles. */
#ifndef SLIDEPIPE_CLI_PNG_ENCODE_H
#define SLIDEPIPE_CLI_PNG_ENCODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Encode w x h pixels of `channels` (1 grey, 3 RGB, 4 RGBA) 8-bit samples, rows `stride` bytes
 * apart, at zlib level `level` (0-9) into a new buffer (*out, *out_len; free() it). False when
 * libpng fails or memory runs out; nothing is returned then. */
bool png_encode(const uint8_t *px, int64_t w, int64_t h, int64_t stride, int channels, int level,
                uint8_t **out, size_t *out_len);

#endif
