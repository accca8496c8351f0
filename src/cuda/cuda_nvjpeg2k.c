/* cuda_nvjpeg2k.c — region reads into device memory with a level's JPEG 2000 tiles decoded by
 * nvJPEG2000 (Aperio 33003 and 33005, TIFF 34712: SP_RAW_JPEG2000). Each tile the region needs is
 * read as stored (slide/raw_tiles.c), parsed on the host, decoded into the context's device
 * planes (8-bit, planar, each component at its own resolution) and turned into the region's
 * pixels by the kernel of j2k_planes.cu, whose arithmetic the unit tests hold to the CPU
 * decoder's: only nvJPEG2000's inverse wavelet transform differs from the CPU path.
 *
 * A tile is decoded, converted and waited for before the next one is parsed (the parsed stream
 * and the planes are reused); batching tiles is the next step. Anything this path does not take
 * goes to the CPU path, which rewrites the whole destination: a JP2 file rather than a raw
 * codestream, a tile whose image is not the tile's size, components that are not three unsigned
 * 8-bit ones subsampled by 1, 2 or 4, a missing tile, any nvJPEG2000 error, or
 * SLIDEPIPE_NVJPEG2K=0.
 *
 * libnvjpeg2k is never linked: its functions are looked up once per process (cuda_libs.c finds
 * the library), with the few types they take declared here from the nvJPEG2000 API reference. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_internal.h"
#include "cuda/j2k_planes.h"
#include "slide/slide.h"

typedef struct nvjpeg2k_handle *nvjpeg2k_handle_t;
typedef struct nvjpeg2k_state *nvjpeg2k_state_t;
typedef struct nvjpeg2k_stream *nvjpeg2k_stream_t;

/* nvjpeg2kImageInfo_t */
typedef struct {
    uint32_t image_width, image_height, tile_width, tile_height, num_tiles_x, num_tiles_y,
        num_components;
} j2k_image_info;

/* nvjpeg2kImageComponentInfo_t */
typedef struct {
    uint32_t component_width, component_height;
    uint8_t precision, sgn;
} j2k_component_info;

/* nvjpeg2kImage_t, with pixel_type NVJPEG2K_UINT8 = 0 */
typedef struct {
    void **pixel_data;
    size_t *pitch_in_bytes;
    int pixel_type;
    uint32_t num_components;
} j2k_image;

typedef struct nvjpeg2k_api {
    int (*create_simple)(nvjpeg2k_handle_t *handle);
    int (*destroy)(nvjpeg2k_handle_t handle);
    int (*state_create)(nvjpeg2k_handle_t handle, nvjpeg2k_state_t *state);
    int (*state_destroy)(nvjpeg2k_state_t state);
    int (*stream_create)(nvjpeg2k_stream_t *stream);
    int (*stream_destroy)(nvjpeg2k_stream_t stream);
    int (*parse)(nvjpeg2k_handle_t handle, const unsigned char *data, size_t length,
                 int save_metadata, int save_stream, nvjpeg2k_stream_t stream);
    int (*image_info)(nvjpeg2k_stream_t stream, j2k_image_info *info);
    int (*component_info)(nvjpeg2k_stream_t stream, j2k_component_info *info, uint32_t component);
    int (*decode)(nvjpeg2k_handle_t handle, nvjpeg2k_state_t state, nvjpeg2k_stream_t stream,
                  j2k_image *out, cudaStream_t cuda_stream);
} nvjpeg2k_api;

static nvjpeg2k_api API;
static int API_OK;
static char API_WHY[200];
static pthread_once_t API_ONCE = PTHREAD_ONCE_INIT;

static void load_api(void) {
    static const char *const NAMES[] = {
        "nvjpeg2kCreateSimple",
        "nvjpeg2kDestroy",
        "nvjpeg2kDecodeStateCreate",
        "nvjpeg2kDecodeStateDestroy",
        "nvjpeg2kStreamCreate",
        "nvjpeg2kStreamDestroy",
        "nvjpeg2kStreamParse",
        "nvjpeg2kStreamGetImageInfo",
        "nvjpeg2kStreamGetImageComponentInfo",
        "nvjpeg2kDecode",
    };
    void *slots[sizeof NAMES / sizeof NAMES[0]];
    _Static_assert(sizeof slots == sizeof API, "one symbol per member of nvjpeg2k_api");
    if (!sp_cuda_library_symbols(SP_CUDA_LIB_NVJPEG2K, NAMES, sizeof NAMES / sizeof NAMES[0], slots,
                                 API_WHY, sizeof API_WHY)) {
        return;
    }
    memcpy(&API, slots, sizeof API); /* function pointers, in the order of NAMES */
    API_OK = 1;
}

struct sp_nvjpeg2k {
    nvjpeg2k_handle_t handle;
    nvjpeg2k_state_t state;
    nvjpeg2k_stream_t stream;
    uint8_t *planes; /* device: three planes of up to a tile each */
    size_t planes_bytes;
};

void sp_cuda_nvjpeg2k_destroy(sp_cuda_context *ctx) {
    sp_nvjpeg2k *d = ctx->nvjpeg2k;
    if (d == NULL) {
        return;
    }
    if (d->stream != NULL) {
        API.stream_destroy(d->stream);
    }
    if (d->state != NULL) {
        API.state_destroy(d->state);
    }
    if (d->handle != NULL) {
        API.destroy(d->handle);
    }
    cudaFree(d->planes);
    free(d);
    ctx->nvjpeg2k = NULL;
}

/* The context's decoder with planes of at least `bytes`; NULL with the reason noted. */
static sp_nvjpeg2k *decoder(sp_cuda_context *ctx, size_t bytes) {
    sp_nvjpeg2k *d = ctx->nvjpeg2k;
    if (d == NULL) {
        d = calloc(1, sizeof *d);
        if (d == NULL) {
            sp_cuda_note_fallback("out of memory");
            return NULL;
        }
        ctx->nvjpeg2k = d;
        int s = API.create_simple(&d->handle);
        s = s != 0 ? s : API.state_create(d->handle, &d->state);
        s = s != 0 ? s : API.stream_create(&d->stream);
        if (s != 0) {
            sp_cuda_nvjpeg2k_destroy(ctx);
            sp_cuda_note_fallback("nvJPEG2000 failed to start (status %d)", s);
            return NULL;
        }
    }
    if (d->planes_bytes < bytes) {
        cudaFree(d->planes);
        d->planes = NULL;
        d->planes_bytes = 0;
        cudaError_t e = cudaMalloc((void **)&d->planes, bytes);
        if (e != cudaSuccess) {
            d->planes = NULL;
            (void)cudaGetLastError();
            sp_cuda_note_fallback("cannot allocate the nvJPEG2000 planes: %s",
                                  cudaGetErrorString(e));
            return NULL;
        }
        d->planes_bytes = bytes;
    }
    return d;
}

static int log2_of(uint32_t factor) {
    return factor == 1 ? 0 : factor == 2 ? 1 : factor == 4 ? 2 : -1;
}

/* Parse `stream` and describe its planes in *p (placed in d->planes, pitch = component width)
 * when this path takes it: a raw codestream of a tw x th image, three unsigned 8-bit components
 * subsampled by 1, 2 or 4 exactly. SP_E_UNSUPPORTED with the reason noted otherwise. */
static sp_status describe(sp_nvjpeg2k *d, const uint8_t *stream, size_t len, int64_t tw, int64_t th,
                          sp_j2k_planes *p) {
    if (len < 4 || stream[0] != 0xFF || stream[1] != 0x4F || stream[2] != 0xFF ||
        stream[3] != 0x51) {
        return sp_cuda_note_fallback("a JPEG 2000 tile that is not a raw codestream (JP2?)");
    }
    int s = API.parse(d->handle, stream, len, 0, 0, d->stream);
    j2k_image_info info;
    s = s != 0 ? s : API.image_info(d->stream, &info);
    if (s != 0) {
        return sp_cuda_note_fallback("nvJPEG2000 cannot parse a tile (status %d)", s);
    }
    if ((int64_t)info.image_width != tw || (int64_t)info.image_height != th ||
        info.num_components != 3) {
        return sp_cuda_note_fallback("a JPEG 2000 tile of %ux%u with %u components",
                                     info.image_width, info.image_height, info.num_components);
    }
    memset(p, 0, sizeof *p);
    size_t at = 0;
    for (uint32_t c = 0; c < 3; c++) {
        j2k_component_info k;
        s = API.component_info(d->stream, &k, c);
        uint32_t fx = k.component_width ? (uint32_t)tw / k.component_width : 0;
        uint32_t fy = k.component_height ? (uint32_t)th / k.component_height : 0;
        int sx = log2_of(fx), sy = log2_of(fy);
        if (s != 0 || k.precision != 8 || k.sgn != 0 || sx < 0 || sy < 0 ||
            (tw + fx - 1) / fx != k.component_width || (th + fy - 1) / fy != k.component_height) {
            return sp_cuda_note_fallback("a JPEG 2000 component this path does not take");
        }
        p->plane[c] = d->planes + at;
        p->pitch[c] = k.component_width;
        p->width[c] = (int)k.component_width;
        p->height[c] = (int)k.component_height;
        p->shift_x[c] = sx;
        p->shift_y[c] = sy;
        at += (size_t)k.component_width * k.component_height;
    }
    return SP_OK;
}

/* Decode the parsed tile into the planes *p describes and paint its part (sx, sy, w, h) at dst;
 * waits for both. */
static sp_status decode_and_paint(sp_cuda_context *ctx, sp_nvjpeg2k *d, const sp_j2k_planes *p,
                                  int sx, int sy, int w, int h, uint8_t *dst, int64_t stride,
                                  int bpp) {
    void *planes[3] = {(void *)p->plane[0], (void *)p->plane[1], (void *)p->plane[2]};
    size_t pitches[3] = {(size_t)p->pitch[0], (size_t)p->pitch[1], (size_t)p->pitch[2]};
    j2k_image out = {planes, pitches, 0, 3};
    int s = API.decode(d->handle, d->state, d->stream, &out, ctx->stream);
    if (s != 0) {
        return sp_cuda_note_fallback("nvJPEG2000 failed to decode a tile (status %d)", s);
    }
    int e = sp_cuda_launch_j2k_planes(p, sx, sy, w, h, dst, stride, bpp, ctx->stream);
    cudaError_t es = cudaStreamSynchronize(ctx->stream);
    if (e != 0 || es != cudaSuccess) {
        return sp_cuda_note_fallback("a JPEG 2000 tile's conversion failed: %s",
                                     cudaGetErrorString(e != 0 ? (cudaError_t)e : es));
    }
    return SP_OK;
}

static atomic_uint_least64_t REGIONS, TILES;

void sp_cuda_nvjpeg2k_counts(uint64_t *regions, uint64_t *tiles) {
    *regions = atomic_load(&REGIONS);
    *tiles = atomic_load(&TILES);
}

sp_status sp_cuda_nvjpeg2k_read(sp_cuda_context *ctx, sp_slide *slide, sp_pixel_format format,
                                uint8_t *dst, int64_t stride, int32_t level, int64_t x, int64_t y,
                                int64_t w, int64_t h) {
    sp_raw_level raw;
    if (!sp_slide_raw_level(slide, level, &raw) || raw.kind != SP_RAW_JPEG2000) {
        return SP_E_UNSUPPORTED; /* not this path's kind of level: nothing to note */
    }
    const char *env = getenv("SLIDEPIPE_NVJPEG2K");
    if (env != NULL && (strcmp(env, "0") == 0 || strcmp(env, "off") == 0)) {
        return sp_cuda_note_fallback("nvJPEG2000 disabled by SLIDEPIPE_NVJPEG2K=0");
    }
    if (sp_slide_error(slide) != NULL) {
        return sp_cuda_note_fallback("the slide has a sticky error");
    }
    pthread_once(&API_ONCE, load_api);
    if (!API_OK) {
        return sp_cuda_note_fallback("%s", API_WHY);
    }
    int64_t tw = raw.tile_width, th = raw.tile_height;
    if (tw > 65536 || th > 65536 || (uint64_t)(3 * tw * th) > ((uint64_t)256 << 20)) {
        return sp_cuda_note_fallback("tile size out of this path's range");
    }
    const sp_level *l = &slide->levels[level];
    sp_cuda_span span;
    if (!sp_cuda_level_span(l->width, l->height, l->downsample, x, y, w, h, &span)) {
        return SP_E_UNSUPPORTED; /* it noted why */
    }
    sp_nvjpeg2k *d = decoder(ctx, (size_t)(3 * tw * th));
    if (d == NULL) {
        return SP_E_UNSUPPORTED;
    }
    int bpp = sp_pixel_format_bytes(format);
    int64_t lx = span.lx, ly = span.ly, x0 = span.x0, y0 = span.y0, x1 = span.x1, y1 = span.y1;
    int64_t col0 = x0 / tw, col1 = (x1 - 1) / tw, row0 = y0 / th, row1 = (y1 - 1) / th;
    int64_t across = col1 - col0 + 1, count = across * (row1 - row0 + 1);
    sp_status st = sp_cuda_fill_outside(ctx, slide, format, dst, stride, w, h, &span);
    for (int64_t k = 0; k < count && st == SP_OK; k++) {
        int64_t row = row0 + k / across, col = col0 + k % across;
        int64_t tx = col * tw, ty = row * th;
        int64_t cx0 = tx > x0 ? tx : x0, cy0 = ty > y0 ? ty : y0;
        int64_t cx1 = tx + tw < x1 ? tx + tw : x1, cy1 = ty + th < y1 ? ty + th : y1;
        uint8_t *stream = NULL;
        size_t len = 0;
        sp_err err = {0};
        st = sp_slide_read_raw_tile(slide, level, col, row, &stream, &len, &err);
        if (st != SP_OK || stream == NULL) {
            st = sp_cuda_note_fallback("%s", st != SP_OK ? err.msg : "a missing tile");
            break;
        }
        sp_j2k_planes p;
        st = describe(d, stream, len, tw, th, &p);
        if (st == SP_OK) {
            p.ycbcr = raw.ycbcr;
            st = decode_and_paint(ctx, d, &p, (int)(cx0 - tx), (int)(cy0 - ty), (int)(cx1 - cx0),
                                  (int)(cy1 - cy0), dst + (cy0 - ly) * stride + (cx0 - lx) * bpp,
                                  stride, bpp);
        }
        free(stream);
    }
    if (st != SP_OK) {
        (void)cudaGetLastError();
        return SP_E_UNSUPPORTED;
    }
    atomic_fetch_add(&REGIONS, 1);
    atomic_fetch_add(&TILES, (uint64_t)count);
    return SP_OK;
}
