/* tiff_write.c — the streaming TIFF / BigTIFF writer (see tiff_write.h).
 *
 * Bytes go through one buffer to an atomic file target (io/file_target.c), so the file's size is
 * always known and chunk offsets are handed out without seeking. Values are encoded byte by byte
 * in little-endian order, which keeps the output identical on any host.
 */
#include "tiff/tiff_write.h"

#include <stdlib.h>
#include <string.h>

#include "io/file_target.h"

#define TW_BUF_SIZE (1u << 20)
#define TW_ALIGN 8 /* directories and out-of-line values start on this boundary */

typedef struct tw_entry {
    uint16_t tag;
    uint16_t type;
    uint64_t count;
    uint8_t value[8]; /* the values themselves when they fit, else their offset */
} tw_entry;

typedef struct tw_dir {
    tw_entry *entries;
    size_t n;
} tw_dir;

struct sp_tiff_writer {
    sp_file_target *out;
    bool bigtiff;
    uint64_t size; /* bytes in the file, counting those still buffered */
    uint8_t *buf;
    size_t buf_len;
    tw_dir *dirs;
    size_t ndirs;
    size_t dirs_cap;
};

static void tw_put16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void tw_put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

static void tw_put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

static size_t tw_type_size(uint16_t type) {
    switch (type) {
    case SP_TIFF_ASCII:
        return 1;
    case SP_TIFF_SHORT:
        return 2;
    case SP_TIFF_LONG:
        return 4;
    case SP_TIFF_RATIONAL:
    case SP_TIFF_LONG8:
        return 8;
    default:
        return 0;
    }
}

static sp_status tw_write_all(sp_tiff_writer *w, const uint8_t *p, size_t len, sp_err *err) {
    return sp_file_target_append(w->out, p, len, err);
}

static sp_status tw_flush(sp_tiff_writer *w, sp_err *err) {
    sp_status st = tw_write_all(w, w->buf, w->buf_len, err);
    w->buf_len = 0;
    return st;
}

static sp_status tw_append(sp_tiff_writer *w, const void *data, size_t len, sp_err *err) {
    uint64_t end = w->size + len;
    if (!w->bigtiff && end > UINT32_MAX) {
        return sp_err_set(err, SP_E_LIMIT,
                          "the file would pass 4 GiB, the most a classic TIFF can address");
    }
    if (len == 0) {
        return SP_OK;
    }
    const uint8_t *p = data;
    if (w->buf_len + len > TW_BUF_SIZE) {
        sp_status st = tw_flush(w, err);
        if (st != SP_OK) {
            return st;
        }
        if (len >= TW_BUF_SIZE) {
            st = tw_write_all(w, p, len, err);
            if (st != SP_OK) {
                return st;
            }
            w->size = end;
            return SP_OK;
        }
    }
    memcpy(w->buf + w->buf_len, p, len);
    w->buf_len += len;
    w->size = end;
    return SP_OK;
}

static sp_status tw_pad(sp_tiff_writer *w, sp_err *err) {
    static const uint8_t zeros[TW_ALIGN];
    size_t pad = (size_t)((TW_ALIGN - w->size % TW_ALIGN) % TW_ALIGN);
    return tw_append(w, zeros, pad, err);
}

static void tw_free(sp_tiff_writer *w) {
    for (size_t i = 0; i < w->ndirs; i++) {
        free(w->dirs[i].entries);
    }
    free(w->dirs);
    free(w->buf);
    free(w);
}

void sp_tiff_writer_abort(sp_tiff_writer *w) {
    if (w == NULL) {
        return;
    }
    sp_file_target_abort(w->out);
    tw_free(w);
}

sp_status sp_tiff_writer_create(const char *path, bool bigtiff, sp_tiff_writer **out, sp_err *err) {
    *out = NULL;
    if (path == NULL || path[0] == '\0') {
        return sp_err_set(err, SP_E_INVALID_ARG, "no output path");
    }
    sp_tiff_writer *w = calloc(1, sizeof *w);
    if (w == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory starting a TIFF writer");
    }
    w->bigtiff = bigtiff;
    w->buf = malloc(TW_BUF_SIZE);
    if (w->buf == NULL) {
        tw_free(w);
        return sp_err_set(err, SP_E_NOMEM, "out of memory starting a TIFF writer");
    }
    sp_status opened = sp_file_target_open(path, &w->out, err);
    if (opened != SP_OK) {
        tw_free(w);
        return opened;
    }

    /* The first directory's offset is left zero here and patched in by finish. */
    uint8_t header[16] = {'I', 'I'};
    size_t header_len;
    if (bigtiff) {
        tw_put16(header + 2, 43);
        tw_put16(header + 4, 8); /* bytes per offset */
        tw_put16(header + 6, 0);
        header_len = 16;
    } else {
        tw_put16(header + 2, 42);
        header_len = 8;
    }
    sp_status st = tw_append(w, header, header_len, err);
    if (st != SP_OK) {
        sp_tiff_writer_abort(w);
        return st;
    }
    *out = w;
    return SP_OK;
}

sp_status sp_tiff_writer_append(sp_tiff_writer *w, const void *data, size_t len, uint64_t *offset,
                                sp_err *err) {
    if (offset != NULL) {
        *offset = w->size;
    }
    return tw_append(w, data, len, err);
}

/* Encode values [first, first + n) of an array into little-endian bytes at dst. `wide` says the
 * source is uint64_t whatever the target type (the chunk arrays); otherwise its C type follows
 * the TIFF type. */
static void tw_encode(uint16_t type, const void *values, bool wide, uint64_t first, size_t n,
                      uint8_t *dst) {
    for (size_t i = 0; i < n; i++) {
        uint64_t k = first + i;
        if (wide) {
            uint64_t v = ((const uint64_t *)values)[k];
            if (type == SP_TIFF_LONG8) {
                tw_put64(dst + 8 * i, v);
            } else {
                tw_put32(dst + 4 * i, (uint32_t)v);
            }
            continue;
        }
        switch (type) {
        case SP_TIFF_ASCII:
            dst[i] = (uint8_t)((const char *)values)[k];
            break;
        case SP_TIFF_SHORT:
            tw_put16(dst + 2 * i, ((const uint16_t *)values)[k]);
            break;
        case SP_TIFF_LONG:
            tw_put32(dst + 4 * i, ((const uint32_t *)values)[k]);
            break;
        case SP_TIFF_RATIONAL:
            tw_put32(dst + 8 * i, ((const uint32_t *)values)[2 * k]);
            tw_put32(dst + 8 * i + 4, ((const uint32_t *)values)[2 * k + 1]);
            break;
        default:
            tw_put64(dst + 8 * i, ((const uint64_t *)values)[k]);
            break;
        }
    }
}

/* Fill one entry: its values inline when they fit the entry's value field, else appended to the
 * file in blocks (a level's chunk arrays can hold millions of values) with the offset inline. */
static sp_status tw_make_entry(sp_tiff_writer *w, tw_entry *e, uint16_t tag, uint16_t type,
                               uint64_t count, const void *values, bool wide, sp_err *err) {
    size_t tsize = tw_type_size(type);
    size_t inline_size = w->bigtiff ? 8 : 4;
    e->tag = tag;
    e->type = type;
    e->count = count;
    memset(e->value, 0, sizeof e->value);
    if (count <= inline_size / tsize) {
        tw_encode(type, values, wide, 0, (size_t)count, e->value);
        return SP_OK;
    }
    sp_status st = tw_pad(w, err);
    if (st != SP_OK) {
        return st;
    }
    if (w->bigtiff) {
        tw_put64(e->value, w->size);
    } else {
        tw_put32(e->value, (uint32_t)w->size);
    }
    uint8_t block[4096];
    size_t per_block = sizeof block / tsize;
    for (uint64_t done = 0; done < count;) {
        size_t n = count - done < per_block ? (size_t)(count - done) : per_block;
        tw_encode(type, values, wide, done, n, block);
        st = tw_append(w, block, n * tsize, err);
        if (st != SP_OK) {
            return st;
        }
        done += n;
    }
    return SP_OK;
}

sp_status sp_tiff_writer_add_directory(sp_tiff_writer *w, const sp_tiff_wtag *tags, size_t ntags,
                                       uint16_t offsets_tag, uint16_t counts_tag,
                                       const uint64_t *offsets, const uint64_t *counts,
                                       uint64_t nchunks, sp_err *err) {
    uint16_t chunk_type = w->bigtiff ? SP_TIFF_LONG8 : SP_TIFF_LONG;
    if (offsets_tag == counts_tag || nchunks == 0) {
        return sp_err_set(err, SP_E_INVALID_ARG, "a TIFF directory needs chunks and two tags");
    }
    for (size_t i = 0; i < ntags; i++) {
        const sp_tiff_wtag *t = &tags[i];
        if (tw_type_size(t->type) == 0 || (t->type == SP_TIFF_LONG8 && !w->bigtiff)) {
            return sp_err_set(err, SP_E_INVALID_ARG, "TIFF tag %u has an unwritable type %u",
                              t->tag, t->type);
        }
        if (t->count == 0 || t->values == NULL || (!w->bigtiff && t->count > UINT32_MAX)) {
            return sp_err_set(err, SP_E_INVALID_ARG, "TIFF tag %u has a bad value count", t->tag);
        }
        if (t->type == SP_TIFF_ASCII && ((const char *)t->values)[t->count - 1] != '\0') {
            return sp_err_set(err, SP_E_INVALID_ARG, "TIFF tag %u: text must end in NUL", t->tag);
        }
        /* Checked before anything is written, so a refused directory leaves no stray bytes. */
        bool repeated = t->tag == offsets_tag || t->tag == counts_tag;
        for (size_t j = 0; j < i && !repeated; j++) {
            repeated = tags[j].tag == t->tag;
        }
        if (repeated) {
            return sp_err_set(err, SP_E_INVALID_ARG, "TIFF tag %u given twice", t->tag);
        }
    }
    if (!w->bigtiff) {
        for (uint64_t i = 0; i < nchunks; i++) {
            if (offsets[i] > UINT32_MAX || counts[i] > UINT32_MAX) {
                return sp_err_set(err, SP_E_LIMIT, "a chunk lies past 4 GiB in a classic TIFF");
            }
        }
        if (nchunks > UINT32_MAX) {
            return sp_err_set(err, SP_E_LIMIT, "too many chunks for a classic TIFF");
        }
    }
    if (w->ndirs == w->dirs_cap) {
        size_t cap = w->dirs_cap ? 2 * w->dirs_cap : 8;
        tw_dir *dirs = realloc(w->dirs, cap * sizeof *dirs);
        if (dirs == NULL) {
            return sp_err_set(err, SP_E_NOMEM, "out of memory adding a TIFF directory");
        }
        w->dirs = dirs;
        w->dirs_cap = cap;
    }
    size_t n = ntags + 2;
    tw_entry *entries = calloc(n, sizeof *entries);
    if (entries == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory adding a TIFF directory");
    }
    sp_status st = SP_OK;
    for (size_t i = 0; i < ntags && st == SP_OK; i++) {
        st = tw_make_entry(w, &entries[i], tags[i].tag, tags[i].type, tags[i].count, tags[i].values,
                           false, err);
    }
    if (st == SP_OK) {
        st =
            tw_make_entry(w, &entries[ntags], offsets_tag, chunk_type, nchunks, offsets, true, err);
    }
    if (st == SP_OK) {
        st = tw_make_entry(w, &entries[ntags + 1], counts_tag, chunk_type, nchunks, counts, true,
                           err);
    }
    if (st != SP_OK) {
        free(entries);
        return st;
    }
    /* Readers may binary-search a directory, so the spec wants entries in ascending tag order. */
    for (size_t i = 1; i < n; i++) {
        tw_entry e = entries[i];
        size_t j = i;
        while (j > 0 && entries[j - 1].tag > e.tag) {
            entries[j] = entries[j - 1];
            j--;
        }
        entries[j] = e;
    }
    w->dirs[w->ndirs].entries = entries;
    w->dirs[w->ndirs].n = n;
    w->ndirs++;
    return SP_OK;
}

/* Write the directories back to back, each pointing at the next, and return the first's offset.
 */
static sp_status tw_write_directories(sp_tiff_writer *w, uint64_t *first, sp_err *err) {
    sp_status st = tw_pad(w, err);
    if (st != SP_OK) {
        return st;
    }
    *first = w->size;
    size_t count_size = w->bigtiff ? 8 : 2;
    size_t entry_size = w->bigtiff ? 20 : 12;
    size_t next_size = w->bigtiff ? 8 : 4;
    for (size_t d = 0; d < w->ndirs && st == SP_OK; d++) {
        const tw_dir *dir = &w->dirs[d];
        uint64_t dir_size = count_size + dir->n * entry_size + next_size;
        uint64_t next = d + 1 < w->ndirs ? w->size + dir_size : 0;
        uint8_t rec[20];
        if (w->bigtiff) {
            tw_put64(rec, dir->n);
        } else {
            tw_put16(rec, (uint16_t)dir->n);
        }
        st = tw_append(w, rec, count_size, err);
        for (size_t i = 0; i < dir->n && st == SP_OK; i++) {
            const tw_entry *e = &dir->entries[i];
            tw_put16(rec, e->tag);
            tw_put16(rec + 2, e->type);
            if (w->bigtiff) {
                tw_put64(rec + 4, e->count);
                memcpy(rec + 12, e->value, 8);
            } else {
                tw_put32(rec + 4, (uint32_t)e->count);
                memcpy(rec + 8, e->value, 4);
            }
            st = tw_append(w, rec, entry_size, err);
        }
        if (st == SP_OK) {
            if (w->bigtiff) {
                tw_put64(rec, next);
            } else {
                tw_put32(rec, (uint32_t)next);
            }
            st = tw_append(w, rec, next_size, err);
        }
    }
    return st;
}

sp_status sp_tiff_writer_finish(sp_tiff_writer *w, sp_err *err) {
    if (w->ndirs == 0) {
        sp_status st = sp_err_set(err, SP_E_INVALID_ARG, "a TIFF file needs a directory");
        sp_tiff_writer_abort(w);
        return st;
    }
    uint64_t first = 0;
    sp_status st = tw_write_directories(w, &first, err);
    if (st == SP_OK) {
        st = tw_flush(w, err);
    }
    if (st == SP_OK) {
        uint8_t rec[8];
        if (w->bigtiff) {
            tw_put64(rec, first);
            st = sp_file_target_write_at(w->out, 8, rec, 8, err);
        } else {
            tw_put32(rec, (uint32_t)first);
            st = sp_file_target_write_at(w->out, 4, rec, 4, err);
        }
    }
    if (st != SP_OK) {
        sp_tiff_writer_abort(w);
        return st;
    }
    st = sp_file_target_commit(w->out, err);
    w->out = NULL;
    tw_free(w);
    return st;
}
