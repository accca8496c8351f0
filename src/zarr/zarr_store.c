/* zarr_store.c — writing Zarr v2 and v3 arrays into a folder or an object-store prefix (see
 * zarr_store.h): the chunk grid, the manifest and the store's lifecycle.
 *
 * Chunks arrive whole from any thread. Each is encoded (zarr_codec.c), hashed (SHA-256, for the
 * manifest) and put through the write target (io/write_target.h), which makes the put atomic: a
 * killed run or a power cut leaves either the complete chunk or nothing under its final name.
 * Chunks are put "grouped": the target makes them durable together (one file-system flush covers
 * many, while the writers go on encoding); metadata is put "now", and the manifest and the
 * completion marker "durably", one by one. On S3 every put is a PUT, whole or nothing. The store's
 * mutex guards only the shared tables (the manifest entries and the written-chunk bitmaps);
 * encoding, hashing and I/O run outside it. With sharding the inner chunks are collected per
 * shard (zarr_shard_writer.c) and the thread that delivers a shard's last inner chunk has it
 * written. sp_zarr_store_finish checks that every chunk was written, writes the arrays' metadata
 * (zarr_array_json.c), syncs the target, then writes the manifest (sorted by path, so the dataset
 * hash is independent of thread timing) and last the completion marker.
 *
 * A new store must be an empty or absent folder; on S3, which this target cannot list, the names
 * a store or an interrupted conversion is known by must be absent. Resume: a store reopened with
 * resume=true keeps what is there. A chunk or shard whose final file exists is not encoded again;
 * its bytes are read back and hashed. Stale temporary files of a killed run are removed when the
 * store is opened. Resuming a store that was completed removes its completion marker and manifest
 * first and then proceeds as for an interrupted one, so the result is rewritten (identically,
 * given the same input and options).
 */
#include "zarr/zarr_store.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "base/limits.h"
#include "base/strings.h"
#include "io/source_hash.h"
#include "io/write_target.h"
#include "zarr/zarr_array_json.h"
#include "zarr/zarr_codec.h"
#include "zarr/zarr_shard_writer.h"

/* Bitmaps of written chunks cost one bit per chunk; this bounds them to 256 MiB. */
#define MAX_CHUNKS_PER_ARRAY ((int64_t)1 << 31)
/* A chunk (inner chunk when sharded) is encoded in one buffer; blosc 1 caps it near 2 GiB. */
#define MAX_CHUNK_BYTES ((uint64_t)1 << 30)

typedef struct manifest_entry {
    char *path;
    char hash[65];
    uint64_t seq; /* order of recording; a path recorded twice keeps the later hash */
} manifest_entry;

struct sp_zarr_array {
    sp_zarr_store *store;
    sp_zarr_array *next;
    char *name;
    sp_zarr_array_spec spec;
    char *dim_names[3];
    size_t typesize;
    size_t chunk_bytes;
    int64_t nchunks[3];
    int64_t total_chunks;
    int64_t written; /* chunks handed over (under the lock) */
    uint8_t *chunk_done;
    sp_zarr_shards *shards; /* NULL unless sharded */
};

struct sp_zarr_store {
    sp_write_target *target;
    bool resume;
    pthread_mutex_t lock;
    sp_zarr_array *arrays;
    manifest_entry *entries;
    size_t nentries, capentries;
    uint64_t seq;
};

static bool bit_test(const uint8_t *bits, int64_t i) {
    return (bits[i >> 3] >> (i & 7)) & 1;
}

static void bit_set(uint8_t *bits, int64_t i) {
    bits[i >> 3] |= (uint8_t)(1u << (i & 7));
}

/* ---- paths and the manifest ---------------------------------------------------------------- */

/* A relative path inside the store: no leading '/', no empty, "." or ".." component, no control
 * characters (the manifest is line-based). The empty string is the store root. */
static bool relpath_ok(const char *p, bool allow_empty) {
    if (*p == '\0') {
        return allow_empty;
    }
    const char *comp = p;
    for (const char *c = p;; c++) {
        if (*c == '/' || *c == '\0') {
            size_t n = (size_t)(c - comp);
            if (n == 0 || (n == 1 && comp[0] == '.') ||
                (n == 2 && comp[0] == '.' && comp[1] == '.')) {
                return false;
            }
            if (*c == '\0') {
                return true;
            }
            comp = c + 1;
        } else if ((unsigned char)*c < 0x20 || *c == 0x7f) {
            return false;
        }
    }
}

/* Record a file in the manifest (under the lock). */
static sp_status record(sp_zarr_store *s, const char *relpath, const char *hash, sp_err *err) {
    char *path = strdup(relpath);
    if (path == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory recording %s", relpath);
    }
    pthread_mutex_lock(&s->lock);
    if (s->nentries == s->capentries) {
        size_t cap = s->capentries ? s->capentries * 2 : 256;
        manifest_entry *e = realloc(s->entries, cap * sizeof *e);
        if (e == NULL) {
            pthread_mutex_unlock(&s->lock);
            free(path);
            return sp_err_set(err, SP_E_NOMEM, "out of memory recording %s", relpath);
        }
        s->entries = e;
        s->capentries = cap;
    }
    manifest_entry *e = &s->entries[s->nentries++];
    e->path = path;
    memcpy(e->hash, hash, 65);
    e->seq = s->seq++;
    pthread_mutex_unlock(&s->lock);
    return SP_OK;
}

/* Hash, put and record a file: a chunk or shard grouped, metadata at once. */
static sp_status put_pieces(sp_zarr_store *s, const char *relpath, const sp_bytes *pieces,
                            size_t npieces, sp_put_mode mode, sp_err *err) {
    char hash[65];
    if (!sp_sha256_parts_hex(pieces, npieces, hash)) {
        return sp_err_set(err, SP_E_NOMEM, "hashing %s failed", relpath);
    }
    sp_status st = sp_write_target_put(s->target, relpath, pieces, npieces, hash, mode, err);
    if (st == SP_OK) {
        st = record(s, relpath, hash, err);
    }
    return st;
}

static sp_status put_file(sp_zarr_store *s, const char *relpath, const void *data, size_t len,
                          sp_put_mode mode, sp_err *err) {
    sp_bytes one = {data, len};
    return put_pieces(s, relpath, &one, 1, mode, err);
}

/* In resume mode: if relpath is a file of the target, hash and record it and set *found. */
static sp_status adopt_existing(sp_zarr_store *s, const char *relpath, bool *found, sp_err *err) {
    *found = false;
    sp_source *src = NULL;
    bool missing = true;
    sp_status rc = sp_write_target_open_file(s->target, relpath, &src, &missing, err);
    if (rc == SP_OK && !missing) {
        char hash[65];
        rc = sp_sha256_source(src, hash, err);
        if (rc == SP_OK) {
            rc = record(s, relpath, hash, err);
            *found = rc == SP_OK;
        }
    }
    sp_source_close(src);
    return rc;
}

/* ---- store ---------------------------------------------------------------------------------- */

static void free_array(sp_zarr_array *a) {
    sp_zarr_shards_free(a->shards);
    free(a->chunk_done);
    for (int d = 0; d < 3; d++) {
        free(a->dim_names[d]);
    }
    free(a->name);
    free(a);
}

/* Free the store; with keep, grouped puts are first brought into place (after an error, so that
 * a resume finds them), without, those not yet in place are removed (never part of the store). */
static void free_store(sp_zarr_store *s, bool keep) {
    if (s == NULL) {
        return;
    }
    for (sp_zarr_array *a = s->arrays, *next; a != NULL; a = next) {
        next = a->next;
        free_array(a);
    }
    for (size_t i = 0; i < s->nentries; i++) {
        free(s->entries[i].path);
    }
    free(s->entries);
    sp_write_target_close(s->target, keep);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

void sp_zarr_store_abort(sp_zarr_store *store) {
    free_store(store, true);
}

static bool note_any(void *user, const char *relpath, bool is_folder) {
    (void)relpath, (void)is_folder;
    *(bool *)user = true;
    return false; /* one entry is enough */
}

/* Without resume a store starts empty: a folder holding nothing, or (a target that cannot list)
 * none of the names a store or an interrupted conversion is known by. */
static sp_status check_fresh(sp_zarr_store *s, sp_err *err) {
    const char *root = sp_write_target_root(s->target);
    bool any = false;
    sp_err probe = {0};
    sp_status st = sp_write_target_list(s->target, note_any, &any, &probe);
    if (st == SP_OK) {
        return any ? sp_err_set(err, SP_E_INVALID_ARG, "%s exists (use --resume to complete it)",
                                root)
                   : SP_OK;
    }
    if (st != SP_E_UNSUPPORTED) {
        return sp_err_set(err, st, "%s", probe.msg);
    }
    static const char *const taken[] = {SP_ZARR_COMPLETE, SP_ZARR_MANIFEST, ".zgroup", "zarr.json",
                                        "slidepipe-convert.json"};
    for (size_t i = 0; i < sizeof taken / sizeof *taken; i++) {
        bool there = false;
        st = sp_write_target_exists(s->target, taken[i], &there, err);
        if (st != SP_OK) {
            return st;
        }
        if (there) {
            return sp_err_set(err, SP_E_INVALID_ARG,
                              "%s already holds a store (%s; use --resume to complete it)", root,
                              taken[i]);
        }
    }
    return SP_OK;
}

sp_status sp_zarr_store_open(const char *path, bool resume, sp_zarr_store **out, sp_err *err) {
    if (out == NULL) {
        return sp_err_set(err, SP_E_INVALID_ARG, "Zarr store: null output");
    }
    *out = NULL;
    if (path == NULL || *path == '\0') {
        return sp_err_set(err, SP_E_INVALID_ARG, "Zarr store: empty path");
    }
    sp_zarr_store *s = calloc(1, sizeof *s);
    if (s == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory");
    }
    if (pthread_mutex_init(&s->lock, NULL) != 0) {
        free(s);
        return sp_err_set(err, SP_E_NOMEM, "cannot create a mutex");
    }
    s->resume = resume;
    sp_status st = sp_write_target_open(path, &s->target, err);
    if (st == SP_OK && !resume) {
        st = check_fresh(s, err);
    }
    if (st == SP_OK && resume) {
        /* The marker goes first: a store must never claim completeness while being rewritten. */
        st = sp_write_target_remove(s->target, SP_ZARR_COMPLETE, err);
        if (st == SP_OK) {
            st = sp_write_target_remove(s->target, SP_ZARR_MANIFEST, err);
        }
        if (st == SP_OK) {
            st = sp_write_target_sweep_temporaries(s->target, err);
        }
    }
    if (st != SP_OK) {
        free_store(s, false);
        return st;
    }
    *out = s;
    return SP_OK;
}

static size_t dtype_size(sp_zarr_dtype t) {
    return t == SP_ZARR_F32 ? 4 : 1;
}

sp_status sp_zarr_array_create(sp_zarr_store *store, const char *name,
                               const sp_zarr_array_spec *spec, sp_zarr_array **out, sp_err *err) {
    if (out != NULL) {
        *out = NULL;
    }
    if (store == NULL || name == NULL || spec == NULL || out == NULL) {
        return sp_err_set(err, SP_E_INVALID_ARG, "Zarr array: null argument");
    }
    if (!relpath_ok(name, true)) {
        return sp_err_set(err, SP_E_INVALID_ARG, "Zarr array: bad name \"%s\"", name);
    }
    if (spec->zarr_version != 2 && spec->zarr_version != 3) {
        return sp_err_set(err, SP_E_INVALID_ARG, "Zarr array %s: zarr_version %d", name,
                          spec->zarr_version);
    }
    if (spec->ndim != 2 && spec->ndim != 3) {
        return sp_err_set(err, SP_E_INVALID_ARG, "Zarr array %s: ndim %d", name, spec->ndim);
    }
    if (spec->dtype != SP_ZARR_U8 && spec->dtype != SP_ZARR_F32) {
        return sp_err_set(err, SP_E_INVALID_ARG, "Zarr array %s: unknown dtype", name);
    }
    sp_status st = sp_zarr_codec_check(spec->codec, spec->level, err);
    if (st != SP_OK) {
        return st;
    }
    sp_zarr_array *a = calloc(1, sizeof *a);
    if (a == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory");
    }
    a->store = store;
    a->spec = *spec;
    a->typesize = dtype_size(spec->dtype);
    bool sharded = false;
    for (int d = 0; d < spec->ndim; d++) {
        sharded |= spec->shard[d] != 0;
    }
    if (sharded && spec->zarr_version != 3) {
        st = sp_err_set(err, SP_E_INVALID_ARG, "Zarr array %s: sharding needs Zarr v3", name);
        goto fail;
    }
    uint64_t chunk_elems = 1, total = 1, inner = 1;
    int64_t per_shard[3] = {0, 0, 0};
    for (int d = 0; d < spec->ndim; d++) {
        int64_t sh = spec->shape[d], ch = spec->chunks[d];
        if (sh < 1 || ch < 1 || sh > ((int64_t)1 << 48) || ch > ((int64_t)1 << 30)) {
            st = sp_err_set(err, SP_E_INVALID_ARG,
                            "Zarr array %s: bad shape %lld or chunk %lld in dimension %d", name,
                            (long long)sh, (long long)ch, d);
            goto fail;
        }
        a->nchunks[d] = (sh + ch - 1) / ch;
        if (!sp_mul_u64(chunk_elems, (uint64_t)ch, &chunk_elems) ||
            !sp_mul_u64(total, (uint64_t)a->nchunks[d], &total)) {
            st = sp_err_set(err, SP_E_LIMIT, "Zarr array %s: too many chunks", name);
            goto fail;
        }
        if (sharded) {
            int64_t sd = spec->shard[d];
            if (sd < ch || sd % ch != 0) {
                st = sp_err_set(err, SP_E_INVALID_ARG,
                                "Zarr array %s: shard %lld is not a multiple of chunk %lld", name,
                                (long long)sd, (long long)ch);
                goto fail;
            }
            per_shard[d] = sd / ch;
            if (!sp_mul_u64(inner, (uint64_t)per_shard[d], &inner)) {
                st = sp_err_set(err, SP_E_LIMIT, "Zarr array %s: shard too large", name);
                goto fail;
            }
        }
    }
    uint64_t chunk_bytes;
    if (!sp_mul_u64(chunk_elems, a->typesize, &chunk_bytes) || chunk_bytes > MAX_CHUNK_BYTES) {
        st = sp_err_set(err, SP_E_LIMIT, "Zarr array %s: chunk above %llu bytes", name,
                        (unsigned long long)MAX_CHUNK_BYTES);
        goto fail;
    }
    if (total > (uint64_t)MAX_CHUNKS_PER_ARRAY || inner > (uint64_t)1 << 24) {
        st = sp_err_set(err, SP_E_LIMIT, "Zarr array %s: %llu chunks is above the limit", name,
                        (unsigned long long)total);
        goto fail;
    }
    a->chunk_bytes = (size_t)chunk_bytes;
    a->total_chunks = (int64_t)total;
    a->name = strdup(name);
    a->chunk_done = calloc((size_t)(total + 7) / 8, 1);
    if (a->name == NULL || a->chunk_done == NULL) {
        st = sp_err_set(err, SP_E_NOMEM, "out of memory");
        goto fail;
    }
    if (sharded) {
        st = sp_zarr_shards_create(spec->ndim, a->nchunks, per_shard, &a->shards, err);
        if (st != SP_OK) {
            goto fail;
        }
    }
    for (int d = 0; d < 3; d++) {
        a->spec.dimension_names[d] = NULL;
        if (d < spec->ndim && spec->dimension_names[d] != NULL) {
            const char *dn = spec->dimension_names[d];
            for (const char *c = dn; *c; c++) {
                if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20) {
                    st = sp_err_set(err, SP_E_INVALID_ARG, "Zarr array %s: bad dimension name",
                                    name);
                    goto fail;
                }
            }
            a->dim_names[d] = strdup(dn);
            if (a->dim_names[d] == NULL) {
                st = sp_err_set(err, SP_E_NOMEM, "out of memory");
                goto fail;
            }
            a->spec.dimension_names[d] = a->dim_names[d];
        }
    }
    pthread_mutex_lock(&store->lock);
    for (sp_zarr_array *o = store->arrays; o != NULL; o = o->next) {
        if (strcmp(o->name, name) == 0) {
            pthread_mutex_unlock(&store->lock);
            st = sp_err_set(err, SP_E_INVALID_ARG, "Zarr array %s declared twice", name);
            goto fail;
        }
    }
    a->next = store->arrays;
    store->arrays = a;
    pthread_mutex_unlock(&store->lock);
    *out = a;
    return SP_OK;
fail:
    free_array(a);
    return st;
}

/* "name/i/j[/k]" (v2) or "name/c/i/j[/k]" (v3) for chunk or shard coordinates. */
static char *key_path(const sp_zarr_array *a, const int64_t *c) {
    char key[96];
    int n = snprintf(key, sizeof key, "%s%lld/%lld", a->spec.zarr_version == 3 ? "c/" : "",
                     (long long)c[0], (long long)c[1]);
    if (a->spec.ndim == 3) {
        snprintf(key + n, sizeof key - (size_t)n, "/%lld", (long long)c[2]);
    }
    return a->name[0] ? sp_strdup_printf("%s/%s", a->name, key) : strdup(key);
}

/* Write a complete shard's bytes (zarr_shard_writer.c lays them out) as one grouped file. */
static sp_status write_shard(sp_zarr_array *a, const int64_t *shard_coord, const sp_zarr_shard *sh,
                             sp_err *err) {
    char *rel = key_path(a, shard_coord);
    sp_bytes *pieces = NULL;
    uint8_t *index = NULL;
    size_t npieces = 0;
    sp_status st = rel == NULL
                       ? sp_err_set(err, SP_E_NOMEM, "out of memory writing a shard")
                       : sp_zarr_shard_layout(a->shards, sh, &pieces, &npieces, &index, err);
    if (st == SP_OK) {
        st = put_pieces(a->store, rel, pieces, npieces, SP_PUT_GROUPED, err);
    }
    free(pieces);
    free(index);
    free(rel);
    return st;
}

static sp_status write_sharded(sp_zarr_array *a, const int64_t *index, const void *data,
                               sp_err *err) {
    sp_zarr_store *s = a->store;
    sp_zarr_shard_place place;
    sp_zarr_shards_place(a->shards, index, &place);
    bool done, collecting;
    sp_zarr_shards_state(a->shards, place.key, &done, &collecting);
    if (done) {
        return SP_OK; /* found complete on disk when resuming */
    }
    sp_status st = SP_OK;
    if (s->resume && !collecting) {
        char *rel = key_path(a, place.coord);
        if (rel == NULL) {
            return sp_err_set(err, SP_E_NOMEM, "out of memory");
        }
        bool exists = false;
        st = sp_write_target_exists(s->target, rel, &exists, err);
        if (st == SP_OK && exists) {
            /* Only the first thread to see it hashes it; the others drop their chunk. */
            if (sp_zarr_shards_claim(a->shards, place.key)) {
                bool found;
                st = adopt_existing(s, rel, &found, err);
            }
            free(rel);
            return st;
        }
        free(rel);
        if (st != SP_OK) {
            return st;
        }
    }
    uint8_t *enc = NULL;
    size_t enc_len = 0;
    st = sp_zarr_encode(a->spec.codec, a->spec.level, a->typesize, data, a->chunk_bytes, &enc,
                        &enc_len, err);
    if (st != SP_OK) {
        return st;
    }
    sp_zarr_shard *complete = NULL;
    st = sp_zarr_shards_add(a->shards, &place, enc, enc_len, &complete, err);
    if (st == SP_OK && complete != NULL) {
        st = write_shard(a, place.coord, complete, err);
        sp_zarr_shard_free(a->shards, complete);
    }
    return st;
}

sp_status sp_zarr_array_write_chunk(sp_zarr_array *array, const int64_t index[3], const void *data,
                                    sp_err *err) {
    if (array == NULL || index == NULL || data == NULL) {
        return sp_err_set(err, SP_E_INVALID_ARG, "Zarr chunk: null argument");
    }
    sp_zarr_array *a = array;
    sp_zarr_store *s = a->store;
    int64_t lin = 0;
    for (int d = 0; d < a->spec.ndim; d++) {
        if (index[d] < 0 || index[d] >= a->nchunks[d]) {
            return sp_err_set(err, SP_E_INVALID_ARG,
                              "Zarr array %s: chunk index %lld out of range in dimension %d",
                              a->name, (long long)index[d], d);
        }
        lin = lin * a->nchunks[d] + index[d];
    }
    pthread_mutex_lock(&s->lock);
    bool twice = bit_test(a->chunk_done, lin);
    if (!twice) {
        bit_set(a->chunk_done, lin);
        a->written++;
    }
    pthread_mutex_unlock(&s->lock);
    if (twice) {
        return sp_err_set(err, SP_E_INVALID_ARG, "Zarr array %s: chunk written twice", a->name);
    }
    if (a->shards != NULL) {
        return write_sharded(a, index, data, err);
    }
    char *rel = key_path(a, index);
    if (rel == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory");
    }
    sp_status st = SP_OK;
    bool found = false;
    if (s->resume) {
        st = adopt_existing(s, rel, &found, err);
    }
    if (st == SP_OK && !found) {
        uint8_t *enc = NULL;
        size_t enc_len = 0;
        st = sp_zarr_encode(a->spec.codec, a->spec.level, a->typesize, data, a->chunk_bytes, &enc,
                            &enc_len, err);
        if (st == SP_OK) {
            st = put_file(s, rel, enc, enc_len, SP_PUT_GROUPED, err);
        }
        free(enc);
    }
    free(rel);
    return st;
}

sp_status sp_zarr_store_write_json(sp_zarr_store *store, const char *relpath, const char *json,
                                   sp_err *err) {
    if (store == NULL || relpath == NULL || json == NULL) {
        return sp_err_set(err, SP_E_INVALID_ARG, "Zarr metadata: null argument");
    }
    if (!relpath_ok(relpath, false) || strcmp(relpath, SP_ZARR_MANIFEST) == 0 ||
        strcmp(relpath, SP_ZARR_COMPLETE) == 0) {
        return sp_err_set(err, SP_E_INVALID_ARG, "Zarr metadata: bad path \"%s\"", relpath);
    }
    return put_file(store, relpath, json, strlen(json), SP_PUT_NOW, err);
}

/* ---- finishing ------------------------------------------------------------------------------ */

static sp_status array_metadata(sp_zarr_array *a, sp_err *err) {
    size_t len;
    char *doc = sp_zarr_array_json(&a->spec, &len);
    const char *file = a->spec.zarr_version == 2 ? ".zarray" : "zarr.json";
    char *rel = a->name[0] ? sp_strdup_printf("%s/%s", a->name, file) : strdup(file);
    sp_status st = doc != NULL && rel != NULL ? put_file(a->store, rel, doc, len, SP_PUT_NOW, err)
                                              : sp_err_set(err, SP_E_NOMEM, "out of memory");
    free(rel);
    free(doc);
    return st;
}

static int entry_cmp(const void *x, const void *y) {
    const manifest_entry *a = x, *b = y;
    int c = strcmp(a->path, b->path);
    if (c != 0) {
        return c;
    }
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* The manifest: "HASH  PATH\n" per file, sorted by path; a path recorded twice (metadata
 * rewritten) keeps its latest content. NULL when out of memory. */
static char *manifest_text(sp_zarr_store *s, size_t *len) {
    qsort(s->entries, s->nentries, sizeof *s->entries, entry_cmp);
    size_t total = 0;
    for (size_t i = 0; i < s->nentries; i++) {
        total += 64 + 2 + strlen(s->entries[i].path) + 1;
    }
    char *m = malloc(total + 1);
    if (m == NULL) {
        return NULL;
    }
    size_t at = 0;
    for (size_t i = 0; i < s->nentries; i++) {
        if (i + 1 < s->nentries && strcmp(s->entries[i].path, s->entries[i + 1].path) == 0) {
            continue;
        }
        size_t n = strlen(s->entries[i].path);
        memcpy(m + at, s->entries[i].hash, 64);
        memcpy(m + at + 64, "  ", 2);
        memcpy(m + at + 66, s->entries[i].path, n);
        m[at + 66 + n] = '\n';
        at += 67 + n;
    }
    m[at] = '\0';
    *len = at;
    return m;
}

sp_status sp_zarr_store_finish(sp_zarr_store *store, char *dataset_hash, sp_err *err) {
    if (dataset_hash != NULL) {
        dataset_hash[0] = '\0';
    }
    if (store == NULL) {
        return sp_err_set(err, SP_E_INVALID_ARG, "Zarr store: null");
    }
    sp_zarr_store *s = store;
    char *m = NULL;
    size_t mlen = 0;
    sp_status st = SP_OK;
    bool keep = false; /* whether what was put stays for a resume when finishing fails */
    /* No worker may still be writing: the caller has joined them, so no lock is needed. */
    for (sp_zarr_array *a = s->arrays; a != NULL && st == SP_OK; a = a->next) {
        if (a->written != a->total_chunks ||
            (a->shards != NULL && sp_zarr_shards_in_flight(a->shards) != 0)) {
            st = sp_err_set(err, SP_E_INVALID_ARG,
                            "Zarr array %s: %lld of %lld chunks were not written", a->name,
                            (long long)(a->total_chunks - a->written), (long long)a->total_chunks);
            keep = true; /* the chunks that were written are good: a resume adopts them */
        }
    }
    for (sp_zarr_array *a = s->arrays; a != NULL && st == SP_OK; a = a->next) {
        st = array_metadata(a, err);
    }
    if (st == SP_OK) {
        st = sp_write_target_sync(s->target, err); /* before the manifest vouches for it */
    }
    if (st != SP_OK) {
        goto done;
    }
    m = manifest_text(s, &mlen);
    if (m == NULL) {
        st = sp_err_set(err, SP_E_NOMEM, "out of memory for the manifest");
        goto done;
    }
    sp_bytes manifest = {m, mlen};
    st = sp_write_target_put(s->target, SP_ZARR_MANIFEST, &manifest, 1, NULL, SP_PUT_DURABLE, err);
    if (st != SP_OK) {
        goto done;
    }
    char hash[66];
    sp_sha256_hex(m, mlen, hash);
    hash[64] = '\n';
    hash[65] = '\0';
    sp_bytes marker = {hash, 65};
    st = sp_write_target_put(s->target, SP_ZARR_COMPLETE, &marker, 1, NULL, SP_PUT_DURABLE, err);
    if (st != SP_OK) {
        /* The marker's name may be in place without being on disk: the store must not say it is
         * complete (a resume writes it again). */
        sp_err ignored = {0};
        sp_write_target_remove(s->target, SP_ZARR_COMPLETE, &ignored);
    } else if (dataset_hash != NULL) {
        memcpy(dataset_hash, hash, 64);
        dataset_hash[64] = '\0';
    }
done:
    free(m);
    free_store(s, keep);
    return st;
}
