/* cuda_nvjpeg.c — region reads into device memory with the JPEG tiles decoded on the GPU by
 * nvJPEG (loaded at run time), the fast path of sp_cuda_read_region for levels whose tiles are
 * baseline 8-bit three-component JPEG as the format stores them (TIFF: generic TIFF, Aperio SVS,
 * OME-TIFF).
 *
 * For the tiles under the region, in batches that fit a device scratch of at most 64 MiB: each
 * tile's complete stream (from the slide's raw-tile operation, slide/raw_tiles.c) is parsed and
 * checked on the host, the batch is decoded by nvjpegDecodeBatched into the scratch as component
 * planes (NVJPEG_OUTPUT_YUV: no colour conversion, chroma at its own resolution), and a kernel per
 * tile (jpeg_planes.cu) upsamples and converts the needed part into the caller's rows exactly as
 * the CPU decoder would from the same planes. The handle uses the hardware decoder
 * (NVJPEG_BACKEND_HARDWARE: A100, H100) when it can be created, else the default back end; a
 * context whose hardware decoder fails a batch switches to the default back end.
 *
 * sp_cuda_nvjpeg_read_many does the same for many regions of one level: the distinct tiles under
 * all of them, in raster order, each decoded once, in batches as large as the scratch holds, then
 * every region's part of each painted; a region that touches a tile this path cannot take goes to
 * the CPU path alone.
 *
 * Anything this path does not handle — a level that is not such JPEG, a missing tile, a
 * progressive, 12-bit or four-component stream, subsampling other than 4:4:4, 4:2:2 or 4:2:0,
 * a frame that is not the tile's size, nvJPEG absent (or SLIDEPIPE_NVJPEG=0), any nvJPEG or CUDA
 * failure — returns a reason and the caller reads the region on the CPU path instead, which
 * rewrites the whole destination; so this path can never give other pixels than a CPU decode of
 * the same planes, only fail over. nvJPEG's IDCT is not libjpeg-turbo's, so the pixels are close
 * to, not equal to, the CPU path's (docs/gpu.md gives the measured difference).
 *
 * The nvJPEG types and functions used are declared here from NVIDIA's documented API (the
 * enumerations are C ints) and looked up with dlsym, so building needs no nvJPEG header. */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_internal.h"
#include "cuda/jpeg_planes.h"
#include "slide/slide.h"

/* ---- the part of nvJPEG's API used here --------------------------------------------------- */

enum {
    NVJPEG_OK = 0,
    NVJPEG_BACKEND_DEFAULT = 0,
    NVJPEG_BACKEND_HARDWARE = 3,
    NVJPEG_OUTPUT_YUV = 1,
    NVJPEG_ENCODING_BASELINE_DCT = 0xc0,
    NVJPEG_MAX_COMPONENT = 4,
};

typedef struct nvjpeg_handle *nvjpeg_handle_t;
typedef struct nvjpeg_state *nvjpeg_state_t;
typedef struct nvjpeg_stream *nvjpeg_stream_t;
typedef struct {
    unsigned char *channel[NVJPEG_MAX_COMPONENT];
    size_t pitch[NVJPEG_MAX_COMPONENT];
} nvjpeg_image_t;

typedef struct nvjpeg_api {
    int (*create_ex)(int backend, void *dev_allocator, void *pinned_allocator, unsigned flags,
                     nvjpeg_handle_t *handle);
    int (*destroy)(nvjpeg_handle_t handle);
    int (*state_create)(nvjpeg_handle_t handle, nvjpeg_state_t *state);
    int (*state_destroy)(nvjpeg_state_t state);
    int (*stream_create)(nvjpeg_handle_t handle, nvjpeg_stream_t *stream);
    int (*stream_destroy)(nvjpeg_stream_t stream);
    int (*stream_parse)(nvjpeg_handle_t handle, const unsigned char *data, size_t length,
                        int save_metadata, int save_stream, nvjpeg_stream_t stream);
    int (*get_encoding)(nvjpeg_stream_t stream, int *encoding);
    int (*get_frame_dimensions)(nvjpeg_stream_t stream, unsigned *width, unsigned *height);
    int (*get_components)(nvjpeg_stream_t stream, unsigned *components);
    int (*get_component_dimensions)(nvjpeg_stream_t stream, unsigned component, unsigned *width,
                                    unsigned *height);
    int (*get_precision)(nvjpeg_stream_t stream, unsigned *precision);
    int (*batched_supported)(nvjpeg_handle_t handle, nvjpeg_stream_t stream, int *is_supported);
    int (*batched_initialize)(nvjpeg_handle_t handle, nvjpeg_state_t state, int batch_size,
                              int max_cpu_threads, int output_format);
    int (*decode_batched)(nvjpeg_handle_t handle, nvjpeg_state_t state,
                          const unsigned char *const *data, const size_t *lengths,
                          nvjpeg_image_t *destinations, cudaStream_t stream);
} nvjpeg_api;

static nvjpeg_api API;
static int API_OK;
static char API_WHY[200];
static pthread_once_t API_ONCE = PTHREAD_ONCE_INIT;

static void load_api(void) {
    static const char *const NAMES[] = {
        "nvjpegCreateEx",
        "nvjpegDestroy",
        "nvjpegJpegStateCreate",
        "nvjpegJpegStateDestroy",
        "nvjpegJpegStreamCreate",
        "nvjpegJpegStreamDestroy",
        "nvjpegJpegStreamParse",
        "nvjpegJpegStreamGetJpegEncoding",
        "nvjpegJpegStreamGetFrameDimensions",
        "nvjpegJpegStreamGetComponentsNum",
        "nvjpegJpegStreamGetComponentDimensions",
        "nvjpegJpegStreamGetSamplePrecision",
        "nvjpegDecodeBatchedSupported",
        "nvjpegDecodeBatchedInitialize",
        "nvjpegDecodeBatched",
    };
    void *slots[sizeof NAMES / sizeof NAMES[0]];
    _Static_assert(sizeof slots == sizeof API, "one symbol per member of nvjpeg_api");
    if (!sp_cuda_library_symbols(SP_CUDA_LIB_NVJPEG, NAMES, sizeof NAMES / sizeof NAMES[0], slots,
                                 API_WHY, sizeof API_WHY)) {
        return;
    }
    memcpy(&API, slots, sizeof API); /* function pointers, in the order of NAMES */
    API_OK = 1;
}

/* ---- what the read paths did, for sp_cuda_get_decode_stats ---------------------------------- */

static atomic_uint_least64_t NVJPEG_REGIONS, NVJPEG_TILES, DIRECT_REGIONS, CPU_REGIONS,
    CUFILE_REGIONS;
static pthread_mutex_t WHY_LOCK = PTHREAD_MUTEX_INITIALIZER;
static char LAST_FALLBACK[200];

void sp_cuda_nvjpeg_count_cpu_region(void) {
    atomic_fetch_add(&CPU_REGIONS, 1);
}

void sp_cuda_count_direct_region(void) {
    atomic_fetch_add(&DIRECT_REGIONS, 1);
}

void sp_cuda_count_cufile_region(void) {
    atomic_fetch_add(&CUFILE_REGIONS, 1);
}

sp_status sp_cuda_get_decode_stats(sp_cuda_decode_stats *out) {
    if (out == NULL || out->struct_size < sizeof *out) {
        return SP_E_INVALID_ARG;
    }
    out->struct_size = sizeof *out;
    out->nvjpeg_regions = atomic_load(&NVJPEG_REGIONS);
    out->nvjpeg_tiles = atomic_load(&NVJPEG_TILES);
    out->direct_regions = atomic_load(&DIRECT_REGIONS);
    out->cpu_regions = atomic_load(&CPU_REGIONS);
    out->cufile_regions = atomic_load(&CUFILE_REGIONS);
    sp_cuda_nvjpeg2k_counts(&out->nvjpeg2k_regions, &out->nvjpeg2k_tiles);
    pthread_mutex_lock(&WHY_LOCK);
    snprintf(out->last_fallback, sizeof out->last_fallback, "%s", LAST_FALLBACK);
    pthread_mutex_unlock(&WHY_LOCK);
    return SP_OK;
}

sp_status sp_cuda_note_fallback(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&WHY_LOCK);
    vsnprintf(LAST_FALLBACK, sizeof LAST_FALLBACK, fmt, ap);
    pthread_mutex_unlock(&WHY_LOCK);
    va_end(ap);
    return SP_E_UNSUPPORTED;
}

/* ---- one context's decoder ---------------------------------------------------------------- */

/* Device scratch for decoded planes: bounded so that a context stays cheap. */
#define SCRATCH_MAX ((size_t)64 << 20)
#define BATCH_MAX 256

/* Decoder states kept per context, each initialised for one batch size: regions of one shape
 * give batches of a few sizes (4, 6 or 9 tiles for 512² regions on 256² tiles), and
 * re-initialising one state for every change of size would redo its set-up each time. */
#define STATES 8

typedef struct batch_state {
    nvjpeg_state_t state;
    int batch_size;     /* what it was initialised for (0: not yet, or reset after a failure) */
    unsigned long used; /* when it was last used, for replacing the least recent */
} batch_state;

struct sp_nvjpeg {
    nvjpeg_handle_t handle;
    batch_state states[STATES];
    unsigned long clock;
    nvjpeg_stream_t parsed;
    int hardware; /* the handle uses the hardware decoder */
    uint8_t *scratch;
    size_t scratch_bytes;
    char failed[200]; /* why this context cannot use nvJPEG ("" while it can) */
};

static void free_decoder(sp_nvjpeg *nv) {
    if (nv == NULL) {
        return;
    }
    cudaFree(nv->scratch);
    if (nv->parsed != NULL) {
        API.stream_destroy(nv->parsed);
    }
    for (int i = 0; i < STATES; i++) {
        if (nv->states[i].state != NULL) {
            API.state_destroy(nv->states[i].state);
        }
    }
    if (nv->handle != NULL) {
        API.destroy(nv->handle);
    }
    free(nv);
}

void sp_cuda_nvjpeg_destroy(sp_cuda_context *ctx) {
    free_decoder(ctx->nvjpeg);
    ctx->nvjpeg = NULL;
}

/* A new decoder: the hardware back end when allowed and it can be made, else the default one;
 * NULL when out of memory. One that nvJPEG refused says why in `failed`. */
static sp_nvjpeg *make_decoder(int allow_hardware) {
    sp_nvjpeg *nv = calloc(1, sizeof *nv);
    if (nv == NULL) {
        return NULL;
    }
    int s =
        allow_hardware ? API.create_ex(NVJPEG_BACKEND_HARDWARE, NULL, NULL, 0, &nv->handle) : -1;
    nv->hardware = s == NVJPEG_OK;
    if (s != NVJPEG_OK) {
        nv->handle = NULL;
        s = API.create_ex(NVJPEG_BACKEND_DEFAULT, NULL, NULL, 0, &nv->handle);
    }
    if (s != NVJPEG_OK) {
        nv->handle = NULL;
        snprintf(nv->failed, sizeof nv->failed, "nvjpegCreateEx failed (status %d)", s);
    } else if ((s = API.stream_create(nv->handle, &nv->parsed)) != NVJPEG_OK) {
        nv->parsed = NULL;
        snprintf(nv->failed, sizeof nv->failed, "nvjpegJpegStreamCreate failed (status %d)", s);
    }
    return nv;
}

/* The context's decoder, made on first use; NULL (with the reason noted) when it cannot be. */
static sp_nvjpeg *context_decoder(sp_cuda_context *ctx, int allow_hardware) {
    if (ctx->nvjpeg == NULL && (ctx->nvjpeg = make_decoder(allow_hardware)) == NULL) {
        return NULL;
    }
    if (ctx->nvjpeg->failed[0] != '\0') {
        sp_cuda_note_fallback("%s", ctx->nvjpeg->failed);
        return NULL;
    }
    return ctx->nvjpeg;
}

/* ---- decoders shared by the process (SLIDEPIPE_NVJPEG_DECODERS) ---------------------------- */

/* With SLIDEPIPE_NVJPEG_DECODERS=N (1-64), at most N decoders per GPU exist in the process,
 * made on first use and lent to one read at a time; a read that finds all N of its GPU's lent
 * is decoded on the CPU path instead, beside them. Unset, every context has its own decoder.
 * Why (docs/gpu.md): on an H200 the hardware decoder gave 1.56 GP/s from 8 threads, 1.00 from
 * 16 and 0.65 from 32, and each context paid about 0.25 s to make its own. */
#define SHARED_MAX 64

typedef struct shared_decoder {
    sp_nvjpeg *nv; /* NULL until made */
    int device;
    bool used; /* the slot belongs to `device` */
    bool lent; /* a read has it now */
} shared_decoder;

static pthread_mutex_t SHARED_LOCK = PTHREAD_MUTEX_INITIALIZER;
static shared_decoder SHARED[SHARED_MAX];
static int SHARED_NO_HARDWARE; /* a shared hardware decoder failed: the default back end since */

/* SLIDEPIPE_NVJPEG_DECODERS, or 0 (each context its own decoder) when unset or out of range. */
static int shared_decoders(void) {
    const char *v = getenv("SLIDEPIPE_NVJPEG_DECODERS");
    char *end = NULL;
    long n = v != NULL ? strtol(v, &end, 10) : 0;
    return v != NULL && end != v && *end == '\0' && n >= 1 && n <= SHARED_MAX ? (int)n : 0;
}

/* A decoder for one read on ctx's GPU: the context's own, or with SLIDEPIPE_NVJPEG_DECODERS a
 * shared one (*lent set: give it back with give_back). NULL (reason noted) when none can be had. */
static sp_nvjpeg *borrow(sp_cuda_context *ctx, int mode, shared_decoder **lent) {
    *lent = NULL;
    int most = shared_decoders();
    if (most == 0) {
        return context_decoder(ctx, mode == 2 && !ctx->nvjpeg_no_hardware);
    }
    pthread_mutex_lock(&SHARED_LOCK);
    shared_decoder *pick = NULL, *spare = NULL;
    int mine = 0;
    for (int i = 0; i < SHARED_MAX; i++) {
        shared_decoder *d = &SHARED[i];
        if (d->used && d->device == ctx->device) {
            mine++;
            pick = pick == NULL && !d->lent ? d : pick;
        } else if (!d->used && spare == NULL) {
            spare = d;
        }
    }
    if (pick == NULL && mine < most && spare != NULL) {
        *spare = (shared_decoder){.device = ctx->device, .used = true};
        pick = spare;
    }
    if (pick != NULL) {
        pick->lent = true;
    }
    int allow_hardware = mode == 2 && !SHARED_NO_HARDWARE;
    pthread_mutex_unlock(&SHARED_LOCK);
    if (pick == NULL) {
        sp_cuda_note_fallback("all %d nvJPEG decoders of GPU %d are busy "
                              "(SLIDEPIPE_NVJPEG_DECODERS): decoded on the CPU",
                              most, ctx->device);
        return NULL;
    }
    *lent = pick;
    if (pick->nv == NULL) {
        pick->nv = make_decoder(allow_hardware); /* the slot is this read's alone */
    }
    if (pick->nv == NULL || pick->nv->failed[0] != '\0') {
        sp_cuda_note_fallback("%s", pick->nv != NULL ? pick->nv->failed : "out of memory");
        return NULL; /* the caller gives the slot back */
    }
    return pick->nv;
}

/* End a read's use of its decoder (from borrow). `hardware_failed`: the hardware decoder failed
 * where it said it could decode, so the default back end from the next read on. The read has
 * left the context's stream idle, so the decoder's scratch is free for another context. */
static void give_back(sp_cuda_context *ctx, shared_decoder *lent, bool hardware_failed) {
    if (lent == NULL) {
        if (hardware_failed) {
            sp_cuda_nvjpeg_destroy(ctx);
            ctx->nvjpeg_no_hardware = 1;
        }
        return;
    }
    sp_nvjpeg *gone = NULL;
    pthread_mutex_lock(&SHARED_LOCK);
    if (hardware_failed) {
        gone = lent->nv;
        lent->nv = NULL;
        SHARED_NO_HARDWARE = 1;
    }
    lent->lent = false;
    pthread_mutex_unlock(&SHARED_LOCK);
    free_decoder(gone);
}

/* A decoder state initialised for batches of n images: one already so, else the least recently
 * used (made if need be) initialised anew. NULL (reason noted) on failure. */
static batch_state *state_for(sp_nvjpeg *nv, int n) {
    batch_state *pick = NULL;
    for (int i = 0; i < STATES; i++) {
        batch_state *b = &nv->states[i];
        if (b->state != NULL && b->batch_size == n) {
            b->used = ++nv->clock;
            return b;
        }
        if (pick == NULL || b->used < pick->used) {
            pick = b;
        }
    }
    int s;
    if (pick->state == NULL && (s = API.state_create(nv->handle, &pick->state)) != NVJPEG_OK) {
        pick->state = NULL;
        sp_cuda_note_fallback("nvjpegJpegStateCreate failed (status %d)", s);
        return NULL;
    }
    pick->batch_size = 0;
    s = API.batched_initialize(nv->handle, pick->state, n, 1, NVJPEG_OUTPUT_YUV);
    if (s != NVJPEG_OK) {
        sp_cuda_note_fallback("nvjpegDecodeBatchedInitialize failed (status %d)", s);
        return NULL;
    }
    pick->batch_size = n;
    pick->used = ++nv->clock;
    return pick;
}

/* Grow nv's device scratch to at least `bytes`; false (reason noted) when CUDA cannot. */
static bool ensure_scratch(sp_nvjpeg *nv, size_t bytes) {
    if (nv->scratch_bytes >= bytes) {
        return true;
    }
    cudaFree(nv->scratch);
    nv->scratch = NULL;
    nv->scratch_bytes = 0;
    cudaError_t e = cudaMalloc((void **)&nv->scratch, bytes);
    if (e != cudaSuccess) {
        nv->scratch = NULL;
        (void)cudaGetLastError();
        sp_cuda_note_fallback("cannot allocate the nvJPEG scratch: %s", cudaGetErrorString(e));
        return false;
    }
    nv->scratch_bytes = bytes;
    return true;
}

/* ---- the read ------------------------------------------------------------------------------ */

typedef struct tile_job {
    int64_t col, row;
    int64_t cx0, cy0, cx1, cy1; /* the part of the region this tile covers, level pixels */
    uint8_t *stream;
    size_t len;
    sp_jpeg_planes planes;
} tile_job;

/* Parse tile t's stream and check that this path decodes it; fills t->planes but the pointers. */
static sp_status check_tile(sp_nvjpeg *nv, const sp_raw_level *raw, tile_job *t) {
    int s = API.stream_parse(nv->handle, t->stream, t->len, 0, 0, nv->parsed);
    if (s != NVJPEG_OK) {
        return sp_cuda_note_fallback("nvJPEG cannot parse tile (%lld, %lld) (status %d)",
                                     (long long)t->col, (long long)t->row, s);
    }
    int encoding = 0;
    unsigned fw = 0, fh = 0, comps = 0, precision = 0, w[3] = {0}, h[3] = {0};
    if (API.get_encoding(nv->parsed, &encoding) != NVJPEG_OK ||
        API.get_frame_dimensions(nv->parsed, &fw, &fh) != NVJPEG_OK ||
        API.get_components(nv->parsed, &comps) != NVJPEG_OK ||
        API.get_precision(nv->parsed, &precision) != NVJPEG_OK) {
        return sp_cuda_note_fallback("nvJPEG cannot describe tile (%lld, %lld)", (long long)t->col,
                                     (long long)t->row);
    }
    if (encoding != NVJPEG_ENCODING_BASELINE_DCT || precision != 8 || comps != 3) {
        return sp_cuda_note_fallback(
            "tile (%lld, %lld): encoding 0x%x, %u bits, %u components (baseline "
            "8-bit 3-component JPEG is decoded on the GPU)",
            (long long)t->col, (long long)t->row, (unsigned)encoding, precision, comps);
    }
    if (fw != (unsigned)raw->tile_width || fh != (unsigned)raw->tile_height) {
        return sp_cuda_note_fallback("tile (%lld, %lld): a %ux%u frame in a %llux%llu tile",
                                     (long long)t->col, (long long)t->row, fw, fh,
                                     (unsigned long long)raw->tile_width,
                                     (unsigned long long)raw->tile_height);
    }
    for (unsigned c = 0; c < 3; c++) {
        if (API.get_component_dimensions(nv->parsed, c, &w[c], &h[c]) != NVJPEG_OK) {
            return sp_cuda_note_fallback("nvJPEG cannot describe tile (%lld, %lld)'s components",
                                         (long long)t->col, (long long)t->row);
        }
    }
    int hf = w[1] == fw ? 1 : w[1] == (fw + 1) / 2 ? 2 : 0;
    int vf = h[1] == fh ? 1 : h[1] == (fh + 1) / 2 ? 2 : 0;
    /* 4:4:4, 4:2:2 and 4:2:0 (with a chroma plane wider than 2, where libjpeg's fancy
     * upsampling applies); component 0 full size, components 1 and 2 alike */
    if (w[0] != fw || h[0] != fh || w[2] != w[1] || h[2] != h[1] || hf == 0 || vf == 0 ||
        (hf == 1 && vf == 2) || (hf == 2 && w[1] <= 2)) {
        return sp_cuda_note_fallback(
            "tile (%lld, %lld): component sizes %ux%u, %ux%u, %ux%u not handled on "
            "the GPU",
            (long long)t->col, (long long)t->row, w[0], h[0], w[1], h[1], w[2], h[2]);
    }
    if (nv->hardware) {
        int unsupported = 1;
        s = API.batched_supported(nv->handle, nv->parsed, &unsupported);
        if (s != NVJPEG_OK || unsupported != 0) { /* 0 means the hardware decodes it */
            return sp_cuda_note_fallback(
                "tile (%lld, %lld): not decodable by the hardware JPEG decoder", (long long)t->col,
                (long long)t->row);
        }
    }
    t->planes.width = (int)fw;
    t->planes.height = (int)fh;
    t->planes.chroma_width = (int)w[1];
    t->planes.chroma_height = (int)h[1];
    t->planes.h_factor = hf;
    t->planes.v_factor = vf;
    t->planes.ycbcr = raw->ycbcr;
    return SP_OK;
}

/* Give tile t (parsed and checked) scratch slot `slot` of a batch: its planes there, for nvJPEG's
 * destination and for the planes kernel, and its stream as the batch's input. */
static void put_in_slot(const sp_nvjpeg *nv, const sp_raw_level *raw, tile_job *t, int slot,
                        size_t slot_bytes, nvjpeg_image_t *image, const unsigned char **data,
                        size_t *length) {
    size_t plane_bytes = (size_t)(raw->tile_width * raw->tile_height);
    memset(image, 0, sizeof *image);
    for (int c = 0; c < 3; c++) {
        uint8_t *plane = nv->scratch + (size_t)slot * slot_bytes + (size_t)c * plane_bytes;
        image->channel[c] = plane;
        image->pitch[c] = (size_t)raw->tile_width;
        t->planes.plane[c] = plane;
        t->planes.pitch[c] = raw->tile_width;
    }
    *data = t->stream;
    *length = t->len;
}

/* Decode the tiles of one batch into the scratch and paint their parts into the region.
 * SP_E_UNSUPPORTED: a tile this path does not take; SP_E_IO: nvJPEG or CUDA failed. */
static sp_status run_batch(sp_cuda_context *ctx, sp_nvjpeg *nv, sp_slide *slide, int32_t level,
                           const sp_raw_level *raw, tile_job *tiles, int n, size_t slot_bytes,
                           uint8_t *dst, int64_t stride, int bpp, int64_t lx, int64_t ly) {
    const unsigned char *data[BATCH_MAX];
    size_t lengths[BATCH_MAX];
    nvjpeg_image_t images[BATCH_MAX];
    for (int i = 0; i < n; i++) {
        sp_err err = {0};
        tile_job *t = &tiles[i];
        sp_status st =
            sp_slide_read_raw_tile(slide, level, t->col, t->row, &t->stream, &t->len, &err);
        if (st != SP_OK) {
            return sp_cuda_note_fallback("%s", err.msg);
        }
        if (t->stream == NULL) {
            return sp_cuda_note_fallback("tile (%lld, %lld) is missing", (long long)t->col,
                                         (long long)t->row);
        }
        st = check_tile(nv, raw, t);
        if (st != SP_OK) {
            return st;
        }
        put_in_slot(nv, raw, t, i, slot_bytes, &images[i], &data[i], &lengths[i]);
    }
    batch_state *bs = state_for(nv, n);
    if (bs == NULL) {
        return SP_E_IO;
    }
    int s = API.decode_batched(nv->handle, bs->state, data, lengths, images, ctx->stream);
    if (s != NVJPEG_OK) {
        bs->batch_size = 0; /* re-initialise before its next use */
        sp_cuda_note_fallback("nvjpegDecodeBatched failed (status %d)", s);
        return SP_E_IO;
    }
    for (int i = 0; i < n; i++) {
        const tile_job *t = &tiles[i];
        int64_t tx = t->col * raw->tile_width, ty = t->row * raw->tile_height;
        uint8_t *out = dst + (t->cy0 - ly) * stride + (t->cx0 - lx) * bpp;
        int e = sp_cuda_launch_jpeg_planes(&t->planes, (int)(t->cx0 - tx), (int)(t->cy0 - ty),
                                           (int)(t->cx1 - t->cx0), (int)(t->cy1 - t->cy0), out,
                                           stride, bpp, ctx->stream);
        if (e != 0) {
            return sp_cuda_note_fallback("the JPEG planes kernel failed: %s",
                                         cudaGetErrorString((cudaError_t)e));
        }
    }
    /* the streams are host memory that nvJPEG may still read: wait before they are freed */
    cudaError_t e = cudaStreamSynchronize(ctx->stream);
    if (e != cudaSuccess) {
        bs->batch_size = 0;
        sp_cuda_note_fallback("nvJPEG decoding failed: %s", cudaGetErrorString(e));
        return SP_E_IO;
    }
    return SP_OK;
}

/* The nvJPEG mode from SLIDEPIPE_NVJPEG: 0 off ("0", "off"), 1 the default back end only
 * ("default"), 2 the hardware decoder when there is one (unset or anything else). */
static int nvjpeg_mode(void) {
    const char *v = getenv("SLIDEPIPE_NVJPEG");
    if (v == NULL) {
        return 2;
    }
    if (strcmp(v, "0") == 0 || strcmp(v, "off") == 0) {
        return 0;
    }
    return strcmp(v, "default") == 0 ? 1 : 2;
}

/* The rest of sp_cuda_nvjpeg_read once it has decoder nv: the region's tiles in batches. */
static sp_status read_tiles(sp_cuda_context *ctx, sp_nvjpeg *nv, sp_slide *slide,
                            sp_pixel_format format, uint8_t *dst, int64_t stride, int32_t level,
                            const sp_raw_level *raw, const sp_cuda_span *span, int64_t w, int64_t h,
                            bool *hardware_failed) {
    int bpp = sp_pixel_format_bytes(format);
    int64_t lx = span->lx, ly = span->ly, x0 = span->x0, y0 = span->y0, x1 = span->x1,
            y1 = span->y1;
    int64_t tw = raw->tile_width, th = raw->tile_height;
    int64_t col0 = x0 / tw, col1 = (x1 - 1) / tw, row0 = y0 / th, row1 = (y1 - 1) / th;
    int64_t count = (col1 - col0 + 1) * (row1 - row0 + 1);
    size_t slot_bytes = (size_t)(3 * tw * th);
    int64_t slots = (int64_t)(SCRATCH_MAX / slot_bytes);
    slots = slots < BATCH_MAX ? slots : BATCH_MAX;
    slots = slots < count ? slots : count;
    if (!ensure_scratch(nv, (size_t)slots * slot_bytes)) {
        return SP_E_UNSUPPORTED;
    }
    tile_job *tiles = calloc((size_t)slots, sizeof *tiles);
    if (tiles == NULL) {
        return sp_cuda_note_fallback("out of memory");
    }
    sp_status st = sp_cuda_fill_outside(ctx, slide, format, dst, stride, w, h, span);
    int64_t done = 0;
    for (int64_t k = 0; st == SP_OK && k < count;) {
        int n = 0;
        for (; n < slots && k < count; n++, k++) {
            tile_job *t = &tiles[n];
            memset(t, 0, sizeof *t);
            t->row = row0 + k / (col1 - col0 + 1);
            t->col = col0 + k % (col1 - col0 + 1);
            int64_t tx = t->col * tw, ty = t->row * th;
            t->cx0 = tx > x0 ? tx : x0;
            t->cy0 = ty > y0 ? ty : y0;
            t->cx1 = tx + tw < x1 ? tx + tw : x1;
            t->cy1 = ty + th < y1 ? ty + th : y1;
        }
        st = run_batch(ctx, nv, slide, level, raw, tiles, n, slot_bytes, dst, stride, bpp, lx, ly);
        for (int i = 0; i < n; i++) {
            free(tiles[i].stream);
            tiles[i].stream = NULL;
        }
        done += n;
    }
    free(tiles);
    if (st != SP_OK) {
        /* leave the stream idle and the runtime's last error clear for the CPU path */
        cudaStreamSynchronize(ctx->stream);
        (void)cudaGetLastError();
        /* the hardware decoder failed where it said it could decode: the default back end
         * from the next region on */
        *hardware_failed = st == SP_E_IO && nv->hardware;
        return SP_E_UNSUPPORTED;
    }
    atomic_fetch_add(&NVJPEG_REGIONS, 1);
    atomic_fetch_add(&NVJPEG_TILES, (uint64_t)done);
    return SP_OK;
}

sp_status sp_cuda_nvjpeg_read(sp_cuda_context *ctx, sp_slide *slide, sp_pixel_format format,
                              uint8_t *dst, int64_t stride, int32_t level, int64_t x, int64_t y,
                              int64_t w, int64_t h) {
    int mode = nvjpeg_mode();
    if (mode == 0) {
        return sp_cuda_note_fallback("nvJPEG disabled by SLIDEPIPE_NVJPEG=0");
    }
    sp_raw_level raw;
    bool known = sp_slide_raw_level(slide, level, &raw);
    if (known && (raw.kind == SP_RAW_RGB8 || raw.kind == SP_RAW_JPEG2000)) {
        return SP_E_UNSUPPORTED; /* the direct or nvJPEG2000 path's: it noted why it declined */
    }
    if (!known || raw.kind != SP_RAW_JPEG) {
        return sp_cuda_note_fallback("level %d's tiles are neither baseline RGB/YCbCr JPEG, "
                                     "JPEG 2000 nor uncompressed RGB as the format stores them: "
                                     "decoded on the CPU",
                                     (int)level);
    }
    if (sp_slide_error(slide) != NULL) {
        return sp_cuda_note_fallback("the slide has a sticky error");
    }
    pthread_once(&API_ONCE, load_api);
    if (!API_OK) {
        return sp_cuda_note_fallback("%s", API_WHY);
    }
    const sp_level *l = &slide->levels[level];
    if (raw.tile_width > 65536 || raw.tile_height > 65536 ||
        (uint64_t)(3 * raw.tile_width * raw.tile_height) > SCRATCH_MAX) {
        return sp_cuda_note_fallback("tile size out of this path's range");
    }
    sp_cuda_span span;
    if (!sp_cuda_level_span(l->width, l->height, l->downsample, x, y, w, h, &span)) {
        return SP_E_UNSUPPORTED; /* it noted why */
    }
    shared_decoder *lent = NULL;
    sp_nvjpeg *nv = borrow(ctx, mode, &lent);
    bool hardware_failed = false;
    sp_status st = nv != NULL ? read_tiles(ctx, nv, slide, format, dst, stride, level, &raw, &span,
                                           w, h, &hardware_failed)
                              : SP_E_UNSUPPORTED;
    give_back(ctx, lent, hardware_failed);
    return st;
}

/* ---- many regions at once ----------------------------------------------------------------- */

/* One region's use of one tile: the part of the region the tile covers (level pixels). */
typedef struct tile_use {
    size_t region;
    int64_t col, row;
    int64_t cx0, cy0, cx1, cy1;
    size_t tile; /* index of the distinct tile, after sorting */
} tile_use;

static int use_order(const void *a, const void *b) {
    const tile_use *u = a, *v = b;
    if (u->row != v->row) {
        return u->row < v->row ? -1 : 1;
    }
    if (u->col != v->col) {
        return u->col < v->col ? -1 : 1;
    }
    return u->region < v->region ? -1 : u->region > v->region;
}

/* The distinct tiles first..first+n of `tiles` decoded in one nvJPEG batch into the scratch, then
 * every use of them painted. A tile this path cannot take, or a failed batch, marks the regions
 * that use them as failed (they go to the CPU path); the rest are painted. Returns the tiles
 * decoded, or -1 when nvJPEG or CUDA failed on the batch. */
static int64_t many_batch(sp_cuda_context *ctx, sp_nvjpeg *nv, sp_slide *slide,
                          const sp_raw_level *raw, int32_t level, tile_job *tiles, int64_t first,
                          int n, const tile_use *uses, size_t n_uses, size_t *use_at,
                          sp_cuda_region *regions, const sp_cuda_span *spans, bool *failed,
                          size_t slot_bytes, int bpp) {
    const unsigned char *data[BATCH_MAX];
    size_t lengths[BATCH_MAX];
    nvjpeg_image_t images[BATCH_MAX];
    int slot_of[BATCH_MAX]; /* each tile's slot in the batch, -1 when it is left out */
    int m = 0;
    for (int i = 0; i < n; i++) {
        tile_job *t = &tiles[first + i];
        sp_err err = {0};
        slot_of[i] = -1;
        if (sp_slide_read_raw_tile(slide, level, t->col, t->row, &t->stream, &t->len, &err) !=
            SP_OK) {
            sp_cuda_note_fallback("%s", err.msg);
            continue;
        }
        if (t->stream == NULL) {
            sp_cuda_note_fallback("tile (%lld, %lld) is missing", (long long)t->col,
                                  (long long)t->row);
            continue;
        }
        if (check_tile(nv, raw, t) != SP_OK) {
            continue;
        }
        put_in_slot(nv, raw, t, m, slot_bytes, &images[m], &data[m], &lengths[m]);
        slot_of[i] = m++;
    }
    bool decoded = false;
    batch_state *bs = m > 0 ? state_for(nv, m) : NULL;
    if (bs != NULL) {
        int s = API.decode_batched(nv->handle, bs->state, data, lengths, images, ctx->stream);
        decoded = s == NVJPEG_OK;
        if (!decoded) {
            bs->batch_size = 0;
            sp_cuda_note_fallback("nvjpegDecodeBatched failed (status %d)", s);
        }
    }
    /* Paint every use of these tiles; a use of a tile not decoded fails its region. */
    for (; *use_at < n_uses && uses[*use_at].tile < (size_t)(first + n); (*use_at)++) {
        const tile_use *u = &uses[*use_at];
        int i = (int)(u->tile - (size_t)first);
        if (!decoded || slot_of[i] < 0) {
            failed[u->region] = true;
            continue;
        }
        if (failed[u->region]) {
            continue;
        }
        const tile_job *t = &tiles[u->tile];
        const sp_cuda_region *r = &regions[u->region];
        int64_t tx = t->col * raw->tile_width, ty = t->row * raw->tile_height;
        uint8_t *out = (uint8_t *)r->dst_device + (u->cy0 - spans[u->region].ly) * r->stride +
                       (u->cx0 - spans[u->region].lx) * bpp;
        int e = sp_cuda_launch_jpeg_planes(&t->planes, (int)(u->cx0 - tx), (int)(u->cy0 - ty),
                                           (int)(u->cx1 - u->cx0), (int)(u->cy1 - u->cy0), out,
                                           r->stride, bpp, ctx->stream);
        if (e != 0) {
            sp_cuda_note_fallback("the JPEG planes kernel failed: %s",
                                  cudaGetErrorString((cudaError_t)e));
            failed[u->region] = true;
        }
    }
    /* the streams are host memory that nvJPEG may still read: wait before they are freed */
    cudaError_t e = cudaStreamSynchronize(ctx->stream);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        sp_cuda_note_fallback("nvJPEG decoding failed: %s", cudaGetErrorString(e));
        for (size_t k = 0; k < *use_at; k++) {
            failed[uses[k].region] = true; /* what this batch painted is not known to be there */
        }
        decoded = false;
    }
    for (int i = 0; i < n; i++) {
        free(tiles[first + i].stream);
        tiles[first + i].stream = NULL;
    }
    if (!decoded && m > 0 && bs != NULL) {
        return -1;
    }
    return decoded ? m : 0;
}

bool sp_cuda_nvjpeg_takes(sp_slide *slide, int32_t level, sp_raw_level *raw) {
    if (nvjpeg_mode() == 0 || !sp_slide_raw_level(slide, level, raw) || raw->kind != SP_RAW_JPEG ||
        sp_slide_error(slide) != NULL) {
        return false;
    }
    pthread_once(&API_ONCE, load_api);
    return API_OK && raw->tile_width <= 65536 && raw->tile_height <= 65536 &&
           (uint64_t)(3 * raw->tile_width * raw->tile_height) <= SCRATCH_MAX;
}

size_t sp_cuda_nvjpeg_read_many(sp_cuda_context *ctx, sp_slide *slide, sp_pixel_format format,
                                int32_t level, sp_cuda_region *regions, size_t n, bool *done) {
    for (size_t i = 0; i < n; i++) {
        done[i] = false;
    }
    int mode = nvjpeg_mode();
    sp_raw_level raw;
    if (n == 0 || !sp_cuda_nvjpeg_takes(slide, level, &raw)) {
        return 0; /* each region's own read says why */
    }
    shared_decoder *lent = NULL;
    sp_nvjpeg *nv = borrow(ctx, mode, &lent);
    if (nv == NULL) {
        give_back(ctx, lent, false);
        return 0;
    }
    const sp_level *l = &slide->levels[level];
    int bpp = sp_pixel_format_bytes(format);
    int64_t tw = raw.tile_width, th = raw.tile_height;
    sp_cuda_span *spans = calloc(n, sizeof *spans);
    bool *failed = calloc(n, sizeof *failed);
    size_t n_uses = 0, cap = 0;
    tile_use *uses = NULL;
    bool ok = spans != NULL && failed != NULL;
    for (size_t r = 0; ok && r < n; r++) {
        sp_cuda_region *g = &regions[r];
        if (!sp_cuda_level_span(l->width, l->height, l->downsample, g->x, g->y, g->width, g->height,
                                &spans[r]) ||
            sp_cuda_fill_outside(ctx, slide, format, g->dst_device, g->stride, g->width, g->height,
                                 &spans[r]) != SP_OK) {
            failed[r] = true;
            continue;
        }
        const sp_cuda_span *s = &spans[r];
        for (int64_t row = s->y0 / th; ok && row * th < s->y1; row++) {
            for (int64_t col = s->x0 / tw; ok && col * tw < s->x1; col++) {
                if (n_uses == cap) {
                    size_t grown = cap ? 2 * cap : 64;
                    tile_use *p = realloc(uses, grown * sizeof *p);
                    ok = p != NULL;
                    if (!ok) {
                        break;
                    }
                    uses = p;
                    cap = grown;
                }
                int64_t tx = col * tw, ty = row * th;
                uses[n_uses++] = (tile_use){
                    .region = r,
                    .col = col,
                    .row = row,
                    .cx0 = tx > s->x0 ? tx : s->x0,
                    .cy0 = ty > s->y0 ? ty : s->y0,
                    .cx1 = tx + tw < s->x1 ? tx + tw : s->x1,
                    .cy1 = ty + th < s->y1 ? ty + th : s->y1,
                };
            }
        }
    }
    /* The distinct tiles, in raster order, each decoded once for all the regions using it. */
    tile_job *tiles = NULL;
    size_t n_tiles = 0;
    if (ok && n_uses > 0) {
        qsort(uses, n_uses, sizeof *uses, use_order);
        tiles = calloc(n_uses, sizeof *tiles);
        ok = tiles != NULL;
        for (size_t k = 0; ok && k < n_uses; k++) {
            if (n_tiles == 0 || tiles[n_tiles - 1].col != uses[k].col ||
                tiles[n_tiles - 1].row != uses[k].row) {
                tiles[n_tiles].col = uses[k].col;
                tiles[n_tiles].row = uses[k].row;
                n_tiles++;
            }
            uses[k].tile = n_tiles - 1;
        }
    }
    size_t slot_bytes = (size_t)(3 * tw * th);
    int64_t slots = (int64_t)(SCRATCH_MAX / slot_bytes);
    slots = slots < BATCH_MAX ? slots : BATCH_MAX;
    slots = slots < (int64_t)n_tiles ? slots : (int64_t)n_tiles;
    ok = ok && (slots == 0 || ensure_scratch(nv, (size_t)slots * slot_bytes));
    int64_t decoded = 0;
    size_t use_at = 0;
    bool broke = false; /* nvJPEG or CUDA failed on a batch */
    for (int64_t first = 0; ok && first < (int64_t)n_tiles; first += slots) {
        int m = (int)((int64_t)n_tiles - first < slots ? (int64_t)n_tiles - first : slots);
        int64_t got = many_batch(ctx, nv, slide, &raw, level, tiles, first, m, uses, n_uses,
                                 &use_at, regions, spans, failed, slot_bytes, bpp);
        broke |= got < 0;
        decoded += got > 0 ? got : 0;
    }
    size_t count = 0;
    for (size_t r = 0; ok && r < n; r++) {
        done[r] = !failed[r];
        count += done[r];
    }
    if (count < n) {
        cudaStreamSynchronize(ctx->stream);
        (void)cudaGetLastError();
    }
    atomic_fetch_add(&NVJPEG_REGIONS, (uint64_t)count);
    atomic_fetch_add(&NVJPEG_TILES, (uint64_t)decoded);
    free(tiles);
    free(uses);
    free(failed);
    free(spans);
    /* as for one region: the hardware decoder failed where it said it could decode, so the
     * default back end from the next call on */
    give_back(ctx, lent, broke && nv->hardware);
    return count;
}
