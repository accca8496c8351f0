/* loader.c — the prefetching patch loader: a thread of its own keeps `prefetch` batches ready
 * while the training loop consumes the current one.
 *
 * Every patch of a batch is one work item on the library's thread pool: read (a level, or any
 * downsample through the scaled reader), stain-normalized, augmented from its own seed, and
 * written into its slot of the batch in the model's dtype and layout (batch_format.c). The
 * result therefore depends only on the requests, never on the thread count or on timing. Batches
 * are handed over whole: the consumer owns one from sp_loader_next until sp_batch_free, so the
 * loader holds at most `prefetch` ready batches plus the one being made, and keeps up to two
 * batches' memory that the consumer let go for the next batches (batch_pool.h).
 */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/thread_pool.h"
#include "cuda/cuda_batch.h"
#include "cuda/cuda_host.h"
#include "jobs/train/batch_pool.h"
#include "io/numa.h"
#include "jobs/train/batch_format.h"
#include "slide/slide.h"

/* The most a batch may take, a guard against a size or batch size typed wrong. */
#define MAX_BATCH_BYTES ((int64_t)16 << 30)
#define MAX_PREFETCH 64

typedef struct batch_box {
    sp_batch pub;
    sp_status *statuses;
    sp_batch_pool *pool; /* where its host memory goes back; NULL once it is on a device */
} batch_box;

/* How every patch is made: the slides, the requests, the steps and the output format. */
typedef struct recipe {
    sp_slide *const *slides;
    const sp_patch_request *reqs;
    sp_loader_config cfg; /* its geometry and photometric point at the caller's or the loader's */
    const sp_stains *stains;           /* per slide, or NULL */
    const sp_reinhard_stats *reinhard; /* per slide, or NULL */
    sp_batch_lut lut;
    size_t patch_bytes; /* one patch in the batch's format */
    size_t n_slides;
    /* The steps after the read run on the GPU (cuda_batch.h): a patch is only read, as RGB8,
     * into a slot of slot_bytes, or not at all when its slide's level is read on the device
     * (bit `level` of device_levels[slide]; device_levels NULL: none). */
    bool gpu_steps;
    size_t slot_bytes;
    const uint64_t *device_levels;
    sp_cuda_context *ctx; /* for the reads on the device */
} recipe;

struct sp_loader {
    recipe r;
    sp_slide **slides; /* the loader's copies of what r points at */
    sp_patch_request *reqs;
    sp_stains *stains;
    sp_reinhard_stats *reinhard, reinhard_target;
    sp_geometry_params geometry;
    sp_photometric_params photometric;
    size_t n_reqs;
    sp_loader_config cfg;
    int64_t n_batches;

    pthread_t thread;
    bool started;
    pthread_mutex_t mu;
    pthread_cond_t changed;
    batch_box **ready; /* a ring of cfg.prefetch */
    int head, count;
    bool stop, done;
    sp_status failure;
    char message[256]; /* why it stopped, when failure is set */
    sp_loader_stats stats;
    sp_batch_pool *pool; /* batch memory, reused */
    sp_cuda_context *ctx; /* with cfg.cuda: the device's context, and what it reads there */
    uint64_t *device_levels;
};

/* What the pool's items share while patches [first, first + count) are made into dst. */
typedef struct making {
    const recipe *r;
    int64_t first;
    uint8_t *dst;
    sp_status *statuses;
    atomic_int_fast64_t failed;
} making;

/* A message (a refused loader's, or why a loader stopped) into err. */
__attribute__((format(printf, 3, 4))) static void put(char *err, size_t len, const char *fmt, ...) {
    if (err != NULL && len > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, len, fmt, ap);
        va_end(ap);
    }
}

/* Whether a GPU loader reads this request on the device (recipe.device_levels). */
static bool read_on_device(const recipe *k, const sp_patch_request *r) {
    return k->device_levels != NULL && r->level >= 0 && r->level < 64 &&
           (k->device_levels[r->slide] >> r->level & 1) != 0;
}

static void make_patch(void *user, size_t i) {
    making *m = user;
    const recipe *k = m->r;
    const sp_patch_request *r = &k->reqs[m->first + (int64_t)i];
    int64_t size = k->cfg.size;
    uint8_t *slot = m->dst + i * k->slot_bytes;
    bool direct = k->gpu_steps ||
                  (k->cfg.format.dtype == SP_BATCH_UINT8 && k->cfg.format.layout == SP_BATCH_NHWC);
    if (k->gpu_steps && read_on_device(k, r)) {
        m->statuses[i] = SP_OK; /* until the device's read says otherwise */
        return;
    }
    uint8_t *rgb = direct ? slot : malloc((size_t)(size * size * 3));
    sp_status st = SP_E_NOMEM;
    if (rgb != NULL) {
        sp_slide *s = k->slides[r->slide];
        st = r->level >= 0 ? sp_slide_read_region(s, SP_PIXEL_RGB8, rgb, size * 3, r->level, r->x,
                                                  r->y, size, size)
                           : sp_slide_read_region_scaled(s, SP_PIXEL_RGB8, rgb, size * 3,
                                                         r->downsample, r->x, r->y, size, size);
    }
    if (k->gpu_steps) {
        m->statuses[i] = st; /* the GPU zeroes a failed patch in the batch */
        atomic_fetch_add(&m->failed, st != SP_OK);
        return;
    }
    if (st == SP_OK && k->cfg.normalize == SP_NORMALIZE_MACENKO) {
        st = sp_stains_normalize(&k->stains[r->slide], &k->cfg.target, rgb, size * size);
    } else if (st == SP_OK && k->cfg.normalize == SP_NORMALIZE_REINHARD) {
        st =
            sp_reinhard_normalize(&k->reinhard[r->slide], k->cfg.reinhard_target, rgb, size * size);
    }
    if (st == SP_OK && k->cfg.geometry != NULL) {
        st = sp_augment_geometry(rgb, size, size, r->seed, k->cfg.geometry);
    }
    if (st == SP_OK && (k->cfg.dihedral || k->cfg.hed_sigma > 0)) {
        st = sp_augment_patch(rgb, size, r->seed, k->cfg.dihedral, k->cfg.hed_sigma);
    }
    if (st == SP_OK && k->cfg.stain_sigma > 0) {
        const sp_stains *in =
            k->cfg.normalize == SP_NORMALIZE_MACENKO ? &k->cfg.target : &k->stains[r->slide];
        st = sp_stains_augment(in, rgb, size * size, r->seed, k->cfg.stain_sigma);
    }
    if (st == SP_OK && k->cfg.photometric != NULL) {
        st = sp_augment_photometric(rgb, size, size, r->seed, k->cfg.photometric);
    }
    if (st == SP_OK && !direct) {
        sp_batch_write_rows(&k->lut, rgb, size, size, 0, size, slot);
    }
    if (st != SP_OK) {
        memset(slot, 0, k->patch_bytes);
        atomic_fetch_add(&m->failed, 1);
    }
    if (!direct) {
        free(rgb);
    }
    m->statuses[i] = st;
}

/* Make patches [first, first + count) into dst on the pool; the number that failed. */
static int64_t make_patches(const recipe *r, int64_t first, int64_t count, void *dst,
                            sp_status *statuses) {
    making m = {.r = r, .first = first, .dst = dst, .statuses = statuses};
    atomic_init(&m.failed, 0);
    sp_pool_run((size_t)count, r->cfg.threads, make_patch, &m);
    return (int64_t)atomic_load(&m.failed);
}

/* Finish a batch of read patches on the GPU (cuda_batch.h) into device memory; the host memory
 * goes back to the pool, and *on_device counts the patches read there. The batch is freed on
 * failure, and the status returned. */
static sp_status finish_on_device(const recipe *r, batch_box *b, int64_t *on_device, char *err,
                                  size_t err_len) {
    const sp_loader_config *c = &r->cfg;
    const void *table = NULL; /* uint8: the byte itself */
    if (c->format.dtype == SP_BATCH_FLOAT16) {
        table = r->lut.f16;
    } else if (c->format.dtype == SP_BATCH_FLOAT32) {
        table = r->lut.f32;
    }
    sp_cuda_batch_job job = {
        .device = c->cuda_device,
        .count = b->pub.count,
        .size = c->size,
        .host_rgb = b->pub.data,
        .read = b->statuses,
        .requests = r->reqs + b->pub.first,
        .n_slides = (int32_t)r->n_slides,
        .normalize = c->normalize,
        .stains = r->stains,
        .target = &c->target,
        .reinhard = r->reinhard,
        .reinhard_target = c->reinhard_target,
        .geometry = c->geometry,
        .dihedral = c->dihedral,
        .hed_sigma = c->hed_sigma,
        .stain_sigma = c->stain_sigma,
        .photometric = c->photometric,
        .table = table,
        .bytes = r->lut.bytes,
        .nchw = c->format.layout == SP_BATCH_NCHW,
    };
    bool *device_read = calloc((size_t)b->pub.count, sizeof *device_read);
    if (device_read == NULL) {
        sp_batch_free(&b->pub);
        put(err, err_len, "loader: out of memory");
        return SP_E_NOMEM;
    }
    for (int64_t i = 0; i < b->pub.count; i++) {
        device_read[i] = read_on_device(r, &job.requests[i]);
        *on_device += device_read[i];
    }
    job.on_device = device_read;
    job.ctx = r->ctx;
    job.slides = r->slides;
    void *made = NULL;
    sp_status st = sp_cuda_batch_make(&job, &made, err, err_len);
    free(device_read);
    if (st != SP_OK) {
        sp_batch_free(&b->pub);
        return st;
    }
    sp_batch_pool_give(b->pool, b->pub.data, b->pub.pinned);
    b->pool = NULL;
    b->pub.data = made;
    b->pub.pinned = 0;
    b->pub.device = c->cuda_device;
    return SP_OK;
}

/* Batch `index`, made on the pool; NULL, with the reason in *why, when out of memory or when the
 * GPU failed (its message then in l->message). */
static batch_box *make_batch(sp_loader *l, int64_t index, sp_status *why) {
    *why = SP_E_NOMEM;
    batch_box *b = calloc(1, sizeof *b);
    if (b == NULL) {
        return NULL;
    }
    b->pub.device = -1;
    b->pub.first = index * l->cfg.batch_size;
    int64_t left = (int64_t)l->n_reqs - b->pub.first;
    b->pub.count = left < l->cfg.batch_size ? left : l->cfg.batch_size;
    b->pub.bytes = (size_t)b->pub.count * l->r.patch_bytes;
    b->statuses = malloc((size_t)b->pub.count * sizeof *b->statuses);
    /* Batch memory, page-locked when asked for (or to be copied to a device) and a device is
     * there: a full batch's, reused from batch to batch (batch_pool.h). */
    b->pub.data = sp_batch_pool_take(l->pool, &b->pub.pinned);
    b->pool = b->pub.data != NULL ? l->pool : NULL;
    b->pub.statuses = b->statuses;
    if (b->statuses == NULL || b->pub.data == NULL) {
        sp_batch_free(&b->pub);
        return NULL;
    }
    int64_t failed = make_patches(&l->r, b->pub.first, b->pub.count, b->pub.data, b->statuses);
    int64_t on_device = 0;
    if (l->r.gpu_steps) {
        *why = finish_on_device(&l->r, b, &on_device, l->message, sizeof l->message);
        if (*why != SP_OK) {
            return NULL;
        }
        failed = 0; /* recounted: the device's reads set their patches' statuses */
        for (int64_t i = 0; i < b->pub.count; i++) {
            failed += b->statuses[i] != SP_OK;
        }
    }
    pthread_mutex_lock(&l->mu);
    l->stats.patches_failed += failed;
    l->stats.patches_read_on_device += on_device;
    l->stats.pinned = b->pub.pinned;
    pthread_mutex_unlock(&l->mu);
    return b;
}

static void *produce(void *user) {
    sp_loader *l = user;
    /* Threads the pool starts from here inherit the placement, and memory goes to the node of
     * the thread that first writes it. */
    int node =
        l->cfg.numa_place && sp_numa_nodes() > 1 && sp_numa_bind_thread(l->cfg.numa_node) == 0
            ? l->cfg.numa_node
            : -1;
    pthread_mutex_lock(&l->mu);
    l->stats.numa_node = node;
    pthread_mutex_unlock(&l->mu);
    for (int64_t i = 0; i < l->n_batches; i++) {
        pthread_mutex_lock(&l->mu);
        while (l->count == l->cfg.prefetch && !l->stop) {
            pthread_cond_wait(&l->changed, &l->mu);
        }
        bool stop = l->stop;
        pthread_mutex_unlock(&l->mu);
        if (stop) {
            break;
        }
        sp_status why;
        batch_box *b = make_batch(l, i, &why);
        pthread_mutex_lock(&l->mu);
        if (b == NULL) {
            if (l->message[0] == '\0') {
                put(l->message, sizeof l->message, "loader: out of memory for batch %lld",
                    (long long)i);
            }
            l->failure = why;
            pthread_mutex_unlock(&l->mu);
            break;
        }
        l->ready[(l->head + l->count) % l->cfg.prefetch] = b;
        l->count++;
        l->stats.batches_made++;
        l->stats.bytes_held += (int64_t)b->pub.bytes;
        if (l->stats.bytes_held > l->stats.bytes_held_peak) {
            l->stats.bytes_held_peak = l->stats.bytes_held;
        }
        pthread_cond_broadcast(&l->changed);
        pthread_mutex_unlock(&l->mu);
    }
    pthread_mutex_lock(&l->mu);
    l->done = true;
    pthread_cond_broadcast(&l->changed);
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

static bool stains_usable(const sp_stains *s) {
    return isfinite(s->max_h) && isfinite(s->max_e) && s->max_h > 0 && s->max_e > 0;
}

/* Whether the augmentation parameters are accepted: each drawn once for a patch of the size. */
static bool augmentations_usable(const sp_loader_config *c) {
    sp_geometry_drawn g = {.struct_size = sizeof g};
    sp_photometric_draws p = {.struct_size = sizeof p};
    return (c->geometry == NULL ||
            sp_geometry_draw(c->size, c->size, 0, c->geometry, &g) == SP_OK) &&
           (c->photometric == NULL || sp_photometric_draw(0, c->photometric, &p) == SP_OK);
}

/* Why the config or a request cannot be used (in err), or SP_OK. */
static sp_status check(sp_slide *const *slides, size_t n_slides, const sp_patch_request *reqs,
                       size_t n_reqs, const sp_loader_config *c, bool loader, char *err,
                       size_t err_len) {
    sp_batch_lut lut;
    if (c == NULL || c->struct_size < sizeof *c || (slides == NULL && n_slides > 0) ||
        (reqs == NULL && n_reqs > 0)) {
        put(err, err_len, "loader: missing slides, requests or config (or an old config)");
        return SP_E_INVALID_ARG;
    }
    char why[256] = "";
    if (loader && c->cuda &&
        (c->cuda_device < 0 || c->cuda_device >= sp_cuda_device_count(why, sizeof why))) {
        put(err, err_len, "loader: no CUDA device %d%s%s", c->cuda_device, why[0] ? ": " : "", why);
        return SP_E_UNSUPPORTED;
    }
    if (loader && c->numa_place && (c->numa_node < 0 || c->numa_node >= sp_numa_nodes())) {
        put(err, err_len, "loader: no NUMA node %d (the machine has %d)", c->numa_node,
            sp_numa_nodes());
        return SP_E_INVALID_ARG;
    }
    if (c->size < 1 || c->size > 65536 || c->batch_size < 1 ||
        (loader && (c->prefetch < 1 || c->prefetch > MAX_PREFETCH)) ||
        !(c->hed_sigma >= 0 && c->hed_sigma <= 1) || sp_batch_lut_init(&lut, &c->format) != SP_OK) {
        put(err, err_len,
            "loader: bad config (size %lld, batch size %lld, prefetch %d, "
            "hed_sigma %g, or a dtype, layout or std that is not usable)",
            (long long)c->size, (long long)c->batch_size, c->prefetch, c->hed_sigma);
        return SP_E_INVALID_ARG;
    }
    if ((double)c->size * (double)c->size * 3 * lut.bytes * (double)c->batch_size >
        (double)MAX_BATCH_BYTES) {
        put(err, err_len, "loader: a batch of %lld patches of %lld pixels would exceed 16 GiB",
            (long long)c->batch_size, (long long)c->size);
        return SP_E_LIMIT;
    }
    if (!augmentations_usable(c)) {
        put(err, err_len, "loader: the geometry or photometric parameters are not usable");
        return SP_E_INVALID_ARG;
    }
    bool macenko = c->normalize == SP_NORMALIZE_MACENKO,
         reinhard = c->normalize == SP_NORMALIZE_REINHARD;
    if ((unsigned)c->normalize > SP_NORMALIZE_REINHARD ||
        ((macenko || c->stain_sigma > 0) && c->source_stains == NULL) ||
        (reinhard && (c->source_reinhard == NULL || c->reinhard_target == NULL)) ||
        !(c->stain_sigma >= 0 && c->stain_sigma <= 1) || (macenko && !stains_usable(&c->target))) {
        put(err, err_len,
            "loader: the normalization or stain augmentation lacks its stains, or "
            "stain_sigma %g is outside [0, 1]",
            c->stain_sigma);
        return SP_E_INVALID_ARG;
    }
    for (size_t s = 0; s < n_slides; s++) {
        if (slides[s] == NULL ||
            (c->source_stains != NULL && !stains_usable(&c->source_stains[s]))) {
            put(err, err_len, "loader: slide %zu is missing or its stains are not usable", s);
            return SP_E_INVALID_ARG;
        }
    }
    for (size_t i = 0; i < n_reqs; i++) {
        const sp_patch_request *r = &reqs[i];
        if (r->slide < 0 || (size_t)r->slide >= n_slides) {
            put(err, err_len, "loader: request %zu names slide %d of %zu", i, (int)r->slide,
                n_slides);
            return SP_E_INVALID_ARG;
        }
        const sp_slide *s = slides[r->slide];
        const char *name = sp_slide_file_name(s) ? sp_slide_file_name(s) : "(memory)";
        if (r->level < -1 || r->level >= s->n_levels ||
            (r->level == -1 && !(r->downsample >= 1 && r->downsample <= 1e6))) {
            put(err, err_len,
                "loader: request %zu: %s has %d levels; level %d, downsample %g "
                "cannot be read",
                i, name, (int)s->n_levels, (int)r->level, r->downsample);
            return SP_E_INVALID_ARG;
        }
    }
    return SP_OK;
}

/* Free the loader's own memory (its thread and locks are gone). */
static void free_loader(sp_loader *l) {
    sp_cuda_context_destroy(l->ctx);
    free(l->device_levels);
    sp_batch_pool_release(l->pool);
    free(l->slides);
    free(l->reqs);
    free(l->ready);
    free(l->stains);
    free(l->reinhard);
    free(l);
}

static void set_recipe(recipe *r, sp_slide *const *slides, size_t n_slides,
                       const sp_patch_request *reqs, const sp_loader_config *cfg, bool gpu_steps) {
    r->slides = slides;
    r->n_slides = n_slides;
    r->gpu_steps = gpu_steps;
    r->device_levels = NULL; /* the loader sets these two for its reads on the device */
    r->ctx = NULL;
    r->reqs = reqs;
    r->cfg = *cfg;
    r->stains = cfg->source_stains;
    r->reinhard = cfg->source_reinhard;
    sp_batch_lut_init(&r->lut, &cfg->format); /* checked already */
    r->patch_bytes = (size_t)(cfg->size * cfg->size * 3 * r->lut.bytes);
    r->slot_bytes = gpu_steps ? (size_t)(cfg->size * cfg->size * 3) : r->patch_bytes;
}

sp_status sp_patches_read(sp_slide *const *slides, size_t n_slides,
                          const sp_patch_request *requests, size_t n_requests,
                          const sp_loader_config *config, void *dst, sp_status *statuses, char *err,
                          size_t err_len) {
    sp_status st = check(slides, n_slides, requests, n_requests, config, false, err, err_len);
    if (st != SP_OK || n_requests == 0) {
        return st;
    }
    if (dst == NULL || statuses == NULL) {
        return SP_E_INVALID_ARG;
    }
    recipe r;
    set_recipe(&r, slides, n_slides, requests, config, false);
    make_patches(&r, 0, (int64_t)n_requests, dst, statuses);
    for (size_t i = 0; i < n_requests; i++) {
        if (statuses[i] != SP_OK) {
            return statuses[i];
        }
    }
    return SP_OK;
}

/* A GPU loader's context and the levels of each slide it reads on the device. */
static sp_status gpu_reads(sp_loader *l, size_t n_slides, char *err, size_t err_len) {
    sp_status st = sp_cuda_context_create(l->cfg.cuda_device, &l->ctx, err, err_len);
    if (st != SP_OK) {
        return st;
    }
    l->device_levels = calloc(n_slides ? n_slides : 1, sizeof *l->device_levels);
    if (l->device_levels == NULL) {
        return SP_E_NOMEM;
    }
    for (size_t s = 0; s < n_slides; s++) {
        l->device_levels[s] = sp_cuda_batch_device_levels(l->slides[s]);
    }
    return SP_OK;
}

sp_status sp_loader_create(sp_slide *const *slides, size_t n_slides,
                           const sp_patch_request *requests, size_t n_requests,
                           const sp_loader_config *config, sp_loader **out, char *err,
                           size_t err_len) {
    if (out == NULL) {
        return SP_E_INVALID_ARG;
    }
    *out = NULL;
    sp_status st = check(slides, n_slides, requests, n_requests, config, true, err, err_len);
    if (st != SP_OK) {
        return st;
    }
    sp_loader *l = calloc(1, sizeof *l);
    if (l == NULL) {
        return SP_E_NOMEM;
    }
    l->cfg = *config;
    l->n_reqs = n_requests;
    l->n_batches = ((int64_t)n_requests + config->batch_size - 1) / config->batch_size;
    l->stats.struct_size = sizeof l->stats;
    l->stats.numa_node = -1;
    l->slides = malloc((n_slides ? n_slides : 1) * sizeof *l->slides);
    l->reqs = malloc((n_requests ? n_requests : 1) * sizeof *l->reqs);
    l->ready = calloc((size_t)config->prefetch, sizeof *l->ready);
    if (config->source_stains != NULL) {
        l->stains = malloc((n_slides ? n_slides : 1) * sizeof *l->stains);
    }
    if (config->source_reinhard != NULL) {
        l->reinhard = malloc((n_slides ? n_slides : 1) * sizeof *l->reinhard);
    }
    bool mu = false, cv = false;
    if (l->slides == NULL || l->reqs == NULL || l->ready == NULL ||
        (config->source_stains != NULL && l->stains == NULL) ||
        (config->source_reinhard != NULL && l->reinhard == NULL) ||
        !(mu = pthread_mutex_init(&l->mu, NULL) == 0) ||
        !(cv = pthread_cond_init(&l->changed, NULL) == 0)) {
        st = SP_E_NOMEM;
        goto fail;
    }
    if (n_slides > 0) {
        memcpy(l->slides, slides, n_slides * sizeof *l->slides);
    }
    if (n_requests > 0) {
        memcpy(l->reqs, requests, n_requests * sizeof *l->reqs);
    }
    if (l->stains != NULL && n_slides > 0) {
        memcpy(l->stains, config->source_stains, n_slides * sizeof *l->stains);
    }
    l->cfg.source_stains = l->stains;
    if (l->reinhard != NULL && n_slides > 0) {
        memcpy(l->reinhard, config->source_reinhard, n_slides * sizeof *l->reinhard);
    }
    l->cfg.source_reinhard = l->reinhard;
    if (config->reinhard_target != NULL) {
        l->reinhard_target = *config->reinhard_target;
        l->cfg.reinhard_target = &l->reinhard_target;
    }
    if (config->geometry != NULL) {
        l->geometry = *config->geometry;
        l->cfg.geometry = &l->geometry;
    }
    if (config->photometric != NULL) {
        l->photometric = *config->photometric;
        l->cfg.photometric = &l->photometric;
    }
    if (l->cfg.cuda && (st = gpu_reads(l, n_slides, err, err_len)) != SP_OK) {
        goto fail;
    }
    set_recipe(&l->r, l->slides, n_slides, l->reqs, &l->cfg, l->cfg.cuda != 0);
    l->r.ctx = l->ctx;
    l->r.device_levels = l->device_levels;
    /* Two spares: the batch the consumer just let go, ready for the next one made. */
    l->pool = sp_batch_pool_new((size_t)l->cfg.batch_size * l->r.patch_bytes,
                                l->cfg.pinned || l->cfg.cuda, 2);
    if (l->pool == NULL) {
        st = SP_E_NOMEM;
        goto fail;
    }
    if (pthread_create(&l->thread, NULL, produce, l) != 0) {
        put(err, err_len, "loader: cannot start its thread");
        st = SP_E_NOMEM;
        goto fail;
    }
    l->started = true;
    *out = l;
    return SP_OK;
fail:
    if (cv) {
        pthread_cond_destroy(&l->changed);
    }
    if (mu) {
        pthread_mutex_destroy(&l->mu);
    }
    free_loader(l);
    return st;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

const char *sp_loader_error(sp_loader *l) {
    if (l == NULL) {
        return "";
    }
    pthread_mutex_lock(&l->mu);
    bool failed = l->failure != SP_OK; /* the message is not written again once it is */
    pthread_mutex_unlock(&l->mu);
    return failed ? l->message : "";
}

sp_status sp_loader_next(sp_loader *l, sp_batch **out) {
    if (l == NULL || out == NULL) {
        return SP_E_INVALID_ARG;
    }
    *out = NULL;
    double t0 = now();
    pthread_mutex_lock(&l->mu);
    while (l->count == 0 && !l->done) {
        pthread_cond_wait(&l->changed, &l->mu);
    }
    l->stats.wait_seconds += now() - t0;
    sp_status st = SP_OK;
    if (l->count > 0) {
        batch_box *b = l->ready[l->head];
        l->head = (l->head + 1) % l->cfg.prefetch;
        l->count--;
        l->stats.batches_taken++;
        l->stats.bytes_held -= (int64_t)b->pub.bytes;
        pthread_cond_broadcast(&l->changed);
        *out = &b->pub;
    } else {
        st = l->failure;
    }
    pthread_mutex_unlock(&l->mu);
    return st;
}

void sp_batch_free(sp_batch *batch) {
    if (batch == NULL) {
        return;
    }
    batch_box *b = (batch_box *)batch; /* pub is the box's first member */
    if (b->pub.device >= 0) {
        sp_cuda_device_free(b->pub.device, b->pub.data);
    } else if (b->pool != NULL) {
        sp_batch_pool_give(b->pool, b->pub.data, b->pub.pinned);
    }
    free(b->statuses);
    free(b);
}

sp_status sp_loader_get_stats(sp_loader *l, sp_loader_stats *stats) {
    if (l == NULL || stats == NULL || stats->struct_size < sizeof *stats) {
        return SP_E_INVALID_ARG;
    }
    pthread_mutex_lock(&l->mu);
    *stats = l->stats;
    pthread_mutex_unlock(&l->mu);
    return SP_OK;
}

void sp_loader_destroy(sp_loader *l) {
    if (l == NULL) {
        return;
    }
    pthread_mutex_lock(&l->mu);
    l->stop = true;
    pthread_cond_broadcast(&l->changed);
    pthread_mutex_unlock(&l->mu);
    if (l->started) {
        pthread_join(l->thread, NULL);
    }
    for (int i = 0; i < l->count; i++) {
        sp_batch_free(&l->ready[(l->head + i) % l->cfg.prefetch]->pub);
    }
    pthread_cond_destroy(&l->changed);
    pthread_mutex_destroy(&l->mu);
    free_loader(l);
}
