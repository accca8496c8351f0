/* sakura_svslide.c — Sakura SVSlide (`.svslide`): an SQLite database, read through libsqlite3
 * as OpenSlide 4.0.1 reads it.
 *
 * The one row of DataManagerSQLiteConfigXPO names the "unique" table of named blobs: the magic
 * "SVGigaPixelImage" (++MagicBytes), a version (++VersionBytes), a little-endian Header (tile
 * size, image width, image height) and the tiles. Each tile is stored once per colour channel as
 * a greyscale JPEG under the id "T;X|Y;DOWNSAMPLE;CHANNEL;FOCALPLANE" (X, Y: the tile's top-left
 * in level-0 pixels); slidepipe joins the three channels into RGB. As in OpenSlide, the levels
 * are the downsamples (powers of two) that tile ids of focal plane 0 name, each of the image size
 * divided by the downsample (rounded down), a regular grid of square tiles cut at the level's
 * edge; a tile with a channel missing is transparent; a malformed tile id or a downsample that
 * is not a power of two refuses the file. SVSlideDataXPO and SVHRScanDataXPO give the sakura.*
 * properties, the MPP (1000 x ResolutionMmPerPix) and the objective; SVScannedImageDataXPO holds
 * the label and macro JPEGs, SVHRScanDataXPO the thumbnail (an associated image that cannot be
 * read is left out, as in OpenSlide).
 *
 * The file is untrusted. SQLite reads it through a VFS over the slide's byte source (so every
 * read goes through src/io: local files, remote objects, memory, injected faults), read-only
 * and immutable (no locks, no journal, nothing written), with no extensions, a schema that is
 * not trusted, blobs bounded by the allocation limit and every statement bounded in steps (a
 * view or trigger cannot make a query run for ever). Each thread reading tiles takes a
 * connection from a small pool: an SQLite statement's blob stays valid only until its next step.
 */
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fill.h"
#include "codecs/codec.h"
#include "formats/format.h"

static const char SQLITE_MAGIC[16] = "SQLite format 3";
static const char SAKURA_MAGIC[] = "SVGigaPixelImage";
static const char VFS_NAME[] = "slidepipe-source";
#define HEADER_MAX 4096 /* the Header blob is 54 bytes in scanners' files */
#define TABLE_NAME_MAX 256
#define TILE_ID_MAX 128        /* 5 numbers of at most 19 digits and their separators */
#define MAX_EXPONENT 62        /* downsamples up to 2^62 */
#define PROGRESS_EVERY 1000    /* SQLite VM steps between progress callbacks */
#define PROGRESS_BUDGET 100000 /* callbacks one statement may use (10^8 steps) */

typedef struct sk_conn {
    sqlite3 *db;
    sqlite3_stmt *blob; /* SELECT data FROM <unique table> WHERE id = ? */
    sp_source *src;
    uint64_t progress;
    char io_msg[SP_ERR_MSG_MAX]; /* the byte source's message when a read failed */
    struct sk_conn *next;        /* in the pool of idle connections */
} sk_conn;

typedef struct sk_level {
    int64_t downsample;
} sk_level;

typedef struct sakura {
    char *blob_sql;
    int64_t tile;
    sk_level levels[MAX_EXPONENT + 1];
    pthread_mutex_t lock; /* guards the pool */
    bool lock_made;
    sk_conn *idle;
} sakura;

/* ---- the VFS: SQLite's reads go to the slide's byte source ---------------------------------- */

typedef struct sk_file {
    sqlite3_file base;
    sk_conn *conn;
} sk_file;

static int file_close(sqlite3_file *f) {
    (void)f;
    return SQLITE_OK;
}

static int file_read(sqlite3_file *f, void *buf, int amount, sqlite3_int64 offset) {
    sk_conn *c = ((sk_file *)f)->conn;
    uint64_t size = sp_source_size(c->src);
    if (amount < 0 || offset < 0) {
        return SQLITE_IOERR_READ;
    }
    size_t want = (size_t)amount, have = 0;
    if ((uint64_t)offset < size) {
        have = size - (uint64_t)offset < want ? (size_t)(size - (uint64_t)offset) : want;
    }
    if (have > 0) {
        sp_err err = {0};
        if (sp_source_read(c->src, (uint64_t)offset, buf, have, &err) != SP_OK) {
            snprintf(c->io_msg, sizeof c->io_msg, "%s", err.msg);
            return SQLITE_IOERR_READ;
        }
    }
    if (have < want) {
        memset((uint8_t *)buf + have, 0, want - have); /* SQLite requires the rest zeroed */
        return SQLITE_IOERR_SHORT_READ;
    }
    return SQLITE_OK;
}

static int file_write(sqlite3_file *f, const void *buf, int amount, sqlite3_int64 offset) {
    (void)f, (void)buf, (void)amount, (void)offset;
    return SQLITE_READONLY;
}

static int file_truncate(sqlite3_file *f, sqlite3_int64 size) {
    (void)f, (void)size;
    return SQLITE_READONLY;
}

static int file_sync(sqlite3_file *f, int flags) {
    (void)f, (void)flags;
    return SQLITE_OK;
}

static int file_size(sqlite3_file *f, sqlite3_int64 *size) {
    uint64_t n = sp_source_size(((sk_file *)f)->conn->src);
    *size = n > (uint64_t)INT64_MAX ? INT64_MAX : (sqlite3_int64)n;
    return SQLITE_OK;
}

static int file_lock(sqlite3_file *f, int level) {
    (void)f, (void)level;
    return SQLITE_OK; /* immutable: nobody writes, nothing to lock */
}

static int file_reserved(sqlite3_file *f, int *out) {
    (void)f;
    *out = 0;
    return SQLITE_OK;
}

static int file_control(sqlite3_file *f, int op, void *arg) {
    (void)f, (void)op, (void)arg;
    return SQLITE_NOTFOUND;
}

static int file_sector(sqlite3_file *f) {
    (void)f;
    return 4096;
}

static int file_caps(sqlite3_file *f) {
    (void)f;
    return SQLITE_IOCAP_IMMUTABLE;
}

static const sqlite3_io_methods FILE_METHODS = {
    .iVersion = 1,
    .xClose = file_close,
    .xRead = file_read,
    .xWrite = file_write,
    .xTruncate = file_truncate,
    .xSync = file_sync,
    .xFileSize = file_size,
    .xLock = file_lock,
    .xUnlock = file_lock,
    .xCheckReservedLock = file_reserved,
    .xFileControl = file_control,
    .xSectorSize = file_sector,
    .xDeviceCharacteristics = file_caps,
};

/* Only the main database opens, and only through conn_open, which names its connection in the
 * URI parameter "conn"; journals, temporary files and anything else are refused. */
static int vfs_open(sqlite3_vfs *vfs, sqlite3_filename name, sqlite3_file *f, int flags,
                    int *out_flags) {
    (void)vfs;
    sk_file *file = (sk_file *)f;
    file->base.pMethods = NULL;
    void *conn = NULL;
    const char *p = name != NULL ? sqlite3_uri_parameter(name, "conn") : NULL;
    if (!(flags & SQLITE_OPEN_MAIN_DB) || p == NULL || sscanf(p, "%p", &conn) != 1 ||
        conn == NULL) {
        return SQLITE_CANTOPEN;
    }
    file->conn = conn;
    file->base.pMethods = &FILE_METHODS;
    if (out_flags != NULL) {
        *out_flags = SQLITE_OPEN_READONLY;
    }
    return SQLITE_OK;
}

static int vfs_delete(sqlite3_vfs *vfs, const char *name, int sync) {
    (void)vfs, (void)name, (void)sync;
    return SQLITE_IOERR_DELETE;
}

static int vfs_access(sqlite3_vfs *vfs, const char *name, int flags, int *out) {
    (void)vfs, (void)name, (void)flags;
    *out = 0; /* no journal, no WAL beside it */
    return SQLITE_OK;
}

static int vfs_full_path(sqlite3_vfs *vfs, const char *name, int n, char *out) {
    (void)vfs;
    sqlite3_snprintf(n, out, "%s", name);
    return SQLITE_OK;
}

static int vfs_randomness(sqlite3_vfs *vfs, int n, char *out) {
    (void)vfs;
    memset(out, 0, (size_t)n);
    return n;
}

static int vfs_sleep(sqlite3_vfs *vfs, int micros) {
    (void)vfs;
    return micros;
}

static int vfs_time(sqlite3_vfs *vfs, double *out) {
    (void)vfs;
    *out = 2440587.5; /* the Unix epoch as a Julian day: queries here never ask the time */
    return SQLITE_OK;
}

static int vfs_last_error(sqlite3_vfs *vfs, int n, char *out) {
    (void)vfs, (void)n, (void)out;
    return 0;
}

static sqlite3_vfs source_vfs = {
    .iVersion = 1,
    .szOsFile = sizeof(sk_file),
    .mxPathname = 512,
    .zName = VFS_NAME,
    .xOpen = vfs_open,
    .xDelete = vfs_delete,
    .xAccess = vfs_access,
    .xFullPathname = vfs_full_path,
    .xRandomness = vfs_randomness,
    .xSleep = vfs_sleep,
    .xCurrentTime = vfs_time,
    .xGetLastError = vfs_last_error,
};

static pthread_once_t vfs_once = PTHREAD_ONCE_INIT;
static int vfs_registered = SQLITE_ERROR;

static void register_vfs(void) {
    vfs_registered = sqlite3_vfs_register(&source_vfs, 0);
}

/* ---- connections ------------------------------------------------------------------------------
 */

static int on_progress(void *arg) {
    sk_conn *c = arg;
    return ++c->progress > PROGRESS_BUDGET;
}

/* The error of the last call on `c`, prefixed with what was being done. */
static sp_status db_error(sk_conn *c, const char *what, sp_err *err) {
    if (c->io_msg[0] != '\0') {
        return sp_err_set(err, SP_E_IO, "%s: %s", what, c->io_msg);
    }
    int rc = sqlite3_errcode(c->db);
    if (rc == SQLITE_INTERRUPT) {
        return sp_err_set(err, SP_E_LIMIT, "%s: the query ran past %d million SQLite steps", what,
                          PROGRESS_BUDGET / 1000 * PROGRESS_EVERY / 1000);
    }
    sp_status st = rc == SQLITE_NOMEM    ? SP_E_NOMEM
                   : rc == SQLITE_TOOBIG ? SP_E_LIMIT
                                         : SP_E_CORRUPT;
    return sp_err_set(err, st, "%s: SQLite: %s", what, sqlite3_errmsg(c->db));
}

static void conn_close(sk_conn *c) {
    if (c == NULL) {
        return;
    }
    sqlite3_finalize(c->blob);
    sqlite3_close(c->db);
    free(c);
}

/* A statement on `c`, its step budget renewed. */
static sp_status prepare(sk_conn *c, const char *sql, sqlite3_stmt **out, const char *what,
                         sp_err *err) {
    c->progress = 0;
    c->io_msg[0] = '\0';
    if (sqlite3_prepare_v2(c->db, sql, -1, out, NULL) != SQLITE_OK) {
        sqlite3_finalize(*out);
        *out = NULL;
        return db_error(c, what, err);
    }
    return SP_OK;
}

static sp_status conn_open(sp_source *src, const sp_limits *limits, const char *blob_sql,
                           sk_conn **out, sp_err *err) {
    *out = NULL;
    pthread_once(&vfs_once, register_vfs);
    if (vfs_registered != SQLITE_OK) {
        return sp_err_set(err, SP_E_IO, "cannot register the SQLite reader of byte sources");
    }
    sk_conn *c = calloc(1, sizeof *c);
    if (c == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory opening an SVSlide database");
    }
    c->src = src;
    char uri[96];
    snprintf(uri, sizeof uri, "file:svslide?mode=ro&immutable=1&conn=%p", (void *)c);
    int rc = sqlite3_open_v2(
        uri, &c->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, VFS_NAME);
    if (rc != SQLITE_OK) {
        sp_status st =
            c->db != NULL ? db_error(c, "opening the SQLite database", err)
                          : sp_err_set(err, SP_E_NOMEM, "out of memory opening an SQLite database");
        conn_close(c);
        return st;
    }
    sqlite3_db_config(c->db, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0, (int *)NULL);
    sqlite3_db_config(c->db, SQLITE_DBCONFIG_DEFENSIVE, 1, (int *)NULL);
#ifdef SQLITE_DBCONFIG_TRUSTED_SCHEMA
    sqlite3_db_config(c->db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, (int *)NULL);
#endif
    int64_t max = limits->value[SP_LIMIT_MAX_ALLOC];
    sqlite3_limit(c->db, SQLITE_LIMIT_LENGTH, max > 0x7FFFFFFF ? 0x7FFFFFFF : (int)max);
    sqlite3_limit(c->db, SQLITE_LIMIT_ATTACHED, 0);
    sqlite3_progress_handler(c->db, PROGRESS_EVERY, on_progress, c);
    if (blob_sql != NULL) {
        sp_status st = prepare(c, blob_sql, &c->blob, "reading the SVSlide's blob table", err);
        if (st != SP_OK) {
            conn_close(c);
            return st;
        }
    }
    *out = c;
    return SP_OK;
}

/* An idle connection of the slide's pool, or a new one. */
static sp_status pool_take(sp_slide *s, sk_conn **out, sp_err *err) {
    sakura *k = s->priv;
    pthread_mutex_lock(&k->lock);
    sk_conn *c = k->idle;
    if (c != NULL) {
        k->idle = c->next;
    }
    pthread_mutex_unlock(&k->lock);
    if (c != NULL) {
        *out = c;
        return SP_OK;
    }
    return conn_open(s->src, &s->limits, k->blob_sql, out, err);
}

static void pool_give(sakura *k, sk_conn *c) {
    pthread_mutex_lock(&k->lock);
    c->next = k->idle;
    k->idle = c;
    pthread_mutex_unlock(&k->lock);
}

/* Step the blob statement for `id`: *data (valid until the statement's next use) and *len, or
 * *data NULL when there is no such row. */
static sp_status fetch_blob(sk_conn *c, const char *id, const void **data, size_t *len,
                            sp_err *err) {
    *data = NULL;
    *len = 0;
    c->progress = 0;
    c->io_msg[0] = '\0';
    sqlite3_reset(c->blob);
    if (sqlite3_bind_text(c->blob, 1, id, -1, SQLITE_TRANSIENT) != SQLITE_OK) {
        return db_error(c, "looking up an SVSlide blob", err);
    }
    int rc = sqlite3_step(c->blob);
    if (rc == SQLITE_DONE) {
        return SP_OK;
    }
    if (rc != SQLITE_ROW) {
        char what[TILE_ID_MAX + 32];
        snprintf(what, sizeof what, "reading blob \"%.*s\"", TILE_ID_MAX, id);
        return db_error(c, what, err);
    }
    const void *p = sqlite3_column_blob(c->blob, 0);
    int n = sqlite3_column_bytes(c->blob, 0);
    static const uint8_t nothing[1] = {0};
    *data = p != NULL ? p : nothing; /* an empty or NULL value: a row with no bytes */
    *len = n > 0 && p != NULL ? (size_t)n : 0;
    return SP_OK;
}

/* ---- tiles ------------------------------------------------------------------------------------
 */

static bool sakura_detect(const sp_probe *p) {
    return p->tiff == NULL && p->src != NULL && p->head_len >= sizeof SQLITE_MAGIC &&
           memcmp(p->head, SQLITE_MAGIC, sizeof SQLITE_MAGIC) == 0;
}

/* Decode the area (x, y, w, h) of one channel's greyscale JPEG at 1/scale into `dst` (grey in
 * every colour byte, alpha 255 for bpp 4); the stream must be a tile x tile grey image.
 * *vw x *vh receive the decoded image's size. */
static sp_status decode_channel(const void *data, size_t len, int64_t tile, const char *id,
                                unsigned scale, int64_t x, int64_t y, int64_t w, int64_t h, int bpp,
                                uint8_t *dst, int64_t stride, uint64_t *vw, uint64_t *vh,
                                sp_err *err) {
    uint32_t iw = 0, ih = 0;
    int components = 0;
    sp_err local = {0};
    sp_status st = sp_jpeg_read_header(data, len, NULL, 0, &iw, &ih, &components, &local);
    if (st == SP_OK && (iw != (uint64_t)tile || ih != (uint64_t)tile || components != 1)) {
        return sp_err_set(err, SP_E_CORRUPT,
                          "tile \"%s\" is a %ux%u JPEG of %d components where the slide's "
                          "tiles are %lldx%lld grey",
                          id, iw, ih, components, (long long)tile, (long long)tile);
    }
    if (st == SP_OK) {
        st = sp_jpeg_decode_area(data, len, NULL, 0, SP_JPEG_SPACE_GREY, scale, (uint64_t)x,
                                 (uint64_t)y, (uint64_t)w, (uint64_t)h, (unsigned)bpp, dst,
                                 (size_t)stride, vw, vh, &local);
    }
    if (st != SP_OK) {
        return sp_err_set(err, st, "tile \"%s\": %s", id,
                          local.msg[0] ? local.msg : sp_status_str(st));
    }
    return SP_OK;
}

/* The area (x, y, w, h) of tile (col, row) decoded at 1/scale, as RGB8 or RGBA8: red decoded
 * straight into `dst` (grey gives R = G = B), green and blue through a scratch area whose first
 * byte of each pixel is copied in. A tile with a channel missing (OpenSlide shows it
 * transparent), and any part beyond the decoded tile, get `empty`. */
static sp_status sakura_read_tile_area(sp_slide *s, const sp_level *level, int64_t col, int64_t row,
                                       unsigned scale, int64_t x, int64_t y, int64_t w, int64_t h,
                                       sp_pixel_format format, uint8_t *dst, int64_t stride,
                                       const uint8_t *empty, sp_err *err) {
    sakura *k = s->priv;
    const sk_level *l = level->priv;
    const int64_t tile = k->tile;
    const int bpp = sp_pixel_format_bytes(format);
    const long long tx = (long long)(col * tile * l->downsample);
    const long long ty = (long long)(row * tile * l->downsample);
    uint8_t *plane = NULL;
    sk_conn *c = NULL;
    uint64_t vw = 0, vh = 0;
    sp_status st =
        sp_alloc(&s->limits, (uint64_t)(w * h * bpp), "an SVSlide channel", (void **)&plane, err);
    if (st == SP_OK) {
        st = pool_take(s, &c, err);
    }
    bool missing = false;
    for (int ch = 0; st == SP_OK && ch < 3; ch++) {
        char id[TILE_ID_MAX];
        snprintf(id, sizeof id, "T;%lld|%lld;%lld;%d;0", tx, ty, (long long)l->downsample, ch);
        const void *data = NULL;
        size_t len = 0;
        st = fetch_blob(c, id, &data, &len, err);
        if (st != SP_OK || (missing = data == NULL)) {
            break;
        }
        if (ch == 0) {
            st = decode_channel(data, len, tile, id, scale, x, y, w, h, bpp, dst, stride, &vw, &vh,
                                err);
            continue;
        }
        uint64_t cw = 0, chh = 0;
        st = decode_channel(data, len, tile, id, scale, x, y, w, h, bpp, plane, w * bpp, &cw, &chh,
                            err);
        /* Every channel is a tile x tile image: the same decoded size, the same covered part. */
        uint64_t rows = vh > (uint64_t)y ? vh - (uint64_t)y : 0;
        uint64_t cols = vw > (uint64_t)x ? vw - (uint64_t)x : 0;
        rows = rows < (uint64_t)h ? rows : (uint64_t)h;
        cols = cols < (uint64_t)w ? cols : (uint64_t)w;
        for (uint64_t r = 0; st == SP_OK && r < rows; r++) {
            const uint8_t *q = plane + r * (uint64_t)(w * bpp);
            uint8_t *d = dst + r * (uint64_t)stride + ch;
            for (uint64_t i = 0; i < cols; i++) {
                d[i * (uint64_t)bpp] = q[i * (uint64_t)bpp];
            }
        }
    }
    if (c != NULL) {
        sqlite3_reset(c->blob);
        pool_give(k, c);
    }
    free(plane);
    if (st != SP_OK || missing) {
        sp_fill_pixels(dst, stride, w, h, bpp, empty);
    } else {
        sp_fill_uncovered(dst, stride, (uint64_t)x, (uint64_t)y, (uint64_t)w, (uint64_t)h, vw, vh,
                          bpp, empty);
    }
    return st;
}

/* Any scale libjpeg's DCT scaling gives; the tiles never carry alpha. */
static unsigned sakura_area_scales(sp_slide *s, const sp_level *level) {
    (void)s, (void)level;
    return 1u | 2u | 4u | 8u | SP_AREA_OPAQUE;
}

static sp_status sakura_read_tile(sp_slide *s, const sp_level *level, int64_t col, int64_t row,
                                  uint8_t *rgba, uint64_t stride, sp_err *err) {
    static const uint8_t transparent[4] = {0, 0, 0, 0};
    return sakura_read_tile_area(s, level, col, row, 1, 0, 0, level->tile_width, level->tile_height,
                                 SP_PIXEL_RGBA8, rgba, (int64_t)stride, transparent, err);
}

/* The query of each associated image (one row, one JPEG column), as OpenSlide runs them. */
static const char *const ASSOCIATED_SQL[][2] = {
    {"label", "SELECT Image FROM SVScannedImageDataXPO JOIN SVSlideDataXPO ON "
              "SVSlideDataXPO.m_labelScan = SVScannedImageDataXPO.OID"},
    {"macro", "SELECT Image FROM SVScannedImageDataXPO JOIN SVSlideDataXPO ON "
              "SVSlideDataXPO.m_overviewScan = SVScannedImageDataXPO.OID"},
    {"thumbnail", "SELECT ThumbnailImage FROM SVHRScanDataXPO JOIN SVSlideDataXPO ON "
                  "SVHRScanDataXPO.ParentSlide = SVSlideDataXPO.OID"},
};

/* Run an associated image's query: its JPEG's header (with `rgba` NULL) or pixels. */
static sp_status associated_jpeg(sk_conn *c, const sp_limits *limits, int which, uint32_t *w,
                                 uint32_t *h, uint8_t *rgba, uint64_t stride, sp_err *err) {
    sqlite3_stmt *stmt = NULL;
    const char *name = ASSOCIATED_SQL[which][0];
    char what[64];
    snprintf(what, sizeof what, "the %s image", name);
    sp_status st = prepare(c, ASSOCIATED_SQL[which][1], &stmt, what, err);
    int rc = st == SP_OK ? sqlite3_step(stmt) : SQLITE_ERROR;
    if (st == SP_OK && rc == SQLITE_DONE) {
        st = sp_err_set(err, SP_E_NOT_FOUND, "the slide has no %s image", name);
    } else if (st == SP_OK && rc != SQLITE_ROW) {
        st = db_error(c, what, err);
    }
    if (st == SP_OK) {
        const void *data = sqlite3_column_blob(stmt, 0);
        int len = sqlite3_column_bytes(stmt, 0);
        if (data == NULL || len <= 0) {
            st = sp_err_set(err, SP_E_CORRUPT, "the %s image is empty", name);
        } else if ((uint64_t)len > (uint64_t)limits->value[SP_LIMIT_MAX_ALLOC]) {
            st = sp_err_set(err, SP_E_LIMIT, "the %s image is larger than the allocation limit",
                            name);
        } else if (rgba == NULL) {
            int components = 0;
            st = sp_jpeg_read_header(data, (size_t)len, NULL, 0, w, h, &components, err);
            if (st == SP_OK && sqlite3_step(stmt) != SQLITE_DONE) {
                st = sp_err_set(err, SP_E_CORRUPT, "the %s image's query has several rows", name);
            }
        } else {
            st = sp_jpeg_decode_rgba(data, (size_t)len, NULL, 0, SP_JPEG_SPACE_AUTO, *w, *h, rgba,
                                     (size_t)stride, err);
        }
    }
    sqlite3_finalize(stmt);
    return st;
}

static sp_status sakura_read_associated(sp_slide *s, const sp_associated *a, uint8_t *rgba,
                                        uint64_t stride, sp_err *err) {
    int which = (int)(intptr_t)a->priv;
    uint32_t w = (uint32_t)a->width, h = (uint32_t)a->height;
    sk_conn *c = NULL;
    sp_status st = pool_take(s, &c, err);
    if (st == SP_OK) {
        st = associated_jpeg(c, &s->limits, which, &w, &h, rgba, stride, err);
        pool_give(s->priv, c);
    }
    return st;
}

static void sakura_destroy(sp_slide *s) {
    sakura *k = s->priv;
    if (k == NULL) {
        return;
    }
    while (k->idle != NULL) {
        sk_conn *c = k->idle;
        k->idle = c->next;
        conn_close(c);
    }
    if (k->lock_made) {
        pthread_mutex_destroy(&k->lock);
    }
    sqlite3_free(k->blob_sql);
    free(k);
    s->priv = NULL;
}

static const sp_slide_ops sakura_ops = {
    .read_tile = sakura_read_tile,
    .read_associated = sakura_read_associated,
    .destroy = sakura_destroy,
    .area_scales = sakura_area_scales,
    .read_tile_area = sakura_read_tile_area,
};

/* ---- open ------------------------------------------------------------------------------------ */

/* The unique table's name: the one row of DataManagerSQLiteConfigXPO. */
static sp_status unique_table(sk_conn *c, char *name, sp_err *err) {
    static const char what[] = "not a Sakura SVSlide (reading DataManagerSQLiteConfigXPO)";
    sqlite3_stmt *stmt = NULL;
    sp_status st = prepare(c, "SELECT TableName FROM DataManagerSQLiteConfigXPO", &stmt, what, err);
    int rc = st == SP_OK ? sqlite3_step(stmt) : SQLITE_ERROR;
    if (st == SP_OK && rc != SQLITE_ROW) {
        st = rc == SQLITE_DONE ? sp_err_set(err, SP_E_NOT_A_SLIDE,
                                            "not a Sakura SVSlide: "
                                            "DataManagerSQLiteConfigXPO is empty")
                               : db_error(c, what, err);
    }
    if (st == SP_OK) {
        const unsigned char *text = sqlite3_column_text(stmt, 0);
        int n = sqlite3_column_bytes(stmt, 0);
        if (text == NULL || n <= 0 || n >= TABLE_NAME_MAX ||
            strlen((const char *)text) != (size_t)n) {
            st = sp_err_set(err, SP_E_CORRUPT,
                            "DataManagerSQLiteConfigXPO names no usable "
                            "table (an empty, long or binary name)");
        } else {
            memcpy(name, text, (size_t)n + 1);
        }
    }
    if (st == SP_OK && sqlite3_step(stmt) != SQLITE_DONE) {
        st = sp_err_set(err, SP_E_CORRUPT,
                        "DataManagerSQLiteConfigXPO names more than one "
                        "table");
    }
    sqlite3_finalize(stmt);
    return st;
}

static sp_status check_magic(sk_conn *c, sp_err *err) {
    const void *data = NULL;
    size_t len = 0;
    sp_status st = fetch_blob(c, "++MagicBytes", &data, &len, err);
    if (st == SP_OK &&
        (data == NULL || len != strlen(SAKURA_MAGIC) || memcmp(data, SAKURA_MAGIC, len) != 0)) {
        st = sp_err_set(err, SP_E_NOT_A_SLIDE,
                        "not a Sakura SVSlide: its blob table has no ++MagicBytes "
                        "\"SVGigaPixelImage\"");
    }
    return st;
}

static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static sp_status read_header(sk_conn *c, const sp_limits *limits, int64_t *tile, int64_t *w,
                             int64_t *h, sp_err *err) {
    const void *data = NULL;
    size_t len = 0;
    sp_status st = fetch_blob(c, "Header", &data, &len, err);
    if (st != SP_OK) {
        return st;
    }
    if (data == NULL || len < 12 || len > HEADER_MAX) {
        return sp_err_set(err, SP_E_CORRUPT, "the SVSlide Header blob is %s (%zu bytes)",
                          data == NULL ? "missing" : "not 12 to 4096 bytes", len);
    }
    const uint8_t *p = data;
    *tile = le32(p);
    *w = le32(p + 4);
    *h = le32(p + 8);
    if (*tile == 0 || *tile > 65536 || *tile * *tile > limits->value[SP_LIMIT_MAX_TILE_PIXELS]) {
        return sp_err_set(err, *tile == 0 ? SP_E_CORRUPT : SP_E_LIMIT,
                          "the SVSlide Header declares tiles of %lld pixels a side (the limit "
                          "is %lld pixels a tile)",
                          (long long)*tile, (long long)limits->value[SP_LIMIT_MAX_TILE_PIXELS]);
    }
    if (*w == 0 || *h == 0) {
        return sp_err_set(err, SP_E_CORRUPT, "the SVSlide Header declares an image of %lldx%lld",
                          (long long)*w, (long long)*h);
    }
    return SP_OK;
}

/* A decimal field of a tile id: digits only, no leading zero (ids must print back the same, as
 * OpenSlide requires), at most INT64_MAX. */
static bool parse_field(const char *s, size_t n, int64_t *out) {
    if (n == 0 || n > 19 || (n > 1 && s[0] == '0')) {
        return false;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return false;
        }
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (v > (uint64_t)INT64_MAX) {
        return false;
    }
    *out = (int64_t)v;
    return true;
}

/* Parse `id` (n bytes): *is_tile false for an id that is no tile's (the Header, the hashes
 * "T;...#", ...); else the fields, or an error for a malformed tile id. */
static sp_status parse_tile_id(const char *id, size_t n, bool *is_tile, int64_t f[5], sp_err *err) {
    *is_tile = n >= 2 && id[0] == 'T' && id[1] == ';' && id[n - 1] != '#';
    if (!*is_tile) {
        return SP_OK;
    }
    if (n > TILE_ID_MAX || memchr(id, '\0', n) != NULL) {
        return sp_err_set(err, SP_E_CORRUPT, "bad tile ID \"%.*s\" (%zu bytes)", 40, id, n);
    }
    /* "T;" X "|" Y ";" DOWNSAMPLE ";" CHANNEL ";" PLANE: four fields split at ';', the first
     * of two split at '|'. */
    const char *starts[5];
    size_t lens[5];
    int semis = 0, bars = 0;
    const char *p = id + 2, *end = id + n;
    starts[0] = p;
    for (const char *q = p; q < end; q++) {
        if (*q == ';' && ++semis < 4) {
            starts[semis + 1] = q + 1;
        }
        bars += *q == '|' && semis == 0;
    }
    const char *bar = memchr(p, '|', (size_t)(end - p));
    if (semis != 3 || bars != 1) {
        return sp_err_set(err, SP_E_CORRUPT, "bad field count in tile ID \"%.*s\"", (int)n, id);
    }
    starts[1] = bar + 1;
    lens[0] = (size_t)(bar - starts[0]);
    for (int i = 1; i < 5; i++) {
        const char *stop = i < 4 ? starts[i + 1] - 1 : end;
        lens[i] = (size_t)(stop - starts[i]);
    }
    for (int i = 0; i < 5; i++) {
        if (!parse_field(starts[i], lens[i], &f[i])) {
            return sp_err_set(err, SP_E_CORRUPT, "bad field value in tile ID \"%.*s\"", (int)n, id);
        }
    }
    if (f[2] < 1 || f[3] > 2) {
        return sp_err_set(err, SP_E_CORRUPT, "bad field value in tile ID \"%.*s\"", (int)n, id);
    }
    return SP_OK;
}

/* The downsamples that the tile ids of focal plane 0 name, as a mask of exponents. */
static sp_status scan_tile_ids(sk_conn *c, const char *table, uint64_t *mask, sp_err *err) {
    *mask = 0;
    char *sql = sqlite3_mprintf("SELECT id FROM \"%w\"", table);
    if (sql == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory");
    }
    sqlite3_stmt *stmt = NULL;
    sp_status st = prepare(c, sql, &stmt, "listing the SVSlide's tiles", err);
    sqlite3_free(sql);
    int rc = SQLITE_DONE;
    while (st == SP_OK && (rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        const char *id = (const char *)sqlite3_column_text(stmt, 0);
        int n = sqlite3_column_bytes(stmt, 0);
        if (id == NULL || n <= 0) {
            continue;
        }
        bool is_tile = false;
        int64_t f[5];
        st = parse_tile_id(id, (size_t)n, &is_tile, f, err);
        if (st != SP_OK || !is_tile || f[4] != 0) {
            continue;
        }
        if (f[2] & (f[2] - 1)) {
            st = sp_err_set(err, SP_E_CORRUPT,
                            "invalid downsample %lld (not a power of two) in "
                            "tile ID \"%.*s\"",
                            (long long)f[2], n, id);
            break;
        }
        *mask |= (uint64_t)1 << __builtin_ctzll((unsigned long long)f[2]);
    }
    if (st == SP_OK && rc != SQLITE_DONE) {
        st = db_error(c, "listing the SVSlide's tiles", err);
    }
    sqlite3_finalize(stmt);
    if (st == SP_OK && *mask == 0) {
        st = sp_err_set(err, SP_E_CORRUPT, "the SVSlide has no tiles");
    }
    return st;
}

/* The sakura.* properties, as OpenSlide reads them (a failing query gives none). */
static const char *const PROPERTY_COLUMNS[][2] = {
    {"SVSlideDataXPO", "SlideId"},
    {"SVSlideDataXPO", "Date"},
    {"SVSlideDataXPO", "Description"},
    {"SVSlideDataXPO", "Creator"},
    {"SVSlideDataXPO", "DiagnosisCode"},
    {"SVSlideDataXPO", "Keywords"},
    {"SVHRScanDataXPO", "ScanId"},
    {"SVHRScanDataXPO", "ResolutionMmPerPix"},
    {"SVHRScanDataXPO", "NominalLensMagnification"},
    {"SVHRScanDataXPO", "FocussingMethod"},
};
#define N_PROPERTIES (sizeof PROPERTY_COLUMNS / sizeof PROPERTY_COLUMNS[0])
#define FIRST_NUMBER 7 /* the two columns that are numbers */
#define LAST_NUMBER 8

static sp_status set_text(sp_slide *s, const char *key, const unsigned char *text, int n,
                          sp_err *err) {
    if (text == NULL || n <= 0 || text[0] == '\0') {
        return SP_OK; /* OpenSlide leaves empty text out */
    }
    if ((int64_t)n > s->limits.value[SP_LIMIT_MAX_METADATA]) {
        return sp_err_set(err, SP_E_LIMIT,
                          "SVSlide property %s is %d bytes, above the "
                          "metadata limit",
                          key, n);
    }
    return sp_props_set(&s->props, key, (const char *)text, err); /* up to a NUL, as OpenSlide */
}

static sp_status add_properties(sp_slide *s, sk_conn *c, sp_err *err) {
    char sql[1024] = "SELECT ";
    for (size_t i = 0; i < N_PROPERTIES; i++) {
        size_t used = strlen(sql);
        snprintf(sql + used, sizeof sql - used, "%s%s.%s", i ? ", " : "", PROPERTY_COLUMNS[i][0],
                 PROPERTY_COLUMNS[i][1]);
    }
    size_t used = strlen(sql);
    snprintf(sql + used, sizeof sql - used,
             " FROM SVSlideDataXPO JOIN SVHRScanDataXPO ON "
             "SVHRScanDataXPO.ParentSlide == SVSlideDataXPO.OID");
    sqlite3_stmt *stmt = NULL;
    sp_err ignored = {0};
    sp_status st = SP_OK;
    bool have_objective = false;
    double objective = 0;
    if (prepare(c, sql, &stmt, "", &ignored) == SP_OK && sqlite3_step(stmt) == SQLITE_ROW) {
        for (size_t i = 0; st == SP_OK && i < N_PROPERTIES; i++) {
            char key[64];
            snprintf(key, sizeof key, "sakura.%s", PROPERTY_COLUMNS[i][1]);
            if (i >= FIRST_NUMBER && i <= LAST_NUMBER) {
                double v = sqlite3_column_double(stmt, (int)i);
                st = sp_slide_set_number(s, key, v, err);
                if (i == LAST_NUMBER) {
                    have_objective = true;
                    objective = v;
                }
            } else {
                st = set_text(s, key, sqlite3_column_text(stmt, (int)i),
                              sqlite3_column_bytes(stmt, (int)i), err);
            }
        }
    }
    sqlite3_finalize(stmt);
    if (st == SP_OK &&
        prepare(c,
                "SELECT ResolutionMmPerPix FROM SVHRScanDataXPO JOIN "
                "SVSlideDataXPO ON SVHRScanDataXPO.ParentSlide = "
                "SVSlideDataXPO.OID",
                &stmt, "", &ignored) == SP_OK &&
        sqlite3_step(stmt) == SQLITE_ROW) {
        double mpp = sqlite3_column_double(stmt, 0) * 1000;
        if (mpp > 0 && mpp < 1e300) {
            st = sp_slide_set_number(s, SP_PROPERTY_MPP_X, mpp, err);
            if (st == SP_OK) {
                st = sp_slide_set_number(s, SP_PROPERTY_MPP_Y, mpp, err);
            }
        }
    }
    sqlite3_finalize(stmt);
    if (st == SP_OK && have_objective && objective > 0 && objective < 1e300) {
        st = sp_slide_set_number(s, SP_PROPERTY_OBJECTIVE_POWER, objective, err);
    }
    const void *data = NULL;
    size_t len = 0;
    if (st == SP_OK && fetch_blob(c, "++VersionBytes", &data, &len, &ignored) == SP_OK &&
        data != NULL && len > 0) {
        char version[256];
        size_t n = len < sizeof version - 1 ? len : sizeof version - 1;
        memcpy(version, data, n);
        version[n] = '\0';
        st = set_text(s, "sakura.VersionBytes", (const unsigned char *)version, (int)n, err);
    }
    sqlite3_reset(c->blob);
    return st;
}

static sp_status sakura_open(sp_slide *s, sp_probe *p, sp_err *err) {
    (void)p;
    sakura *k = calloc(1, sizeof *k);
    if (k == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory opening an SVSlide");
    }
    s->priv = k;
    s->ops = &sakura_ops;
    k->lock_made = pthread_mutex_init(&k->lock, NULL) == 0;
    if (!k->lock_made) {
        return sp_err_set(err, SP_E_NOMEM, "cannot create a lock for an SVSlide");
    }
    sk_conn *c = NULL;
    char table[TABLE_NAME_MAX];
    int64_t tile = 0, width = 0, height = 0;
    uint64_t mask = 0;
    sp_status st = conn_open(s->src, &s->limits, NULL, &c, err);
    if (st == SP_OK) {
        st = unique_table(c, table, err);
    }
    if (st == SP_OK) {
        k->blob_sql = sqlite3_mprintf("SELECT data FROM \"%w\" WHERE id = ?", table);
        st = k->blob_sql != NULL ? SP_OK : sp_err_set(err, SP_E_NOMEM, "out of memory");
    }
    if (st == SP_OK) {
        st =
            prepare(c, k->blob_sql, &c->blob, "not a Sakura SVSlide (reading its blob table)", err);
    }
    if (st == SP_OK) {
        st = check_magic(c, err);
    }
    if (st == SP_OK) {
        st = read_header(c, &s->limits, &tile, &width, &height, err);
    }
    if (st == SP_OK) {
        st = scan_tile_ids(c, table, &mask, err);
    }
    k->tile = tile;
    for (int e = 0; st == SP_OK && e <= MAX_EXPONENT; e++) {
        if (!(mask & (uint64_t)1 << e)) {
            continue;
        }
        int64_t ds = (int64_t)1 << e;
        k->levels[e].downsample = ds;
        sp_level level = {
            .width = width / ds,
            .height = height / ds,
            .downsample = (double)ds,
            .tile_width = tile,
            .tile_height = tile,
            .compression = "jpeg",
            .priv = &k->levels[e],
        };
        if (level.width == 0 || level.height == 0) {
            st = sp_err_set(err, SP_E_CORRUPT,
                            "tiles of downsample %lld leave no pixels of the %lldx%lld image",
                            (long long)ds, (long long)width, (long long)height);
            break;
        }
        level.tiles_across = (level.width + tile - 1) / tile;
        level.tiles_down = (level.height + tile - 1) / tile;
        st = sp_slide_add_level(s, &level, err);
    }
    if (st == SP_OK) {
        st = add_properties(s, c, err);
    }
    for (int i = 0; st == SP_OK && i < 3; i++) {
        uint32_t w = 0, h = 0;
        sp_err ignored = {0};
        if (associated_jpeg(c, &s->limits, i, &w, &h, NULL, 0, &ignored) == SP_OK && w > 0 &&
            h > 0) {
            st = sp_slide_add_associated(s, ASSOCIATED_SQL[i][0], w, h, (void *)(intptr_t)i, err);
        }
    }
    if (c != NULL && c->blob != NULL && st == SP_OK) {
        sqlite3_reset(c->blob);
        pool_give(k, c); /* kept for the first reads */
    } else {
        conn_close(c);
    }
    return st;
}

const sp_format sp_format_sakura_svslide = {"sakura", sakura_detect, sakura_open};
