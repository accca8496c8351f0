/* zarr.c — OME-Zarr: a folder (on disk, or under an http(s):// or s3:// prefix) holding an
 * OME-NGFF image group, as Zarr v2 (NGFF 0.4 and earlier: ".zgroup" + ".zattrs" with
 * "multiscales") or Zarr v3 (NGFF 0.5: "zarr.json" of a group with attributes.ome.multiscales).
 * A bioformats2raw layout (a root group whose series 0 is the image group "0") is followed to
 * that series.
 *
 * The first multiscale's datasets are the pyramid levels; each is a Zarr array whose axes are
 * named by the multiscale (c, y, x or y, x, c, with t and z allowed when they have one plane).
 * A level's tiles are its chunks along y and x (the inner chunks of a sharded v3 array); a tile
 * read decodes every chunk that holds a part of its channels, so per-channel chunking (c chunk
 * 1) and interleaved chunks (c chunk 3, or y,x,c) read alike. Samples are uint8, or int8, uint16
 * and int16 mapped to 8 bits as the TIFF reader maps them (docs/formats.md); 1 channel is grey, 3
 * RGB, 4 RGBA. A chunk file that does not exist holds the array's fill value, as the Zarr
 * specification defines (zarr-python leaves out chunks that equal it), so it reads as opaque
 * fill, not as a transparent hole.
 *
 * Metadata parsing is in zarr_meta.c; here are the files: every read goes through a byte source
 * opened per chunk file (io/store.h, which tells a missing file from a failing one alike on disk
 * and remotely), or per shard, kept open in the process's shard table (zarr_shards.c). A remote
 * store also keeps the chunk files sent for ahead of their reads (io/store_prefetch.h), which the
 * region painter announces (zarr_prefetch); both tables lock, so tiles can be read from any
 * number of threads. Group attributes under "slidepipe" (written by `slidepipe convert`) restore
 * the source slide's properties and associated images and give the pixel hash the writer recorded
 * ("slidepipe.pixel-hash"), and the completion marker of a converted store gives
 * "slidepipe.dataset-hash".
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "base/simd_x86.h"
#include "base/strings.h"
#include "formats/format.h"
#include "formats/zarr_meta.h"
#include "formats/zarr_planes.h"
#include "formats/zarr_recent.h"
#include "formats/zarr_shards.h"
#include "io/http_source.h"
#include "io/store.h"
#include "io/store_prefetch.h"
#include "zarr/zarr_codec.h"
#include "zarr/zarr_store.h"

#define KEY_MAX 256
#define DATASET_HASH "slidepipe.dataset-hash"
#define PIXEL_HASH "slidepipe.pixel-hash"

typedef struct zarr_array {
    char *dir;   /* the array's folder */
    char *label; /* its path inside the store, for messages */
    sp_zarr_array_meta m;
    int dim_c, dim_y, dim_x;           /* dimension indices; dim_c is -1 without channels */
    int64_t channels;                  /* 1, 3 or 4 */
    uint64_t stride[SP_ZARR_MAX_DIMS]; /* elements between neighbours in a decoded chunk */
} zarr_array;

typedef struct zarr_slide {
    zarr_array *arrays; /* levels, then associated images; never reallocated after open */
    int32_t n_arrays;
    sp_store_prefetch *prefetched; /* chunk files fetched ahead (a remote store), or NULL */
} zarr_slide;

/* ---- paths and files ---- */

/* The path without trailing slashes ("/" stays "/"). */
static char *strip_slashes(const char *path) {
    char *p = strdup(path);
    if (p != NULL) {
        size_t n = strlen(p);
        while (n > 1 && p[n - 1] == '/') {
            p[--n] = '\0';
        }
    }
    return p;
}

/* Open a chunk or shard file; a file that does not exist is *missing, not an error. A remote
 * chunk file is fetched whole by the opening request: it is at most about `expected` bytes. */
static sp_status open_data_file(const char *path, uint64_t expected, sp_source **src, bool *missing,
                                sp_err *err) {
    const uint64_t most = (uint64_t)64 << 20;
    return sp_store_open(path, (size_t)(expected < most ? expected : most), src, missing, err);
}

/* The file at `path` taken from the files a remote store's slide sent for ahead of their reads
 * (`kept`, NULL for none) as a source over its bytes (*shared, to release after the source), or
 * *absent; false when nothing was kept for it. */
static bool take_kept(sp_store_prefetch *kept, const char *path, sp_source **src,
                      sp_store_file **shared, bool *absent) {
    sp_err ignored = {0};
    if (kept == NULL || !sp_store_prefetch_take(kept, path, shared, absent)) {
        return false;
    }
    if (!*absent && sp_source_open_memory(sp_store_file_bytes(*shared),
                                          (size_t)sp_store_file_len(*shared), path, src,
                                          &ignored) != SP_OK) {
        sp_store_file_release(*shared);
        *shared = NULL;
        return false;
    }
    return true;
}

/* Read a whole small file (metadata) into a NUL-terminated buffer, bounded by `max`, taking it
 * from `kept` when it was sent for ahead. A file that does not exist sets *missing (SP_OK, *out
 * NULL) when `missing` is given, else is an error. */
static sp_status read_small_file(sp_store_prefetch *kept, const char *path, uint64_t max,
                                 const char *what, char **out, size_t *len, bool *missing,
                                 sp_err *err) {
    *out = NULL;
    if (missing != NULL) {
        *missing = false;
    }
    sp_source *src = NULL;
    sp_store_file *shared = NULL;
    bool absent = false;
    sp_status st = take_kept(kept, path, &src, &shared, &absent)
                       ? SP_OK
                       : sp_store_open(path, 0, &src, &absent, err);
    if (st == SP_OK && absent) {
        if (missing != NULL) {
            *missing = true;
            return SP_OK;
        }
        st = sp_err_set(err, SP_E_CORRUPT, "%s is missing", what);
    }
    if (st != SP_OK) {
        sp_store_file_release(shared);
        return st;
    }
    uint64_t size = sp_source_size(src);
    if (size > max || size > SIZE_MAX - 1) {
        st = sp_err_set(err, SP_E_LIMIT, "%s is %llu bytes, over the limit of %llu bytes", what,
                        (unsigned long long)size, (unsigned long long)max);
    }
    char *text = NULL;
    if (st == SP_OK && (text = malloc((size_t)size + 1)) == NULL) {
        st = sp_err_set(err, SP_E_NOMEM, "out of memory reading %s", what);
    }
    if (st == SP_OK) {
        st = sp_source_read(src, 0, text, (size_t)size, err);
    }
    sp_source_close(src);
    sp_store_file_release(shared);
    if (st != SP_OK) {
        free(text);
        return st;
    }
    text[size] = '\0';
    *out = text;
    *len = (size_t)size;
    return SP_OK;
}

/* Re-record an error from a parser or codec with the file it concerns in front. */
static sp_status wrap(sp_err *err, const sp_err *inner, const char *where) {
    return sp_err_set(err, inner->status, "%s: %s", where, inner->msg);
}

/* "<label>/<name>", or "<name>" for the store's root. */
static void where_of(char *buf, size_t len, const char *label, const char *name) {
    snprintf(buf, len, "%s%s%s", label, label[0] ? "/" : "", name);
}

/* Read metadata file `name` of `dir`; `missing` as for read_small_file. */
static sp_status read_metadata(const sp_slide *s, const char *dir, const char *label,
                               const char *name, char **text, size_t *len, bool *missing,
                               sp_err *err) {
    char *path = sp_path_join(dir, name);
    if (path == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory");
    }
    char where[512];
    where_of(where, sizeof where, label, name);
    sp_err local = {0};
    const zarr_slide *z = s->priv;
    sp_status st = read_small_file(z->prefetched, path,
                                   (uint64_t)s->limits.value[SP_LIMIT_MAX_METADATA], where, text,
                                   len, missing, &local);
    free(path);
    return st == SP_OK ? SP_OK : sp_err_set(err, local.status, "%s", local.msg);
}

/* ---- detection and groups ---- */

/* The files that tell a Zarr node and its kind, and a v2 group's attributes. */
static const char *const NODE_FILES[] = {"zarr.json", ".zgroup", ".zarray", ".zattrs"};

/* Send for the node files of `dir` at once, when they are kept (a remote store): detecting and
 * reading a group then waits one round trip, not one per file. */
static void announce_node(sp_store_prefetch *kept, const char *dir) {
    enum { N = sizeof NODE_FILES / sizeof NODE_FILES[0] };
    char *paths[N];
    size_t n = 0;
    for (size_t i = 0; kept != NULL && i < N; i++) {
        paths[n] = sp_path_join(dir, NODE_FILES[i]);
        n += paths[n] != NULL;
    }
    if (n > 0) {
        sp_store_prefetch_metadata(kept, (const char *const *)paths, n);
    }
    for (size_t i = 0; i < n; i++) {
        free(paths[i]);
    }
}

/* Whether `dir` holds the file `name`, from the kept files when they know. */
static bool has_file(sp_store_prefetch *kept, const char *dir, const char *name) {
    char *path = kept != NULL ? sp_path_join(dir, name) : NULL;
    bool missing = false;
    bool known = path != NULL && sp_store_prefetch_peek(kept, path, &missing);
    free(path);
    return known ? !missing : sp_store_has_file(dir, name);
}

/* What opening guesses a remote store holds: with the root's node files it sends for the array
 * metadata of levels "0" to "GUESSED_LEVELS - 1" and of slidepipe's associated images
 * ("associated/label", ...), each in both formats (0/.zarray and 0/zarr.json, ...), and the
 * completion marker, in the same wave. Most stores name their levels so (slidepipe's,
 * zarr-python's, ome-zarr-py's), and the group then confirms the guesses, so opening waits one
 * round trip, not two. A guess the group does not name costs a request answered 404 and is
 * never read; levels past the guesses, other associated images and stores laid out otherwise
 * are sent for once the group is read, as before. Guesses go out only where they pay
 * (sp_http_guessing_pays): on a server that answers within a millisecond, the files are read
 * one after another as they are needed. */
#define GUESSED_LEVELS 10
static const char *const GUESSED_ASSOCIATED[] = {"associated/label", "associated/macro",
                                                 "associated/thumbnail"};
enum { GUESSED_ARRAYS = GUESSED_LEVELS + sizeof GUESSED_ASSOCIATED / sizeof *GUESSED_ASSOCIATED };

static const char *array_metadata_name(int format);

static void announce_guesses(sp_store_prefetch *kept, const char *root) {
    char *paths[2 * GUESSED_ARRAYS + 1];
    size_t n = 0;
    if (kept == NULL || !sp_http_guessing_pays()) {
        return;
    }
    paths[n] = sp_path_join(root, SP_ZARR_COMPLETE);
    n += paths[n] != NULL;
    for (int format = 2; format <= 3; format++) { /* v2's first: convert's default */
        for (int i = 0; i < GUESSED_ARRAYS; i++) {
            char name[64];
            if (i < GUESSED_LEVELS) {
                snprintf(name, sizeof name, "%d/%s", i, array_metadata_name(format));
            } else {
                snprintf(name, sizeof name, "%s/%s", GUESSED_ASSOCIATED[i - GUESSED_LEVELS],
                         array_metadata_name(format));
            }
            paths[n] = sp_path_join(root, name);
            n += paths[n] != NULL;
        }
    }
    sp_store_prefetch_guesses(kept, (const char *const *)paths, n);
    for (size_t i = 0; i < n; i++) {
        free(paths[i]);
    }
}

static bool zarr_detect(const sp_probe *p) {
    if (!p->is_directory) {
        return false;
    }
    char *dir = strip_slashes(p->path);
    if (dir != NULL) {
        announce_node(p->kept, dir);
        announce_guesses(p->kept, dir);
    }
    /* Any Zarr node is claimed, so that a plain group or array gets a message saying what is
     * missing rather than "not a slide". */
    bool yes = dir != NULL && (has_file(p->kept, dir, "zarr.json") ||
                               has_file(p->kept, dir, ".zgroup") ||
                               has_file(p->kept, dir, ".zarray"));
    free(dir);
    return yes;
}

/* Parse the group at `dir` (labelled `label` in messages). */
static sp_status read_group(const sp_slide *s, const char *dir, const char *label,
                            sp_zarr_group_meta *g, sp_err *err) {
    const char *name = "zarr.json";
    int format = 3;
    char *text = NULL;
    size_t len = 0;
    bool missing = false;
    sp_store_prefetch *kept = ((const zarr_slide *)s->priv)->prefetched;
    announce_node(kept, dir); /* nothing new for the root, which detection announced */
    sp_status st = read_metadata(s, dir, label, name, &text, &len, &missing, err);
    if (st == SP_OK && missing) {
        if (has_file(kept, dir, ".zgroup")) {
            name = ".zattrs";
            format = 2;
            st = read_metadata(s, dir, label, name, &text, &len, &missing, err);
            if (st == SP_OK && missing) {
                return sp_err_set(err, SP_E_NOT_A_SLIDE,
                                  "not a recognised slide: a Zarr v2 group without attributes "
                                  "(.zattrs), so without OME-NGFF \"multiscales\" metadata");
            }
        } else if (has_file(kept, dir, ".zarray")) {
            return sp_err_set(err, SP_E_NOT_A_SLIDE,
                              "not a recognised slide: a Zarr array, not an OME-Zarr image group "
                              "(open the group that holds it)");
        } else {
            return sp_err_set(err, SP_E_CORRUPT, "%s%sno Zarr group here (no zarr.json or .zgroup)",
                              label, label[0] ? ": " : "");
        }
    }
    if (st != SP_OK) {
        return st;
    }
    sp_err local = {0};
    st = sp_zarr_parse_group(text, len, format, &s->limits, g, &local);
    free(text);
    if (st == SP_E_NOT_A_SLIDE) {
        return sp_err_set(err, st, "%s", local.msg);
    }
    if (st != SP_OK) {
        char where[512];
        where_of(where, sizeof where, label, name);
        return wrap(err, &local, where);
    }
    return SP_OK;
}

/* The image group: the root, or series 0 of a bioformats2raw layout. */
static sp_status find_image_group(const sp_slide *s, const char *root, sp_zarr_group_meta *g,
                                  char **group_dir, const char **group_label, sp_err *err) {
    *group_dir = NULL;
    *group_label = "";
    sp_status st = read_group(s, root, "", g, err);
    if (st != SP_OK) {
        return st;
    }
    if (!g->redirect) {
        *group_dir = strdup(root);
        return *group_dir ? SP_OK : sp_err_set(err, SP_E_NOMEM, "out of memory");
    }
    int format = g->zarr_format;
    sp_zarr_group_free(g);
    *group_label = "0";
    *group_dir = sp_path_join(root, "0");
    if (*group_dir == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory");
    }
    sp_err local = {0};
    st = read_group(s, *group_dir, "0", g, &local);
    if (st == SP_OK && (g->redirect || g->zarr_format != format)) {
        sp_zarr_group_free(g);
        st = sp_err_set(&local, SP_E_CORRUPT, "not an OME-NGFF image group of the same format");
    }
    if (st != SP_OK) {
        return sp_err_set(err, st == SP_E_NOT_A_SLIDE ? SP_E_CORRUPT : st,
                          "bioformats2raw layout: series 0: %s", local.msg);
    }
    return SP_OK;
}

/* ---- arrays ---- */

static void free_array(zarr_array *a) {
    free(a->dir);
    free(a->label);
    memset(a, 0, sizeof *a);
}

/* The file that holds an array's metadata in Zarr version `format`. */
static const char *array_metadata_name(int format) {
    return format == 3 ? "zarr.json" : ".zarray";
}

/* Read and parse the array at `path` inside the group. */
static sp_status load_array(const sp_slide *s, const char *group_dir, const char *group_label,
                            const char *path, int format, zarr_array *a, sp_err *err) {
    memset(a, 0, sizeof *a);
    a->dir = sp_path_join(group_dir, path);
    a->label = group_label[0] ? sp_path_join(group_label, path) : strdup(path);
    if (a->dir == NULL || a->label == NULL) {
        free_array(a);
        return sp_err_set(err, SP_E_NOMEM, "out of memory");
    }
    const char *name = array_metadata_name(format);
    char where[512];
    where_of(where, sizeof where, a->label, name);
    char *text = NULL;
    size_t len = 0;
    sp_status st = read_metadata(s, a->dir, a->label, name, &text, &len, NULL, err);
    if (st == SP_OK) {
        sp_err local = {0};
        st = sp_zarr_parse_array(text, len, format, &s->limits, &a->m, &local);
        if (st != SP_OK) {
            wrap(err, &local, where);
        }
    }

    free(text);
    if (st != SP_OK) {
        free_array(a);
    }
    return st;
}

/* Give each dimension its role (the group's axes for levels; y, x[, c] for associated images),
 * and check what this reader supports. */
static sp_status assign_axes(const sp_slide *s, zarr_array *a, int ndim, const sp_zarr_axis *axes,
                             sp_err *err) {
    const sp_zarr_array_meta *m = &a->m;
    if (m->ndim != ndim) {
        return sp_err_set(err, SP_E_CORRUPT, "%s: the array has %d dimensions but %d axes",
                          a->label, m->ndim, ndim);
    }
    a->dim_c = a->dim_y = a->dim_x = -1;
    for (int d = 0; d < ndim; d++) {
        switch (axes[d]) {
        case SP_ZARR_AXIS_T:
        case SP_ZARR_AXIS_Z:
            if (m->shape[d] != 1) {
                return sp_err_set(err, SP_E_UNSUPPORTED,
                                  "%s: the %c axis has %lld planes; slidepipe reads images with "
                                  "one time point and one z plane",
                                  a->label, axes[d] == SP_ZARR_AXIS_T ? 't' : 'z',
                                  (long long)m->shape[d]);
            }
            break;
        case SP_ZARR_AXIS_C: a->dim_c = d; break;
        case SP_ZARR_AXIS_Y: a->dim_y = d; break;
        case SP_ZARR_AXIS_X: a->dim_x = d; break;
        }
    }
    a->channels = a->dim_c >= 0 ? m->shape[a->dim_c] : 1;
    if (a->channels != 1 && a->channels != 3 && a->channels != 4) {
        return sp_err_set(err, SP_E_UNSUPPORTED,
                          "%s: %lld channels; slidepipe reads 1 (grey), 3 (RGB) or 4 (RGBA)",
                          a->label, (long long)a->channels);
    }
    uint64_t tile = (uint64_t)m->chunk[a->dim_y] * (uint64_t)m->chunk[a->dim_x];
    if (tile > (uint64_t)s->limits.value[SP_LIMIT_MAX_TILE_PIXELS]) {
        return sp_err_set(err, SP_E_LIMIT,
                          "%s: a chunk of %lld x %lld pixels exceeds the tile limit of %lld "
                          "pixels",
                          a->label, (long long)m->chunk[a->dim_x], (long long)m->chunk[a->dim_y],
                          (long long)s->limits.value[SP_LIMIT_MAX_TILE_PIXELS]);
    }
    uint64_t stride = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        a->stride[d] = stride;
        stride *= (uint64_t)m->chunk[d]; /* bounded by the chunk size checked when parsing */
    }
    return SP_OK;
}

/* ---- reading chunks ---- */

/* The shard at `path` (taken over), borrowed from the process's table (zarr_shards.h): opened and
 * its index read and checked on first use. *shard stays NULL when the shard does not exist. */
static sp_status shard_open(const sp_slide *s, const zarr_array *a, const char *where, char *path,
                            zarr_shard **shard, sp_err *err) {
    *shard = zarr_shards_get(s->cache_id, path);
    if (*shard != NULL) {
        free(path);
        return SP_OK;
    }
    sp_source *src = NULL;
    bool missing;
    sp_status st = open_data_file(path, 0, &src, &missing, err);
    if (st != SP_OK || missing) {
        free(path);
        return st;
    }
    const sp_zarr_array_meta *m = &a->m;
    uint64_t size = sp_source_size(src), need = sp_zarr_shard_index_bytes(m);
    uint8_t *index = NULL;
    sp_err local = {0};
    if (size < need) {
        st = sp_err_set(&local, SP_E_CORRUPT, "the shard is %llu bytes, too small for its index",
                        (unsigned long long)size);
    } else {
        st = sp_alloc(&s->limits, need, "shard index", (void **)&index, &local);
    }
    if (st == SP_OK) {
        st = sp_source_read(src, m->index_at_start ? 0 : size - need, index, (size_t)need, &local);
    }
    if (st == SP_OK) {
        st = sp_zarr_shard_index_check(m, index, (size_t)need, size, &local);
    }
    if (st != SP_OK) {
        free(path);
        sp_source_close(src);
        free(index);
        return wrap(err, &local, where);
    }
    *shard = zarr_shards_put(s->cache_id, path, src, index);
    return *shard != NULL ? SP_OK : sp_err_set(err, SP_E_NOMEM, "out of memory");
}

static void fill_chunk(const sp_zarr_array_meta *m, uint8_t *chunk) {
    if (m->item_size == 1) {
        memset(chunk, (int)(m->fill & 0xFF), (size_t)m->chunk_bytes);
        return;
    }
    uint16_t bits = (uint16_t)m->fill; /* two's complement for int16 */
    uint8_t b0 = m->big_endian ? (uint8_t)(bits >> 8) : (uint8_t)bits;
    uint8_t b1 = m->big_endian ? (uint8_t)bits : (uint8_t)(bits >> 8);
    for (uint64_t i = 0; i < m->chunk_elements; i++) {
        chunk[2 * i] = b0;
        chunk[2 * i + 1] = b1;
    }
}

static sp_status decode_chunk(const zarr_array *a, const char *where, const uint8_t *in, uint64_t n,
                              uint8_t *chunk, sp_err *err) {
    const sp_zarr_array_meta *m = &a->m;
    sp_err local = {0};
    sp_status st = SP_OK;
    if (m->chunk_crc32c) {
        if (n < 4) {
            st = sp_err_set(&local, SP_E_CORRUPT, "the chunk is too short for its checksum");
        } else {
            const uint8_t *c = in + n - 4;
            uint32_t stored =
                (uint32_t)c[0] | (uint32_t)c[1] << 8 | (uint32_t)c[2] << 16 | (uint32_t)c[3] << 24;
            n -= 4;
            if (sp_crc32c(in, (size_t)n) != stored) {
                st = sp_err_set(&local, SP_E_CORRUPT, "the chunk's crc32c checksum does not match");
            }
        }
    }
    if (st == SP_OK) {
        st = sp_zarr_decode(m->codec, in, (size_t)n, chunk, (size_t)m->chunk_bytes, &local);
    }
    return st == SP_OK ? SP_OK : wrap(err, &local, where);
}

/* Read bytes [offset, offset + n) of a data file into a new buffer. */
static sp_status read_range(const sp_slide *s, sp_source *src, uint64_t offset, uint64_t n,
                            const char *where, uint8_t **out, sp_err *err) {
    sp_err local = {0};
    sp_status st = sp_alloc(&s->limits, n, "compressed chunk", (void **)out, &local);
    if (st == SP_OK) {
        st = sp_source_read(src, offset, *out, (size_t)n, &local);
    }
    if (st != SP_OK) {
        free(*out);
        *out = NULL;
        return wrap(err, &local, where);
    }
    return SP_OK;
}

/* The file holding the chunk at chunk-grid position `index` (*path, malloc'd; its key in `key`)
 * and, in a sharded array, the inner chunk's position in that shard (C order). */
static sp_status chunk_file(const zarr_array *a, const int64_t *index, char *key, char **path,
                            uint64_t *which, sp_err *err) {
    const sp_zarr_array_meta *m = &a->m;
    int64_t file_index[SP_ZARR_MAX_DIMS];
    *which = 0;
    for (int d = 0; d < m->ndim; d++) {
        int64_t per = m->file[d] / m->chunk[d];
        file_index[d] = index[d] / per;
        *which = *which * (uint64_t)per + (uint64_t)(index[d] % per);
    }
    sp_status st = sp_zarr_chunk_key(m, file_index, key, KEY_MAX, err);
    if (st != SP_OK) {
        return st;
    }
    *path = sp_path_join(a->dir, key);
    return *path != NULL ? SP_OK : sp_err_set(err, SP_E_NOMEM, "out of memory");
}

/* The expected size of a chunk file: the decoded chunk, plus room for a codec's header. */
static size_t chunk_file_guess(const sp_zarr_array_meta *m) {
    return (size_t)m->chunk_bytes + 64;
}

/* Decode the chunk at chunk-grid position `index` into `chunk` (chunk_bytes), or fill it. */
static sp_status load_chunk(const sp_slide *s, const zarr_array *a, const int64_t *index,
                            uint8_t *chunk, sp_err *err) {
    const sp_zarr_array_meta *m = &a->m;
    const zarr_slide *z = s->priv;
    char key[KEY_MAX], where[KEY_MAX + 600];
    char *path = NULL;
    uint64_t which = 0;
    sp_status st = chunk_file(a, index, key, &path, &which, err);
    if (st != SP_OK) {
        return st;
    }
    where_of(where, sizeof where, a->label, key);
    uint8_t *bytes = NULL;        /* read here */
    sp_store_file *shared = NULL; /* from the slide's table of files in flight */
    uint64_t n = 0;
    bool missing = false;
    if (!m->sharded && z->prefetched != NULL) {
        /* Through the slide's table of files in flight: one request however many threads
         * need the chunk at once. */
        const uint64_t most = (uint64_t)64 << 20;
        uint64_t expected = chunk_file_guess(m);
        st = sp_store_prefetch_get(z->prefetched, path, (size_t)(expected < most ? expected : most),
                                   &shared, &missing, err);
        n = shared != NULL ? sp_store_file_len(shared) : 0;
        free(path);
    } else if (!m->sharded) {
        sp_source *src = NULL;
        st = open_data_file(path, chunk_file_guess(m), &src, &missing, err);
        free(path);
        if (st == SP_OK && !missing) {
            n = sp_source_size(src);
            st = read_range(s, src, 0, n, where, &bytes, err);
        }
        sp_source_close(src);
    } else {
        zarr_shard *shard = NULL;
        st = shard_open(s, a, where, path, &shard, err);
        missing = st == SP_OK && shard == NULL;
        if (st == SP_OK && !missing) {
            sp_source *src = zarr_shard_source(shard);
            sp_err local = {0};
            uint64_t offset;
            bool present;
            st = sp_zarr_shard_entry(m, zarr_shard_index(shard), sp_source_size(src), which,
                                     &present, &offset, &n, &local);
            if (st != SP_OK) {
                wrap(err, &local, where);
            } else if (!present) {
                missing = true; /* an empty entry */
            } else {
                size_t at = strlen(where);
                snprintf(where + at, sizeof where - at, " (inner chunk %llu)",
                         (unsigned long long)which);
                st = read_range(s, src, offset, n, where, &bytes, err);
            }
        }
        if (shard != NULL) {
            zarr_shards_release(shard);
        }
    }
    if (st == SP_OK) {
        if (missing) {
            fill_chunk(m, chunk);
        } else {
            st = decode_chunk(a, where, shared != NULL ? sp_store_file_bytes(shared) : bytes, n,
                              chunk, err);
        }
    }
    free(bytes);
    sp_store_file_release(shared);
    return st;
}

static inline uint8_t sample8(const sp_zarr_array_meta *m, const uint8_t *chunk, uint64_t e) {
    switch (m->sample) {
    case SP_ZARR_SAMPLE_U8: return chunk[e];
    case SP_ZARR_SAMPLE_I8: return (uint8_t)(chunk[e] ^ 0x80); /* v + 128 */
    case SP_ZARR_SAMPLE_U16:
    case SP_ZARR_SAMPLE_I16: break;
    }
    const uint8_t *p = chunk + 2 * e;
    uint32_t v = m->big_endian ? (uint32_t)p[0] << 8 | p[1] : (uint32_t)p[1] << 8 | p[0];
    if (m->sample == SP_ZARR_SAMPLE_I16) {
        v ^= 0x8000; /* v + 32768 */
    }
    return (uint8_t)((v * 255 + 32767) / 65535);
}

/* Whether every chunk holds all of a pixel's channels as uint8 planes (x the last dimension):
 * the common layout (c, y, x chunks of 3 or 4 channels), painted by one interleaving pass that
 * also writes alpha. */
static bool planar_rgb8(const zarr_array *a) {
    const sp_zarr_array_meta *m = &a->m;
    return m->sample == SP_ZARR_SAMPLE_U8 && (a->channels == 3 || a->channels == 4) &&
           a->dim_c >= 0 && m->chunk[a->dim_c] >= a->channels && a->stride[a->dim_x] == 1;
}

/* Copy the part of a decoded chunk (grid row gy, column gx, channel block kc) that lies in the
 * rectangle (x0, y0, w, h) into rows of RGBA (bpp 4) or RGB (bpp 3) at `out`. */
static void paint_chunk(const zarr_array *a, const uint8_t *chunk, int64_t gy, int64_t gx,
                        int64_t kc, int64_t x0, int64_t y0, int64_t w, int64_t h, int bpp,
                        uint8_t *out, uint64_t stride) {
    const sp_zarr_array_meta *m = &a->m;
    int64_t cy = m->chunk[a->dim_y], cx = m->chunk[a->dim_x];
    int64_t cc = a->dim_c >= 0 ? m->chunk[a->dim_c] : 1;
    int64_t ry0 = gy * cy > y0 ? gy * cy : y0,
            ry1 = (gy + 1) * cy < y0 + h ? (gy + 1) * cy : y0 + h;
    int64_t rx0 = gx * cx > x0 ? gx * cx : x0,
            rx1 = (gx + 1) * cx < x0 + w ? (gx + 1) * cx : x0 + w;
    int64_t c_lo = kc * cc, c_n = a->channels - c_lo < cc ? a->channels - c_lo : cc;
    uint64_t sy = a->stride[a->dim_y], sx = a->stride[a->dim_x];
    uint64_t sc = a->dim_c >= 0 ? a->stride[a->dim_c] : 0;
    if (planar_rgb8(a)) {
        for (int64_t y = ry0; y < ry1; y++) {
            const uint8_t *p = chunk + (uint64_t)(y - gy * cy) * sy + (uint64_t)(rx0 - gx * cx);
            uint8_t *o = out + (uint64_t)(y - y0) * stride + (uint64_t)(rx0 - x0) * (uint64_t)bpp;
            if (bpp == 3) {
                sp_planes_to_rgb(p, p + sc, p + 2 * sc, o, rx1 - rx0);
            } else {
                sp_planes_to_rgba(p, p + sc, p + 2 * sc, a->channels == 4 ? p + 3 * sc : NULL, o,
                                  rx1 - rx0);
            }
        }
        return;
    }
    for (int64_t y = ry0; y < ry1; y++) {
        uint8_t *row = out + (uint64_t)(y - y0) * stride + (uint64_t)(rx0 - x0) * (uint64_t)bpp;
        uint64_t base = (uint64_t)(y - gy * cy) * sy + (uint64_t)(rx0 - gx * cx) * sx;
        for (int64_t lc = 0; lc < c_n; lc++) {
            uint64_t e = base + (uint64_t)lc * sc;
            int64_t ch = c_lo + lc;
            uint8_t *o = row;
            for (int64_t x = rx0; x < rx1; x++, e += sx, o += bpp) {
                uint8_t v = sample8(m, chunk, e);
                if (a->channels == 1) {
                    o[0] = o[1] = o[2] = v;
                } else {
                    o[ch] = v;
                }
            }
        }
    }
}

/* An RGBA area (w x h at `out`) of an array whose chunks do not hold alpha themselves gets it
 * opaque first: paint_chunk writes only the channels the array has. */
static void fill_alpha(const zarr_array *a, int64_t w, int64_t h, uint8_t *out, uint64_t stride) {
    if (a->channels == 4 || planar_rgb8(a)) {
        return;
    }
    for (int64_t y = 0; y < h; y++) {
        for (int64_t x = 0; x < w; x++) {
            out[(uint64_t)y * stride + (uint64_t)x * 4 + 3] = 255;
        }
    }
}

/* Read the rectangle (x0, y0, w, h), inside the array, as RGBA into `out`. A chunk this thread
 * decoded last is not decoded again (zarr_recent.h). */
static sp_status read_rect(sp_slide *s, const zarr_array *a, int64_t x0, int64_t y0, int64_t w,
                           int64_t h, uint8_t *out, uint64_t stride, sp_err *err) {
    const sp_zarr_array_meta *m = &a->m;
    fill_alpha(a, w, h, out, stride);
    sp_zarr_recent *recent = sp_zarr_recent_get();
    sp_status st = recent ? SP_OK : sp_err_set(err, SP_E_NOMEM, "out of memory");
    int64_t cy = m->chunk[a->dim_y], cx = m->chunk[a->dim_x];
    int64_t cc = a->dim_c >= 0 ? m->chunk[a->dim_c] : 1;
    int64_t c_chunks = (a->channels + cc - 1) / cc;
    for (int64_t gy = y0 / cy; st == SP_OK && gy * cy < y0 + h; gy++) {
        for (int64_t gx = x0 / cx; st == SP_OK && gx * cx < x0 + w; gx++) {
            for (int64_t kc = 0; st == SP_OK && kc < c_chunks; kc++) {
                int64_t index[SP_ZARR_MAX_DIMS] = {0};
                index[a->dim_y] = gy;
                index[a->dim_x] = gx;
                if (a->dim_c >= 0) {
                    index[a->dim_c] = kc;
                }
                const uint8_t *chunk = sp_zarr_recent_find(recent, s->cache_id, a, index);
                if (chunk == NULL) {
                    uint8_t *buf = sp_zarr_recent_prepare(recent, &s->limits, m->chunk_bytes, err);
                    st = buf != NULL ? load_chunk(s, a, index, buf, err) : err->status;
                    if (st == SP_OK) {
                        sp_zarr_recent_keep(recent, s->cache_id, a, index);
                    }
                    chunk = buf;
                }
                if (st == SP_OK) {
                    paint_chunk(a, chunk, gy, gx, kc, x0, y0, w, h, 4, out, stride);
                }
            }
        }
    }
    return st;
}

/* A level's tile side for a chunk side: the chunk's, up to MAX_TILE. A larger chunk is split
 * into equal tiles of at most MAX_TILE (and at least MIN_SPLIT) where its side divides evenly:
 * such tiles fit the tile cache, and a region converts only the tiles it covers, while the chunk
 * itself is decoded once for the tiles one thread reads from it (zarr_recent.h). */
#define MAX_TILE 1024
#define MIN_SPLIT 256
static int64_t tile_side(int64_t chunk) {
    for (int64_t k = 2; chunk > MAX_TILE && chunk / k >= MIN_SPLIT; k++) {
        if (chunk % k == 0 && chunk / k <= MAX_TILE) {
            return chunk / k;
        }
    }
    return chunk;
}

static sp_status zarr_read_tile(sp_slide *s, const sp_level *l, int64_t col, int64_t row,
                                uint8_t *rgba, uint64_t stride, sp_err *err) {
    int64_t x0 = col * l->tile_width, y0 = row * l->tile_height;
    int64_t w = l->width - x0 < l->tile_width ? l->width - x0 : l->tile_width;
    int64_t h = l->height - y0 < l->tile_height ? l->height - y0 : l->tile_height;
    if (w < l->tile_width || h < l->tile_height) {
        /* A tile over the array's edge: transparent beyond it. */
        for (int64_t y = 0; y < l->tile_height; y++) {
            memset(rgba + (uint64_t)y * stride, 0, (size_t)l->tile_width * 4);
        }
    }
    if (w <= 0 || h <= 0) {
        return SP_OK;
    }
    return read_rect(s, l->priv, x0, y0, w, h, rgba, stride, err);
}

/* The chunks that hold channel chunk kc of tile (col, row) of array `a`, as grid positions. */
static int64_t tile_chunks(const zarr_array *a, const sp_level *l, sp_tile_pos t, int64_t kc,
                           int64_t (*out)[SP_ZARR_MAX_DIMS], int64_t cap) {
    const sp_zarr_array_meta *m = &a->m;
    int64_t cy = m->chunk[a->dim_y], cx = m->chunk[a->dim_x];
    int64_t x0 = t.col * l->tile_width, y0 = t.row * l->tile_height;
    int64_t x1 = x0 + l->tile_width < l->width ? x0 + l->tile_width : l->width;
    int64_t y1 = y0 + l->tile_height < l->height ? y0 + l->tile_height : l->height;
    int64_t count = 0;
    for (int64_t gy = y0 / cy; gy * cy < y1; gy++) {
        for (int64_t gx = x0 / cx; gx * cx < x1 && count < cap; gx++) {
            memset(out[count], 0, sizeof out[count]);
            out[count][a->dim_y] = gy;
            out[count][a->dim_x] = gx;
            if (a->dim_c >= 0) {
                out[count][a->dim_c] = kc;
            }
            count++;
        }
    }
    return count;
}

/* Fetch the announced tiles' chunks at once: whole chunk files into the slide's prefetched set,
 * or, in a sharded array, their byte ranges through each shard's source. Advice only: every
 * failure here is left for the chunk's read to meet and report. */
static void zarr_prefetch(sp_slide *s, const sp_level *l, const sp_tile_pos *tiles, size_t n) {
    enum { MOST = 2 * SP_PREFETCH_TILES };
    zarr_slide *z = s->priv;
    const zarr_array *a = l->priv;
    const sp_zarr_array_meta *m = &a->m;
    int64_t cc = a->dim_c >= 0 ? m->chunk[a->dim_c] : 1;
    int64_t c_chunks = (a->channels + cc - 1) / cc;
    int64_t positions[MOST][SP_ZARR_MAX_DIMS];
    int64_t count = 0;
    for (size_t i = 0; i < n && count < MOST; i++) {
        for (int64_t kc = 0; kc < c_chunks && count < MOST; kc++) {
            count += tile_chunks(a, l, tiles[i], kc, positions + count, MOST - count);
        }
    }
    char *paths[MOST] = {0};
    zarr_shard *shards[MOST] = {0};
    sp_byte_range ranges[MOST];
    int64_t found = 0;
    const sp_zarr_recent *recent = sp_zarr_recent_get();
    for (int64_t i = 0; i < count; i++) {
        char key[KEY_MAX], where[KEY_MAX + 600];
        char *path = NULL;
        uint64_t which = 0;
        sp_err ignored = {0};
        if (recent != NULL && sp_zarr_recent_find(recent, s->cache_id, a, positions[i]) != NULL) {
            continue; /* this thread holds it decoded: the tiles of a large chunk */
        }
        if (chunk_file(a, positions[i], key, &path, &which, &ignored) != SP_OK) {
            continue;
        }
        if (!m->sharded) {
            paths[found++] = path;
            continue;
        }
        where_of(where, sizeof where, a->label, key);
        zarr_shard *shard = NULL;
        bool present = false;
        uint64_t offset = 0, len = 0;
        if (shard_open(s, a, where, path, &shard, &ignored) == SP_OK && shard != NULL &&
            sp_zarr_shard_entry(m, zarr_shard_index(shard), sp_source_size(zarr_shard_source(shard)),
                                which, &present, &offset, &len, &ignored) == SP_OK &&
            present) {
            shards[found] = shard;
            ranges[found++] = (sp_byte_range){offset, len};
        } else if (shard != NULL) {
            zarr_shards_release(shard);
        }
    }
    if (!m->sharded) {
        sp_store_prefetch_files(z->prefetched, (const char *const *)paths, (size_t)found,
                                chunk_file_guess(m));
        for (int64_t i = 0; i < found; i++) {
            free(paths[i]);
        }
        return;
    }
    /* Each shard's ranges together, so that its source can send them at once. */
    for (int64_t i = 0; i < found; i++) {
        if (shards[i] == NULL) {
            continue;
        }
        sp_byte_range mine[MOST];
        size_t k = 0;
        zarr_shard *shard = shards[i];
        for (int64_t j = i; j < found; j++) {
            if (shards[j] == shard) {
                mine[k++] = ranges[j];
                if (j > i) {
                    zarr_shards_release(shards[j]);
                    shards[j] = NULL;
                }
            }
        }
        sp_source_prefetch(zarr_shard_source(shard), mine, k);
        zarr_shards_release(shard);
    }
}

static sp_status zarr_read_associated(sp_slide *s, const sp_associated *image, uint8_t *rgba,
                                      uint64_t stride, sp_err *err) {
    return read_rect(s, image->priv, 0, 0, image->width, image->height, rgba, stride, err);
}

static void zarr_destroy(sp_slide *s) {
    zarr_shards_drop(s->cache_id);
    zarr_slide *z = s->priv;
    if (z == NULL) {
        return;
    }
    for (int32_t i = 0; i < z->n_arrays; i++) {
        free_array(&z->arrays[i]);
    }
    free(z->arrays);
    sp_store_prefetch_free(z->prefetched);
    free(z);
    s->priv = NULL;
}

/* A chunk that holds every channel is a block (slide_struct.h): the tile cache keeps it decoded,
 * as planes, and areas are painted from it straight into the caller's rows. */
static bool zarr_block_of(const sp_slide *s, const sp_level *l, int64_t col, int64_t row,
                          sp_pixel_format format, sp_tile_pos *block, uint64_t *bytes) {
    (void)s;
    const zarr_array *a = l->priv;
    const sp_zarr_array_meta *m = &a->m;
    if ((a->dim_c >= 0 && m->chunk[a->dim_c] < a->channels) ||
        (format != SP_PIXEL_RGBA8 && a->channels == 4)) {
        return false; /* channels in several chunks, or alpha to composite */
    }
    /* A tile's side divides its chunk's (tile_side), so the chunk holds all of the tile. */
    block->col = col * l->tile_width / m->chunk[a->dim_x];
    block->row = row * l->tile_height / m->chunk[a->dim_y];
    *bytes = m->chunk_bytes;
    return true;
}

static sp_status zarr_decode_block(sp_slide *s, const sp_level *l, sp_tile_pos block, uint8_t *out,
                                   sp_err *err) {
    const zarr_array *a = l->priv;
    int64_t index[SP_ZARR_MAX_DIMS] = {0};
    index[a->dim_y] = block.row;
    index[a->dim_x] = block.col;
    return load_chunk(s, a, index, out, err);
}

static void zarr_paint_block(const sp_slide *s, const sp_level *l, const uint8_t *decoded,
                             sp_tile_pos block, int64_t x, int64_t y, int64_t w, int64_t h,
                             sp_pixel_format format, uint8_t *dst, int64_t stride) {
    (void)s;
    const zarr_array *a = l->priv;
    int bpp = sp_pixel_format_bytes(format);
    if (bpp == 4) {
        fill_alpha(a, w, h, dst, (uint64_t)stride);
    }
    paint_chunk(a, decoded, block.row, block.col, 0, x, y, w, h, bpp, dst, (uint64_t)stride);
}

static const sp_slide_ops ZARR_OPS = {
    .read_tile = zarr_read_tile,
    .read_associated = zarr_read_associated,
    .destroy = zarr_destroy,
    .prefetch = zarr_prefetch,
    .block_of = zarr_block_of,
    .decode_block = zarr_decode_block,
    .paint_block = zarr_paint_block,
};

/* ---- open ---- */

static sp_status add_levels(sp_slide *s, zarr_slide *z, const char *group_dir,
                            const char *group_label, const sp_zarr_group_meta *g, int32_t *base,
                            sp_err *err) {
    sp_status st = SP_OK;
    int64_t widest = -1;
    for (int32_t i = 0; st == SP_OK && i < g->n_datasets; i++) {
        zarr_array *a = &z->arrays[z->n_arrays];
        st = load_array(s, group_dir, group_label, g->datasets[i].path, g->zarr_format, a, err);
        if (st != SP_OK) {
            break;
        }
        z->n_arrays++;
        st = assign_axes(s, a, g->ndim, g->axes, err);
        if (st != SP_OK) {
            break;
        }
        const sp_zarr_array_meta *m = &a->m;
        sp_level level = {
            .width = m->shape[a->dim_x],
            .height = m->shape[a->dim_y],
            .tile_width = tile_side(m->chunk[a->dim_x]),
            .tile_height = tile_side(m->chunk[a->dim_y]),
            .compression = sp_zarr_codec_name(m->codec) ? sp_zarr_codec_name(m->codec) : "unknown",
            .priv = a,
        };
        if (level.width > widest) {
            widest = level.width;
            *base = i;
        }
        st = sp_slide_add_level(s, &level, err);
    }
    return st;
}

/* Associated images are y, x[, c] arrays named in the "slidepipe" attributes. One that cannot
 * be read is left out, as OpenSlide leaves out undecodable associated images: the slide itself
 * does not depend on it. */
static sp_status add_associated(sp_slide *s, zarr_slide *z, const char *group_dir,
                                const char *group_label, const sp_zarr_group_meta *g, sp_err *err) {
    static const sp_zarr_axis YXC[] = {SP_ZARR_AXIS_Y, SP_ZARR_AXIS_X, SP_ZARR_AXIS_C};
    for (int32_t i = 0; i < g->n_associated; i++) {
        const sp_zarr_associated_meta *am = &g->associated[i];
        zarr_array *a = &z->arrays[z->n_arrays];
        sp_err local = {0};
        sp_status st = load_array(s, group_dir, group_label, am->path, g->zarr_format, a, &local);
        if (st == SP_OK) {
            z->n_arrays++;
            int ndim = a->m.ndim == 2 ? 2 : 3;
            st = assign_axes(s, a, ndim, YXC, &local);
            if (st == SP_OK && (a->m.shape[0] != am->height || a->m.shape[1] != am->width)) {
                st = SP_E_CORRUPT;
            }
            if (st != SP_OK) {
                free_array(a);
                z->n_arrays--;
            }
        }
        if (st == SP_E_NOMEM) {
            return sp_err_set(err, st, "%s", local.msg);
        }
        if (st == SP_OK) {
            st = sp_slide_add_associated(s, am->name, am->width, am->height, a, err);
            if (st != SP_OK) {
                return st;
            }
        }
    }
    return SP_OK;
}

static sp_status set_double(sp_slide *s, const char *key, double v, sp_err *err) {
    char buf[64];
    sp_format_double(v, buf, sizeof buf);
    return sp_props_set(&s->props, key, buf, err);
}

/* The dataset hash a completed `slidepipe convert` leaves in its marker file. */
static sp_status add_dataset_hash(sp_slide *s, const char *root, sp_err *err) {
    char *path = sp_path_join(root, SP_ZARR_COMPLETE);
    if (path == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory");
    }
    char *text = NULL;
    size_t len = 0;
    sp_err ignored = {0};
    bool missing = false;
    bool have =
        read_small_file(((zarr_slide *)s->priv)->prefetched, path, 4096, SP_ZARR_COMPLETE, &text,
                        &len, &missing, &ignored) == SP_OK &&
        !missing;
    free(path);
    sp_status st = SP_OK;
    if (have && len >= 64) {
        bool hex = true;
        for (size_t i = 0; i < 64; i++) {
            char c = text[i];
            hex &= (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
        }
        if (hex) {
            text[64] = '\0';
            st = sp_props_set(&s->props, DATASET_HASH, text, err);
        }
    }
    free(text);
    return st;
}

static sp_status add_properties(sp_slide *s, const char *root, const sp_zarr_group_meta *g,
                                const zarr_array *base, const sp_zarr_dataset *base_ds,
                                sp_err *err) {
    sp_status st = SP_OK;
    /* The source slide's properties first, so that what this store itself says wins. A source
     * that was itself a converted store carries its own dataset hash, which says nothing about
     * this one. */
    for (int32_t i = 0; st == SP_OK && i < g->n_properties; i++) {
        if (strcmp(g->properties[i].key, DATASET_HASH) != 0 &&
            strcmp(g->properties[i].key, PIXEL_HASH) != 0) {
            st = sp_props_set(&s->props, g->properties[i].key, g->properties[i].value, err);
        }
    }
    if (st == SP_OK) {
        st = sp_props_set(&s->props, "zarr.format", g->zarr_format == 3 ? "3" : "2", err);
    }
    if (st == SP_OK) {
        st = sp_props_set(&s->props, "zarr.data-type", base->m.data_type, err);
    }
    if (st == SP_OK) {
        st = sp_props_set(&s->props, "ome.axes", g->axes_text, err);
    }
    if (st == SP_OK && g->ome_version != NULL) {
        st = sp_props_set(&s->props, "ome.version", g->ome_version, err);
    }
    if (st == SP_OK && g->name != NULL) {
        st = sp_props_set(&s->props, "ome.name", g->name, err);
    }
    if (st == SP_OK && base_ds->has_scale) {
        double mx = base_ds->scale[base->dim_x] * g->um_per_unit[base->dim_x];
        double my = base_ds->scale[base->dim_y] * g->um_per_unit[base->dim_y];
        if (mx > 0 && my > 0 && isfinite(mx) && isfinite(my)) {
            st = set_double(s, SP_PROPERTY_MPP_X, mx, err);
            if (st == SP_OK) {
                st = set_double(s, SP_PROPERTY_MPP_Y, my, err);
            }
        }
    }
    if (st == SP_OK && g->pixel_hash[0] != '\0') {
        st = sp_props_set(&s->props, PIXEL_HASH, g->pixel_hash, err);
    }
    if (st == SP_OK) {
        st = add_dataset_hash(s, root, err);
    }
    return st;
}

/* Send for the metadata files that opening reads next, all at once: each level's and associated
 * image's array metadata and the completion marker (one round trip, not one each). */
static void announce_metadata(sp_store_prefetch *kept, const char *root, const char *group_dir,
                              const sp_zarr_group_meta *g) {
    enum { MOST = 64 };
    char *paths[MOST];
    size_t n = 0;
    const char *name = array_metadata_name(g->zarr_format);
    for (int32_t i = 0; i < g->n_datasets + g->n_associated && n < MOST - 1; i++) {
        const char *path = i < g->n_datasets ? g->datasets[i].path
                                             : g->associated[i - g->n_datasets].path;
        char *dir = sp_path_join(group_dir, path);
        paths[n] = dir != NULL ? sp_path_join(dir, name) : NULL;
        free(dir);
        n += paths[n] != NULL;
    }
    paths[n] = sp_path_join(root, SP_ZARR_COMPLETE);
    n += paths[n] != NULL;
    sp_store_prefetch_files(kept, (const char *const *)paths, n, 0);
    for (size_t i = 0; i < n; i++) {
        free(paths[i]);
    }
}

static sp_status zarr_open(sp_slide *s, sp_probe *p, sp_err *err) {
    zarr_slide *z = calloc(1, sizeof *z);
    if (z == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory");
    }
    s->priv = z;
    s->ops = &ZARR_OPS;
    z->prefetched = p->kept; /* a remote store's: what detection fetched, and more to come */
    p->kept = NULL;
    s->prefetch = z->prefetched != NULL;
    sp_zarr_group_meta g = {0};
    char *group_dir = NULL;
    const char *group_label = "";
    char *root = strip_slashes(p->path);
    sp_status st = root ? SP_OK : sp_err_set(err, SP_E_NOMEM, "out of memory");
    if (st == SP_OK) {
        st = find_image_group(s, root, &g, &group_dir, &group_label, err);
    }
    if (st == SP_OK) {
        z->arrays = calloc((size_t)(g.n_datasets + g.n_associated), sizeof *z->arrays);
        if (z->arrays == NULL) {
            st = sp_err_set(err, SP_E_NOMEM, "out of memory");
        }
    }
    if (st == SP_OK && z->prefetched != NULL) {
        announce_metadata(z->prefetched, root, group_dir, &g);
    }
    int32_t base = 0;
    if (st == SP_OK) {
        st = add_levels(s, z, group_dir, group_label, &g, &base, err);
    }
    if (st == SP_OK) {
        st = add_associated(s, z, group_dir, group_label, &g, err);
    }
    if (st == SP_OK) {
        st = add_properties(s, root, &g, &z->arrays[base], &g.datasets[base], err);
    }
    sp_zarr_group_free(&g);
    free(group_dir);
    free(root);
    return st;
}

const sp_format sp_format_ome_zarr = {"ome-zarr", zarr_detect, zarr_open};
