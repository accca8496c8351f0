/* test_j2k_planes.c — the CPU-checkable half of the GPU JPEG 2000 path (src/cuda/cuda_nvjpeg2k.c),
 * which cannot run without a GPU:
 *   - the per-pixel arithmetic its kernel uses (src/cuda/j2k_planes_math.h: subsampled
 *     components sampled as the CPU decoder samples them, Aperio YCbCr converted as it converts)
 *     gives the CPU decoder's pixels bit for bit from the same decoded component planes
 *     (OpenJPEG's), for streams OpenJPEG encodes here (RGB and YCbCr, chroma at full, half-width
 *     and quarter resolution, odd sizes) and the tiles of a real Aperio JPEG 2000 slide read both
 *     as RGB (33005, as stored) and as YCbCr;
 *   - the slide's JPEG 2000 levels are offered raw (SP_RAW_JPEG2000, the colour Aperio's
 *     compression code names) and a raw tile is the codestream as stored, which decodes to the
 *     tile the slide reader gives; tiles outside the grid are an error.
 * So on a GPU only nvJPEG2000's inverse wavelet transform can differ from the CPU path. */
#include <openjpeg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codecs/codec.h"
#include "cuda/j2k_planes_math.h"
#include "slide/slide.h"
#include "slidepipe.h"
#include "unit.h"

static unsigned seed = 4242;
static unsigned rng(void) {
    seed = seed * 1103515245u + 12345u;
    return seed >> 16;
}

/* ---- OpenJPEG: encode chosen components, decode to 8-bit planes ------------------------------ */

typedef struct buffer {
    uint8_t *data;
    size_t len, cap, pos;
} buffer;

static OPJ_SIZE_T buf_write(void *src, OPJ_SIZE_T n, void *user) {
    buffer *b = user;
    if (b->pos + n > b->cap) {
        size_t cap = (b->pos + n) * 2;
        uint8_t *d = realloc(b->data, cap);
        if (d == NULL) {
            return (OPJ_SIZE_T)-1;
        }
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->pos, src, n);
    b->pos += n;
    b->len = b->pos > b->len ? b->pos : b->len;
    return n;
}

static OPJ_OFF_T buf_skip(OPJ_OFF_T n, void *user) {
    buffer *b = user;
    b->pos += (size_t)n;
    return n;
}

static OPJ_BOOL buf_seek(OPJ_OFF_T to, void *user) {
    ((buffer *)user)->pos = (size_t)to;
    return OPJ_TRUE;
}

/* A w x h 3-component codestream whose components 1 and 2 are subsampled by (dx, dy), with
 * random smooth-ish samples, lossy (9/7) without a component transform; malloc'd, *len. */
static uint8_t *encode(int w, int h, int dx, int dy, size_t *len) {
    opj_image_cmptparm_t parms[3];
    memset(parms, 0, sizeof parms);
    for (int c = 0; c < 3; c++) {
        parms[c].dx = c ? (OPJ_UINT32)dx : 1;
        parms[c].dy = c ? (OPJ_UINT32)dy : 1;
        parms[c].w = (OPJ_UINT32)((w + (int)parms[c].dx - 1) / (int)parms[c].dx);
        parms[c].h = (OPJ_UINT32)((h + (int)parms[c].dy - 1) / (int)parms[c].dy);
        parms[c].prec = 8;
    }
    opj_image_t *img = opj_image_create(3, parms, OPJ_CLRSPC_SYCC);
    if (img == NULL) {
        return NULL;
    }
    img->x1 = (OPJ_UINT32)w;
    img->y1 = (OPJ_UINT32)h;
    for (int c = 0; c < 3; c++) {
        size_t n = (size_t)img->comps[c].w * img->comps[c].h;
        int v = (int)(rng() % 256);
        for (size_t i = 0; i < n; i++) {
            v = (v + (int)(rng() % 21) - 10 + 256) % 256;
            img->comps[c].data[i] = v;
        }
    }
    opj_cparameters_t params;
    opj_set_default_encoder_parameters(&params);
    params.tcp_numlayers = 1;
    params.tcp_rates[0] = 12; /* lossy: the 9/7 path that Aperio's tiles take */
    params.cp_disto_alloc = 1;
    params.irreversible = 1;
    params.tcp_mct = 0;
    params.numresolution = 3;
    opj_codec_t *codec = opj_create_compress(OPJ_CODEC_J2K);
    opj_stream_t *stream = opj_stream_create(1 << 16, OPJ_FALSE);
    buffer b = {0};
    bool ok = codec != NULL && stream != NULL;
    if (ok) {
        opj_stream_set_user_data(stream, &b, NULL);
        opj_stream_set_write_function(stream, buf_write);
        opj_stream_set_skip_function(stream, buf_skip);
        opj_stream_set_seek_function(stream, buf_seek);
        ok = opj_setup_encoder(codec, &params, img) && opj_start_compress(codec, img, stream) &&
             opj_encode(codec, stream) && opj_end_compress(codec, stream);
    }
    opj_stream_destroy(stream);
    opj_destroy_codec(codec);
    opj_image_destroy(img);
    if (!ok) {
        free(b.data);
        return NULL;
    }
    *len = b.len;
    return b.data;
}

typedef struct mem_in {
    const uint8_t *data;
    size_t len, pos;
} mem_in;

static OPJ_SIZE_T in_read(void *buf, OPJ_SIZE_T n, void *user) {
    mem_in *m = user;
    if (m->pos >= m->len) {
        return (OPJ_SIZE_T)-1;
    }
    n = n < m->len - m->pos ? n : m->len - m->pos;
    memcpy(buf, m->data + m->pos, n);
    m->pos += n;
    return n;
}

static OPJ_OFF_T in_skip(OPJ_OFF_T n, void *user) {
    mem_in *m = user;
    m->pos += (size_t)n;
    return n;
}

static OPJ_BOOL in_seek(OPJ_OFF_T to, void *user) {
    ((mem_in *)user)->pos = (size_t)to;
    return OPJ_TRUE;
}

/* The stream's components as the 8-bit planes nvJPEG2000 gives (unsigned, clamped), with their
 * sizes and subsampling in *p (planes malloc'd into p->plane); *w, *h the image. */
static bool decode_planes(const uint8_t *data, size_t len, sp_j2k_planes *p, int *w, int *h) {
    mem_in m = {data, len, 0};
    opj_stream_t *stream = opj_stream_create(1 << 16, OPJ_TRUE);
    opj_codec_t *codec = opj_create_decompress(OPJ_CODEC_J2K);
    opj_image_t *img = NULL;
    opj_dparameters_t params;
    opj_set_default_decoder_parameters(&params);
    opj_stream_set_user_data(stream, &m, NULL);
    opj_stream_set_user_data_length(stream, len);
    opj_stream_set_read_function(stream, in_read);
    opj_stream_set_skip_function(stream, in_skip);
    opj_stream_set_seek_function(stream, in_seek);
    bool ok = opj_setup_decoder(codec, &params) && opj_read_header(stream, codec, &img) &&
              opj_decode(codec, stream, img) && opj_end_decompress(codec, stream) &&
              img->numcomps == 3;
    memset(p, 0, sizeof *p);
    for (int c = 0; ok && c < 3; c++) {
        const opj_image_comp_t *k = &img->comps[c];
        int shift = k->dx == 1 ? 0 : k->dx == 2 ? 1 : k->dx == 4 ? 2 : -1;
        int shift_y = k->dy == 1 ? 0 : k->dy == 2 ? 1 : k->dy == 4 ? 2 : -1;
        ok = shift >= 0 && shift_y >= 0 && k->prec == 8 && !k->sgnd;
        uint8_t *plane = ok ? malloc((size_t)k->w * k->h) : NULL;
        ok = ok && plane != NULL;
        for (size_t i = 0; ok && i < (size_t)k->w * k->h; i++) {
            plane[i] = sp_j2k_clamp8(k->data[i]);
        }
        p->plane[c] = plane;
        p->pitch[c] = k->w;
        p->width[c] = (int)k->w;
        p->height[c] = (int)k->h;
        p->shift_x[c] = shift;
        p->shift_y[c] = shift_y;
    }
    if (ok) {
        *w = (int)(img->x1 - img->x0);
        *h = (int)(img->y1 - img->y0);
    }
    opj_image_destroy(img);
    opj_destroy_codec(codec);
    opj_stream_destroy(stream);
    return ok;
}

static void free_planes(sp_j2k_planes *p) {
    for (int c = 0; c < 3; c++) {
        free((void *)p->plane[c]);
    }
}

/* Pixels differing between the planes' arithmetic and the CPU decoder on this stream, as RGB or
 * as YCbCr; -1 when either cannot decode it. */
static long compare_stream(const uint8_t *data, size_t len, bool ycbcr) {
    sp_j2k_planes p;
    int w = 0, h = 0;
    if (!decode_planes(data, len, &p, &w, &h)) {
        free_planes(&p);
        return -1;
    }
    p.ycbcr = ycbcr;
    uint8_t *cpu = malloc((size_t)w * h * 4);
    sp_err err = {0};
    long differing = -1;
    if (cpu != NULL &&
        sp_j2k_decode_rgba(data, len, ycbcr ? SP_JPEG_SPACE_YCBCR : SP_JPEG_SPACE_RGB, (uint64_t)w,
                           (uint64_t)h, cpu, (size_t)w * 4, &err) == SP_OK) {
        differing = 0;
        for (int y = 0; y < h; y++) {
            for (int x = 0; x < w; x++) {
                uint8_t rgb[3];
                sp_j2k_pixel(&p, x, y, rgb);
                const uint8_t *c = cpu + ((size_t)y * w + x) * 4;
                differing += rgb[0] != c[0] || rgb[1] != c[1] || rgb[2] != c[2];
            }
        }
    } else {
        fprintf(stderr, "CPU decode failed: %s\n", err.msg);
    }
    free(cpu);
    free_planes(&p);
    return differing;
}

static void test_encoded_streams(void) {
    static const int SHAPES[][4] = {
        {64, 48, 1, 1}, {67, 45, 2, 1}, {66, 50, 2, 2},
        {37, 29, 2, 2}, {64, 64, 4, 4}, {31, 17, 4, 1},
    };
    for (size_t i = 0; i < sizeof SHAPES / sizeof SHAPES[0]; i++) {
        size_t len = 0;
        uint8_t *stream = encode(SHAPES[i][0], SHAPES[i][1], SHAPES[i][2], SHAPES[i][3], &len);
        CHECK(stream != NULL);
        if (stream != NULL) {
            CHECK_EQ_INT(compare_stream(stream, len, true), 0);
            CHECK_EQ_INT(compare_stream(stream, len, false), 0);
        }
        free(stream);
    }
}

/* The raw tiles of a real Aperio JPEG 2000 slide: offered raw, decoded alike both ways. */
static void test_slide(const char *path) {
    sp_slide *slide = NULL;
    char msg[300];
    CHECK_EQ_INT(sp_slide_open(path, &slide, msg, sizeof msg), SP_OK);
    if (slide == NULL) {
        return;
    }
    sp_raw_level raw;
    CHECK(sp_slide_raw_level(slide, 0, &raw) && raw.kind == SP_RAW_JPEG2000 && !raw.ycbcr);
    int64_t across = (slide->levels[0].width + raw.tile_width - 1) / raw.tile_width;
    int64_t down = (slide->levels[0].height + raw.tile_height - 1) / raw.tile_height;
    int64_t cols[] = {0, across / 2, across - 1}, rows[] = {0, down / 2, down - 1};
    size_t tile_bytes = (size_t)(raw.tile_width * raw.tile_height * 4);
    uint8_t *want = malloc(tile_bytes), *got = malloc(tile_bytes);
    for (int i = 0; i < 3 && want != NULL && got != NULL; i++) {
        uint8_t *stream = NULL;
        size_t len = 0;
        sp_err err = {0};
        CHECK_EQ_INT(sp_slide_read_raw_tile(slide, 0, cols[i], rows[i], &stream, &len, &err),
                     SP_OK);
        CHECK(stream != NULL && len > 4 && stream[0] == 0xFF && stream[1] == 0x4F);
        if (stream == NULL) {
            continue;
        }
        CHECK_EQ_INT(compare_stream(stream, len, false), 0);
        CHECK_EQ_INT(compare_stream(stream, len, true), 0);
        /* the stream as stored is the tile the reader gives (where it lies inside the level) */
        int64_t w = raw.tile_width, h = raw.tile_height;
        w = cols[i] * raw.tile_width + w > slide->levels[0].width
                ? slide->levels[0].width - cols[i] * raw.tile_width
                : w;
        h = rows[i] * raw.tile_height + h > slide->levels[0].height
                ? slide->levels[0].height - rows[i] * raw.tile_height
                : h;
        memset(got, 0, tile_bytes);
        CHECK_EQ_INT(sp_j2k_decode_rgba(stream, len, SP_JPEG_SPACE_RGB, (uint64_t)raw.tile_width,
                                        (uint64_t)raw.tile_height, got, (size_t)raw.tile_width * 4,
                                        &err),
                     SP_OK);
        CHECK_EQ_INT(sp_slide_read_region(slide, SP_PIXEL_RGBA8, want, raw.tile_width * 4, 0,
                                          cols[i] * raw.tile_width, rows[i] * raw.tile_height, w,
                                          h),
                     SP_OK);
        long differing = 0;
        for (int64_t y = 0; y < h; y++) {
            differing += memcmp(want + y * raw.tile_width * 4, got + y * raw.tile_width * 4,
                                (size_t)w * 4) != 0;
        }
        CHECK_EQ_INT(differing, 0);
        free(stream);
    }
    uint8_t *stream = NULL;
    size_t len = 0;
    sp_err err = {0};
    CHECK_EQ_INT(sp_slide_read_raw_tile(slide, 0, across, 0, &stream, &len, &err),
                 SP_E_INVALID_ARG);
    free(want);
    free(got);
    sp_slide_close(slide);
}

void unit_run(void) {
    test_encoded_streams();
    const char *data = unit_testdata();
    if (data == NULL) {
        unit_skip("shared test data absent: the Aperio JPEG 2000 slide's tiles not compared");
        return;
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/aperio/tcga-cr-7395-01a-01-ts1.svs", data);
    test_slide(path);
}
