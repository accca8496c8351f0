/* zeiss_czi_dir.c — reading and checking the segments of a Zeiss CZI file (see zeiss_czi_dir.h):
 * the layouts of the ZISRAW specification, every position and size checked against the file. */
#include "formats/zeiss_czi_dir.h"

#include <stdlib.h>
#include <string.h>

#define SEGMENT_HEADER 32
#define FILE_HEADER_DATA 0x50 /* the ZISRAWFILE fields read here end at 0x50 + 32 */
#define DIRECTORY_HEAD 128    /* entry count and reserved bytes before the entries */
#define ENTRY_FIXED 32        /* DirectoryEntryDV before its dimension entries */
#define DIMENSION_ENTRY 20
#define MAX_DIMENSIONS 32     /* the specification knows 12; more is not a CZI file */
#define SUBBLOCK_HEAD_MIN 256 /* a subblock's header part is at least this long */
#define METADATA_HEAD 256
#define ATTDIR_HEAD 256
#define ATTACHMENT_ENTRY 128
#define ATTACH_HEAD 256

static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t rd64(const uint8_t *p) {
    return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

static int32_t rd_i32(const uint8_t *p) {
    return (int32_t)rd32(p);
}

bool sp_czi_magic(const uint8_t *head, size_t len) {
    return len >= SEGMENT_HEADER && memcmp(head, "ZISRAWFILE\0\0\0\0\0\0", 16) == 0;
}

/* The segment header at `pos`: its id must be `id`, and its used size (returned) must lie in the
 * file. */
static sp_status read_segment(sp_source *src, uint64_t size, uint64_t pos, const char *id,
                              uint64_t *used, sp_err *err) {
    uint8_t h[SEGMENT_HEADER];
    if (pos > size || size - pos < SEGMENT_HEADER) {
        return sp_err_set(err, SP_E_CORRUPT,
                          "the %s segment at offset %llu lies beyond the end of the file "
                          "(%llu bytes): truncated or corrupt",
                          id, (unsigned long long)pos, (unsigned long long)size);
    }
    sp_status st = sp_source_read(src, pos, h, sizeof h, err);
    if (st != SP_OK) {
        return st;
    }
    char want[16] = {0};
    memcpy(want, id, strlen(id));
    if (memcmp(h, want, 16) != 0) {
        return sp_err_set(err, SP_E_CORRUPT, "no %s segment at offset %llu", id,
                          (unsigned long long)pos);
    }
    uint64_t u = rd64(h + 24);
    if (u > size - pos - SEGMENT_HEADER) {
        return sp_err_set(err, SP_E_CORRUPT,
                          "the %s segment at offset %llu holds %llu bytes, past the end of the "
                          "file (%llu bytes): truncated or corrupt",
                          id, (unsigned long long)pos, (unsigned long long)u,
                          (unsigned long long)size);
    }
    *used = u;
    return SP_OK;
}

/* Read `len` bytes of a segment's data (from `from` within it) into a new buffer. */
static sp_status read_data(sp_source *src, const sp_limits *limits, uint64_t pos, uint64_t from,
                           uint64_t len, const char *what, uint8_t **out, sp_err *err) {
    void *buf = NULL;
    sp_status st = sp_alloc(limits, len + 1, what, &buf, err);
    if (st == SP_OK) {
        st = sp_source_read(src, pos + SEGMENT_HEADER + from, buf, (size_t)len, err);
    }
    if (st != SP_OK) {
        free(buf);
        return st;
    }
    ((uint8_t *)buf)[len] = 0;
    *out = buf;
    return SP_OK;
}

/* One DirectoryEntryDV at `p` (`avail` bytes): its size in *entry_len. */
static sp_status parse_entry(const uint8_t *p, uint64_t avail, uint64_t file_size, sp_czi_entry *e,
                             uint64_t *entry_len, sp_err *err) {
    if (avail < ENTRY_FIXED || memcmp(p, "DV", 2) != 0) {
        return sp_err_set(err, SP_E_CORRUPT, "a subblock directory entry is not a DV entry");
    }
    int32_t n_dims = rd_i32(p + 28);
    if (n_dims < 2 || n_dims > MAX_DIMENSIONS ||
        (uint64_t)n_dims * DIMENSION_ENTRY > avail - ENTRY_FIXED) {
        return sp_err_set(err, SP_E_CORRUPT,
                          "a subblock directory entry has %d dimension entries (2 to %d that fit "
                          "in the directory)",
                          n_dims, MAX_DIMENSIONS);
    }
    memset(e, 0, sizeof *e);
    e->pixel_type = rd_i32(p + 2);
    e->position = rd64(p + 6);
    e->compression = rd_i32(p + 18);
    if (rd_i32(p + 14) != 0) {
        return sp_err_set(err, SP_E_UNSUPPORTED,
                          "a subblock lies in part %d of a multi-file CZI image, which is not "
                          "supported",
                          rd_i32(p + 14));
    }
    if (e->position >= file_size) {
        return sp_err_set(err, SP_E_CORRUPT,
                          "a subblock lies at offset %llu, past the end of the file (%llu bytes): "
                          "truncated or corrupt",
                          (unsigned long long)e->position, (unsigned long long)file_size);
    }
    bool has_x = false, has_y = false;
    for (int32_t i = 0; i < n_dims; i++) {
        const uint8_t *d = p + ENTRY_FIXED + (size_t)i * DIMENSION_ENTRY;
        int64_t start = rd_i32(d + 4), size = rd_i32(d + 8), stored = rd_i32(d + 16);
        char name = (char)d[0];
        if (d[1] != 0) {
            name = '?'; /* no dimension has a longer name */
        }
        if (name == 'X' || name == 'Y') {
            if (size <= 0 || stored <= 0 || stored > size) {
                return sp_err_set(err, SP_E_CORRUPT,
                                  "a subblock's %c size is %lld, stored as %lld (sizes must be "
                                  "positive, the stored one at most the logical one)",
                                  name, (long long)size, (long long)stored);
            }
        }
        switch (name) {
        case 'X': e->x = start, e->width = size, e->stored_width = stored, has_x = true; break;
        case 'Y': e->y = start, e->height = size, e->stored_height = stored, has_y = true; break;
        case 'Z': e->start[SP_CZI_Z] = start; break;
        case 'C': e->start[SP_CZI_C] = start; break;
        case 'T': e->start[SP_CZI_T] = start; break;
        case 'S': e->start[SP_CZI_S] = start; break;
        case 'M': e->start[SP_CZI_M] = start; break;
        default: break; /* R, I, H, V, B: one value in the slides read here (docs/formats.md) */
        }
    }
    if (!has_x || !has_y) {
        return sp_err_set(err, SP_E_CORRUPT, "a subblock directory entry has no %s dimension",
                          has_x ? "Y" : "X");
    }
    *entry_len = ENTRY_FIXED + (uint64_t)n_dims * DIMENSION_ENTRY;
    return SP_OK;
}

static sp_status read_directory(sp_source *src, const sp_limits *limits, uint64_t pos,
                                sp_czi_file *out, sp_err *err) {
    uint64_t used = 0;
    uint8_t *buf = NULL;
    sp_status st = read_segment(src, out->size, pos, "ZISRAWDIRECTORY", &used, err);
    if (st == SP_OK && used < DIRECTORY_HEAD) {
        st = sp_err_set(err, SP_E_CORRUPT, "the subblock directory is %llu bytes, too short",
                        (unsigned long long)used);
    }
    if (st == SP_OK) {
        st = read_data(src, limits, pos, 0, used, "the CZI subblock directory", &buf, err);
    }
    int32_t count = st == SP_OK ? rd_i32(buf) : 0;
    if (st == SP_OK && (count <= 0 || (uint64_t)count > (used - DIRECTORY_HEAD) / ENTRY_FIXED)) {
        st = sp_err_set(err, SP_E_CORRUPT,
                        "the subblock directory counts %d entries, which its %llu bytes cannot "
                        "hold",
                        count, (unsigned long long)used);
    }
    if (st == SP_OK) {
        void *entries = NULL;
        st = sp_calloc(limits, (uint64_t)count, sizeof(sp_czi_entry), "the CZI subblock entries",
                       &entries, err);
        out->entries = entries;
    }
    uint64_t at = DIRECTORY_HEAD;
    for (int32_t i = 0; st == SP_OK && i < count; i++) {
        uint64_t len = 0;
        st = parse_entry(buf + at, used - at, out->size, &out->entries[i], &len, err);
        at += len;
        out->n_entries = (size_t)i + 1;
    }
    free(buf);
    return st;
}

static sp_status read_attachment_directory(sp_source *src, const sp_limits *limits, uint64_t pos,
                                           sp_czi_file *out, sp_err *err) {
    uint64_t used = 0;
    uint8_t *buf = NULL;
    sp_status st = read_segment(src, out->size, pos, "ZISRAWATTDIR", &used, err);
    if (st == SP_OK && used < ATTDIR_HEAD) {
        st = sp_err_set(err, SP_E_CORRUPT, "the attachment directory is %llu bytes, too short",
                        (unsigned long long)used);
    }
    if (st == SP_OK) {
        st = read_data(src, limits, pos, 0, used, "the CZI attachment directory", &buf, err);
    }
    int32_t count = st == SP_OK ? rd_i32(buf) : 0;
    if (st == SP_OK && (count < 0 || (uint64_t)count > (used - ATTDIR_HEAD) / ATTACHMENT_ENTRY)) {
        st = sp_err_set(err, SP_E_CORRUPT,
                        "the attachment directory counts %d entries, which its %llu bytes cannot "
                        "hold",
                        count, (unsigned long long)used);
    }
    if (st == SP_OK && count > 0) {
        void *atts = NULL;
        st = sp_calloc(limits, (uint64_t)count, sizeof(sp_czi_attachment),
                       "the CZI attachment entries", &atts, err);
        out->attachments = atts;
    }
    for (int32_t i = 0; st == SP_OK && i < count; i++) {
        const uint8_t *p = buf + ATTDIR_HEAD + (size_t)i * ATTACHMENT_ENTRY;
        if (memcmp(p, "A1", 2) != 0) {
            continue; /* another schema: not an attachment this reader knows */
        }
        sp_czi_attachment *a = &out->attachments[out->n_attachments++];
        a->position = rd64(p + 12);
        memcpy(a->type, p + 40, 8);
        memcpy(a->name, p + 48, 80);
    }
    free(buf);
    return st;
}

sp_status sp_czi_read_file(sp_source *src, const sp_limits *limits, sp_czi_file *out, sp_err *err) {
    memset(out, 0, sizeof *out);
    out->size = sp_source_size(src);
    uint64_t used = 0;
    uint8_t h[FILE_HEADER_DATA];
    sp_status st = read_segment(src, out->size, 0, "ZISRAWFILE", &used, err);
    if (st == SP_OK && used < sizeof h) {
        st = sp_err_set(err, SP_E_CORRUPT, "the CZI file header is %llu bytes, too short",
                        (unsigned long long)used);
    }
    if (st == SP_OK) {
        st = sp_source_read(src, SEGMENT_HEADER, h, sizeof h, err);
    }
    if (st != SP_OK) {
        return st;
    }
    int32_t major = rd_i32(h);
    if (major != 1) {
        return sp_err_set(err, SP_E_UNSUPPORTED, "CZI file version %d is not supported (1 is)",
                          major);
    }
    if (rd_i32(h + 0x30) != 0) {
        return sp_err_set(err, SP_E_UNSUPPORTED,
                          "this file is part %d of a multi-file CZI image, which is not supported",
                          rd_i32(h + 0x30));
    }
    uint64_t directory = rd64(h + 0x34);
    out->metadata_position = rd64(h + 0x3c);
    out->attachments_position = rd64(h + 0x48);
    if (directory == 0) {
        return sp_err_set(err, SP_E_CORRUPT, "the CZI file header points to no subblock directory");
    }
    st = read_directory(src, limits, directory, out, err);
    if (st == SP_OK && out->attachments_position != 0) {
        st = read_attachment_directory(src, limits, out->attachments_position, out, err);
    }
    return st;
}

void sp_czi_file_free(sp_czi_file *file) {
    if (file != NULL) {
        free(file->entries);
        free(file->attachments);
        memset(file, 0, sizeof *file);
    }
}

sp_status sp_czi_read_subblock(sp_source *src, const sp_limits *limits, const sp_czi_entry *entry,
                               uint8_t **data, size_t *len, sp_err *err) {
    *data = NULL;
    *len = 0;
    uint64_t size = sp_source_size(src), used = 0;
    uint8_t h[16 + ENTRY_FIXED];
    sp_status st = read_segment(src, size, entry->position, "ZISRAWSUBBLOCK", &used, err);
    if (st == SP_OK && used < sizeof h) {
        st = sp_err_set(err, SP_E_CORRUPT, "the subblock at offset %llu is too short",
                        (unsigned long long)entry->position);
    }
    if (st == SP_OK) {
        st = sp_source_read(src, entry->position + SEGMENT_HEADER, h, sizeof h, err);
    }
    if (st != SP_OK) {
        return st;
    }
    int32_t metadata = rd_i32(h), n_dims = rd_i32(h + 16 + 28);
    uint64_t data_size = rd64(h + 8);
    uint64_t head = 16 + ENTRY_FIXED + (uint64_t)(n_dims < 0 ? 0 : n_dims) * DIMENSION_ENTRY;
    head = head < SUBBLOCK_HEAD_MIN ? SUBBLOCK_HEAD_MIN : head;
    if (metadata < 0 || n_dims < 0 || n_dims > MAX_DIMENSIONS || head > used ||
        (uint64_t)metadata > used - head || data_size > used - head - (uint64_t)metadata) {
        return sp_err_set(err, SP_E_CORRUPT,
                          "the subblock at offset %llu has sizes (metadata %d, data %llu) that "
                          "do not fit in its %llu bytes",
                          (unsigned long long)entry->position, metadata,
                          (unsigned long long)data_size, (unsigned long long)used);
    }
    st = read_data(src, limits, entry->position, head + (uint64_t)metadata, data_size,
                   "a CZI subblock", data, err);
    if (st == SP_OK) {
        *len = (size_t)data_size;
    }
    return st;
}

sp_status sp_czi_read_metadata(sp_source *src, const sp_limits *limits, const sp_czi_file *file,
                               char **xml, size_t *len, sp_err *err) {
    *xml = NULL;
    *len = 0;
    if (file->metadata_position == 0) {
        return SP_OK;
    }
    uint64_t used = 0;
    uint8_t h[8];
    sp_status st =
        read_segment(src, file->size, file->metadata_position, "ZISRAWMETADATA", &used, err);
    if (st == SP_OK && used < METADATA_HEAD) {
        st = sp_err_set(err, SP_E_CORRUPT, "the metadata segment is %llu bytes, too short",
                        (unsigned long long)used);
    }
    if (st == SP_OK) {
        st = sp_source_read(src, file->metadata_position + SEGMENT_HEADER, h, sizeof h, err);
    }
    if (st != SP_OK) {
        return st;
    }
    int32_t xml_size = rd_i32(h);
    if (xml_size < 0 || (uint64_t)xml_size > used - METADATA_HEAD) {
        return sp_err_set(err, SP_E_CORRUPT,
                          "the metadata segment's XML (%d bytes) does not fit in its %llu bytes",
                          xml_size, (unsigned long long)used);
    }
    if ((int64_t)xml_size > limits->value[SP_LIMIT_MAX_METADATA]) {
        return sp_err_set(err, SP_E_LIMIT, "the metadata XML is %d bytes, over the limit of %lld",
                          xml_size, (long long)limits->value[SP_LIMIT_MAX_METADATA]);
    }
    uint8_t *buf = NULL;
    st = read_data(src, limits, file->metadata_position, METADATA_HEAD, (uint64_t)xml_size,
                   "the CZI metadata", &buf, err);
    if (st == SP_OK) {
        *xml = (char *)buf;
        *len = (size_t)xml_size;
    }
    return st;
}

sp_status sp_czi_attachment_data(sp_source *src, const sp_czi_attachment *a, uint64_t *offset,
                                 uint64_t *len, sp_err *err) {
    uint64_t size = sp_source_size(src), used = 0;
    uint8_t h[4];
    sp_status st = read_segment(src, size, a->position, "ZISRAWATTACH", &used, err);
    if (st == SP_OK && used < ATTACH_HEAD) {
        st = sp_err_set(err, SP_E_CORRUPT, "the attachment %s is too short", a->name);
    }
    if (st == SP_OK) {
        st = sp_source_read(src, a->position + SEGMENT_HEADER, h, sizeof h, err);
    }
    if (st != SP_OK) {
        return st;
    }
    int32_t data_size = rd_i32(h);
    if (data_size <= 0 || (uint64_t)data_size > used - ATTACH_HEAD) {
        return sp_err_set(err, SP_E_CORRUPT,
                          "the attachment %s holds %d bytes of data, which do not fit in its "
                          "segment (%llu bytes)",
                          a->name, data_size, (unsigned long long)used);
    }
    *offset = a->position + SEGMENT_HEADER + ATTACH_HEAD;
    *len = (uint64_t)data_size;
    return SP_OK;
}
