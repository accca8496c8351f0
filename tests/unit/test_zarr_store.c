/* test_zarr_store.c — unit tests of the Zarr chunk codecs and store writer (src/zarr/).
 *
 * Codecs: exact round trips of each codec, byte-identical output on repeated encoding, and
 * hostile input (truncated streams, wrong sizes, a blosc header that lies) giving errors and a
 * zeroed output, never a crash. Store: Zarr v2 and v3 (plain and sharded) stores written from two
 * threads in a shuffled order must give the same manifest and dataset hash as one thread writing
 * in order; a shard file is parsed back (index entries, CRC-32C checked with an independent
 * bitwise implementation); an interrupted write completed with resume gives the clean run's hash
 * and leaves no stale temporary file; sp_zarr_verify counts a flipped byte, a deleted chunk and a
 * changed manifest, and refuses a manifest that points outside the folder; a write that fails
 * (EFBIG through RLIMIT_FSIZE) is a clean SP_E_IO that leaves no temporary file behind.
 *
 * Pixel pattern (shared with tests/data/test_zarr_store_compat.py): element (i, j[, k]) of a
 * uint8 array is (i*7 + j*3 + k) & 255; of a float32 array it is that value times 0.5. Edge
 * chunks are padded with zeros. When SP_ZARR_COMPAT_DIR is set, stores for every codec and
 * format are left there for zarr-python to read (see compat_stores); when SP_ZARR_DECODE_DIR is
 * set, chunks that numcodecs encoded there are decoded here (see foreign_chunks).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/hash.h"
#include "unit.h"
#include "zarr/zarr_codec.h"
#include "zarr/zarr_store.h"

static const sp_zarr_codec ALL_CODECS[] = {SP_ZARR_CODEC_ZSTD, SP_ZARR_CODEC_BLOSC_LZ4,
                                           SP_ZARR_CODEC_BLOSC_ZSTD, SP_ZARR_CODEC_GZIP,
                                           SP_ZARR_CODEC_NONE};
static const char *const CODEC_NAMES[] = {"zstd", "blosc-lz4", "blosc-zstd", "gzip", "none"};
#define NCODECS 5

static char workdir[256];

/* ---- helpers ---------------------------------------------------------------------------- */

static uint64_t rng_state = 0x243F6A8885A308D3u;

static uint32_t rng(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 32);
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

static void rm_rf(const char *path) {
    nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static uint8_t *slurp(const char *path, size_t *len) {
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)n + 1);
    if (buf != NULL && fread(buf, 1, (size_t)n, f) == (size_t)n) {
        buf[n] = 0;
        *len = (size_t)n;
    } else {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    return buf;
}

static int count_tmp_cb_n;
static int count_tmp_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag;
    if (strstr(path + ftw->base, ".tmp-") != NULL) {
        count_tmp_cb_n++;
    }
    return 0;
}

static int count_tmp(const char *dir) {
    count_tmp_cb_n = 0;
    nftw(dir, count_tmp_cb, 16, FTW_PHYS);
    return count_tmp_cb_n;
}

/* The independent reference: bitwise CRC-32C. */
static uint32_t crc32c_bitwise(const uint8_t *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int b = 0; b < 8; b++) {
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        }
    }
    return ~c;
}

static uint64_t get_le64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) {
        v = v << 8 | p[i];
    }
    return v;
}

/* ---- codecs ----------------------------------------------------------------------------- */

static uint8_t *make_data(size_t n, int kind) {
    uint8_t *p = malloc(n ? n : 1);
    for (size_t i = 0; i < n; i++) {
        switch (kind) {
        case 0: p[i] = (uint8_t)rng(); break;
        case 1: p[i] = 0; break;
        default: p[i] = (uint8_t)((i * 7 + (i >> 8) * 3) & 255); break;
        }
    }
    return p;
}

static void test_codec_roundtrip(void) {
    const size_t sizes[] = {1, 1000, 65536 + 12, 3 * 256 * 256};
    for (int c = 0; c < NCODECS; c++) {
        for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
            for (int kind = 0; kind < 3; kind++) {
                for (size_t typesize = 1; typesize <= 4; typesize += 3) {
                    size_t n = sizes[si] - sizes[si] % typesize;
                    if (n == 0) {
                        continue;
                    }
                    uint8_t *in = make_data(n, kind);
                    uint8_t *enc = NULL, *enc2 = NULL;
                    size_t enc_len = 0, enc2_len = 0;
                    sp_err e = {0};
                    CHECK_EQ_INT(
                        sp_zarr_encode(ALL_CODECS[c], 0, typesize, in, n, &enc, &enc_len, &e),
                        SP_OK);
                    CHECK_EQ_INT(
                        sp_zarr_encode(ALL_CODECS[c], 0, typesize, in, n, &enc2, &enc2_len, &e),
                        SP_OK);
                    CHECK(enc_len == enc2_len && memcmp(enc, enc2, enc_len) == 0);
                    uint8_t *out = malloc(n);
                    CHECK_EQ_INT(sp_zarr_decode(ALL_CODECS[c], enc, enc_len, out, n, &e), SP_OK);
                    CHECK(memcmp(in, out, n) == 0);
                    if (kind == 1 && n >= 1000 && ALL_CODECS[c] != SP_ZARR_CODEC_NONE) {
                        CHECK(enc_len < n / 10); /* it really compresses */
                    }
                    free(in);
                    free(enc);
                    free(enc2);
                    free(out);
                }
            }
        }
    }
    /* levels: each in-range level works; out of range is refused */
    uint8_t *in = make_data(5000, 2);
    for (int lv = 1; lv <= 22; lv++) {
        uint8_t *enc = NULL;
        size_t enc_len = 0;
        sp_err e = {0};
        CHECK_EQ_INT(sp_zarr_encode(SP_ZARR_CODEC_ZSTD, lv, 1, in, 5000, &enc, &enc_len, &e),
                     SP_OK);
        free(enc);
    }
    sp_err e = {0};
    uint8_t *enc = NULL;
    size_t enc_len = 0;
    CHECK_EQ_INT(sp_zarr_encode(SP_ZARR_CODEC_GZIP, 10, 1, in, 5000, &enc, &enc_len, &e),
                 SP_E_INVALID_ARG);
    CHECK(enc == NULL && strstr(e.msg, "level 10") != NULL);
    CHECK_EQ_INT(sp_zarr_codec_check(SP_ZARR_CODEC_BLOSC_LZ4, 0, NULL), SP_OK);
    CHECK_EQ_INT(sp_zarr_codec_check(SP_ZARR_CODEC_BLOSC_LZ4, 10, NULL), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_zarr_codec_check(SP_ZARR_CODEC_ZSTD, 23, NULL), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_zarr_codec_check((sp_zarr_codec)9, 0, NULL), SP_E_INVALID_ARG);
    free(in);
}

/* Decoding must fail cleanly (and leave the output zeroed) on every broken input. */
static void expect_bad(sp_zarr_codec codec, const uint8_t *in, size_t in_len, size_t out_len) {
    uint8_t *out = malloc(out_len ? out_len : 1);
    memset(out, 0xAB, out_len);
    sp_err e = {0};
    sp_status st = sp_zarr_decode(codec, in, in_len, out, out_len, &e);
    CHECK(st == SP_E_CORRUPT);
    if (st != SP_E_CORRUPT) {
        fprintf(stderr, "  codec %d in_len %zu out_len %zu: status %d\n", (int)codec, in_len,
                out_len, (int)st);
    }
    int zero = 1;
    for (size_t i = 0; i < out_len; i++) {
        zero &= out[i] == 0;
    }
    CHECK(zero);
    free(out);
}

static void test_codec_hostile(void) {
    const size_t n = 40000;
    uint8_t *in = make_data(n, 2);
    for (int c = 0; c < NCODECS; c++) {
        sp_zarr_codec codec = ALL_CODECS[c];
        uint8_t *enc = NULL;
        size_t len = 0;
        sp_err e = {0};
        CHECK_EQ_INT(sp_zarr_encode(codec, 0, 1, in, n, &enc, &len, &e), SP_OK);
        expect_bad(codec, enc, len, n + 1); /* wrong size, either way */
        expect_bad(codec, enc, len, n - 1);
        if (codec != SP_ZARR_CODEC_NONE) {
            expect_bad(codec, enc, len / 2, n); /* truncated */
            expect_bad(codec, enc, len - 1, n);
            expect_bad(codec, enc, 3, n);
            expect_bad(codec, enc, 0, n);
        }
        /* random garbage of several lengths */
        for (int t = 0; t < 50; t++) {
            size_t gl = 1 + rng() % 200;
            uint8_t *g = make_data(gl, 0);
            if (codec != SP_ZARR_CODEC_NONE || gl != n) {
                expect_bad(codec, g, gl, n);
            }
            free(g);
        }
        /* bit flips in the stream must never crash; they may decode or fail */
        for (int t = 0; t < 200; t++) {
            uint8_t *copy = malloc(len);
            memcpy(copy, enc, len);
            copy[rng() % len] ^= (uint8_t)(1u << (rng() % 8));
            uint8_t *out = malloc(n);
            sp_err e2 = {0};
            sp_status st = sp_zarr_decode(codec, copy, len, out, n, &e2);
            CHECK(st == SP_OK || st == SP_E_CORRUPT);
            free(out);
            free(copy);
        }
        if (codec == SP_ZARR_CODEC_BLOSC_LZ4 || codec == SP_ZARR_CODEC_BLOSC_ZSTD) {
            /* blosc header: version, versionlz, flags, typesize, nbytes, blocksize, cbytes */
            uint8_t *lie = malloc(len);
            memcpy(lie, enc, len);
            lie[4] = (uint8_t)(n + 1), lie[5] = (uint8_t)((n + 1) >> 8),
            lie[6] = (uint8_t)((n + 1) >> 16);
            expect_bad(codec, lie, len, n); /* claims one more byte than the chunk */
            memcpy(lie, enc, len);
            lie[12] = (uint8_t)(len + 100), lie[13] = (uint8_t)((len + 100) >> 8);
            expect_bad(codec, lie, len, n); /* claims more compressed bytes than given */
            memcpy(lie, enc, len);
            lie[8] = 0xFF, lie[9] = 0xFF, lie[10] = 0xFF, lie[11] = 0x7F; /* huge blocksize */
            uint8_t *out = malloc(n);
            sp_status st = sp_zarr_decode(codec, lie, len, out, n, &e);
            CHECK(st == SP_E_CORRUPT || st == SP_OK);
            free(out);
            free(lie);
        }
        if (codec == SP_ZARR_CODEC_GZIP) {
            uint8_t *lie = malloc(len);
            memcpy(lie, enc, len);
            lie[len - 4] ^= 1; /* ISIZE */
            expect_bad(codec, lie, len, n);
            memcpy(lie, enc, len);
            lie[len - 8] ^= 1; /* CRC32 */
            expect_bad(codec, lie, len, n);
            free(lie);
        }
        free(enc);
    }
    free(in);
}

static void test_codec_names(void) {
    char *s = sp_zarr_codec_v2_json(SP_ZARR_CODEC_ZSTD, 0, 1);
    CHECK(strcmp(s, "{\"id\": \"zstd\", \"level\": 1}") == 0);
    free(s);
    s = sp_zarr_codec_v2_json(SP_ZARR_CODEC_BLOSC_LZ4, 7, 1);
    CHECK(strcmp(s, "{\"id\": \"blosc\", \"cname\": \"lz4\", \"clevel\": 7, \"shuffle\": 1, "
                    "\"blocksize\": 0}") == 0);
    free(s);
    s = sp_zarr_codec_v2_json(SP_ZARR_CODEC_NONE, 0, 1);
    CHECK(strcmp(s, "null") == 0);
    free(s);
    s = sp_zarr_codec_v3_json(SP_ZARR_CODEC_BLOSC_ZSTD, 0, 4);
    CHECK(strcmp(s, "{\"name\": \"blosc\", \"configuration\": {\"cname\": \"zstd\", \"clevel\": 5, "
                    "\"shuffle\": \"shuffle\", \"typesize\": 4, \"blocksize\": 0}}") == 0);
    free(s);
    s = sp_zarr_codec_v3_json(SP_ZARR_CODEC_GZIP, 0, 1);
    CHECK(strcmp(s, "{\"name\": \"gzip\", \"configuration\": {\"level\": 6}}") == 0);
    free(s);
    CHECK(sp_zarr_codec_v3_json(SP_ZARR_CODEC_NONE, 0, 1) == NULL);
    CHECK_EQ_INT(sp_zarr_codec_default_level(SP_ZARR_CODEC_ZSTD), 1);
    CHECK_EQ_INT(sp_zarr_codec_default_level(SP_ZARR_CODEC_GZIP), 6);

    sp_zarr_codec c = SP_ZARR_CODEC_NONE;
    sp_err e = {0};
    CHECK(sp_zarr_codec_from_v2("blosc", "lz4", &c, &e) == SP_OK && c == SP_ZARR_CODEC_BLOSC_LZ4);
    CHECK(sp_zarr_codec_from_v2("blosc", "zstd", &c, &e) == SP_OK && c == SP_ZARR_CODEC_BLOSC_ZSTD);
    CHECK(sp_zarr_codec_from_v2("gzip", NULL, &c, &e) == SP_OK && c == SP_ZARR_CODEC_GZIP);
    CHECK(sp_zarr_codec_from_v2(NULL, NULL, &c, &e) == SP_OK && c == SP_ZARR_CODEC_NONE);
    CHECK(sp_zarr_codec_from_v3("zstd", NULL, &c, &e) == SP_OK && c == SP_ZARR_CODEC_ZSTD);
    CHECK_EQ_INT(sp_zarr_codec_from_v2("blosc", "snappy", &c, &e), SP_E_UNSUPPORTED);
    CHECK(strstr(e.msg, "snappy") != NULL);
    sp_err_clear(&e);
    CHECK_EQ_INT(sp_zarr_codec_from_v3("lzma", NULL, &c, &e), SP_E_UNSUPPORTED);
    CHECK(strstr(e.msg, "lzma") != NULL);
}

/* ---- stores ----------------------------------------------------------------------------- */

/* The arrays of a test store: "a" (uint8, c,y,x) and "f" (float32, y,x). */
typedef struct test_layout {
    int version;
    bool sharded;
    sp_zarr_codec codec;
} test_layout;

static void spec_a(const test_layout *l, sp_zarr_array_spec *s) {
    memset(s, 0, sizeof *s);
    s->zarr_version = l->version;
    s->ndim = 3;
    s->shape[0] = 3, s->shape[1] = 100, s->shape[2] = 75;
    s->chunks[0] = 1, s->chunks[1] = 32, s->chunks[2] = 32;
    if (l->sharded) {
        s->shard[0] = 1, s->shard[1] = 64, s->shard[2] = 64;
    }
    s->dtype = SP_ZARR_U8;
    s->codec = l->codec;
    s->dimension_names[0] = "c", s->dimension_names[1] = "y", s->dimension_names[2] = "x";
}

static void spec_f(const test_layout *l, sp_zarr_array_spec *s) {
    memset(s, 0, sizeof *s);
    s->zarr_version = l->version;
    s->ndim = 2;
    s->shape[0] = 50, s->shape[1] = 45;
    s->chunks[0] = 16, s->chunks[1] = 16;
    if (l->sharded) {
        s->shard[0] = 32, s->shard[1] = 32;
    }
    s->dtype = SP_ZARR_F32;
    s->codec = l->codec;
    s->dimension_names[0] = "y", s->dimension_names[1] = "x";
}

/* A whole chunk of the pattern, zero-padded at the edges. */
static void *make_chunk(const sp_zarr_array_spec *s, const int64_t idx[3]) {
    int64_t c0 = s->chunks[0], c1 = s->chunks[1], c2 = s->ndim == 3 ? s->chunks[2] : 1;
    size_t n = (size_t)(c0 * c1 * c2);
    size_t ts = s->dtype == SP_ZARR_F32 ? 4 : 1;
    uint8_t *buf = calloc(n, ts);
    for (int64_t a = 0; a < c0; a++) {
        for (int64_t b = 0; b < c1; b++) {
            for (int64_t c = 0; c < c2; c++) {
                int64_t i = idx[0] * c0 + a, j = idx[1] * c1 + b;
                int64_t k = s->ndim == 3 ? idx[2] * c2 + c : 0;
                if (i >= s->shape[0] || j >= s->shape[1] || (s->ndim == 3 && k >= s->shape[2])) {
                    continue;
                }
                uint8_t v = (uint8_t)((i * 7 + j * 3 + k) & 255);
                size_t at = (size_t)((a * c1 + b) * c2 + c);
                if (ts == 1) {
                    buf[at] = v;
                } else {
                    float f = (float)v * 0.5f;
                    memcpy(buf + at * 4, &f, 4);
                }
            }
        }
    }
    return buf;
}

typedef struct task {
    int array; /* 0 = "a", 1 = "f" */
    int64_t idx[3];
} task;

typedef struct job {
    sp_zarr_array *arrays[2];
    sp_zarr_array_spec specs[2];
    task *tasks;
    int ntasks;
    int next; /* atomic */
    int stride, start;
    int failures;
} job;

static int make_tasks(const sp_zarr_array_spec *specs, task **out) {
    int n = 0;
    task *t = malloc(sizeof *t * 1024);
    for (int a = 0; a < 2; a++) {
        const sp_zarr_array_spec *s = &specs[a];
        int64_t n0 = (s->shape[0] + s->chunks[0] - 1) / s->chunks[0];
        int64_t n1 = (s->shape[1] + s->chunks[1] - 1) / s->chunks[1];
        int64_t n2 = s->ndim == 3 ? (s->shape[2] + s->chunks[2] - 1) / s->chunks[2] : 1;
        for (int64_t i = 0; i < n0; i++) {
            for (int64_t j = 0; j < n1; j++) {
                for (int64_t k = 0; k < n2; k++) {
                    t[n].array = a;
                    t[n].idx[0] = i, t[n].idx[1] = j, t[n].idx[2] = k;
                    n++;
                }
            }
        }
    }
    *out = t;
    return n;
}

static void *worker(void *arg) {
    job *j = arg;
    for (;;) {
        int i = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED);
        if (i >= j->ntasks) {
            break;
        }
        if (i % j->stride != j->start) {
            continue;
        }
        task *t = &j->tasks[i];
        void *chunk = make_chunk(&j->specs[t->array], t->idx);
        sp_err e = {0};
        if (sp_zarr_array_write_chunk(j->arrays[t->array], t->idx, chunk, &e) != SP_OK) {
            fprintf(stderr, "  write_chunk: %s\n", e.msg);
            __atomic_fetch_add(&j->failures, 1, __ATOMIC_RELAXED);
        }
        free(chunk);
    }
    return NULL;
}

static void write_group(sp_zarr_store *s, int version) {
    sp_err e = {0};
    if (version == 2) {
        CHECK_EQ_INT(sp_zarr_store_write_json(s, ".zgroup", "{\"zarr_format\": 2}\n", &e), SP_OK);
    } else {
        CHECK_EQ_INT(sp_zarr_store_write_json(
                         s, "zarr.json",
                         "{\"zarr_format\": 3, \"node_type\": \"group\", \"attributes\": {}}\n",
                         &e),
                     SP_OK);
    }
}

/* Write the test store into `dir`: with `threads` workers, tasks shuffled when `shuffle`; only
 * every `stride`-th task from `start` (stride 1: all). With finish, returns the dataset hash in
 * `hash`; otherwise the store is aborted after writing. Returns the failures seen. */
static int write_store(const char *dir, const test_layout *l, int threads, bool shuffle,
                       bool resume, int stride, int start, bool finish, char *hash) {
    sp_zarr_store *s = NULL;
    sp_err e = {0};
    if (sp_zarr_store_open(dir, resume, &s, &e) != SP_OK) {
        fprintf(stderr, "  open %s: %s\n", dir, e.msg);
        return 1;
    }
    job j = {0};
    spec_a(l, &j.specs[0]);
    spec_f(l, &j.specs[1]);
    int bad = 0;
    bad += sp_zarr_array_create(s, "a", &j.specs[0], &j.arrays[0], &e) != SP_OK;
    bad += sp_zarr_array_create(s, "f", &j.specs[1], &j.arrays[1], &e) != SP_OK;
    if (bad) {
        fprintf(stderr, "  create: %s\n", e.msg);
        sp_zarr_store_abort(s);
        return bad;
    }
    j.ntasks = make_tasks(j.specs, &j.tasks);
    j.stride = stride;
    j.start = start;
    if (shuffle) {
        for (int i = j.ntasks - 1; i > 0; i--) {
            int k = (int)(rng() % (uint32_t)(i + 1));
            task tmp = j.tasks[i];
            j.tasks[i] = j.tasks[k];
            j.tasks[k] = tmp;
        }
    }
    pthread_t th[8];
    for (int t = 0; t < threads; t++) {
        pthread_create(&th[t], NULL, worker, &j);
    }
    for (int t = 0; t < threads; t++) {
        pthread_join(th[t], NULL);
    }
    bad = j.failures;
    free(j.tasks);
    if (!finish) {
        sp_zarr_store_abort(s);
        return bad;
    }
    write_group(s, l->version);
    if (sp_zarr_store_finish(s, hash, &e) != SP_OK) {
        fprintf(stderr, "  finish: %s\n", e.msg);
        bad++;
    }
    return bad;
}

static char *path_in(const char *dir, const char *rel) {
    static char buf[4][1024];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, rel);
    return buf[k];
}

static void test_store_threads(void) {
    const test_layout layouts[] = {{2, false, SP_ZARR_CODEC_ZSTD},
                                   {3, false, SP_ZARR_CODEC_BLOSC_LZ4},
                                   {3, true, SP_ZARR_CODEC_ZSTD},
                                   {3, true, SP_ZARR_CODEC_GZIP}};
    for (size_t li = 0; li < sizeof layouts / sizeof *layouts; li++) {
        char d1[300], d2[300], h1[65] = "", h2[65] = "";
        snprintf(d1, sizeof d1, "%s/threads-%zu-one", workdir, li);
        snprintf(d2, sizeof d2, "%s/threads-%zu-two", workdir, li);
        CHECK_EQ_INT(write_store(d1, &layouts[li], 1, false, false, 1, 0, true, h1), 0);
        CHECK_EQ_INT(write_store(d2, &layouts[li], 2, true, false, 1, 0, true, h2), 0);
        CHECK(strlen(h1) == 64 && strcmp(h1, h2) == 0);
        char d3[300], h3[65] = "";
        snprintf(d3, sizeof d3, "%s/threads-%zu-eight", workdir, li);
        CHECK_EQ_INT(write_store(d3, &layouts[li], 8, true, false, 1, 0, true, h3), 0);
        CHECK(strcmp(h1, h3) == 0);
        size_t n1, n2, nc;
        uint8_t *m1 = slurp(path_in(d1, SP_ZARR_MANIFEST), &n1);
        uint8_t *m2 = slurp(path_in(d2, SP_ZARR_MANIFEST), &n2);
        uint8_t *c1 = slurp(path_in(d1, SP_ZARR_COMPLETE), &nc);
        CHECK(m1 != NULL && m2 != NULL && n1 == n2 && memcmp(m1, m2, n1) == 0);
        char mh[65];
        sp_sha256_hex(m1, n1, mh);
        CHECK(strcmp(mh, h1) == 0);
        CHECK(c1 != NULL && nc == 65 && memcmp(c1, h1, 64) == 0 && c1[64] == '\n');
        /* manifest: sorted, metadata included, marker and manifest themselves not */
        if (m1 != NULL) {
            CHECK(strstr((char *)m1,
                         layouts[li].version == 2 ? "  a/.zarray\n" : "  a/zarr.json\n") != NULL);
            CHECK(strstr((char *)m1, layouts[li].version == 2 ? "  .zgroup\n" : "  zarr.json\n") !=
                  NULL);
            CHECK(strstr((char *)m1, SP_ZARR_COMPLETE) == NULL);
            int sorted = 1, lines = 0;
            const char *prev = NULL;
            for (char *p = (char *)m1; *p; lines++) {
                char *nl = strchr(p, '\n');
                *nl = '\0';
                if (prev != NULL) {
                    sorted &= strcmp(prev + 66, p + 66) < 0;
                }
                prev = p;
                p = nl + 1;
            }
            CHECK(sorted);
            /* a: 3x4x3 chunks or 3x2x2 shards; f: 4x3 chunks or 2x2 shards; + 3 metadata */
            CHECK_EQ_INT(lines, layouts[li].sharded ? 12 + 4 + 3 : 36 + 12 + 3);
        }
        free(m1);
        free(m2);
        free(c1);
        /* v2 chunk keys are "a/i/j/k", v3 "a/c/i/j/k" */
        struct stat sb;
        if (layouts[li].version == 2) {
            CHECK(stat(path_in(d1, "a/2/3/2"), &sb) == 0);
            CHECK(stat(path_in(d1, "f/3/2"), &sb) == 0);
            CHECK(stat(path_in(d1, "a/.zattrs"), &sb) != 0);
        } else if (!layouts[li].sharded) {
            CHECK(stat(path_in(d1, "a/c/2/3/2"), &sb) == 0);
        } else {
            CHECK(stat(path_in(d1, "a/c/2/1/1"), &sb) == 0);
            CHECK(stat(path_in(d1, "a/c/2/2/0"), &sb) != 0);
        }
        CHECK_EQ_INT(count_tmp(d1) + count_tmp(d2), 0);
    }
}

static void test_crc32c_vector(void) {
    CHECK(crc32c_bitwise((const uint8_t *)"123456789", 9) == 0xE3069283u);
}

/* Parse shard "a/c/1/1/1" of the sharded v3 store back: chunk_shape 1x64x64 over 1x32x32 inner
 * chunks; shard (1, 1, 1) covers y 64..99 and x 64..74, so only inner slots (0,0) and (1,0) of the
 * 1x2x2 grid lie in the array — (0,1) and (1,1) are absent. */
static void test_shard_layout(void) {
    char dir[300], h[65];
    snprintf(dir, sizeof dir, "%s/shard", workdir);
    test_layout l = {3, true, SP_ZARR_CODEC_ZSTD};
    CHECK_EQ_INT(write_store(dir, &l, 1, false, false, 1, 0, true, h), 0);
    size_t len = 0;
    uint8_t *f = slurp(path_in(dir, "a/c/1/1/1"), &len);
    CHECK(f != NULL && len > 4 * 16 + 4);
    if (f == NULL || len <= 4 * 16 + 4) {
        free(f);
        return;
    }
    const uint8_t *index = f + len - 4 - 64;
    uint32_t crc = (uint32_t)f[len - 4] | (uint32_t)f[len - 3] << 8 | (uint32_t)f[len - 2] << 16 |
                   (uint32_t)f[len - 1] << 24;
    CHECK(crc == crc32c_bitwise(index, 64));
    sp_zarr_array_spec s;
    spec_a(&l, &s);
    uint64_t expect_off = 0;
    for (int slot = 0; slot < 4; slot++) {
        uint64_t off = get_le64(index + 16 * slot), nb = get_le64(index + 16 * slot + 8);
        bool present = slot == 0 || slot == 2; /* slot = y_inner * 2 + x_inner */
        if (!present) {
            CHECK(off == UINT64_MAX && nb == UINT64_MAX);
            continue;
        }
        CHECK(off == expect_off && off + nb <= len - 68);
        if (off != expect_off || off + nb > len - 68) {
            break;
        }
        expect_off += nb;
        int64_t idx[3] = {1, 2 + slot / 2, 2 + slot % 2};
        uint8_t *want = make_chunk(&s, idx);
        uint8_t got[32 * 32];
        sp_err e = {0};
        CHECK_EQ_INT(sp_zarr_decode(SP_ZARR_CODEC_ZSTD, f + off, nb, got, sizeof got, &e), SP_OK);
        CHECK(memcmp(got, want, sizeof got) == 0);
        free(want);
    }
    CHECK(expect_off == len - 68); /* the chunks fill everything before the index */
    free(f);

    /* the array metadata names the layout */
    uint8_t *meta = slurp(path_in(dir, "a/zarr.json"), &len);
    CHECK(meta != NULL && strstr((char *)meta, "\"sharding_indexed\"") != NULL &&
          strstr((char *)meta, "\"chunk_shape\": [1, 64, 64]") != NULL &&
          strstr((char *)meta, "\"chunk_shape\": [1, 32, 32]") != NULL &&
          strstr((char *)meta, "\"dimension_names\": [\"c\", \"y\", \"x\"]") != NULL);
    free(meta);
}

static void test_resume(void) {
    const test_layout layouts[] = {{2, false, SP_ZARR_CODEC_BLOSC_ZSTD},
                                   {3, true, SP_ZARR_CODEC_ZSTD}};
    for (size_t li = 0; li < 2; li++) {
        char clean[300], dir[300], h1[65] = "", h2[65] = "", h3[65] = "";
        snprintf(clean, sizeof clean, "%s/resume-%zu-clean", workdir, li);
        snprintf(dir, sizeof dir, "%s/resume-%zu", workdir, li);
        CHECK_EQ_INT(write_store(clean, &layouts[li], 1, false, false, 1, 0, true, h1), 0);
        /* half the chunks, from two threads, then killed */
        CHECK_EQ_INT(write_store(dir, &layouts[li], 2, true, false, 2, 0, false, NULL), 0);
        /* what a killed writer leaves: temporary files, at the root and deeper */
        FILE *t = fopen(path_in(dir, "a/0/x.tmp-AbC123"), "w");
        if (t == NULL) {
            mkdir(path_in(dir, "a"), 0777);
            mkdir(path_in(dir, "a/0"), 0777);
            t = fopen(path_in(dir, "a/0/x.tmp-AbC123"), "w");
        }
        CHECK(t != NULL);
        if (t != NULL) {
            fputs("torn", t);
            fclose(t);
        }
        t = fopen(path_in(dir, "zarr.json.tmp-zzzzzz"), "w");
        CHECK(t != NULL);
        if (t != NULL) {
            fclose(t);
        }
        CHECK(count_tmp(dir) == 2);
        /* without resume the folder is refused */
        sp_zarr_store *s = NULL;
        sp_err e = {0};
        CHECK_EQ_INT(sp_zarr_store_open(dir, false, &s, &e), SP_E_INVALID_ARG);
        CHECK(s == NULL && strstr(e.msg, "use --resume") != NULL);
        /* a partial store does not verify */
        int64_t problems = -1;
        char msg[256];
        CHECK_EQ_INT(sp_zarr_verify(dir, NULL, NULL, &problems, NULL, NULL, msg, sizeof msg),
                     SP_E_CORRUPT);
        CHECK(strstr(msg, "incomplete conversion") != NULL);
        /* resume writes everything again (the chunks present are kept and hashed) */
        CHECK_EQ_INT(write_store(dir, &layouts[li], 2, true, true, 1, 0, true, h2), 0);
        CHECK(strlen(h2) == 64 && strcmp(h1, h2) == 0);
        CHECK_EQ_INT(count_tmp(dir), 0);
        /* resuming a complete store rewrites the manifest and marker identically */
        CHECK_EQ_INT(write_store(dir, &layouts[li], 1, false, true, 1, 0, true, h3), 0);
        CHECK(strcmp(h1, h3) == 0);
        size_t n1, n2;
        uint8_t *m1 = slurp(path_in(clean, SP_ZARR_MANIFEST), &n1);
        uint8_t *m2 = slurp(path_in(dir, SP_ZARR_MANIFEST), &n2);
        CHECK(m1 != NULL && m2 != NULL && n1 == n2 && memcmp(m1, m2, n1) == 0);
        free(m1);
        free(m2);
    }
}

typedef struct report_log {
    int n;
    char path[4][256];
    char problem[4][16];
} report_log;

static void on_report(void *user, const char *path, const char *problem) {
    report_log *r = user;
    if (r->n < 4) {
        snprintf(r->path[r->n], sizeof r->path[0], "%s", path);
        snprintf(r->problem[r->n], sizeof r->problem[0], "%s", problem);
    }
    r->n++;
}

static void test_verify(void) {
    char dir[300], h[65], vh[65];
    snprintf(dir, sizeof dir, "%s/verify", workdir);
    test_layout l = {2, false, SP_ZARR_CODEC_GZIP};
    CHECK_EQ_INT(write_store(dir, &l, 2, true, false, 1, 0, true, h), 0);
    int64_t problems = -1;
    char msg[256] = "";
    report_log r = {0};
    CHECK_EQ_INT(sp_zarr_verify(dir, on_report, &r, &problems, vh, NULL, msg, sizeof msg), SP_OK);
    CHECK(problems == 0 && r.n == 0 && strcmp(vh, h) == 0);

    /* one flipped byte */
    size_t len;
    const char *victim = path_in(dir, "a/1/2/0");
    uint8_t *orig = slurp(victim, &len);
    CHECK(orig != NULL && len > 10);
    FILE *f = fopen(victim, "r+b");
    fseek(f, 5, SEEK_SET);
    fputc(orig[5] ^ 0x10, f);
    fclose(f);
    r.n = 0;
    CHECK_EQ_INT(sp_zarr_verify(dir, on_report, &r, &problems, vh, NULL, msg, sizeof msg), SP_OK);
    CHECK(problems == 1 && r.n == 1 && strcmp(r.path[0], "a/1/2/0") == 0 &&
          strcmp(r.problem[0], "changed") == 0);
    /* put it back, delete another */
    f = fopen(victim, "wb");
    fwrite(orig, 1, len, f);
    fclose(f);
    free(orig);
    CHECK_EQ_INT(unlink(path_in(dir, "f/3/2")), 0);
    r.n = 0;
    CHECK_EQ_INT(sp_zarr_verify(dir, on_report, &r, &problems, vh, NULL, msg, sizeof msg), SP_OK);
    CHECK(problems == 1 && r.n == 1 && strcmp(r.path[0], "f/3/2") == 0 &&
          strcmp(r.problem[0], "missing") == 0);
    CHECK_EQ_INT(sp_zarr_verify(dir, NULL, NULL, &problems, NULL, NULL, msg, sizeof msg), SP_OK);
    CHECK(problems == 1);

    /* a manifest edited to point outside: refused, no file opened */
    char mpath[400];
    snprintf(mpath, sizeof mpath, "%s", path_in(dir, SP_ZARR_MANIFEST));
    uint8_t *manifest = slurp(mpath, &len);
    const char *bad_lines[] = {
        "0000000000000000000000000000000000000000000000000000000000000000  ../x\n",
        "0000000000000000000000000000000000000000000000000000000000000000  /etc/passwd\n",
        "0000000000000000000000000000000000000000000000000000000000000000  a/../../x\n",
        "0000000000000000000000000000000000000000000000000000000000000000 a/1/2/0\n",
        "000000000000000000000000000000000000000000000000000000000000000G  a/1/2/0\n",
        "0000000000000000000000000000000000000000000000000000000000000000  a//b\n",
        "0000000000000000000000000000000000000000000000000000000000000000  a/1/2/0",
        "short\n",
    };
    for (size_t i = 0; i < sizeof bad_lines / sizeof *bad_lines; i++) {
        f = fopen(mpath, "wb");
        fwrite(manifest, 1, len, f);
        fputs(bad_lines[i], f);
        fclose(f);
        r.n = 0;
        msg[0] = '\0';
        CHECK_EQ_INT(sp_zarr_verify(dir, on_report, &r, &problems, vh, NULL, msg, sizeof msg),
                     SP_E_CORRUPT);
        CHECK(r.n == 0 && problems == 0 && strstr(msg, "manifest line") != NULL);
    }
    /* a manifest that parses but is not the one the marker vouches for */
    manifest[0] = manifest[0] == '0' ? '1' : '0'; /* the first file's recorded hash */
    f = fopen(mpath, "wb");
    fwrite(manifest, 1, len, f);
    fclose(f);
    r.n = 0;
    CHECK_EQ_INT(sp_zarr_verify(dir, on_report, &r, &problems, vh, NULL, msg, sizeof msg), SP_OK);
    /* the manifest, its first file (.zgroup) and the deleted chunk */
    CHECK(problems == 3 && r.n == 3 && strcmp(r.path[0], SP_ZARR_MANIFEST) == 0 &&
          strcmp(r.path[1], ".zgroup") == 0 && strcmp(r.problem[1], "changed") == 0);
    free(manifest);

    /* no marker: an interrupted conversion */
    CHECK_EQ_INT(unlink(path_in(dir, SP_ZARR_COMPLETE)), 0);
    CHECK_EQ_INT(sp_zarr_verify(dir, NULL, NULL, &problems, NULL, NULL, msg, sizeof msg), SP_E_CORRUPT);
    CHECK(strstr(msg, "no manifest") != NULL);
    CHECK_EQ_INT(sp_zarr_verify(NULL, NULL, NULL, &problems, NULL, NULL, msg, sizeof msg),
                 SP_E_INVALID_ARG);
}

static void test_misuse(void) {
    char dir[300];
    snprintf(dir, sizeof dir, "%s/misuse", workdir);
    sp_zarr_store *s = NULL;
    sp_err e = {0};
    CHECK_EQ_INT(sp_zarr_store_open(dir, false, &s, &e), SP_OK);
    test_layout l = {3, true, SP_ZARR_CODEC_ZSTD};
    sp_zarr_array_spec spec;
    spec_a(&l, &spec);
    sp_zarr_array *a = NULL, *b = NULL;
    CHECK_EQ_INT(sp_zarr_array_create(s, "0", &spec, &a, &e), SP_OK);
    sp_err_clear(&e);
    CHECK_EQ_INT(sp_zarr_array_create(s, "0", &spec, &b, &e), SP_E_INVALID_ARG);
    sp_err_clear(&e);
    CHECK_EQ_INT(sp_zarr_array_create(s, "../up", &spec, &b, &e), SP_E_INVALID_ARG);
    sp_err_clear(&e);
    sp_zarr_array_spec bad = spec;
    bad.shard[1] = 48; /* not a multiple of 32 */
    CHECK_EQ_INT(sp_zarr_array_create(s, "bad", &bad, &b, &e), SP_E_INVALID_ARG);
    sp_err_clear(&e);
    bad = spec;
    bad.zarr_version = 2; /* sharding is v3 only */
    CHECK_EQ_INT(sp_zarr_array_create(s, "bad", &bad, &b, &e), SP_E_INVALID_ARG);
    sp_err_clear(&e);
    bad = spec;
    bad.level = 30;
    CHECK_EQ_INT(sp_zarr_array_create(s, "bad", &bad, &b, &e), SP_E_INVALID_ARG);
    sp_err_clear(&e);
    CHECK(b == NULL);
    int64_t idx[3] = {0, 0, 0};
    void *chunk = make_chunk(&spec, idx);
    CHECK_EQ_INT(sp_zarr_array_write_chunk(a, idx, chunk, &e), SP_OK);
    CHECK_EQ_INT(sp_zarr_array_write_chunk(a, idx, chunk, &e), SP_E_INVALID_ARG);
    CHECK(strstr(e.msg, "twice") != NULL);
    sp_err_clear(&e);
    int64_t out[3] = {0, 4, 0};
    CHECK_EQ_INT(sp_zarr_array_write_chunk(a, out, chunk, &e), SP_E_INVALID_ARG);
    sp_err_clear(&e);
    CHECK_EQ_INT(sp_zarr_store_write_json(s, "../x", "{}", &e), SP_E_INVALID_ARG);
    sp_err_clear(&e);
    CHECK_EQ_INT(sp_zarr_store_write_json(s, SP_ZARR_COMPLETE, "{}", &e), SP_E_INVALID_ARG);
    sp_err_clear(&e);
    free(chunk);
    /* finishing with chunks missing is refused, and no marker appears */
    char hash[65] = "x";
    CHECK_EQ_INT(sp_zarr_store_finish(s, hash, &e), SP_E_INVALID_ARG);
    CHECK(hash[0] == '\0' && strstr(e.msg, "not written") != NULL);
    struct stat sb;
    CHECK(stat(path_in(dir, SP_ZARR_COMPLETE), &sb) != 0);
    sp_zarr_store_abort(NULL);
    /* a path that is a file, or below one */
    FILE *f = fopen(path_in(dir, "plain"), "w");
    fclose(f);
    sp_err_clear(&e);
    CHECK_EQ_INT(sp_zarr_store_open(path_in(dir, "plain"), true, &s, &e), SP_E_INVALID_ARG);
    CHECK(s == NULL && strstr(e.msg, "not a folder") != NULL);
    sp_err_clear(&e);
    CHECK_EQ_INT(sp_zarr_store_open(path_in(dir, "plain/sub"), false, &s, &e), SP_E_IO);
    CHECK(s == NULL);
}

/* A write refused by the operating system (EFBIG past RLIMIT_FSIZE, with SIGXFSZ ignored, the
 * same path as ENOSPC): SP_E_IO naming the file and the reason; once the store is aborted, no
 * temporary file is left and the chunks written before the error are kept. */
static void test_write_error(void) {
    char dir[300];
    snprintf(dir, sizeof dir, "%s/efbig", workdir);
    sp_zarr_store *s = NULL;
    sp_err e = {0};
    CHECK_EQ_INT(sp_zarr_store_open(dir, false, &s, &e), SP_OK);
    sp_zarr_array_spec spec = {0};
    spec.zarr_version = 2;
    spec.ndim = 2;
    spec.shape[0] = 256, spec.shape[1] = 128;
    spec.chunks[0] = 128, spec.chunks[1] = 128;
    spec.codec = SP_ZARR_CODEC_NONE;
    sp_zarr_array *a = NULL;
    CHECK_EQ_INT(sp_zarr_array_create(s, "0", &spec, &a, &e), SP_OK);
    uint8_t *chunk = make_data(128 * 128, 0);
    int64_t i0[3] = {0, 0, 0}, i1[3] = {1, 0, 0};
    CHECK_EQ_INT(sp_zarr_array_write_chunk(a, i0, chunk, &e), SP_OK);

    struct rlimit old;
    getrlimit(RLIMIT_FSIZE, &old);
    struct rlimit small = old;
    small.rlim_cur = 4096;
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    if (setrlimit(RLIMIT_FSIZE, &small) != 0) {
        printf("note: EFBIG test skipped: setrlimit failed (%s)\n", strerror(errno));
    } else {
        sp_status st = sp_zarr_array_write_chunk(a, i1, chunk, &e);
        setrlimit(RLIMIT_FSIZE, &old);
        CHECK_EQ_INT(st, SP_E_IO);
        CHECK(strstr(e.msg, "0/1/0") != NULL && strstr(e.msg, strerror(EFBIG)) != NULL);
    }
    signal(SIGXFSZ, old_handler);
    /* Stopping after the error flushes the pending batch: the good chunk is in place, the failed
     * one is absent, and no temporary file is left. */
    sp_zarr_store_abort(s);
    struct stat sb;
    CHECK_EQ_INT(count_tmp(dir), 0);
    CHECK(stat(path_in(dir, "0/1/0"), &sb) != 0);
    CHECK(stat(path_in(dir, "0/0/0"), &sb) == 0 && sb.st_size == 128 * 128);
    free(chunk);
}

/* With SP_ZARR_COMPAT_DIR: one store per codec and format ("<codec>-v2", "<codec>-v3",
 * "<codec>-v3-shard"), each a group holding "a" and "f", for zarr-python to read. */
static void compat_stores(const char *root) {
    mkdir(root, 0777);
    for (int c = 0; c < NCODECS; c++) {
        for (int form = 0; form < 3; form++) {
            test_layout l = {form == 0 ? 2 : 3, form == 2, ALL_CODECS[c]};
            char dir[1024], h[65];
            snprintf(dir, sizeof dir, "%s/%s-%s", root, CODEC_NAMES[c],
                     form == 0   ? "v2"
                     : form == 1 ? "v3"
                                 : "v3-shard");
            rm_rf(dir);
            CHECK_EQ_INT(write_store(dir, &l, 2, true, false, 1, 0, true, h), 0);
        }
    }
    printf("compat: stores written to %s\n", root);
}

/* With SP_ZARR_DECODE_DIR: files "<codec>-<n>.bin" (codec a CODEC_NAMES entry, optionally
 * followed by "-tag") hold n bytes of the pattern byte i = (i*7 + (i>>8)*3) & 255 encoded by
 * numcodecs; each must decode here to exactly those bytes. */
static void foreign_chunks(const char *dir) {
    DIR *d = opendir(dir);
    CHECK(d != NULL);
    if (d == NULL) {
        return;
    }
    int decoded = 0;
    struct dirent *ent;
    while ((ent = readdir(d)) != NULL) {
        const char *name = ent->d_name;
        if (strstr(name, ".bin") == NULL) {
            continue;
        }
        int c = -1;
        size_t best = 0;
        for (int k = 0; k < NCODECS; k++) {
            size_t kl = strlen(CODEC_NAMES[k]);
            if (strncmp(name, CODEC_NAMES[k], kl) == 0 && name[kl] == '-' && kl > best) {
                c = k, best = kl;
            }
        }
        const char *num = strrchr(name, '-');
        CHECK(c >= 0 && num != NULL);
        if (c < 0 || num == NULL) {
            continue;
        }
        size_t n = strtoull(num + 1, NULL, 10);
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, name);
        size_t len;
        uint8_t *enc = slurp(path, &len);
        uint8_t *want = make_data(n, 2), *got = malloc(n ? n : 1);
        sp_err e = {0};
        sp_status st = sp_zarr_decode(ALL_CODECS[c], enc, len, got, n, &e);
        CHECK_EQ_INT(st, SP_OK);
        CHECK(st == SP_OK && memcmp(got, want, n) == 0);
        if (st == SP_OK && memcmp(got, want, n) == 0) {
            printf("compat: decoded %s\n", name);
            decoded++;
        } else {
            printf("compat: FAILED %s: %s\n", name, e.msg);
        }
        free(enc);
        free(want);
        free(got);
    }
    closedir(d);
    CHECK(decoded > 0);
}

void unit_run(void) {
    const char *tmp = getenv("TMPDIR");
    snprintf(workdir, sizeof workdir, "%s/sp-zarr-test-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (mkdtemp(workdir) == NULL) {
        unit_skip("cannot create a temporary folder");
        return;
    }
    test_crc32c_vector();
    test_codec_roundtrip();
    test_codec_hostile();
    test_codec_names();
    test_store_threads();
    test_shard_layout();
    test_resume();
    test_verify();
    test_misuse();
    test_write_error();
    const char *compat = getenv("SP_ZARR_COMPAT_DIR");
    if (compat != NULL && *compat) {
        compat_stores(compat);
    }
    const char *foreign = getenv("SP_ZARR_DECODE_DIR");
    if (foreign != NULL && *foreign) {
        foreign_chunks(foreign);
    }
    rm_rf(workdir);
}
