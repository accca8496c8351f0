/* fuzz_ndpi.c — libFuzzer target for the NDPI reader's restart-marker index
 * (src/formats/hamamatsu_ndpi.c): the JPEG header walk, the McuStarts tag (65426) and the scan of
 * the strip for restart markers that replaces it, and the tiles cut from the intervals.
 *
 * fuzz_tiff.c reaches NDPI too, but a mutated TIFF rarely keeps a JPEG strip whose restart
 * intervals line up with the level, so that target seldom gets past the index. Here the input
 * does not hold the file; it steers one. Each run encodes a small image with libjpeg (restart
 * interval, chroma subsampling and size taken from the input, so the stream has real restart
 * markers), finds its true interval starts, then applies the input's edits: to the McuStarts
 * values (or leaves the tag out, so the reader scans), to the TIFF's width and height, and to
 * bytes of the strip (markers, entropy data, the end); the strip may also be cut short. The
 * result is wrapped in a one-level little-endian NDPI TIFF in memory and opened the way
 * fuzz_tiff.c opens its input: from a memory source with lowered limits, then the GPU path's raw
 * tiles and the reads of fuzz_read_slide.h. Every input, the empty one included, makes a valid
 * file before the edits, so no seed corpus is needed.
 *
 * Input (missing bytes read as 0):
 *   [0] flags: bits 0-1 subsampling (4:4:4, 4:2:2, 4:2:0, grey); bit 2 leave McuStarts out;
 *       bit 3 cut the strip at the offset in [6..7]; bit 4 store McuStarts as SHORT, not LONG
 *   [1] width in MCUs - 1 (mod 32)   [2] height in MCUs - 1 (mod 16)
 *   [3] restart interval in MCUs (0: none)   [4] pixels taken off the TIFF's width, [5] height
 *   [6..7] where to cut the strip (little-endian, mod its length)
 *   [8] k, then k McuStarts edits of 5 bytes: index (mod count), a signed 32-bit delta
 *   then strip patches of 3 bytes: offset (16-bit, mod the strip's length), the new byte.
 */
#include <setjmp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h> /* jpeglib.h uses FILE without including it */
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#include "fuzz_read_slide.h"
#include "slide/slide.h"

typedef struct input {
    const uint8_t *p;
    size_t n, at;
} input;

static uint8_t next_byte(input *in) {
    return in->at < in->n ? in->p[in->at++] : 0;
}

static uint32_t next_u32(input *in) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        v |= (uint32_t)next_byte(in) << (8 * i);
    }
    return v;
}

/* ---- the JPEG strip ----------------------------------------------------------------------- */

typedef struct encoder_error {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
} encoder_error;

static void on_encoder_error(j_common_ptr cinfo) {
    longjmp(((encoder_error *)cinfo->err)->jump, 1);
}

typedef struct encode_job {
    struct jpeg_compress_struct cinfo;
    encoder_error jerr;
    unsigned char *out;
    unsigned long out_len;
    uint8_t *pixels;
} encode_job;

/* The part that may longjmp; everything it touches lives in *job. */
static int run_encoder(encode_job *job, unsigned w, unsigned h, int subsampling, unsigned restart) {
    if (setjmp(job->jerr.jump)) {
        return -1;
    }
    struct jpeg_compress_struct *c = &job->cinfo;
    jpeg_create_compress(c);
    jpeg_mem_dest(c, &job->out, &job->out_len);
    bool grey = subsampling == 3;
    c->image_width = w;
    c->image_height = h;
    c->input_components = grey ? 1 : 3;
    c->in_color_space = grey ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_set_defaults(c);
    jpeg_set_quality(c, 80, TRUE);
    if (!grey) {
        c->comp_info[0].h_samp_factor = subsampling >= 1 ? 2 : 1;
        c->comp_info[0].v_samp_factor = subsampling == 2 ? 2 : 1;
    }
    c->restart_interval = restart;
    jpeg_start_compress(c, TRUE);
    size_t row = (size_t)w * (size_t)c->input_components;
    while (c->next_scanline < h) {
        JSAMPROW r = job->pixels + (size_t)c->next_scanline * row;
        jpeg_write_scanlines(c, &r, 1);
    }
    jpeg_finish_compress(c);
    return 0;
}

/* A w x h JPEG of a smooth pattern with a little texture (malloc'd into *out), or false. */
static bool encode(unsigned w, unsigned h, int subsampling, unsigned restart, uint8_t **out,
                   size_t *len) {
    encode_job job;
    memset(&job, 0, sizeof job);
    int comps = subsampling == 3 ? 1 : 3;
    job.pixels = malloc((size_t)w * h * (size_t)comps);
    if (job.pixels == NULL) {
        return false;
    }
    for (unsigned y = 0; y < h; y++) {
        for (unsigned x = 0; x < w; x++) {
            for (int c = 0; c < comps; c++) {
                job.pixels[((size_t)y * w + x) * (size_t)comps + (size_t)c] =
                    (uint8_t)(x * 3 + y * 2 + (unsigned)c * 70 + ((x ^ y) & 7) * 5);
            }
        }
    }
    job.cinfo.err = jpeg_std_error(&job.jerr.pub);
    job.jerr.pub.error_exit = on_encoder_error;
    int rc = run_encoder(&job, w, h, subsampling, restart);
    jpeg_destroy_compress(&job.cinfo);
    free(job.pixels);
    if (rc != 0 || job.out == NULL) {
        free(job.out);
        return false;
    }
    *out = job.out;
    *len = job.out_len;
    return true;
}

/* Where each restart interval starts in `s`: after the SOS segment, then after each RST marker
 * (as offsets from the strip's start, what McuStarts holds). Returns how many, at most `cap`. */
static size_t interval_starts(const uint8_t *s, size_t len, uint32_t *starts, size_t cap) {
    size_t i = 2;
    while (i + 4 <= len && s[i] == 0xFF) {
        size_t seg = (size_t)s[i + 2] << 8 | s[i + 3];
        bool sos = s[i + 1] == 0xDA;
        i += 2 + seg;
        if (sos) {
            break;
        }
    }
    size_t n = 0;
    if (i < len && cap > 0) {
        starts[n++] = (uint32_t)i;
    }
    for (; i + 1 < len && n < cap; i++) {
        if (s[i] == 0xFF && s[i + 1] >= 0xD0 && s[i + 1] <= 0xD7) {
            starts[n++] = (uint32_t)(i + 2);
        }
    }
    return n;
}

/* ---- the TIFF around it ------------------------------------------------------------------- */

typedef struct tiff_buf {
    uint8_t *p;
    size_t len;
} tiff_buf;

static void put16(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v) {
    put16(p, v);
    put16(p + 2, v >> 16);
}

/* An IFD entry at e: tag, type, count, and the value (inline) or the offset of the values.
 * Returns where the next entry goes. */
static uint8_t *entry(uint8_t *e, uint16_t tag, uint16_t type, uint32_t count, uint32_t value) {
    put16(e, tag);
    put16(e + 2, type);
    put32(e + 4, count);
    if (type == 3 && count == 1) {
        put16(e + 8, value);
        put16(e + 10, 0);
    } else {
        put32(e + 8, value);
    }
    return e + 12;
}

enum { N_ENTRIES = 13 };

/* A one-level NDPI: header, one IFD, the McuStarts values (n_starts, 0 for no tag), the strip. */
static bool build_tiff(uint32_t width, uint32_t height, bool grey, const uint32_t *starts,
                       size_t n_starts, bool short_starts, const uint8_t *strip, size_t strip_len,
                       tiff_buf *out) {
    size_t ifd = 8, ifd_len = 2 + 12 * N_ENTRIES + 4;
    size_t starts_at = ifd + ifd_len, starts_len = n_starts * (short_starts ? 2 : 4);
    size_t strip_at = starts_at + starts_len;
    out->len = strip_at + strip_len;
    out->p = calloc(1, out->len);
    if (out->p == NULL) {
        return false;
    }
    memcpy(out->p, "II*\0", 4);
    put32(out->p + 4, (uint32_t)ifd);
    uint8_t *e = out->p + ifd;
    put16(e, n_starts > 0 ? N_ENTRIES : N_ENTRIES - 1);
    e += 2;
    e = entry(e, 256, 4, 1, width);
    e = entry(e, 257, 4, 1, height);
    e = entry(e, 258, 3, 1, 8);
    e = entry(e, 259, 3, 1, 7); /* JPEG */
    e = entry(e, 262, 3, 1, grey ? 1 : 6);
    e = entry(e, 273, 4, 1, (uint32_t)strip_at);
    e = entry(e, 277, 3, 1, grey ? 1 : 3);
    e = entry(e, 278, 4, 1, height);
    e = entry(e, 279, 4, 1, (uint32_t)strip_len);
    e = entry(e, 65420, 4, 1, 1); /* the NDPI flag */
    float lens = 20.0f;
    uint32_t lens_bits;
    memcpy(&lens_bits, &lens, 4);
    e = entry(e, 65421, 11, 1, lens_bits); /* SourceLens (FLOAT) */
    e = entry(e, 65424, 9, 1, 0);          /* Z offset 0: the plane that is read */
    if (n_starts > 0) {
        uint32_t where = n_starts * (short_starts ? 2u : 4u) <= 4 ? 0 : (uint32_t)starts_at;
        uint8_t *v = where == 0 ? e + 8 : out->p + starts_at;
        e = entry(e, 65426, short_starts ? 3 : 4, (uint32_t)n_starts, where);
        for (size_t i = 0; i < n_starts; i++) {
            if (short_starts) {
                put16(v + 2 * i, starts[i]);
            } else {
                put32(v + 4 * i, starts[i]);
            }
        }
    }
    put32(e, 0); /* no next IFD */
    memcpy(out->p + strip_at, strip, strip_len);
    return true;
}

/* ---- the target --------------------------------------------------------------------------- */

#define MAX_STARTS 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    input in = {data, size, 0};
    uint8_t flags = next_byte(&in);
    int subsampling = flags & 3;
    unsigned mcu_w = subsampling == 1 || subsampling == 2 ? 16 : 8;
    unsigned mcu_h = subsampling == 2 ? 16 : 8;
    unsigned mcus_x = next_byte(&in) % 32u + 1, mcus_y = next_byte(&in) % 16u + 1;
    unsigned restart = next_byte(&in);
    unsigned w = mcus_x * mcu_w, h = mcus_y * mcu_h;
    uint32_t tiff_w = w - next_byte(&in) % mcu_w, tiff_h = h - next_byte(&in) % mcu_h;
    uint32_t cut = next_byte(&in);
    cut |= (uint32_t)next_byte(&in) << 8;

    uint8_t *strip = NULL;
    size_t strip_len = 0;
    if (!encode(w, h, subsampling, restart, &strip, &strip_len)) {
        return 0;
    }
    static uint32_t starts[MAX_STARTS];
    size_t n_starts = interval_starts(strip, strip_len, starts, MAX_STARTS);
    unsigned edits = next_byte(&in);
    for (unsigned i = 0; i < edits && n_starts > 0; i++) {
        size_t which = next_byte(&in) % n_starts;
        starts[which] += next_u32(&in);
    }
    while (in.at + 3 <= in.n) {
        size_t at = (size_t)(next_byte(&in) | next_byte(&in) << 8) % strip_len;
        strip[at] = next_byte(&in);
    }
    if (flags & 8) {
        strip_len = cut % strip_len;
    }
    if (flags & 4) {
        n_starts = 0;
    }
    tiff_buf file = {0};
    bool built = build_tiff(tiff_w, tiff_h, subsampling == 3, starts, n_starts, flags & 16, strip,
                            strip_len, &file);
    free(strip);
    if (!built) {
        return 0;
    }
    sp_slide *slide = fuzz_open_memory(file.p, file.len, "fuzz.ndpi");
    if (slide != NULL) {
        fuzz_raw_tiles(slide);
        fuzz_read_slide(slide); /* closes the slide */
    }
    free(file.p);
    return 0;
}
