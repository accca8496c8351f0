/* zarr_store.c — writing Zarr v2 and v3 arrays into a folder (see zarr_store.h).
 *
 * Chunks arrive whole from any thread. Each is encoded, hashed and written to
 * "<final>.tmp-XXXXXX" (mkstemp, same folder) and renamed into place only after its bytes are on
 * stable storage, so a killed run or a power cut leaves either the complete chunk or nothing under
 * its final name. Chunk files are made durable in groups by a background thread
 * (durable_renames.c): one syncfs() covers every file handed over before it began, then those
 * files are renamed, while the writers go on encoding (an fsync per chunk cost more wall time than
 * encoding on a busy disk). Metadata, manifest and marker are fsync'd one by one. The store's mutex
 * guards only the shared tables (the manifest entries, the written-chunk bitmaps and the shards in
 * flight); encoding, hashing and file I/O run outside it. With sharding an encoded inner chunk
 * waits in its shard's slot until every inner chunk of that shard that lies in the array has
 * arrived, and the thread that delivers the last one assembles and writes the shard, so memory
 * holds only the shards in flight. sp_zarr_store_finish checks that every chunk was written, writes
 * the arrays' metadata, flushes the file system, then writes the manifest (sorted by path, so the
 * dataset hash is independent of thread timing) and last the completion marker.
 *
 * A store under an s3:// prefix is written the same way through S3's PUT, which stores an object
 * whole or not at all, so there is no temporary name, rename or flush: a chunk's object exists
 * complete once its PUT has returned, and the manifest and marker are still written last.
 *
 * Resume: a store reopened with resume=true keeps what is there. A chunk or shard whose final
 * file exists is not encoded again; its bytes are read back and hashed. Stale temporary files of
 * a killed run are removed when the store is opened. Resuming a store that was completed removes
 * its completion marker and manifest first and then proceeds as for an interrupted one, so the
 * result is rewritten (identically, given the same input and options).
 */
#define _GNU_SOURCE /* syncfs */
#include "base/strings.h"
#include "zarr/zarr_store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "base/limits.h"
#include "io/durable_renames.h"
#include "io/file_target.h"
#include "io/s3.h"
#include "io/source.h"
#include "io/store.h"
#include "zarr/zarr_codec.h"

/* Bitmaps of written chunks cost one bit per chunk; this bounds them to 256 MiB. */
#define MAX_CHUNKS_PER_ARRAY ((int64_t)1 << 31)
/* A chunk (inner chunk when sharded) is encoded in one buffer; blosc 1 caps it near 2 GiB. */
#define MAX_CHUNK_BYTES ((uint64_t)1 << 30)
/* Deepest folder nesting the stale-file sweep descends. */
#define MAX_SWEEP_DEPTH 32

typedef struct manifest_entry {
    char *path;
    char hash[65];
    uint64_t seq; /* order of recording; a path recorded twice keeps the later hash */
} manifest_entry;

typedef struct shard_state {
    struct shard_state *next; /* hash chain */
    int64_t key;              /* linear shard index */
    int64_t arrived, expected;
    uint8_t **bufs; /* encoded inner chunks, C order over the shard's inner grid */
    size_t *lens;
} shard_state;

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
    /* sharding */
    bool sharded;
    int64_t per_shard[3]; /* inner chunks per shard side */
    int64_t nshards[3];
    int64_t inner_per_shard;
    uint8_t *shard_done; /* shards written or found on disk */
    shard_state **buckets;
    size_t nbuckets, nflight;
};

struct sp_zarr_store {
    char *root;
    bool remote; /* root is an s3:// prefix */
    bool resume;
    mode_t file_mode;
    pthread_mutex_t lock;
    sp_zarr_array *arrays;
    manifest_entry *entries;
    size_t nentries, capentries;
    uint64_t seq;
    sp_durable_renames *renames; /* chunk files waiting for a flush and their rename */
};

/* ---- small helpers ------------------------------------------------------------------------ */

/* A growing text buffer for the metadata documents; `failed` sticks after an allocation failure. */
typedef struct strbuf {
    char *s;
    size_t len, cap;
    bool failed;
} strbuf;

static void sb_printf(strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void sb_printf(strbuf *b, const char *fmt, ...) {
    if (b->failed) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = true;
        return;
    }
    if (b->len + (size_t)n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + (size_t)n + 1) {
            cap *= 2;
        }
        char *s = realloc(b->s, cap);
        if (s == NULL) {
            b->failed = true;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

static void put_le64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

static bool bit_test(const uint8_t *bits, int64_t i) {
    return (bits[i >> 3] >> (i & 7)) & 1;
}

static void bit_set(uint8_t *bits, int64_t i) {
    bits[i >> 3] |= (uint8_t)(1u << (i & 7));
}

/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of the v3 shard index. */
static const uint32_t CRC32C_TABLE[256] = {
    0x00000000u, 0xf26b8303u, 0xe13b70f7u, 0x1350f3f4u, 0xc79a971fu, 0x35f1141cu, 0x26a1e7e8u,
    0xd4ca64ebu, 0x8ad958cfu, 0x78b2dbccu, 0x6be22838u, 0x9989ab3bu, 0x4d43cfd0u, 0xbf284cd3u,
    0xac78bf27u, 0x5e133c24u, 0x105ec76fu, 0xe235446cu, 0xf165b798u, 0x030e349bu, 0xd7c45070u,
    0x25afd373u, 0x36ff2087u, 0xc494a384u, 0x9a879fa0u, 0x68ec1ca3u, 0x7bbcef57u, 0x89d76c54u,
    0x5d1d08bfu, 0xaf768bbcu, 0xbc267848u, 0x4e4dfb4bu, 0x20bd8edeu, 0xd2d60dddu, 0xc186fe29u,
    0x33ed7d2au, 0xe72719c1u, 0x154c9ac2u, 0x061c6936u, 0xf477ea35u, 0xaa64d611u, 0x580f5512u,
    0x4b5fa6e6u, 0xb93425e5u, 0x6dfe410eu, 0x9f95c20du, 0x8cc531f9u, 0x7eaeb2fau, 0x30e349b1u,
    0xc288cab2u, 0xd1d83946u, 0x23b3ba45u, 0xf779deaeu, 0x05125dadu, 0x1642ae59u, 0xe4292d5au,
    0xba3a117eu, 0x4851927du, 0x5b016189u, 0xa96ae28au, 0x7da08661u, 0x8fcb0562u, 0x9c9bf696u,
    0x6ef07595u, 0x417b1dbcu, 0xb3109ebfu, 0xa0406d4bu, 0x522bee48u, 0x86e18aa3u, 0x748a09a0u,
    0x67dafa54u, 0x95b17957u, 0xcba24573u, 0x39c9c670u, 0x2a993584u, 0xd8f2b687u, 0x0c38d26cu,
    0xfe53516fu, 0xed03a29bu, 0x1f682198u, 0x5125dad3u, 0xa34e59d0u, 0xb01eaa24u, 0x42752927u,
    0x96bf4dccu, 0x64d4cecfu, 0x77843d3bu, 0x85efbe38u, 0xdbfc821cu, 0x2997011fu, 0x3ac7f2ebu,
    0xc8ac71e8u, 0x1c661503u, 0xee0d9600u, 0xfd5d65f4u, 0x0f36e6f7u, 0x61c69362u, 0x93ad1061u,
    0x80fde395u, 0x72966096u, 0xa65c047du, 0x5437877eu, 0x4767748au, 0xb50cf789u, 0xeb1fcbadu,
    0x197448aeu, 0x0a24bb5au, 0xf84f3859u, 0x2c855cb2u, 0xdeeedfb1u, 0xcdbe2c45u, 0x3fd5af46u,
    0x7198540du, 0x83f3d70eu, 0x90a324fau, 0x62c8a7f9u, 0xb602c312u, 0x44694011u, 0x5739b3e5u,
    0xa55230e6u, 0xfb410cc2u, 0x092a8fc1u, 0x1a7a7c35u, 0xe811ff36u, 0x3cdb9bddu, 0xceb018deu,
    0xdde0eb2au, 0x2f8b6829u, 0x82f63b78u, 0x709db87bu, 0x63cd4b8fu, 0x91a6c88cu, 0x456cac67u,
    0xb7072f64u, 0xa457dc90u, 0x563c5f93u, 0x082f63b7u, 0xfa44e0b4u, 0xe9141340u, 0x1b7f9043u,
    0xcfb5f4a8u, 0x3dde77abu, 0x2e8e845fu, 0xdce5075cu, 0x92a8fc17u, 0x60c37f14u, 0x73938ce0u,
    0x81f80fe3u, 0x55326b08u, 0xa759e80bu, 0xb4091bffu, 0x466298fcu, 0x1871a4d8u, 0xea1a27dbu,
    0xf94ad42fu, 0x0b21572cu, 0xdfeb33c7u, 0x2d80b0c4u, 0x3ed04330u, 0xccbbc033u, 0xa24bb5a6u,
    0x502036a5u, 0x4370c551u, 0xb11b4652u, 0x65d122b9u, 0x97baa1bau, 0x84ea524eu, 0x7681d14du,
    0x2892ed69u, 0xdaf96e6au, 0xc9a99d9eu, 0x3bc21e9du, 0xef087a76u, 0x1d63f975u, 0x0e330a81u,
    0xfc588982u, 0xb21572c9u, 0x407ef1cau, 0x532e023eu, 0xa145813du, 0x758fe5d6u, 0x87e466d5u,
    0x94b49521u, 0x66df1622u, 0x38cc2a06u, 0xcaa7a905u, 0xd9f75af1u, 0x2b9cd9f2u, 0xff56bd19u,
    0x0d3d3e1au, 0x1e6dcdeeu, 0xec064eedu, 0xc38d26c4u, 0x31e6a5c7u, 0x22b65633u, 0xd0ddd530u,
    0x0417b1dbu, 0xf67c32d8u, 0xe52cc12cu, 0x1747422fu, 0x49547e0bu, 0xbb3ffd08u, 0xa86f0efcu,
    0x5a048dffu, 0x8ecee914u, 0x7ca56a17u, 0x6ff599e3u, 0x9d9e1ae0u, 0xd3d3e1abu, 0x21b862a8u,
    0x32e8915cu, 0xc083125fu, 0x144976b4u, 0xe622f5b7u, 0xf5720643u, 0x07198540u, 0x590ab964u,
    0xab613a67u, 0xb831c993u, 0x4a5a4a90u, 0x9e902e7bu, 0x6cfbad78u, 0x7fab5e8cu, 0x8dc0dd8fu,
    0xe330a81au, 0x115b2b19u, 0x020bd8edu, 0xf0605beeu, 0x24aa3f05u, 0xd6c1bc06u, 0xc5914ff2u,
    0x37faccf1u, 0x69e9f0d5u, 0x9b8273d6u, 0x88d28022u, 0x7ab90321u, 0xae7367cau, 0x5c18e4c9u,
    0x4f48173du, 0xbd23943eu, 0xf36e6f75u, 0x0105ec76u, 0x12551f82u, 0xe03e9c81u, 0x34f4f86au,
    0xc69f7b69u, 0xd5cf889du, 0x27a40b9eu, 0x79b737bau, 0x8bdcb4b9u, 0x988c474du, 0x6ae7c44eu,
    0xbe2da0a5u, 0x4c4623a6u, 0x5f16d052u, 0xad7d5351u,
};

static uint32_t crc32c(const uint8_t *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c = CRC32C_TABLE[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    }
    return c ^ 0xFFFFFFFFu;
}

/* ---- hashing -------------------------------------------------------------------------------- */

static void hex_digest(const unsigned char *md, char *out) {
    static const char HEX[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        out[2 * i] = HEX[md[i] >> 4];
        out[2 * i + 1] = HEX[md[i] & 15];
    }
    out[64] = '\0';
}

void sp_sha256_hex(const void *data, size_t len, char *out) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    if (EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen != 32) {
        /* Only an allocation failure inside OpenSSL gets here; a hash that matches nothing
         * makes every later comparison fail loudly rather than pass. */
        memset(out, '0', 64);
        out[64] = '\0';
        return;
    }
    hex_digest(md, out);
}

sp_status sp_sha256_source(sp_source *src, char *out, sp_err *err) {
    out[0] = '\0';
    enum { BLOCK = 1 << 20 };
    const char *name = sp_source_name(src);
    uint8_t *buf = malloc(BLOCK);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    sp_status st = SP_OK;
    if (buf == NULL || ctx == NULL || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
        st = sp_err_set(err, SP_E_NOMEM, "out of memory hashing %s", name);
        goto done;
    }
    uint64_t size = sp_source_size(src);
    for (uint64_t off = 0; off < size;) {
        size_t n = size - off < BLOCK ? (size_t)(size - off) : BLOCK;
        st = sp_source_read(src, off, buf, n, err);
        if (st != SP_OK) {
            goto done;
        }
        if (EVP_DigestUpdate(ctx, buf, n) != 1) {
            st = sp_err_set(err, SP_E_NOMEM, "hashing %s failed", name);
            goto done;
        }
        off += n;
    }
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    if (EVP_DigestFinal_ex(ctx, md, &mdlen) != 1 || mdlen != 32) {
        st = sp_err_set(err, SP_E_NOMEM, "hashing %s failed", name);
        goto done;
    }
    hex_digest(md, out);
done:
    EVP_MD_CTX_free(ctx);
    free(buf);
    return st;
}

/* ---- paths and files ------------------------------------------------------------------------ */

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

/* mkdir every folder on the way to `full` below the root, accepting ones that exist, so that
 * threads creating the same folder at once all succeed. */
static sp_status make_parents(const sp_zarr_store *s, char *full, sp_err *err) {
    size_t root_len = strlen(s->root);
    for (char *c = full + root_len + 1; *c; c++) {
        if (*c != '/') {
            continue;
        }
        *c = '\0';
        int r = mkdir(full, 0777);
        int e = errno;
        *c = '/';
        if (r != 0 && e != EEXIST) {
            *c = '\0';
            sp_err_set(err, SP_E_IO, "cannot create folder %s: %s", full, strerror(e));
            *c = '/';
            return SP_E_IO;
        }
    }
    return SP_OK;
}

static sp_status fsync_dir(const char *path, sp_err *err) {
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        return sp_err_set(err, SP_E_IO, "cannot open folder %s: %s", path, strerror(errno));
    }
    int r = fsync(fd);
    int e = errno;
    close(fd);
    /* Some file systems cannot fsync a folder; that is not a failure of the write. */
    if (r != 0 && e != EINVAL && e != EROFS) {
        return sp_err_set(err, SP_E_IO, "cannot flush folder %s: %s", path, strerror(e));
    }
    return SP_OK;
}

/* A file's content as consecutive pieces, so that a shard is written from its inner chunks
 * without first being copied into one buffer. */
typedef sp_bytes piece;

static void sha256_pieces(const piece *pieces, size_t npieces, char *hash, bool *ok);

/* PUT the pieces as object root/relpath of a remote store; `hash` is their SHA-256 (NULL: computed
 * here), which S3 checks against what arrives. */
static sp_status put_object(sp_zarr_store *s, const char *relpath, const piece *pieces,
                            size_t npieces, const char *hash, sp_err *err) {
    char own[65];
    if (hash == NULL) {
        bool ok;
        sha256_pieces(pieces, npieces, own, &ok);
        if (!ok) {
            return sp_err_set(err, SP_E_NOMEM, "hashing %s failed", relpath);
        }
        hash = own;
    }
    char *uri = sp_strdup_printf("%s/%s", s->root, relpath);
    if (uri == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory writing %s", relpath);
    }
    sp_status st = sp_s3_put(uri, pieces, npieces, hash, err);
    free(uri);
    return st;
}

/* Write the pieces to root/relpath through a temporary file in the same folder. Immediate: fsync
 * and rename now. Batched: hand the temporary file to the durable renames, which rename it after
 * its batch's flush. On failure the temporary file is removed and the final name untouched. */
static sp_status write_atomic(sp_zarr_store *s, const char *relpath, const piece *pieces,
                              size_t npieces, bool batched, sp_err *err) {
    if (s->remote) {
        return put_object(s, relpath, pieces, npieces, NULL, err);
    }
    char *full = sp_strdup_printf("%s/%s", s->root, relpath);
    char *tmp = sp_strdup_printf("%s/%s.tmp-XXXXXX", s->root, relpath);
    sp_status st = SP_OK;
    int fd = -1;
    if (full == NULL || tmp == NULL) {
        st = sp_err_set(err, SP_E_NOMEM, "out of memory writing %s", relpath);
        goto done;
    }
    size_t tmp_len = strlen(tmp);
    fd = mkstemp(tmp);
    if (fd < 0 && errno == ENOENT) {
        st = make_parents(s, full, err);
        if (st != SP_OK) {
            goto done;
        }
        memcpy(tmp + tmp_len - 6, "XXXXXX", 6);
        fd = mkstemp(tmp);
    }
    if (fd < 0) {
        st = sp_err_set(err, SP_E_IO, "cannot create %s: %s", tmp, strerror(errno));
        goto done;
    }
    if (fchmod(fd, s->file_mode) != 0) {
        st = sp_err_set(err, SP_E_IO, "cannot write %s: %s", full, strerror(errno));
        goto fail;
    }
    for (size_t i = 0; i < npieces; i++) {
        const uint8_t *p = pieces[i].data;
        for (size_t off = 0; off < pieces[i].len;) {
            ssize_t n = write(fd, p + off, pieces[i].len - off);
            if (n < 0) {
                if (errno == EINTR) {
                    continue;
                }
                st = sp_err_set(err, SP_E_IO, "cannot write %s: %s", full, strerror(errno));
                goto fail;
            }
            off += (size_t)n;
        }
    }
    if (!batched && fsync(fd) != 0) {
        st = sp_err_set(err, SP_E_IO, "cannot write %s: %s", full, strerror(errno));
        goto fail;
    }
    int r = close(fd);
    fd = -1;
    if (r != 0) {
        st = sp_err_set(err, SP_E_IO, "cannot write %s: %s", full, strerror(errno));
        goto fail;
    }
    if (batched) {
        st = sp_durable_renames_add(s->renames, tmp, full, err); /* takes both names */
        tmp = full = NULL;
        goto done;
    }
    if (rename(tmp, full) != 0) {
        st = sp_err_set(err, SP_E_IO, "cannot rename %s to %s: %s", tmp, full, strerror(errno));
        goto fail;
    }
    goto done;
fail:
    if (fd >= 0) {
        close(fd);
    }
    unlink(tmp);
done:
    free(full);
    free(tmp);
    return st;
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

/* Hash, write atomically (a chunk or shard in a durability batch, anything else at once) and
 * record. */
static void sha256_pieces(const piece *pieces, size_t npieces, char *hash, bool *ok) {
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    *ok = ctx != NULL && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1;
    for (size_t i = 0; *ok && i < npieces; i++) {
        *ok = EVP_DigestUpdate(ctx, pieces[i].data, pieces[i].len) == 1;
    }
    *ok = *ok && EVP_DigestFinal_ex(ctx, md, &mdlen) == 1 && mdlen == 32;
    EVP_MD_CTX_free(ctx);
    if (*ok) {
        hex_digest(md, hash);
    }
}

static sp_status put_pieces(sp_zarr_store *s, const char *relpath, const piece *pieces,
                            size_t npieces, bool batched, sp_err *err) {
    char hash[65];
    bool ok;
    sha256_pieces(pieces, npieces, hash, &ok);
    if (!ok) {
        return sp_err_set(err, SP_E_NOMEM, "hashing %s failed", relpath);
    }
    sp_status st = s->remote ? put_object(s, relpath, pieces, npieces, hash, err)
                             : write_atomic(s, relpath, pieces, npieces, batched, err);
    if (st == SP_OK) {
        st = record(s, relpath, hash, err);
    }
    return st;
}

static sp_status put_file(sp_zarr_store *s, const char *relpath, const void *data, size_t len,
                          bool batched, sp_err *err) {
    piece one = {data, len};
    return put_pieces(s, relpath, &one, 1, batched, err);
}

/* In resume mode: if root/relpath exists (a regular file, or a remote object), hash and record it
 * and set *found. */
static sp_status adopt_existing(sp_zarr_store *s, const char *relpath, bool *found, sp_err *err) {
    *found = false;
    char *full = sp_strdup_printf("%s/%s", s->root, relpath);
    if (full == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory");
    }
    struct stat info;
    sp_status rc = SP_OK;
    if (s->remote || (stat(full, &info) == 0 && S_ISREG(info.st_mode))) {
        sp_source *src = NULL;
        bool missing = false;
        char hash[65];
        rc = sp_store_open(full, 0, &src, &missing, err);
        if (rc == SP_OK && !missing) {
            rc = sp_sha256_source(src, hash, err);
            if (rc == SP_OK) {
                rc = record(s, relpath, hash, err);
                *found = rc == SP_OK;
            }
        }
        sp_source_close(src);
    }
    free(full);
    return rc;
}

/* Remove "*.tmp-XXXXXX" files that a killed run left, in `dirfd` and below. */
static bool is_stale_tmp(const char *name) {
    size_t n = strlen(name);
    if (n < 12 || memcmp(name + n - 11, ".tmp-", 5) != 0) {
        return false;
    }
    for (size_t i = n - 6; i < n; i++) {
        char c = name[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) {
            return false;
        }
    }
    return true;
}

static sp_status sweep_tmp(int dirfd, const char *where, int depth, sp_err *err) {
    if (depth > MAX_SWEEP_DEPTH) {
        close(dirfd);
        return sp_err_set(err, SP_E_IO, "%s: folders nested too deep", where);
    }
    DIR *d = fdopendir(dirfd);
    if (d == NULL) {
        close(dirfd);
        return sp_err_set(err, SP_E_IO, "cannot list %s: %s", where, strerror(errno));
    }
    sp_status st = SP_OK;
    struct dirent *ent;
    while (st == SP_OK && (errno = 0, ent = readdir(d)) != NULL) {
        const char *name = ent->d_name;
        if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
            continue;
        }
        struct stat sb;
        if (fstatat(dirfd, name, &sb, AT_SYMLINK_NOFOLLOW) != 0) {
            continue; /* vanished meanwhile */
        }
        if (S_ISDIR(sb.st_mode)) {
            int sub = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub < 0) {
                st =
                    sp_err_set(err, SP_E_IO, "cannot open %s/%s: %s", where, name, strerror(errno));
                break;
            }
            char *path = sp_strdup_printf("%s/%s", where, name);
            if (path == NULL) {
                close(sub);
                st = sp_err_set(err, SP_E_NOMEM, "out of memory");
                break;
            }
            st = sweep_tmp(sub, path, depth + 1, err);
            free(path);
        } else if (S_ISREG(sb.st_mode) && is_stale_tmp(name)) {
            if (unlinkat(dirfd, name, 0) != 0 && errno != ENOENT) {
                st = sp_err_set(err, SP_E_IO, "cannot remove %s/%s: %s", where, name,
                                strerror(errno));
            }
        }
    }
    if (st == SP_OK && errno != 0) {
        st = sp_err_set(err, SP_E_IO, "cannot list %s: %s", where, strerror(errno));
    }
    closedir(d);
    return st;
}

static sp_status mkdir_p(char *path, sp_err *err) {
    for (char *c = path + 1;; c++) {
        if (*c != '/' && *c != '\0') {
            continue;
        }
        char saved = *c;
        *c = '\0';
        int r = mkdir(path, 0777);
        int e = errno;
        *c = saved;
        if (r != 0 && e != EEXIST) {
            return sp_err_set(err, SP_E_IO, "cannot create folder %s: %s", path, strerror(e));
        }
        if (saved == '\0') {
            return SP_OK;
        }
    }
}

static sp_status remove_if_present(const sp_zarr_store *s, const char *name, sp_err *err) {
    char *p = sp_strdup_printf("%s/%s", s->root, name);
    if (p == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory");
    }
    sp_status st = SP_OK;
    if (s->remote) {
        st = sp_s3_delete(p, err);
    } else if (unlink(p) != 0 && errno != ENOENT) {
        st = sp_err_set(err, SP_E_IO, "cannot remove %s: %s", p, strerror(errno));
    }
    free(p);
    return st;
}

/* ---- store ---------------------------------------------------------------------------------- */

static void free_shard(shard_state *sh, int64_t n) {
    if (sh == NULL) {
        return;
    }
    if (sh->bufs != NULL) {
        for (int64_t i = 0; i < n; i++) {
            free(sh->bufs[i]);
        }
    }
    free(sh->bufs);
    free(sh->lens);
    free(sh);
}

static void free_array(sp_zarr_array *a) {
    for (size_t b = 0; b < a->nbuckets; b++) {
        for (shard_state *sh = a->buckets[b], *next; sh != NULL; sh = next) {
            next = sh->next;
            free_shard(sh, a->inner_per_shard);
        }
    }
    free(a->buckets);
    free(a->chunk_done);
    free(a->shard_done);
    for (int d = 0; d < 3; d++) {
        free(a->dim_names[d]);
    }
    free(a->name);
    free(a);
}

static void free_store(sp_zarr_store *s) {
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
    sp_durable_renames_destroy(s->renames, false); /* never flushed: not part of the store */
    pthread_mutex_destroy(&s->lock);
    free(s->root);
    free(s);
}

void sp_zarr_store_abort(sp_zarr_store *store) {
    if (store != NULL && store->renames != NULL) {
        sp_err ignored = {0};
        /* keep what was written before the error */
        sp_durable_renames_drain(store->renames, &ignored);
    }
    free_store(store);
}

/* Open an s3:// prefix for writing. S3 cannot say cheaply whether a prefix is empty, so without
 * resume the names a store (or an interrupted conversion) is known by must be absent; with resume
 * the marker and then the manifest are deleted, as in a folder. */
static sp_status open_remote(sp_zarr_store *s, sp_err *err) {
    if (strncmp(s->root, "s3://", 5) != 0) {
        return sp_err_set(err, SP_E_INVALID_ARG,
                          "%s: stores are written to a folder or an s3:// prefix; http(s) URLs "
                          "are read-only",
                          s->root);
    }
    s->remote = true;
    char *probe = sp_strdup_printf("%s/%s", s->root, SP_ZARR_COMPLETE);
    sp_s3_target t;
    sp_status st = probe != NULL ? sp_s3_target_resolve(probe, &t, err)
                                 : sp_err_set(err, SP_E_NOMEM, "out of memory");
    free(probe);
    if (st != SP_OK) {
        return st;
    }
    sp_s3_target_clear(&t);
    if (s->resume) {
        st = remove_if_present(s, SP_ZARR_COMPLETE, err);
        return st == SP_OK ? remove_if_present(s, SP_ZARR_MANIFEST, err) : st;
    }
    static const char *const taken[] = {SP_ZARR_COMPLETE, SP_ZARR_MANIFEST, ".zgroup", "zarr.json",
                                        "slidepipe-convert.json"};
    for (size_t i = 0; i < sizeof taken / sizeof *taken; i++) {
        if (sp_store_has_file(s->root, taken[i])) {
            return sp_err_set(err, SP_E_INVALID_ARG,
                              "%s already holds a store (%s; use --resume to complete it)", s->root,
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
    sp_status st = SP_OK;
    s->root = strdup(path);
    if (s->root == NULL) {
        st = sp_err_set(err, SP_E_NOMEM, "out of memory");
        goto fail;
    }
    for (size_t n = strlen(s->root); n > 1 && s->root[n - 1] == '/'; n--) {
        s->root[n - 1] = '\0';
    }
    s->resume = resume;
    s->file_mode = (mode_t)sp_file_default_mode();
    if (sp_store_is_remote(s->root)) {
        st = open_remote(s, err);
        if (st != SP_OK) {
            goto fail;
        }
        *out = s;
        return SP_OK;
    }
    st = sp_durable_renames_create(s->root, &s->renames, err);
    if (st != SP_OK) {
        goto fail;
    }

    struct stat sb;
    if (stat(s->root, &sb) == 0) {
        if (!S_ISDIR(sb.st_mode)) {
            st = sp_err_set(err, SP_E_INVALID_ARG, "%s exists and is not a folder", s->root);
            goto fail;
        }
        if (!resume) {
            DIR *d = opendir(s->root);
            if (d == NULL) {
                st = sp_err_set(err, SP_E_IO, "cannot list %s: %s", s->root, strerror(errno));
                goto fail;
            }
            bool empty = true;
            struct dirent *ent;
            while ((ent = readdir(d)) != NULL) {
                if (strcmp(ent->d_name, ".") != 0 && strcmp(ent->d_name, "..") != 0) {
                    empty = false;
                    break;
                }
            }
            closedir(d);
            if (!empty) {
                st = sp_err_set(err, SP_E_INVALID_ARG, "%s exists (use --resume to complete it)",
                                s->root);
                goto fail;
            }
        }
    } else if (errno == ENOENT) {
        st = mkdir_p(s->root, err);
        if (st != SP_OK) {
            goto fail;
        }
    } else {
        st = sp_err_set(err, SP_E_IO, "cannot open %s: %s", s->root, strerror(errno));
        goto fail;
    }

    if (resume) {
        /* The marker goes first: a store must never claim completeness while being rewritten. */
        st = remove_if_present(s, SP_ZARR_COMPLETE, err);
        if (st == SP_OK) {
            st = remove_if_present(s, SP_ZARR_MANIFEST, err);
        }
        if (st != SP_OK) {
            goto fail;
        }
        int fd = open(s->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
            st = sp_err_set(err, SP_E_IO, "cannot open %s: %s", s->root, strerror(errno));
            goto fail;
        }
        st = sweep_tmp(fd, s->root, 0, err);
        if (st != SP_OK) {
            goto fail;
        }
    }
    *out = s;
    return SP_OK;
fail:
    free_store(s);
    return st;
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
    bool any_shard = false;
    for (int d = 0; d < spec->ndim; d++) {
        any_shard |= spec->shard[d] != 0;
    }
    a->sharded = any_shard;
    if (a->sharded && spec->zarr_version != 3) {
        st = sp_err_set(err, SP_E_INVALID_ARG, "Zarr array %s: sharding needs Zarr v3", name);
        goto fail;
    }
    uint64_t chunk_elems = 1, total = 1, shards_total = 1, inner = 1;
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
        if (a->sharded) {
            int64_t sd = spec->shard[d];
            if (sd < ch || sd % ch != 0) {
                st = sp_err_set(err, SP_E_INVALID_ARG,
                                "Zarr array %s: shard %lld is not a multiple of chunk %lld", name,
                                (long long)sd, (long long)ch);
                goto fail;
            }
            a->per_shard[d] = sd / ch;
            a->nshards[d] = (a->nchunks[d] + a->per_shard[d] - 1) / a->per_shard[d];
            if (!sp_mul_u64(inner, (uint64_t)a->per_shard[d], &inner)) {
                st = sp_err_set(err, SP_E_LIMIT, "Zarr array %s: shard too large", name);
                goto fail;
            }
            shards_total *= (uint64_t)a->nshards[d];
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
    a->inner_per_shard = a->sharded ? (int64_t)inner : 1;
    a->name = strdup(name);
    a->chunk_done = calloc((size_t)(total + 7) / 8, 1);
    if (a->name == NULL || a->chunk_done == NULL) {
        st = sp_err_set(err, SP_E_NOMEM, "out of memory");
        goto fail;
    }
    if (a->sharded) {
        a->shard_done = calloc((size_t)(shards_total + 7) / 8, 1);
        a->nbuckets = 64;
        a->buckets = calloc(a->nbuckets, sizeof *a->buckets);
        if (a->shard_done == NULL || a->buckets == NULL) {
            st = sp_err_set(err, SP_E_NOMEM, "out of memory");
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

/* Shard layout: the inner chunks present, in C order of their slot, then the index of
 * (offset, nbytes) little-endian uint64 pairs, all-ones for an absent slot, then the index's
 * CRC-32C (index_location "end", index_codecs bytes + crc32c). Written from the chunk buffers
 * and a small index buffer, never copied into one shard-sized buffer. */
static sp_status write_shard(sp_zarr_array *a, const int64_t *shard_coord, shard_state *sh,
                             sp_err *err) {
    int64_t n = a->inner_per_shard;
    size_t index_bytes = (size_t)n * 16;
    uint8_t *index = malloc(index_bytes + 4);
    piece *pieces = malloc(sizeof *pieces * ((size_t)n + 1));
    char *rel = key_path(a, shard_coord);
    sp_status st = SP_OK;
    if (index == NULL || pieces == NULL || rel == NULL) {
        st = sp_err_set(err, SP_E_NOMEM, "out of memory writing a shard");
        goto done;
    }
    uint64_t off = 0;
    size_t np = 0;
    for (int64_t i = 0; i < n; i++) {
        if (sh->bufs[i] != NULL) {
            pieces[np++] = (piece){sh->bufs[i], sh->lens[i]};
            put_le64(index + 16 * i, off);
            put_le64(index + 16 * i + 8, sh->lens[i]);
            off += sh->lens[i];
        } else {
            put_le64(index + 16 * i, UINT64_MAX);
            put_le64(index + 16 * i + 8, UINT64_MAX);
        }
    }
    uint32_t crc = crc32c(index, index_bytes);
    for (int k = 0; k < 4; k++) {
        index[index_bytes + (size_t)k] = (uint8_t)(crc >> (8 * k));
    }
    pieces[np++] = (piece){index, index_bytes + 4};
    st = put_pieces(a->store, rel, pieces, np, true, err);
done:
    free(pieces);
    free(index);
    free(rel);
    return st;
}

static shard_state **shard_slot(sp_zarr_array *a, int64_t key) {
    uint64_t h = (uint64_t)key * 0x9E3779B97F4A7C15u;
    shard_state **p = &a->buckets[(h >> 32) & (a->nbuckets - 1)];
    while (*p != NULL && (*p)->key != key) {
        p = &(*p)->next;
    }
    return p;
}

/* Double the bucket table when the shards in flight outnumber it (under the lock). Failure to
 * grow only makes chains longer, so it is not an error. */
static void maybe_grow(sp_zarr_array *a) {
    if (a->nflight <= a->nbuckets) {
        return;
    }
    size_t nb = a->nbuckets * 2;
    shard_state **b = calloc(nb, sizeof *b);
    if (b == NULL) {
        return;
    }
    shard_state **old = a->buckets;
    size_t oldn = a->nbuckets;
    a->buckets = b;
    a->nbuckets = nb;
    for (size_t i = 0; i < oldn; i++) {
        for (shard_state *sh = old[i], *next; sh != NULL; sh = next) {
            next = sh->next;
            shard_state **p = shard_slot(a, sh->key);
            sh->next = NULL;
            *p = sh;
        }
    }
    free(old);
}

static sp_status write_sharded(sp_zarr_array *a, const int64_t *index, const void *data,
                               sp_err *err) {
    sp_zarr_store *s = a->store;
    int nd = a->spec.ndim;
    int64_t scoord[3] = {0, 0, 0};
    int64_t skey = 0, slot = 0, expected = 1;
    for (int d = 0; d < nd; d++) {
        scoord[d] = index[d] / a->per_shard[d];
        skey = skey * a->nshards[d] + scoord[d];
        slot = slot * a->per_shard[d] + index[d] % a->per_shard[d];
        int64_t left = a->nchunks[d] - scoord[d] * a->per_shard[d];
        expected *= left < a->per_shard[d] ? left : a->per_shard[d];
    }
    pthread_mutex_lock(&s->lock);
    bool done = bit_test(a->shard_done, skey);
    bool flying = *shard_slot(a, skey) != NULL;
    pthread_mutex_unlock(&s->lock);
    if (done) {
        return SP_OK; /* found complete on disk when resuming */
    }
    sp_status st = SP_OK;
    if (s->resume && !flying) {
        char *rel = key_path(a, scoord);
        if (rel == NULL) {
            return sp_err_set(err, SP_E_NOMEM, "out of memory");
        }
        char *full = sp_strdup_printf("%s/%s", s->root, rel);
        struct stat sb;
        bool exists = full != NULL && stat(full, &sb) == 0 && S_ISREG(sb.st_mode);
        free(full);
        if (exists) {
            /* Only the first thread to see it hashes it; the others drop their chunk. */
            pthread_mutex_lock(&s->lock);
            bool claim = !bit_test(a->shard_done, skey) && *shard_slot(a, skey) == NULL;
            if (claim) {
                bit_set(a->shard_done, skey);
            }
            pthread_mutex_unlock(&s->lock);
            if (claim) {
                bool found;
                st = adopt_existing(s, rel, &found, err);
            }
            free(rel);
            return st;
        }
        free(rel);
    }

    uint8_t *enc = NULL;
    size_t enc_len = 0;
    st = sp_zarr_encode(a->spec.codec, a->spec.level, a->typesize, data, a->chunk_bytes, &enc,
                        &enc_len, err);
    if (st != SP_OK) {
        return st;
    }
    pthread_mutex_lock(&s->lock);
    shard_state **p = shard_slot(a, skey);
    shard_state *sh = *p;
    if (sh == NULL) {
        sh = calloc(1, sizeof *sh);
        if (sh != NULL) {
            sh->bufs = calloc((size_t)a->inner_per_shard, sizeof *sh->bufs);
            sh->lens = calloc((size_t)a->inner_per_shard, sizeof *sh->lens);
        }
        if (sh == NULL || sh->bufs == NULL || sh->lens == NULL) {
            pthread_mutex_unlock(&s->lock);
            free_shard(sh, 0);
            free(enc);
            return sp_err_set(err, SP_E_NOMEM, "out of memory for a shard");
        }
        sh->key = skey;
        sh->expected = expected;
        *p = sh;
        a->nflight++;
        maybe_grow(a);
    }
    sh->bufs[slot] = enc;
    sh->lens[slot] = enc_len;
    bool complete = ++sh->arrived == sh->expected;
    if (complete) {
        *shard_slot(a, skey) = sh->next; /* the table may have grown: look the slot up again */
        sh->next = NULL;
        a->nflight--;
        bit_set(a->shard_done, skey);
    }
    pthread_mutex_unlock(&s->lock);
    if (complete) {
        st = write_shard(a, scoord, sh, err);
        free_shard(sh, a->inner_per_shard);
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
    if (a->sharded) {
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
            st = put_file(s, rel, enc, enc_len, true, err);
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
    return put_file(store, relpath, json, strlen(json), false, err);
}

/* ---- finishing --------------------------------------------------------------------------------
 */

static void sb_int_list(strbuf *b, const int64_t *v, int n) {
    sb_printf(b, "[");
    for (int d = 0; d < n; d++) {
        sb_printf(b, "%s%lld", d ? ", " : "", (long long)v[d]);
    }
    sb_printf(b, "]");
}

static sp_status array_metadata(sp_zarr_array *a, sp_err *err) {
    const sp_zarr_array_spec *sp = &a->spec;
    strbuf b = {0};
    char *comp = NULL;
    if (sp->zarr_version == 2) {
        comp = sp_zarr_codec_v2_json(sp->codec, sp->level, a->typesize);
        if (comp == NULL) {
            return sp_err_set(err, SP_E_NOMEM, "out of memory");
        }
        sb_printf(&b, "{\n  \"zarr_format\": 2,\n  \"shape\": ");
        sb_int_list(&b, sp->shape, sp->ndim);
        sb_printf(&b, ",\n  \"chunks\": ");
        sb_int_list(&b, sp->chunks, sp->ndim);
        sb_printf(
            &b,
            ",\n  \"dtype\": \"%s\",\n  \"compressor\": %s,\n  \"fill_value\": 0,\n"
            "  \"order\": \"C\",\n  \"filters\": null,\n  \"dimension_separator\": \"/\"\n}\n",
            sp->dtype == SP_ZARR_F32 ? "<f4" : "|u1", comp);
    } else {
        comp = sp_zarr_codec_v3_json(sp->codec, sp->level, a->typesize);
        if (comp == NULL && sp->codec != SP_ZARR_CODEC_NONE) {
            return sp_err_set(err, SP_E_NOMEM, "out of memory");
        }
        const char *bytes = "{\"name\": \"bytes\", \"configuration\": {\"endian\": \"little\"}}";
        sb_printf(&b, "{\n  \"zarr_format\": 3,\n  \"node_type\": \"array\",\n  \"shape\": ");
        sb_int_list(&b, sp->shape, sp->ndim);
        sb_printf(&b, ",\n  \"data_type\": \"%s\",\n",
                  sp->dtype == SP_ZARR_F32 ? "float32" : "uint8");
        sb_printf(&b, "  \"chunk_grid\": {\"name\": \"regular\", \"configuration\": "
                      "{\"chunk_shape\": ");
        sb_int_list(&b, a->sharded ? sp->shard : sp->chunks, sp->ndim);
        sb_printf(&b, "}},\n  \"chunk_key_encoding\": {\"name\": \"default\", \"configuration\": "
                      "{\"separator\": \"/\"}},\n");
        sb_printf(&b, "  \"fill_value\": %s,\n  \"codecs\": [",
                  sp->dtype == SP_ZARR_F32 ? "0.0" : "0");
        if (a->sharded) {
            sb_printf(&b, "{\"name\": \"sharding_indexed\", \"configuration\": {\"chunk_shape\": ");
            sb_int_list(&b, sp->chunks, sp->ndim);
            sb_printf(&b,
                      ", \"codecs\": [%s%s%s], \"index_codecs\": [%s, {\"name\": \"crc32c\"}], "
                      "\"index_location\": \"end\"}}",
                      bytes, comp ? ", " : "", comp ? comp : "", bytes);
        } else {
            sb_printf(&b, "%s%s%s", bytes, comp ? ", " : "", comp ? comp : "");
        }
        sb_printf(&b, "],\n  \"attributes\": {}");
        bool named = false;
        for (int d = 0; d < sp->ndim; d++) {
            named |= sp->dimension_names[d] != NULL;
        }
        if (named) {
            sb_printf(&b, ",\n  \"dimension_names\": [");
            for (int d = 0; d < sp->ndim; d++) {
                const char *dn = sp->dimension_names[d];
                if (dn != NULL) {
                    sb_printf(&b, "%s\"%s\"", d ? ", " : "", dn);
                } else {
                    sb_printf(&b, "%snull", d ? ", " : "");
                }
            }
            sb_printf(&b, "]");
        }
        sb_printf(&b, "\n}\n");
    }
    free(comp);
    sp_status st;
    char *rel = NULL;
    if (b.failed) {
        st = sp_err_set(err, SP_E_NOMEM, "out of memory");
    } else {
        const char *file = sp->zarr_version == 2 ? ".zarray" : "zarr.json";
        rel = a->name[0] ? sp_strdup_printf("%s/%s", a->name, file) : strdup(file);
        st = rel ? put_file(a->store, rel, b.s, b.len, false, err)
                 : sp_err_set(err, SP_E_NOMEM, "out of memory");
    }
    free(rel);
    free(b.s);
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

sp_status sp_zarr_store_finish(sp_zarr_store *store, char *dataset_hash, sp_err *err) {
    if (dataset_hash != NULL) {
        dataset_hash[0] = '\0';
    }
    if (store == NULL) {
        return sp_err_set(err, SP_E_INVALID_ARG, "Zarr store: null");
    }
    sp_zarr_store *s = store;
    strbuf m = {0};
    sp_status st = s->renames != NULL ? sp_durable_renames_drain(s->renames, err) : SP_OK;
    /* No worker may still be writing: the caller has joined them, so no lock is needed. */
    for (sp_zarr_array *a = s->arrays; a != NULL && st == SP_OK; a = a->next) {
        if (a->written != a->total_chunks || a->nflight != 0) {
            st = sp_err_set(err, SP_E_INVALID_ARG,
                            "Zarr array %s: %lld of %lld chunks were not written", a->name,
                            (long long)(a->total_chunks - a->written), (long long)a->total_chunks);
        }
    }
    for (sp_zarr_array *a = s->arrays; a != NULL && st == SP_OK; a = a->next) {
        st = array_metadata(a, err);
    }
    if (st == SP_OK && !s->remote) {
        st = sp_sync_fs(s->root, err); /* before the manifest vouches for it */
    }
    if (st != SP_OK) {
        goto done;
    }
    qsort(s->entries, s->nentries, sizeof *s->entries, entry_cmp);
    for (size_t i = 0; i < s->nentries; i++) {
        /* a path recorded twice (metadata rewritten) keeps its latest content */
        if (i + 1 < s->nentries && strcmp(s->entries[i].path, s->entries[i + 1].path) == 0) {
            continue;
        }
        sb_printf(&m, "%s  %s\n", s->entries[i].hash, s->entries[i].path);
    }
    if (m.failed) {
        st = sp_err_set(err, SP_E_NOMEM, "out of memory for the manifest");
        goto done;
    }
    piece manifest = {m.s ? m.s : "", m.len};
    st = write_atomic(s, SP_ZARR_MANIFEST, &manifest, 1, false, err);
    if (st == SP_OK && !s->remote) {
        st = fsync_dir(s->root, err);
    }
    if (st != SP_OK) {
        goto done;
    }
    char hash[66];
    sp_sha256_hex(m.s ? m.s : "", m.len, hash);
    hash[64] = '\n';
    hash[65] = '\0';
    piece marker = {hash, 65};
    st = write_atomic(s, SP_ZARR_COMPLETE, &marker, 1, false, err);
    if (st == SP_OK && !s->remote) {
        st = fsync_dir(s->root, err);
        if (st != SP_OK) {
            /* The marker's name may not be on disk: the store must not say it is complete (a
             * resume writes it again). */
            sp_err ignored = {0};
            remove_if_present(s, SP_ZARR_COMPLETE, &ignored);
        }
    }
    if (st == SP_OK && dataset_hash != NULL) {
        memcpy(dataset_hash, hash, 64);
        dataset_hash[64] = '\0';
    }
done:
    free(m.s);
    free_store(s);
    return st;
}
