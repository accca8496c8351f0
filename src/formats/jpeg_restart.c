/* jpeg_restart.c — JPEG streams cut at their restart markers into tiles (jpeg_restart.h).
 *
 * Moved here from hamamatsu_ndpi.c so that NDPI levels and VMS images share one reading of the
 * header, one scan for restart markers and one way of building a tile's stream.
 */
#include "formats/jpeg_restart.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/fill.h"
#include "codecs/codec.h"
#include "formats/slide_struct.h"

/* Bytes read at a time when scanning a stream for restart markers. */
#define SCAN_BLOCK (1u << 20)

static unsigned be16(const uint8_t *p) {
    return (unsigned)p[0] << 8 | p[1];
}

sp_status sp_jpeg_restart_parse_header(const uint8_t *h, size_t len, const char *where,
                                       sp_jpeg_restart_layout *out, sp_err *err) {
    memset(out, 0, sizeof *out);
    if (len < 4 || h[0] != 0xFF || h[1] != 0xD8) {
        return sp_err_set(err, SP_E_CORRUPT, "%s: not a JPEG stream", where);
    }
    size_t i = 2;
    bool frame = false;
    while (i + 4 <= len) {
        if (h[i] != 0xFF) {
            return sp_err_set(err, SP_E_CORRUPT, "%s: bad JPEG marker at byte %zu", where, i);
        }
        unsigned marker = h[i + 1];
        if (marker == 0xFF) { /* fill byte */
            i++;
            continue;
        }
        size_t seg = be16(h + i + 2);
        if (seg < 2 || i + 2 + seg > len) {
            break;
        }
        const uint8_t *p = h + i + 4;
        if (marker == 0xC0 || marker == 0xC1) {
            unsigned n = seg >= 8 ? p[5] : 0;
            if (p[0] != 8 || (n != 1 && n != 3) || seg != 8 + 3 * n) {
                return sp_err_set(err, SP_E_UNSUPPORTED,
                                  "%s: JPEG frame of %u components at %u bits (8-bit grey or "
                                  "3 components are read)",
                                  where, n, p[0]);
            }
            unsigned hmax = 1, vmax = 1;
            for (unsigned c = 0; c < n; c++) {
                unsigned hs = p[7 + 3 * c] >> 4, vs = p[7 + 3 * c] & 15;
                if (hs < 1 || hs > 4 || vs < 1 || vs > 4) {
                    return sp_err_set(err, SP_E_CORRUPT, "%s: bad JPEG sampling factors", where);
                }
                hmax = hs > hmax ? hs : hmax;
                vmax = vs > vmax ? vs : vmax;
            }
            out->height = be16(p + 1);
            out->width = be16(p + 3);
            out->components = n;
            out->mcu_width = n == 1 ? 8 : 8 * hmax;
            out->mcu_height = n == 1 ? 8 : 8 * vmax;
            out->frame_size_at = i + 5;
            frame = true;
        } else if (marker >= 0xC2 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 &&
                   marker != 0xCC) {
            return sp_err_set(err, SP_E_UNSUPPORTED,
                              "%s: JPEG frame type 0x%02X (baseline or extended Huffman is read)",
                              where, marker);
        } else if (marker == 0xDD && seg == 4) {
            out->restart_interval = be16(p);
        } else if (marker == 0xDA) {
            if (!frame) {
                return sp_err_set(err, SP_E_CORRUPT, "%s: JPEG scan before its frame", where);
            }
            out->header_len = i + 2 + seg;
            return SP_OK;
        }
        i += 2 + seg;
    }
    return sp_err_set(err, SP_E_CORRUPT, "%s: no JPEG scan within the first %zu bytes", where, len);
}

void sp_jpeg_restart_set_frame_size(uint8_t *header, const sp_jpeg_restart_layout *lay,
                                    uint64_t width, uint64_t height) {
    header[lay->frame_size_at] = (uint8_t)(height >> 8);
    header[lay->frame_size_at + 1] = (uint8_t)height;
    header[lay->frame_size_at + 2] = (uint8_t)(width >> 8);
    header[lay->frame_size_at + 3] = (uint8_t)width;
}

sp_status sp_jpeg_restart_scan(sp_source *src, uint64_t first, uint64_t end, uint64_t n,
                               uint64_t *starts, const char *where, sp_err *err) {
    uint8_t *block = malloc(SCAN_BLOCK);
    if (block == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory scanning %s", where);
    }
    uint64_t found = 1;
    starts[0] = first;
    bool after_ff = false;
    sp_status st = SP_OK;
    for (uint64_t at = first; st == SP_OK && at < end && found < n;) {
        size_t len = end - at < SCAN_BLOCK ? (size_t)(end - at) : SCAN_BLOCK;
        st = sp_source_read(src, at, block, len, err);
        for (size_t i = 0; st == SP_OK && i < len && found < n; i++) {
            if (after_ff && block[i] >= 0xD0 && block[i] <= 0xD7) {
                starts[found++] = at + i + 1;
            }
            after_ff = block[i] == 0xFF;
        }
        at += len;
    }
    free(block);
    if (st == SP_OK && found != n) {
        st = sp_err_set(err, SP_E_CORRUPT,
                        "%s: %llu restart intervals found where the level needs %llu", where,
                        (unsigned long long)found, (unsigned long long)n);
    }
    starts[n] = end;
    return st;
}

sp_status sp_jpeg_restart_tile(sp_source *src, const sp_limits *limits, const uint8_t *header,
                               size_t header_len, uint64_t begin, uint64_t end, uint8_t **out,
                               size_t *len, sp_err *err) {
    uint8_t *buf = NULL;
    sp_status st = sp_alloc(limits, header_len + (end - begin) + 2, "a restart-interval tile",
                            (void **)&buf, err);
    if (st == SP_OK) {
        st = sp_source_read(src, begin, buf + header_len, (size_t)(end - begin), err);
    }
    if (st != SP_OK) {
        free(buf);
        return st;
    }
    memcpy(buf, header, header_len);
    size_t n = header_len + (size_t)(end - begin);
    /* The interval ends with the next one's restart marker (or the stream's end of image):
     * end of image in its place. */
    if (n >= header_len + 2 && buf[n - 2] == 0xFF &&
        ((buf[n - 1] >= 0xD0 && buf[n - 1] <= 0xD7) || buf[n - 1] == 0xD9)) {
        n -= 2;
    }
    buf[n] = 0xFF;
    buf[n + 1] = 0xD9;
    *out = buf;
    *len = n + 2;
    return SP_OK;
}

sp_status sp_jpeg_restart_decode_area(sp_source *src, const sp_limits *limits,
                                      const uint8_t *header, size_t header_len, uint64_t begin,
                                      uint64_t end, unsigned scale, int64_t x, int64_t y, int64_t w,
                                      int64_t h, int bpp, uint8_t *dst, int64_t stride,
                                      const uint8_t *empty, sp_err *err) {
    uint8_t *jpeg;
    size_t len;
    sp_status st =
        sp_jpeg_restart_tile(src, limits, header, header_len, begin, end, &jpeg, &len, err);
    if (st != SP_OK) {
        return st;
    }
    uint64_t vw = 0, vh = 0;
    st = sp_jpeg_decode_area(jpeg, len, NULL, 0, SP_JPEG_SPACE_AUTO, scale, (uint64_t)x,
                             (uint64_t)y, (uint64_t)w, (uint64_t)h, (unsigned)bpp, dst,
                             (size_t)stride, &vw, &vh, err);
    free(jpeg);
    if (st == SP_OK) {
        sp_fill_uncovered(dst, stride, (uint64_t)x, (uint64_t)y, (uint64_t)w, (uint64_t)h, vw, vh,
                          bpp, empty);
    }
    return st;
}

unsigned sp_jpeg_restart_area_scales(unsigned scale) {
    unsigned scales = 0;
    for (unsigned c = 1; c <= 8; c *= 2) {
        scales |= scale * c <= 8 ? c : 0;
    }
    return scales | SP_AREA_OPAQUE; /* JPEG has no alpha */
}
