/* tiff.c — parsing the TIFF / BigTIFF directory structure (see tiff.h).
 *
 * The file is untrusted: the header, each IFD's entry table and every out-of-line value are read
 * through the byte source with bounds checked against the file size, sizes are multiplied with
 * overflow checks, value sizes are capped by the metadata limit, the number of directories by
 * the directory limit, and a directory offset seen twice (a cycle, or two chains sharing a
 * directory) is an error. Structural facts (chunk grid, defaults) are derived once here so that
 * formats and the decoder read plain fields.
 */
#include "tiff/tiff.h"

#include <stdlib.h>
#include <string.h>

/* Most tags a single IFD may hold; real files have a few dozen. */
#define SP_TIFF_MAX_ENTRIES 4096
/* Deepest SubIFD nesting followed (OME-TIFF uses one level). */
#define SP_TIFF_MAX_SUBIFD_DEPTH 2

typedef struct parse_state {
    sp_tiff *tiff;
    uint64_t *seen; /* offsets of every IFD parsed so far */
    uint32_t n_seen;
    uint64_t metadata_total;
} parse_state;

static uint16_t rd16(const sp_tiff *t, const uint8_t *p) {
    return t->big_endian ? (uint16_t)(p[0] << 8 | p[1]) : (uint16_t)(p[1] << 8 | p[0]);
}

static uint32_t rd32(const sp_tiff *t, const uint8_t *p) {
    if (t->big_endian) {
        return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
    }
    return (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

static uint64_t rd64(const sp_tiff *t, const uint8_t *p) {
    uint64_t hi = rd32(t, t->big_endian ? p : p + 4);
    uint64_t lo = rd32(t, t->big_endian ? p + 4 : p);
    return hi << 32 | lo;
}

/* Size in bytes of one element of a TIFF field type, 0 for unknown types. */
static unsigned type_size(uint16_t type) {
    switch (type) {
    case 1: case 2: case 6: case 7: return 1;  /* BYTE ASCII SBYTE UNDEFINED */
    case 3: case 8: return 2;                  /* SHORT SSHORT */
    case 4: case 9: case 11: case 13: return 4; /* LONG SLONG FLOAT IFD */
    case 5: case 10: case 12: case 16: case 17: case 18: return 8; /* RATIONAL ... IFD8 */
    default: return 0;
    }
}

bool sp_tiff_magic(const uint8_t *head, size_t len) {
    if (len < 4) {
        return false;
    }
    bool le = head[0] == 'I' && head[1] == 'I';
    bool be = head[0] == 'M' && head[1] == 'M';
    if (!le && !be) {
        return false;
    }
    unsigned version = le ? (unsigned)(head[2] | head[3] << 8) : (unsigned)(head[2] << 8 | head[3]);
    return version == 42 || version == 43;
}

const sp_tiff_entry *sp_tiff_find(const sp_tiff_dir *dir, uint16_t tag) {
    size_t lo = 0, hi = dir->n_entries;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint16_t t = dir->entries[mid].tag;
        if (t == tag) {
            return &dir->entries[mid];
        }
        if (t < tag) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return NULL;
}

bool sp_tiff_entry_uint(const sp_tiff *tiff, const sp_tiff_entry *e, uint64_t i, uint64_t *out) {
    if (e == NULL || e->data == NULL || i >= e->count) {
        return false;
    }
    const uint8_t *p = e->data + i * type_size(e->type);
    switch (e->type) {
    case 1: case 7: *out = p[0]; return true;
    case 6: *out = (uint64_t)(int64_t)(int8_t)p[0]; return true;
    case 3: *out = rd16(tiff, p); return true;
    case 8: *out = (uint64_t)(int64_t)(int16_t)rd16(tiff, p); return true;
    case 4: case 13: *out = rd32(tiff, p); return true;
    case 9: *out = (uint64_t)(int64_t)(int32_t)rd32(tiff, p); return true;
    case 16: case 17: case 18: *out = rd64(tiff, p); return true;
    default: return false;
    }
}

bool sp_tiff_entry_double(const sp_tiff *tiff, const sp_tiff_entry *e, uint64_t i, double *out) {
    if (e == NULL || e->data == NULL || i >= e->count) {
        return false;
    }
    const uint8_t *p = e->data + i * type_size(e->type);
    switch (e->type) {
    case 5: {
        uint32_t num = rd32(tiff, p), den = rd32(tiff, p + 4);
        if (den == 0) {
            return false;
        }
        *out = (double)num / (double)den;
        return true;
    }
    case 10: {
        int32_t num = (int32_t)rd32(tiff, p), den = (int32_t)rd32(tiff, p + 4);
        if (den == 0) {
            return false;
        }
        *out = (double)num / (double)den;
        return true;
    }
    case 11: {
        uint32_t bits = rd32(tiff, p);
        float f;
        memcpy(&f, &bits, sizeof f);
        *out = f;
        return true;
    }
    case 12: {
        uint64_t bits = rd64(tiff, p);
        memcpy(out, &bits, sizeof *out);
        return true;
    }
    default: {
        uint64_t v;
        if (!sp_tiff_entry_uint(tiff, e, i, &v)) {
            return false;
        }
        bool is_signed = e->type == 6 || e->type == 8 || e->type == 9 || e->type == 17;
        *out = is_signed ? (double)(int64_t)v : (double)v;
        return true;
    }
    }
}

const char *sp_tiff_entry_string(const sp_tiff_entry *e) {
    if (e == NULL || e->type != 2 || e->data == NULL) {
        return NULL;
    }
    return (const char *)e->data;
}

const char *sp_tiff_compression_name(uint16_t compression) {
    switch (compression) {
    case SP_COMPRESSION_NONE: return "none";
    case SP_COMPRESSION_LZW: return "lzw";
    case SP_COMPRESSION_OJPEG: return "old-jpeg";
    case SP_COMPRESSION_JPEG: return "jpeg";
    case SP_COMPRESSION_ADOBE_DEFLATE:
    case SP_COMPRESSION_DEFLATE: return "deflate";
    case SP_COMPRESSION_PACKBITS: return "packbits";
    case SP_COMPRESSION_ZSTD: return "zstd";
    case SP_COMPRESSION_WEBP: return "webp";
    case 33003: case 33005: case 34712: case 33004: return "jpeg2000";
    default: return "unknown";
    }
}

static int entry_cmp(const void *a, const void *b) {
    const sp_tiff_entry *x = a, *y = b;
    return (x->tag > y->tag) - (x->tag < y->tag);
}

static void dir_free(sp_tiff_dir *dir) {
    for (uint32_t i = 0; i < dir->n_entries; i++) {
        free(dir->entries[i].data);
    }
    free(dir->entries);
    free(dir->chunk_offsets);
    free(dir->chunk_byte_counts);
    for (uint32_t i = 0; i < dir->n_subifds; i++) {
        dir_free(&dir->subifds[i]);
    }
    free(dir->subifds);
    memset(dir, 0, sizeof *dir);
}

/* Read one entry's value bytes (inline or out of line) into a fresh allocation. `high` is the
 * high half NDPI gives its 32-bit value field (0 elsewhere): of the value offset, or of a single
 * inline LONG, which then becomes a LONG8. */
static sp_status load_entry_value(parse_state *ps, sp_tiff_entry *e, const uint8_t *value_field,
                                  uint32_t high, sp_err *err) {
    sp_tiff *t = ps->tiff;
    unsigned tsize = type_size(e->type);
    if (tsize == 0) {
        return SP_OK; /* unknown type: keep the tag, no value */
    }
    uint8_t widened[8];
    if (high != 0 && e->count == 1 && (e->type == 4 || e->type == 13)) { /* LONG, IFD */
        memcpy(widened, value_field, 4); /* NDPI is little-endian: the low half first */
        for (int i = 0; i < 4; i++) {
            widened[4 + i] = (uint8_t)(high >> (8 * i));
        }
        e->type = 16; /* LONG8 */
        tsize = 8;
        value_field = widened;
    }
    uint64_t size;
    if (!sp_mul_u64(e->count, tsize, &size) ||
        size > (uint64_t)t->limits.value[SP_LIMIT_MAX_METADATA]) {
        return sp_err_set(err, SP_E_LIMIT,
                          "TIFF tag %u holds %llu values, over the metadata limit of %lld bytes",
                          e->tag, (unsigned long long)e->count,
                          (long long)t->limits.value[SP_LIMIT_MAX_METADATA]);
    }
    ps->metadata_total += size;
    if (ps->metadata_total > (uint64_t)t->limits.value[SP_LIMIT_MAX_ALLOC]) {
        return sp_err_set(err, SP_E_LIMIT, "TIFF metadata exceeds the allocation limit");
    }
    /* +1 so that ASCII values are always NUL-terminated. */
    sp_status st = sp_alloc(&t->limits, size + 1, "TIFF tag value", (void **)&e->data, err);
    if (st != SP_OK) {
        return st;
    }
    e->data[size] = 0;
    e->size = size;
    unsigned inline_max = t->bigtiff || value_field == widened ? 8 : 4;
    if (size <= inline_max) {
        memcpy(e->data, value_field, (size_t)size);
        return SP_OK;
    }
    uint64_t offset =
        t->bigtiff ? rd64(t, value_field) : (uint64_t)high << 32 | rd32(t, value_field);
    return sp_source_read(t->src, offset, e->data, (size_t)size, err);
}

static uint64_t get_uint(const sp_tiff *t, const sp_tiff_dir *d, uint16_t tag, uint64_t dflt) {
    uint64_t v;
    return sp_tiff_entry_uint(t, sp_tiff_find(d, tag), 0, &v) ? v : dflt;
}

/* Load an integer array tag (chunk offsets, byte counts) of exactly n values. */
static sp_status load_u64_array(const sp_tiff *t, const sp_tiff_dir *d, uint16_t tag, uint64_t n,
                                uint64_t **out, sp_err *err) {
    const sp_tiff_entry *e = sp_tiff_find(d, tag);
    if (e == NULL || e->count < n) {
        return sp_err_set(err, SP_E_CORRUPT,
                          "TIFF directory at %llu: tag %u has %llu values, %llu chunks expected",
                          (unsigned long long)d->offset, tag,
                          (unsigned long long)(e ? e->count : 0), (unsigned long long)n);
    }
    sp_status st = sp_calloc(&t->limits, n ? n : 1, sizeof(uint64_t), "TIFF chunk table",
                             (void **)out, err);
    if (st != SP_OK) {
        return st;
    }
    for (uint64_t i = 0; i < n; i++) {
        if (!sp_tiff_entry_uint(t, e, i, &(*out)[i])) {
            return sp_err_set(err, SP_E_CORRUPT, "TIFF tag %u has a non-integer type %u", tag,
                              e->type);
        }
    }
    return SP_OK;
}

/* Derive the image structure of a directory. A directory without image dimensions is kept
 * (formats skip it) but a directory whose chunk layout is inconsistent is an error. */
static sp_status derive_layout(const sp_tiff *t, sp_tiff_dir *d, sp_err *err) {
    d->width = get_uint(t, d, SP_TAG_IMAGE_WIDTH, 0);
    d->height = get_uint(t, d, SP_TAG_IMAGE_LENGTH, 0);
    d->compression = (uint16_t)get_uint(t, d, SP_TAG_COMPRESSION, SP_COMPRESSION_NONE);
    d->photometric = (uint16_t)get_uint(t, d, SP_TAG_PHOTOMETRIC, 0xffff);
    d->planar_config = (uint16_t)get_uint(t, d, SP_TAG_PLANAR_CONFIG, 1);
    d->predictor = (uint16_t)get_uint(t, d, SP_TAG_PREDICTOR, 1);
    d->bits_per_sample = (uint16_t)get_uint(t, d, SP_TAG_BITS_PER_SAMPLE, 1);
    d->samples_per_pixel = (uint16_t)get_uint(t, d, SP_TAG_SAMPLES_PER_PIXEL, 1);
    d->sample_format = (uint16_t)get_uint(t, d, SP_TAG_SAMPLE_FORMAT, 1);
    d->subfile_type = (uint32_t)get_uint(t, d, SP_TAG_NEW_SUBFILE_TYPE, 0);
    const sp_tiff_entry *extra = sp_tiff_find(d, SP_TAG_EXTRA_SAMPLES);
    d->extra_samples = extra ? (uint16_t)(extra->count > 0xffff ? 0xffff : extra->count) : 0;
    uint64_t kind = 0;
    if (extra != NULL && sp_tiff_entry_uint(t, extra, 0, &kind)) {
        d->extra_sample0 = (uint16_t)(kind > 2 ? 0 : kind);
    }
    const sp_tiff_entry *sub = sp_tiff_find(d, SP_TAG_YCBCR_SUBSAMPLING);
    uint64_t sh = 2, sv = 2;
    if (sub != NULL) {
        sp_tiff_entry_uint(t, sub, 0, &sh);
        sp_tiff_entry_uint(t, sub, 1, &sv);
    }
    d->ycbcr_sub_h = (uint16_t)(sh > 4 ? 4 : sh);
    d->ycbcr_sub_v = (uint16_t)(sv > 4 ? 4 : sv);
    const sp_tiff_entry *tables = sp_tiff_find(d, SP_TAG_JPEG_TABLES);
    if (tables != NULL && tables->data != NULL && tables->size > 0) {
        d->jpeg_tables = tables->data;
        d->jpeg_tables_len = tables->size;
    }
    d->description = sp_tiff_entry_string(sp_tiff_find(d, SP_TAG_IMAGE_DESCRIPTION));

    if (d->width == 0 || d->height == 0) {
        return SP_OK; /* not an image; formats ignore it */
    }
    if (d->width > UINT32_MAX || d->height > UINT32_MAX) {
        return sp_err_set(err, SP_E_CORRUPT, "TIFF directory at %llu: image size %llux%llu",
                          (unsigned long long)d->offset, (unsigned long long)d->width,
                          (unsigned long long)d->height);
    }
    d->tiled = sp_tiff_find(d, SP_TAG_TILE_WIDTH) != NULL;
    uint16_t offsets_tag, counts_tag;
    if (d->tiled) {
        d->chunk_width = get_uint(t, d, SP_TAG_TILE_WIDTH, 0);
        d->chunk_height = get_uint(t, d, SP_TAG_TILE_LENGTH, 0);
        offsets_tag = SP_TAG_TILE_OFFSETS;
        counts_tag = SP_TAG_TILE_BYTE_COUNTS;
    } else {
        d->chunk_width = d->width;
        uint64_t rps = get_uint(t, d, SP_TAG_ROWS_PER_STRIP, UINT32_MAX);
        d->chunk_height = rps > d->height ? d->height : rps;
        offsets_tag = SP_TAG_STRIP_OFFSETS;
        counts_tag = SP_TAG_STRIP_BYTE_COUNTS;
    }
    if (d->chunk_width == 0 || d->chunk_height == 0) {
        return sp_err_set(err, SP_E_CORRUPT, "TIFF directory at %llu: %s size is zero",
                          (unsigned long long)d->offset, d->tiled ? "tile" : "strip");
    }
    uint64_t chunk_pixels;
    if (!sp_mul_u64(d->chunk_width, d->chunk_height, &chunk_pixels) ||
        chunk_pixels > (uint64_t)t->limits.value[SP_LIMIT_MAX_TILE_PIXELS]) {
        return sp_err_set(err, SP_E_LIMIT,
                          "TIFF directory at %llu: a %s of %llux%llu pixels exceeds the tile "
                          "limit of %lld pixels",
                          (unsigned long long)d->offset, d->tiled ? "tile" : "strip",
                          (unsigned long long)d->chunk_width, (unsigned long long)d->chunk_height,
                          (long long)t->limits.value[SP_LIMIT_MAX_TILE_PIXELS]);
    }
    if (d->samples_per_pixel == 0) {
        return sp_err_set(err, SP_E_CORRUPT, "TIFF directory at %llu: SamplesPerPixel is 0",
                          (unsigned long long)d->offset);
    }
    d->chunks_across = (d->width + d->chunk_width - 1) / d->chunk_width;
    d->chunks_down = (d->height + d->chunk_height - 1) / d->chunk_height;
    uint64_t planes = d->planar_config == 2 ? d->samples_per_pixel : 1;
    uint64_t per_plane;
    if (!sp_mul_u64(d->chunks_across, d->chunks_down, &per_plane) ||
        !sp_mul_u64(per_plane, planes, &d->n_chunks)) {
        return sp_err_set(err, SP_E_CORRUPT, "TIFF directory at %llu: chunk count overflows",
                          (unsigned long long)d->offset);
    }
    sp_status st = load_u64_array(t, d, offsets_tag, d->n_chunks, &d->chunk_offsets, err);
    if (st == SP_OK) {
        st = load_u64_array(t, d, counts_tag, d->n_chunks, &d->chunk_byte_counts, err);
    }
    return st;
}

static sp_status parse_ifd(parse_state *ps, uint64_t offset, int depth, sp_tiff_dir *d,
                           uint64_t *next, sp_err *err);

static sp_status note_offset(parse_state *ps, uint64_t offset, sp_err *err) {
    sp_tiff *t = ps->tiff;
    for (uint32_t i = 0; i < ps->n_seen; i++) {
        if (ps->seen[i] == offset) {
            return sp_err_set(err, SP_E_CORRUPT,
                              "TIFF directory at offset %llu is referenced twice (a cycle)",
                              (unsigned long long)offset);
        }
    }
    if (ps->n_seen >= (uint64_t)t->limits.value[SP_LIMIT_MAX_DIRECTORIES]) {
        return sp_err_set(err, SP_E_LIMIT, "TIFF file has more than %lld directories",
                          (long long)t->limits.value[SP_LIMIT_MAX_DIRECTORIES]);
    }
    uint64_t *grown = realloc(ps->seen, (ps->n_seen + 1) * sizeof *grown);
    if (grown == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory reading TIFF directories");
    }
    ps->seen = grown;
    ps->seen[ps->n_seen++] = offset;
    return SP_OK;
}

static sp_status parse_subifds(parse_state *ps, sp_tiff_dir *d, int depth, sp_err *err) {
    const sp_tiff_entry *e = sp_tiff_find(d, SP_TAG_SUB_IFDS);
    if (e == NULL || e->count == 0 || depth >= SP_TIFF_MAX_SUBIFD_DEPTH) {
        return SP_OK;
    }
    if (e->count > (uint64_t)ps->tiff->limits.value[SP_LIMIT_MAX_DIRECTORIES]) {
        return sp_err_set(err, SP_E_LIMIT, "TIFF directory lists %llu SubIFDs",
                          (unsigned long long)e->count);
    }
    sp_status st = sp_calloc(&ps->tiff->limits, e->count, sizeof *d->subifds, "SubIFD table",
                             (void **)&d->subifds, err);
    if (st != SP_OK) {
        return st;
    }
    for (uint64_t i = 0; i < e->count; i++) {
        uint64_t off, unused;
        if (!sp_tiff_entry_uint(ps->tiff, e, i, &off)) {
            return sp_err_set(err, SP_E_CORRUPT, "SubIFDs tag has a non-integer type");
        }
        st = parse_ifd(ps, off, depth + 1, &d->subifds[d->n_subifds], &unused, err);
        if (st != SP_OK) {
            dir_free(&d->subifds[d->n_subifds]); /* not counted yet: what it parsed is freed here */
            return st;
        }
        d->n_subifds++;
    }
    return SP_OK;
}

static sp_status parse_ifd(parse_state *ps, uint64_t offset, int depth, sp_tiff_dir *d,
                           uint64_t *next, sp_err *err) {
    sp_tiff *t = ps->tiff;
    memset(d, 0, sizeof *d);
    d->offset = offset;
    sp_status st = note_offset(ps, offset, err);
    if (st != SP_OK) {
        return st;
    }
    unsigned count_size = t->bigtiff ? 8 : 2;
    unsigned entry_size = t->bigtiff ? 20 : 12;
    uint8_t cbuf[8];
    st = sp_source_read(t->src, offset, cbuf, count_size, err);
    if (st != SP_OK) {
        return st;
    }
    uint64_t n = t->bigtiff ? rd64(t, cbuf) : rd16(t, cbuf);
    if (n == 0 || n > SP_TIFF_MAX_ENTRIES) {
        return sp_err_set(err, SP_E_CORRUPT, "TIFF directory at %llu has %llu entries",
                          (unsigned long long)offset, (unsigned long long)n);
    }
    unsigned next_size = t->bigtiff || t->ndpi ? 8 : 4;
    size_t table_size = (size_t)n * entry_size + next_size; /* entries + next-IFD offset */
    /* NDPI's high halves of the value fields follow; a file that ends before them has none. */
    bool highs =
        t->ndpi && offset + count_size + table_size + (uint64_t)n * 4 <= sp_source_size(t->src);
    table_size += highs ? (size_t)n * 4 : 0;
    uint8_t *table = malloc(table_size);
    if (table == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory reading a TIFF directory");
    }
    st = sp_source_read(t->src, offset + count_size, table, table_size, err);
    if (st == SP_OK) {
        d->entries = calloc((size_t)n, sizeof *d->entries);
        if (d->entries == NULL) {
            st = sp_err_set(err, SP_E_NOMEM, "out of memory reading a TIFF directory");
        }
    }
    for (uint64_t i = 0; st == SP_OK && i < n; i++) {
        const uint8_t *p = table + i * entry_size;
        sp_tiff_entry *e = &d->entries[d->n_entries++];
        e->tag = rd16(t, p);
        e->type = rd16(t, p + 2);
        e->count = t->bigtiff ? rd64(t, p + 4) : rd32(t, p + 4);
        uint32_t high = highs ? rd32(t, table + n * entry_size + next_size + i * 4) : 0;
        st = load_entry_value(ps, e, p + (t->bigtiff ? 12 : 8), high, err);
    }
    if (st == SP_OK) {
        const uint8_t *np = table + n * entry_size;
        *next = next_size == 8 ? rd64(t, np) : rd32(t, np);
    }
    free(table);
    if (st != SP_OK) {
        return st;
    }
    qsort(d->entries, d->n_entries, sizeof *d->entries, entry_cmp);
    st = derive_layout(t, d, err);
    if (st == SP_OK) {
        st = parse_subifds(ps, d, depth, err);
    }
    return st;
}

/* Whether the classic-TIFF directory at `offset` holds tag `tag` (false when it does not read). */
static bool dir_has_tag(const sp_tiff *t, uint64_t offset, uint16_t tag) {
    uint8_t cbuf[2];
    sp_err ignored = {0};
    if (offset < 8 || sp_source_read(t->src, offset, cbuf, 2, &ignored) != SP_OK) {
        return false;
    }
    unsigned n = rd16(t, cbuf);
    uint8_t *table = n > 0 && n <= SP_TIFF_MAX_ENTRIES ? malloc((size_t)n * 12) : NULL;
    bool found = false;
    if (table != NULL &&
        sp_source_read(t->src, offset + 2, table, (size_t)n * 12, &ignored) == SP_OK) {
        for (unsigned i = 0; i < n && !found; i++) {
            found = rd16(t, table + i * 12) == tag;
        }
    }
    free(table);
    return found;
}

/* Whether a little-endian classic TIFF past 4 GiB is an NDPI with 64-bit offsets (its first
 * directory holds tag 65420), and where that directory is: the header's offset read as 8 bytes,
 * as NDPI writes it, when that names an NDPI directory, else the classic 4-byte one (*first).
 * Below 4 GiB every high half is 0 and the classic reading gives the same offsets; so it is
 * kept there, as tifffile does, for files that carry the NDPI tags in classic TIFF's layout.
 * `head` is the header's first 16 bytes. */
static void detect_ndpi(sp_tiff *t, const uint8_t *head, uint64_t *first) {
    if (t->big_endian || sp_source_size(t->src) <= UINT32_MAX) {
        return;
    }
    uint64_t wide = rd64(t, head + 4);
    if (wide != *first && wide < sp_source_size(t->src) &&
        dir_has_tag(t, wide, SP_TAG_NDPI_FORMAT_FLAG)) {
        t->ndpi = true;
        *first = wide;
    } else {
        t->ndpi = dir_has_tag(t, *first, SP_TAG_NDPI_FORMAT_FLAG);
    }
}

sp_status sp_tiff_open(sp_source *src, const sp_limits *limits, sp_tiff **out, sp_err *err) {
    *out = NULL;
    uint8_t head[16];
    uint64_t fsize = sp_source_size(src);
    if (fsize < 8) {
        return sp_err_set(err, SP_E_CORRUPT, "file too short to be a TIFF (%llu bytes)",
                          (unsigned long long)fsize);
    }
    sp_status st = sp_source_read(src, 0, head, fsize < 16 ? 8 : 16, err);
    if (st != SP_OK) {
        return st;
    }
    if (!sp_tiff_magic(head, 8)) {
        return sp_err_set(err, SP_E_NOT_A_SLIDE, "not a TIFF file");
    }
    sp_tiff *t = calloc(1, sizeof *t);
    if (t == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory");
    }
    t->src = src;
    t->limits = *limits;
    t->big_endian = head[0] == 'M';
    t->bigtiff = rd16(t, head + 2) == 43;
    uint64_t first;
    if (t->bigtiff) {
        if (fsize < 16 || rd16(t, head + 4) != 8 || rd16(t, head + 6) != 0) {
            sp_tiff_close(t);
            return sp_err_set(err, SP_E_CORRUPT, "bad BigTIFF header");
        }
        first = rd64(t, head + 8);
    } else {
        first = rd32(t, head + 4);
        detect_ndpi(t, head, &first); /* past 4 GiB: all 16 bytes of head were read */
    }
    parse_state ps = {.tiff = t};
    uint64_t offset = first;
    while (st == SP_OK && offset != 0) {
        sp_tiff_dir *grown = realloc(t->dirs, (t->n_dirs + 1) * sizeof *grown);
        if (grown == NULL) {
            st = sp_err_set(err, SP_E_NOMEM, "out of memory reading TIFF directories");
            break;
        }
        t->dirs = grown;
        uint64_t next = 0;
        st = parse_ifd(&ps, offset, 0, &t->dirs[t->n_dirs], &next, err);
        t->n_dirs++; /* counted even on failure so that close frees it */
        offset = next;
    }
    free(ps.seen);
    if (st == SP_OK && t->n_dirs == 0) {
        st = sp_err_set(err, SP_E_CORRUPT, "TIFF file has no directories");
    }
    if (st != SP_OK) {
        sp_tiff_close(t);
        return st;
    }
    *out = t;
    return SP_OK;
}

void sp_tiff_close(sp_tiff *tiff) {
    if (tiff == NULL) {
        return;
    }
    for (uint32_t i = 0; i < tiff->n_dirs; i++) {
        dir_free(&tiff->dirs[i]);
    }
    free(tiff->dirs);
    free(tiff);
}
