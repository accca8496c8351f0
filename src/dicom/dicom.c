/* dicom.c — the DICOM Part 10 reader (see dicom.h): preamble and File Meta group, the data set
 * walked element by element with an explicit stack of open sequences and items (no recursion),
 * a table of wanted attributes, and the frame index of the Pixel Data element.
 *
 * Element encoding (PS3.5 section 7): a tag (group, element: two little-endian uint16), then in
 * explicit VR a two-letter VR and a length of 2 bytes, or of 4 bytes after 2 reserved bytes for
 * the VRs listed in long_length_vr(); in implicit VR a 4-byte length and no VR. A length of
 * 0xFFFFFFFF is undefined: the value is a sequence of items ended by a delimiter. Items and
 * delimiters (group FFFE) are always a tag and a 4-byte length. The reads go through a small
 * window buffer over the source, so a header of a million elements costs a few hundred reads.
 */
#include "dicom/dicom.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/numbers.h"
#include "base/strings.h"

#define TAG(g, e) (((uint32_t)(g) << 16) | (uint32_t)(e))
#define TAG_ITEM TAG(0xFFFE, 0xE000)
#define TAG_ITEM_DELIM TAG(0xFFFE, 0xE00D)
#define TAG_SEQ_DELIM TAG(0xFFFE, 0xE0DD)
#define TAG_PIXEL_DATA TAG(0x7FE0, 0x0010)
#define TAG_PER_FRAME TAG(0x5200, 0x9230)
#define TAG_PLANE_POSITION_SLIDE TAG(0x0048, 0x021A)
#define TAG_COLUMN_POSITION TAG(0x0048, 0x021E)
#define TAG_ROW_POSITION TAG(0x0048, 0x021F)
#define TAG_Z_OFFSET TAG(0x0040, 0x074A)
#define TAG_OPTICAL_PATH_ID_SEQ TAG(0x0048, 0x0207)
#define TAG_OPTICAL_PATH_ID TAG(0x0048, 0x0106)
#define UNDEFINED_LENGTH 0xFFFFFFFFu
#define NO_END UINT64_MAX
#define WINDOW (64 * 1024)
#define MAX_STACK 64

#define GROUP(t) ((t) >> 16)
#define ELEM(t) ((t)&0xFFFF)

static const char *const SYNTAX_IMPLICIT_LE = "1.2.840.10008.1.2";
static const char *const SYNTAX_EXPLICIT_BE = "1.2.840.10008.1.2.2";
static const char *const SYNTAX_DEFLATED = "1.2.840.10008.1.2.1.99";

/* ---- the wanted attributes ------------------------------------------------------------- */

typedef struct wanted {
    uint32_t tag;
    uint32_t path[2]; /* enclosing sequences, outermost first (first item of each) */
    uint8_t depth;
    char vr[3]; /* the dictionary VR, used when the file does not say (implicit VR) */
    sp_dicom_attr attr;
} wanted;

static const wanted WANTED[] = {
    {TAG(0x0002, 0x0002), {0, 0}, 0, "UI", SP_DICOM_MEDIA_SOP_CLASS_UID},
    {TAG(0x0002, 0x0003), {0, 0}, 0, "UI", SP_DICOM_MEDIA_SOP_INSTANCE_UID},
    {TAG(0x0002, 0x0010), {0, 0}, 0, "UI", SP_DICOM_TRANSFER_SYNTAX_UID},
    {TAG(0x0008, 0x0008), {0, 0}, 0, "CS", SP_DICOM_IMAGE_TYPE},
    {TAG(0x0008, 0x0016), {0, 0}, 0, "UI", SP_DICOM_SOP_CLASS_UID},
    {TAG(0x0008, 0x0018), {0, 0}, 0, "UI", SP_DICOM_SOP_INSTANCE_UID},
    {TAG(0x0008, 0x0070), {0, 0}, 0, "LO", SP_DICOM_MANUFACTURER},
    {TAG(0x0008, 0x103E), {0, 0}, 0, "LO", SP_DICOM_SERIES_DESCRIPTION},
    {TAG(0x0008, 0x1090), {0, 0}, 0, "LO", SP_DICOM_MANUFACTURER_MODEL_NAME},
    {TAG(0x0020, 0x000D), {0, 0}, 0, "UI", SP_DICOM_STUDY_INSTANCE_UID},
    {TAG(0x0020, 0x000E), {0, 0}, 0, "UI", SP_DICOM_SERIES_INSTANCE_UID},
    {TAG(0x0020, 0x0013), {0, 0}, 0, "IS", SP_DICOM_INSTANCE_NUMBER},
    {TAG(0x0020, 0x9161), {0, 0}, 0, "UI", SP_DICOM_CONCATENATION_UID},
    {TAG(0x0020, 0x9162), {0, 0}, 0, "US", SP_DICOM_IN_CONCATENATION_NUMBER},
    {TAG(0x0020, 0x9228), {0, 0}, 0, "UL", SP_DICOM_CONCATENATION_FRAME_OFFSET},
    {TAG(0x0020, 0x9311), {0, 0}, 0, "CS", SP_DICOM_DIMENSION_ORGANIZATION_TYPE},
    {TAG(0x0028, 0x0002), {0, 0}, 0, "US", SP_DICOM_SAMPLES_PER_PIXEL},
    {TAG(0x0028, 0x0004), {0, 0}, 0, "CS", SP_DICOM_PHOTOMETRIC_INTERPRETATION},
    {TAG(0x0028, 0x0006), {0, 0}, 0, "US", SP_DICOM_PLANAR_CONFIGURATION},
    {TAG(0x0028, 0x0008), {0, 0}, 0, "IS", SP_DICOM_NUMBER_OF_FRAMES},
    {TAG(0x0028, 0x0010), {0, 0}, 0, "US", SP_DICOM_ROWS},
    {TAG(0x0028, 0x0011), {0, 0}, 0, "US", SP_DICOM_COLUMNS},
    {TAG(0x0028, 0x0100), {0, 0}, 0, "US", SP_DICOM_BITS_ALLOCATED},
    {TAG(0x0028, 0x0101), {0, 0}, 0, "US", SP_DICOM_BITS_STORED},
    {TAG(0x0028, 0x0103), {0, 0}, 0, "US", SP_DICOM_PIXEL_REPRESENTATION},
    {TAG(0x0040, 0x0512), {0, 0}, 0, "LO", SP_DICOM_CONTAINER_IDENTIFIER},
    {TAG(0x0048, 0x0006), {0, 0}, 0, "UL", SP_DICOM_TOTAL_PIXEL_MATRIX_COLUMNS},
    {TAG(0x0048, 0x0007), {0, 0}, 0, "UL", SP_DICOM_TOTAL_PIXEL_MATRIX_ROWS},
    {TAG(0x0048, 0x0112), {TAG(0x0048, 0x0105), 0}, 1, "DS", SP_DICOM_OBJECTIVE_LENS_POWER},
    {TAG(0x0048, 0x0302), {0, 0}, 0, "UL", SP_DICOM_NUMBER_OF_OPTICAL_PATHS},
    {TAG(0x0048, 0x0303), {0, 0}, 0, "UL", SP_DICOM_TOTAL_PIXEL_MATRIX_FOCAL_PLANES},
    {TAG(0x2200, 0x0005), {0, 0}, 0, "LT", SP_DICOM_BARCODE_VALUE},
    {TAG(0x0028, 0x0030),
     {TAG(0x5200, 0x9229), TAG(0x0028, 0x9110)},
     2,
     "DS",
     SP_DICOM_PIXEL_SPACING},
    {TAG(0x7FE0, 0x0001), {0, 0}, 0, "OV", SP_DICOM_EXTENDED_OFFSET_TABLE},
    {TAG(0x7FE0, 0x0002), {0, 0}, 0, "OV", SP_DICOM_EXTENDED_OFFSET_TABLE_LENGTHS},
    {TAG(0x0028, 0x2000), {TAG(0x0048, 0x0105), 0}, 1, "OB", SP_DICOM_ICC_PROFILE},
    {TAG(0x0048, 0x0106), {TAG(0x0048, 0x0105), 0}, 1, "SH", SP_DICOM_OPTICAL_PATH_IDENTIFIER},
    {TAG(0x0040, 0x074A),
     {TAG(0x5200, 0x9229), TAG_PLANE_POSITION_SLIDE},
     2,
     "DS",
     SP_DICOM_SHARED_Z_OFFSET},
};

/* Sequences on the paths above: in implicit VR a defined-length value is only known to be a
 * sequence from the dictionary. */
static bool known_sequence(uint32_t tag) {
    return tag == TAG(0x0048, 0x0105) || tag == TAG(0x5200, 0x9229) || tag == TAG(0x0028, 0x9110) ||
           tag == TAG_PER_FRAME || tag == TAG_PLANE_POSITION_SLIDE ||
           tag == TAG_OPTICAL_PATH_ID_SEQ;
}

/* VRs whose explicit encoding has 2 reserved bytes and a 4-byte length (PS3.5 table 7.1-1). */
static bool long_length_vr(const char vr[2]) {
    static const char *const LONG[] = {"OB", "OD", "OF", "OL", "OV", "OW", "SQ",
                                       "SV", "UC", "UN", "UR", "UT", "UV"};
    for (size_t i = 0; i < sizeof LONG / sizeof LONG[0]; i++) {
        if (vr[0] == LONG[i][0] && vr[1] == LONG[i][1]) {
            return true;
        }
    }
    return false;
}

static bool known_short_vr(const char vr[2]) {
    static const char *const SHORT[] = {"AE", "AS", "AT", "CS", "DA", "DS", "DT",
                                        "FL", "FD", "IS", "LO", "LT", "PN", "SH",
                                        "SL", "SS", "ST", "TM", "UI", "UL", "US"};
    for (size_t i = 0; i < sizeof SHORT / sizeof SHORT[0]; i++) {
        if (vr[0] == SHORT[i][0] && vr[1] == SHORT[i][1]) {
            return true;
        }
    }
    return false;
}

static bool vr_is(const char vr[2], const char *name) {
    return vr[0] == name[0] && vr[1] == name[1];
}

/* ---- buffered reads ------------------------------------------------------------------------ */

typedef struct reader {
    sp_source *src;
    uint64_t size;
    uint64_t start; /* file offset of buf[0] */
    size_t len;
    uint8_t *buf;
} reader;

static uint16_t le16(const uint8_t *p) {
    return (uint16_t)(p[0] | p[1] << 8);
}
static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t le64(const uint8_t *p) {
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

static sp_status truncated(const reader *r, uint64_t pos, uint64_t n, sp_err *err) {
    return sp_err_set(err, SP_E_CORRUPT,
                      "DICOM: truncated: %llu bytes at offset %llu lie beyond the end of %s "
                      "(%llu bytes)",
                      (unsigned long long)n, (unsigned long long)pos, sp_source_name(r->src),
                      (unsigned long long)r->size);
}

/* Copy n (<= WINDOW) bytes at pos into out. */
static sp_status rd(reader *r, uint64_t pos, void *out, size_t n, sp_err *err) {
    if (pos > r->size || n > r->size - pos) {
        return truncated(r, pos, n, err);
    }
    if (pos < r->start || pos + n > r->start + r->len) {
        uint64_t want = r->size - pos < WINDOW ? r->size - pos : WINDOW;
        sp_status st = sp_source_read(r->src, pos, r->buf, (size_t)want, err);
        if (st != SP_OK) {
            r->len = 0;
            return st;
        }
        r->start = pos;
        r->len = (size_t)want;
    }
    memcpy(out, r->buf + (pos - r->start), n);
    return SP_OK;
}

/* ---- parse state ----------------------------------------------------------------------------- */

/* An open sequence or item. The stack alternates: [0] the data set, [1] a sequence, [2] one of
 * its items, [3] a sequence inside that item, ... */
typedef struct container {
    uint32_t tag;   /* the sequence's tag (items: their sequence's) */
    bool item;      /* an item's data set (or the top-level data set) vs. a sequence */
    bool implicit;  /* elements inside are implicit VR */
    uint64_t end;   /* one past its last byte, or NO_END (undefined length) */
    uint64_t bound; /* the nearest defined end here or in an enclosing container */
    uint64_t index; /* item: its index in the sequence; sequence: items seen so far */
} container;

typedef struct parser {
    sp_dicom *d;
    reader r;
    container stack[MAX_STACK];
    int sp;
    sp_err *err;
} parser;

static sp_status count_element(parser *p) {
    if (++p->d->n_elements > p->d->options.max_elements) {
        return sp_err_set(p->err, SP_E_LIMIT,
                          "DICOM: more than %llu data elements (the element limit)",
                          (unsigned long long)p->d->options.max_elements);
    }
    return SP_OK;
}

static sp_status corrupt_at(parser *p, uint64_t pos, const char *what, uint32_t tag) {
    return sp_err_set(p->err, SP_E_CORRUPT, "DICOM: %s (%04X,%04X) at offset %llu", what,
                      GROUP(tag), ELEM(tag), (unsigned long long)pos);
}

/* Store a wanted value (the first occurrence wins). */
static sp_status keep_value(parser *p, sp_dicom_attr attr, const char vr[2], uint64_t pos,
                            uint64_t len) {
    sp_dicom_value *v = &p->d->attrs[attr];
    if (v->present) {
        return SP_OK;
    }
    if (len > (uint64_t)p->d->limits.value[SP_LIMIT_MAX_METADATA] || len > UINT32_MAX) {
        return sp_err_set(p->err, SP_E_LIMIT,
                          "DICOM: a %llu-byte value at offset %llu exceeds the metadata limit "
                          "(%lld bytes)",
                          (unsigned long long)len, (unsigned long long)pos,
                          (long long)p->d->limits.value[SP_LIMIT_MAX_METADATA]);
    }
    uint8_t *data = NULL;
    sp_status st = sp_alloc(&p->d->limits, len + 1, "DICOM value", (void **)&data, p->err);
    if (st != SP_OK) {
        return st;
    }
    st = len <= WINDOW ? rd(&p->r, pos, data, (size_t)len, p->err)
                       : sp_source_read(p->r.src, pos, data, (size_t)len, p->err);
    if (st != SP_OK) {
        free(data);
        return st;
    }
    data[len] = 0;
    v->present = true;
    v->vr[0] = vr[0];
    v->vr[1] = vr[1];
    v->len = (uint32_t)len;
    v->data = data;
    return SP_OK;
}

/* The sequences enclosing the current data set: their tags and the index of the item we are in.
 * Returns their number. */
static int enclosing(const parser *p, uint32_t *tags, uint64_t *items, int max) {
    int n = 0;
    for (int i = 1; i + 1 <= p->sp && n < max; i += 2) {
        tags[n] = p->stack[i].tag;
        items[n] = p->stack[i + 1].index;
        n++;
    }
    return n;
}

static const wanted *find_wanted(const parser *p, uint32_t tag) {
    uint32_t tags[2];
    uint64_t items[2];
    if (p->sp > 4) {
        return NULL;
    }
    int depth = enclosing(p, tags, items, 2);
    for (size_t i = 0; i < sizeof WANTED / sizeof WANTED[0]; i++) {
        const wanted *w = &WANTED[i];
        if (w->tag != tag || w->depth != depth) {
            continue;
        }
        bool match = true;
        for (int j = 0; j < depth; j++) {
            match = match && tags[j] == w->path[j] && items[j] == 0;
        }
        if (match) {
            return w;
        }
    }
    return NULL;
}

static sp_status grow_positions(parser *p, uint64_t index) {
    sp_dicom *d = p->d;
    if (index < d->n_positions) {
        return SP_OK;
    }
    if (index >= d->options.max_frames || index >= UINT32_MAX) {
        return sp_err_set(p->err, SP_E_LIMIT,
                          "DICOM: more than %llu per-frame functional group items (the frame "
                          "limit)",
                          (unsigned long long)d->options.max_frames);
    }
    uint64_t cap = d->n_positions ? d->n_positions : 64;
    while (cap <= index) {
        cap *= 2;
    }
    /* n_positions doubles as the capacity: unused entries are "absent". */
    sp_dicom_position *grown = NULL;
    sp_status st =
        sp_alloc(&d->limits, cap * sizeof *grown, "DICOM frame positions", (void **)&grown, p->err);
    if (st != SP_OK) {
        return st;
    }
    if (d->n_positions) {
        memcpy(grown, d->positions, d->n_positions * sizeof *grown);
    }
    for (uint64_t i = d->n_positions; i < cap; i++) {
        grown[i] = (sp_dicom_position){.column = SP_DICOM_NO_POSITION, .row = SP_DICOM_NO_POSITION};
    }
    free(d->positions);
    d->positions = grown;
    d->n_positions = cap;
    return SP_OK;
}

/* Whether the element being read sits in PerFrameFunctionalGroupsSequence[i] > `sequence`[0]. */
static bool in_frame_group(const parser *p, uint32_t sequence) {
    return p->sp == 4 && p->stack[1].tag == TAG_PER_FRAME && p->stack[3].tag == sequence &&
           p->stack[4].index == 0 && p->stack[2].index < p->d->n_positions;
}

/* A frame's place inside PerFrameFunctionalGroupsSequence[i]: the column, row (SL) and Z offset
 * (DS) of PlanePositionSlideSequence[0], the identifier (SH) of
 * OpticalPathIdentificationSequence[0]. *kept: the element was one of these. */
static sp_status keep_position(parser *p, uint32_t tag, const char vr[2], uint64_t pos,
                               uint64_t len, bool *kept) {
    bool path = tag == TAG_OPTICAL_PATH_ID;
    *kept = in_frame_group(p, path ? TAG_OPTICAL_PATH_ID_SEQ : TAG_PLANE_POSITION_SLIDE);
    if (!*kept) {
        return SP_OK;
    }
    sp_dicom_position *at = &p->d->positions[p->stack[2].index];
    char text[17] = {0};
    if (path || tag == TAG_Z_OFFSET) { /* SH or DS: up to 16 characters, space-padded */
        sp_status st = len <= 16 ? rd(&p->r, pos, text, (size_t)len, p->err) : SP_OK;
        if (st != SP_OK || len > 16) {
            return st;
        }
        size_t n = strnlen(text, sizeof text - 1);
        while (n > 0 && (text[n - 1] == ' ' || text[n - 1] == '\0')) {
            text[--n] = '\0';
        }
        size_t lead = strspn(text, " ");
        if (path) {
            memcpy(at->path_id, text + lead, n - lead + 1);
            return SP_OK;
        }
        char *end = NULL;
        double z = sp_strtod(text + lead, &end);
        at->has_z = end != text + lead && *end == '\0' && isfinite(z);
        at->z = at->has_z ? z : 0;
        return SP_OK;
    }
    if (len != 4 || !(vr_is(vr, "SL") || vr_is(vr, "UN"))) {
        return SP_OK;
    }
    uint8_t b[4];
    sp_status st = rd(&p->r, pos, b, 4, p->err);
    if (st != SP_OK) {
        return st;
    }
    int64_t v = (int32_t)le32(b);
    if (tag == TAG_COLUMN_POSITION) {
        at->column = v;
    } else {
        at->row = v;
    }
    return SP_OK;
}

static sp_status push(parser *p, container c) {
    if (p->sp + 1 >= MAX_STACK) {
        return sp_err_set(p->err, SP_E_LIMIT, "DICOM: sequences nested too deeply");
    }
    const container *parent = &p->stack[p->sp];
    c.bound = c.end != NO_END ? c.end : parent->bound;
    p->stack[++p->sp] = c;
    return SP_OK;
}

/* Read an item or delimiter header at `pos`: its tag and 32-bit length. */
static sp_status read_item_header(reader *r, uint64_t pos, uint32_t *tag, uint32_t *len,
                                  sp_err *err) {
    uint8_t h[8];
    sp_status st = rd(r, pos, h, 8, err);
    if (st == SP_OK) {
        *tag = TAG(le16(h), le16(h + 2));
        *len = le32(h + 4);
    }
    return st;
}

/* Skip an undefined-length value that is not a sequence of data sets: encapsulated pixel data
 * (for instance in an icon image), items of raw bytes ended by a sequence delimiter. */
static sp_status skip_fragments(parser *p, uint64_t *pos, uint64_t bound) {
    for (;;) {
        if (*pos > bound || bound - *pos < 8) {
            return truncated(&p->r, *pos, 8, p->err);
        }
        uint32_t tag, len;
        sp_status st = read_item_header(&p->r, *pos, &tag, &len, p->err);
        if (st == SP_OK) {
            st = count_element(p);
        }
        if (st != SP_OK) {
            return st;
        }
        *pos += 8;
        if (tag == TAG_SEQ_DELIM) {
            return SP_OK;
        }
        if (tag != TAG_ITEM || len == UNDEFINED_LENGTH) {
            return corrupt_at(p, *pos - 8, "expected a fragment item, found", tag);
        }
        if (len > bound - *pos) {
            return truncated(&p->r, *pos, len, p->err);
        }
        *pos += len;
    }
}

/* The File Meta group: explicit VR little endian whatever the transfer syntax, group 0002. */
static sp_status parse_meta(parser *p, uint64_t *pos) {
    for (;;) {
        uint8_t h[12];
        if (p->r.size - *pos < 8) {
            return SP_OK; /* a file with nothing after its meta group */
        }
        sp_status st = rd(&p->r, *pos, h, 8, p->err);
        if (st != SP_OK) {
            return st;
        }
        uint32_t tag = TAG(le16(h), le16(h + 2));
        if (GROUP(tag) != 0x0002) {
            return SP_OK;
        }
        if ((st = count_element(p)) != SP_OK) {
            return st;
        }
        char vr[2] = {(char)h[4], (char)h[5]};
        uint64_t len, hdr;
        if (long_length_vr(vr)) {
            if ((st = rd(&p->r, *pos, h, 12, p->err)) != SP_OK) {
                return st;
            }
            len = le32(h + 8);
            hdr = 12;
        } else if (known_short_vr(vr)) {
            len = le16(h + 6);
            hdr = 8;
        } else {
            return corrupt_at(p, *pos, "File Meta element with an unknown VR:", tag);
        }
        if (len == UNDEFINED_LENGTH) {
            return corrupt_at(p, *pos, "undefined length in the File Meta group at", tag);
        }
        uint64_t value = *pos + hdr;
        if (value > p->r.size || len > p->r.size - value) {
            return truncated(&p->r, value, len, p->err);
        }
        const wanted *w = find_wanted(p, tag);
        if (w != NULL && (st = keep_value(p, w->attr, vr, value, len)) != SP_OK) {
            return st;
        }
        *pos = value + len;
    }
}

/* Read one element header inside a data set; fills tag, vr, len and the header size. */
static sp_status element_header(parser *p, uint64_t pos, bool implicit, uint64_t bound,
                                uint32_t *tag, char vr[2], uint32_t *len, uint64_t *hdr) {
    uint8_t h[12];
    if (pos > bound || bound - pos < 8) {
        return truncated(&p->r, pos, 8, p->err);
    }
    sp_status st = rd(&p->r, pos, h, 8, p->err);
    if (st != SP_OK) {
        return st;
    }
    *tag = TAG(le16(h), le16(h + 2));
    if (implicit || GROUP(*tag) == 0xFFFE) {
        *len = le32(h + 4);
        *hdr = 8;
        vr[0] = 'U';
        vr[1] = 'N';
        const wanted *w = find_wanted(p, *tag);
        if (w != NULL) {
            vr[0] = w->vr[0];
            vr[1] = w->vr[1];
        } else if (known_sequence(*tag) || *len == UNDEFINED_LENGTH) {
            vr[0] = 'S';
            vr[1] = 'Q';
        }
        if (*tag == TAG_COLUMN_POSITION || *tag == TAG_ROW_POSITION) {
            vr[0] = 'S';
            vr[1] = 'L';
        } else if (*tag == TAG_PIXEL_DATA) {
            vr[0] = 'O'; /* encapsulated fragments, not data sets, when undefined */
            vr[1] = 'B';
        }
        return SP_OK;
    }
    vr[0] = (char)h[4];
    vr[1] = (char)h[5];
    if (known_short_vr(vr)) {
        *len = le16(h + 6);
        *hdr = 8;
        return SP_OK;
    }
    /* Long-length VRs, and (PS3.5 7.1.2) VRs this reader does not know, which later editions
     * of the standard define with the same layout. */
    if (!(vr[0] >= 'A' && vr[0] <= 'Z' && vr[1] >= 'A' && vr[1] <= 'Z')) {
        return corrupt_at(p, pos, "invalid VR in element", *tag);
    }
    if (bound - pos < 12) {
        return truncated(&p->r, pos, 12, p->err);
    }
    if ((st = rd(&p->r, pos, h, 12, p->err)) != SP_OK) {
        return st;
    }
    *len = le32(h + 8);
    *hdr = 12;
    return SP_OK;
}

static sp_status parse_dataset(parser *p, uint64_t pos) {
    sp_dicom *d = p->d;
    p->sp = 0;
    p->stack[0] =
        (container){.item = true, .implicit = d->implicit_vr, .end = p->r.size, .bound = p->r.size};
    for (;;) {
        container *top = &p->stack[p->sp];
        if (top->end != NO_END && pos >= top->end) {
            if (p->sp == 0) {
                return SP_OK; /* no Pixel Data */
            }
            if (top->item) {
                p->stack[p->sp - 1].index++;
            }
            p->sp--;
            continue;
        }
        sp_status st;
        if (!top->item) {
            /* Inside a sequence: an item or the sequence delimiter. */
            uint8_t h[8];
            if (top->bound - pos < 8) {
                return truncated(&p->r, pos, 8, p->err);
            }
            if ((st = rd(&p->r, pos, h, 8, p->err)) != SP_OK || (st = count_element(p)) != SP_OK) {
                return st;
            }
            uint32_t tag = TAG(le16(h), le16(h + 2));
            uint32_t len = le32(h + 4);
            if (tag == TAG_SEQ_DELIM) {
                if (top->end != NO_END) {
                    return corrupt_at(p, pos, "sequence delimiter inside a defined-length sequence",
                                      top->tag);
                }
                pos += 8;
                p->sp--;
                continue;
            }
            if (tag != TAG_ITEM) {
                return corrupt_at(p, pos, "expected an item in a sequence, found", tag);
            }
            pos += 8;
            container item = {.tag = top->tag,
                              .item = true,
                              .implicit = top->implicit,
                              .end = NO_END,
                              .index = top->index};
            if (len != UNDEFINED_LENGTH) {
                if (len > top->bound - pos) {
                    return corrupt_at(p, pos - 8, "an item overruns its sequence", top->tag);
                }
                item.end = pos + len;
            }
            if (p->sp == 1 && top->tag == TAG_PER_FRAME &&
                (st = grow_positions(p, top->index)) != SP_OK) {
                return st;
            }
            if ((st = push(p, item)) != SP_OK) {
                return st;
            }
            continue;
        }

        /* Inside a data set: an element, or the end of an undefined-length item. */
        uint32_t tag = 0, len = 0;
        char vr[2];
        uint64_t hdr = 0;
        if ((st = element_header(p, pos, top->implicit, top->bound, &tag, vr, &len, &hdr)) !=
                SP_OK ||
            (st = count_element(p)) != SP_OK) {
            return st;
        }
        if (tag == TAG_ITEM_DELIM) {
            if (p->sp == 0 || top->end != NO_END) {
                return corrupt_at(p, pos, "unexpected item delimiter", tag);
            }
            pos += 8;
            p->stack[p->sp - 1].index++;
            p->sp--;
            continue;
        }
        if (GROUP(tag) == 0xFFFE) {
            return corrupt_at(p, pos, "unexpected item or delimiter in a data set:", tag);
        }
        uint64_t value = pos + hdr;
        if (tag == TAG_PIXEL_DATA && p->sp == 0) {
            d->has_pixel_data = true;
            d->pixel_offset = value;
            if (len == UNDEFINED_LENGTH) {
                d->encapsulated = true;
            } else {
                if (value > p->r.size || len > p->r.size - value) {
                    return truncated(&p->r, value, len, p->err);
                }
                d->pixel_length = len;
            }
            return SP_OK; /* nothing after Pixel Data is needed */
        }
        bool sequence = vr_is(vr, "SQ") ||
                        (len == UNDEFINED_LENGTH && vr_is(vr, "UN") && tag != TAG_PIXEL_DATA);
        if (sequence) {
            int open_sequences = (p->sp + 1) / 2;
            if ((uint32_t)open_sequences >= d->options.max_depth) {
                return sp_err_set(p->err, SP_E_LIMIT,
                                  "DICOM: sequences nested deeper than %u levels (the depth "
                                  "limit) at offset %llu",
                                  d->options.max_depth, (unsigned long long)pos);
            }
            /* PS3.5 6.2.2: an undefined-length UN holds a sequence in implicit VR LE. */
            container seq = {.tag = tag,
                             .item = false,
                             .implicit = top->implicit || vr_is(vr, "UN"),
                             .end = NO_END};
            if (len != UNDEFINED_LENGTH) {
                if (value > top->bound || len > top->bound - value) {
                    return corrupt_at(p, pos, "a sequence overruns its container", tag);
                }
                seq.end = value + len;
            }
            if ((st = push(p, seq)) != SP_OK) {
                return st;
            }
            pos = value;
            continue;
        }
        if (len == UNDEFINED_LENGTH) {
            if (!(vr_is(vr, "OB") || vr_is(vr, "OW") || vr_is(vr, "UN"))) {
                return corrupt_at(p, pos, "undefined length on a non-sequence element", tag);
            }
            pos = value;
            if ((st = skip_fragments(p, &pos, top->bound)) != SP_OK) {
                return st;
            }
            continue;
        }
        if (value > top->bound || len > top->bound - value) {
            if (top->bound == p->r.size) {
                return truncated(&p->r, value, len, p->err);
            }
            return corrupt_at(p, pos, "an element overruns its item:", tag);
        }
        bool kept = false;
        if ((tag == TAG_COLUMN_POSITION || tag == TAG_ROW_POSITION || tag == TAG_Z_OFFSET ||
             tag == TAG_OPTICAL_PATH_ID) &&
            (st = keep_position(p, tag, vr, value, len, &kept)) != SP_OK) {
            return st;
        }
        if (!kept) {
            const wanted *w = find_wanted(p, tag);
            if (w != NULL) {
                /* Explicit VR says what the value is, except UN (an unknown-VR rewrite). */
                const char *use = top->implicit || vr_is(vr, "UN") ? w->vr : vr;
                if ((st = keep_value(p, w->attr, use, value, len)) != SP_OK) {
                    return st;
                }
            }
        }
        pos = value + len;
    }
}

void sp_dicom_options_default(sp_dicom_options *o) {
    o->max_depth = 16;
    o->max_elements = UINT64_C(1) << 24;
    o->max_frames = UINT64_C(1) << 24;
    o->meta_only = false;
}

bool sp_dicom_magic(const uint8_t *head, size_t len) {
    return len >= SP_DICOM_MAGIC_OFFSET + 4 && memcmp(head + SP_DICOM_MAGIC_OFFSET, "DICM", 4) == 0;
}

sp_status sp_dicom_open(sp_source *src, const sp_limits *limits, const sp_dicom_options *options,
                        sp_dicom **out, sp_err *err) {
    *out = NULL;
    sp_dicom *d = calloc(1, sizeof *d);
    parser *p = calloc(1, sizeof *p);
    uint8_t *window = malloc(WINDOW);
    sp_status st = SP_OK;
    if (d == NULL || p == NULL || window == NULL) {
        st = sp_err_set(err, SP_E_NOMEM, "out of memory parsing a DICOM file");
        goto done;
    }
    d->src = src;
    d->limits = *limits;
    if (options != NULL) {
        d->options = *options;
    } else {
        sp_dicom_options_default(&d->options);
    }
    p->d = d;
    p->err = err;
    p->r = (reader){.src = src, .size = sp_source_size(src), .buf = window};
    uint8_t magic[4];
    if (p->r.size < SP_DICOM_MAGIC_OFFSET + 4 ||
        (st = rd(&p->r, SP_DICOM_MAGIC_OFFSET, magic, 4, err)) != SP_OK ||
        memcmp(magic, "DICM", 4) != 0) {
        if (st == SP_OK) {
            st = sp_err_set(err, SP_E_NOT_A_SLIDE, "not a DICOM file: no DICM at offset 128");
        }
        goto done;
    }
    uint64_t pos = SP_DICOM_MAGIC_OFFSET + 4;
    if ((st = parse_meta(p, &pos)) != SP_OK) {
        goto done;
    }
    if (!sp_dicom_string(d, SP_DICOM_TRANSFER_SYNTAX_UID, 0, d->transfer_syntax,
                         sizeof d->transfer_syntax)) {
        st = sp_err_set(err, SP_E_CORRUPT, "DICOM: no Transfer Syntax UID in the File Meta group");
        goto done;
    }
    if (d->options.meta_only) {
        goto done; /* detection: a file in an unsupported syntax is still ours to refuse */
    }
    if (strcmp(d->transfer_syntax, SYNTAX_EXPLICIT_BE) == 0 ||
        strcmp(d->transfer_syntax, SYNTAX_DEFLATED) == 0) {
        st = sp_err_set(err, SP_E_UNSUPPORTED, "DICOM: transfer syntax %s (%s) is not supported",
                        d->transfer_syntax,
                        strcmp(d->transfer_syntax, SYNTAX_DEFLATED) == 0
                            ? "deflated explicit VR little endian"
                            : "explicit VR big endian");
        goto done;
    }
    d->implicit_vr = strcmp(d->transfer_syntax, SYNTAX_IMPLICIT_LE) == 0;
    st = parse_dataset(p, pos);
done:
    free(window);
    free(p);
    if (st != SP_OK) {
        sp_dicom_close(d);
        return st;
    }
    *out = d;
    return SP_OK;
}

void sp_dicom_close(sp_dicom *d) {
    if (d == NULL) {
        return;
    }
    for (int i = 0; i < SP_DICOM_ATTR_COUNT_; i++) {
        free(d->attrs[i].data);
    }
    free(d->positions);
    free(d->frames);
    free(d->fragments);
    free(d);
}

/* ---- values ------------------------------------------------------------------------------- */

bool sp_dicom_has(const sp_dicom *d, sp_dicom_attr a) {
    return (unsigned)a < SP_DICOM_ATTR_COUNT_ && d->attrs[a].present;
}

static bool is_pad(uint8_t c) {
    return c == ' ' || c == '\0';
}

/* Value `index` of a '\'-separated string: [*start, *end) of the value's bytes. */
static bool string_part(const sp_dicom_value *v, uint32_t index, uint32_t *start, uint32_t *end) {
    uint32_t s = 0;
    for (uint32_t k = 0; k < index; k++) {
        while (s < v->len && v->data[s] != '\\') {
            s++;
        }
        if (s == v->len) {
            return false;
        }
        s++;
    }
    uint32_t e = s;
    while (e < v->len && v->data[e] != '\\') {
        e++;
    }
    while (s < e && is_pad(v->data[s])) {
        s++;
    }
    while (e > s && is_pad(v->data[e - 1])) {
        e--;
    }
    *start = s;
    *end = e;
    return true;
}

bool sp_dicom_string(const sp_dicom *d, sp_dicom_attr a, uint32_t index, char *buf, size_t len) {
    if (!sp_dicom_has(d, a) || len == 0) {
        return false;
    }
    uint32_t s, e;
    if (!string_part(&d->attrs[a], index, &s, &e) || e - s >= len) {
        return false;
    }
    memcpy(buf, d->attrs[a].data + s, e - s);
    buf[e - s] = '\0';
    return memchr(buf, '\0', e - s) == NULL;
}

char *sp_dicom_string_dup(const sp_dicom *d, sp_dicom_attr a) {
    if (!sp_dicom_has(d, a)) {
        return NULL;
    }
    const sp_dicom_value *v = &d->attrs[a];
    uint32_t s = 0, e = v->len;
    while (s < e && is_pad(v->data[s])) {
        s++;
    }
    while (e > s && is_pad(v->data[e - 1])) {
        e--;
    }
    char *out = malloc(e - s + 1);
    if (out == NULL) {
        return NULL;
    }
    size_t n = 0;
    for (uint32_t i = s; i < e;) {
        uint8_t c = v->data[i];
        if (c >= 0x80) {
            size_t k = sp_utf8_char_len(v->data + i, e - i);
            if (k > 0) {
                memcpy(out + n, v->data + i, k);
                n += k;
                i += (uint32_t)k;
                continue;
            }
            c = '?';
        } else if (c < 0x20 || c == 0x7F) {
            c = c == '\r' || c == '\n' || c == '\t' ? ' ' : '?';
        }
        out[n++] = (char)c;
        i++;
    }
    out[n] = '\0';
    return out;
}

bool sp_dicom_int(const sp_dicom *d, sp_dicom_attr a, int64_t *out) {
    if (!sp_dicom_has(d, a)) {
        return false;
    }
    const sp_dicom_value *v = &d->attrs[a];
    const uint8_t *b = v->data;
    if (vr_is(v->vr, "US") && v->len >= 2) {
        *out = le16(b);
    } else if (vr_is(v->vr, "SS") && v->len >= 2) {
        *out = (int16_t)le16(b);
    } else if (vr_is(v->vr, "UL") && v->len >= 4) {
        *out = le32(b);
    } else if (vr_is(v->vr, "SL") && v->len >= 4) {
        *out = (int32_t)le32(b);
    } else if ((vr_is(v->vr, "UV") || vr_is(v->vr, "SV")) && v->len >= 8) {
        uint64_t u = le64(b);
        if (vr_is(v->vr, "UV") && u > INT64_MAX) {
            return false;
        }
        *out = (int64_t)u;
    } else if (vr_is(v->vr, "IS")) {
        char buf[32];
        if (!sp_dicom_string(d, a, 0, buf, sizeof buf) || buf[0] == '\0') {
            return false;
        }
        char *end;
        long long x = strtoll(buf, &end, 10);
        if (*end != '\0') {
            return false;
        }
        *out = x;
    } else {
        return false;
    }
    return true;
}

bool sp_dicom_double(const sp_dicom *d, sp_dicom_attr a, uint32_t index, double *out) {
    if (!sp_dicom_has(d, a)) {
        return false;
    }
    const sp_dicom_value *v = &d->attrs[a];
    if (vr_is(v->vr, "FD") && v->len >= 8 * ((uint64_t)index + 1)) {
        uint64_t u = le64(v->data + 8 * index);
        memcpy(out, &u, sizeof *out);
        return true;
    }
    if (vr_is(v->vr, "FL") && v->len >= 4 * ((uint64_t)index + 1)) {
        uint32_t u = le32(v->data + 4 * index);
        float f;
        memcpy(&f, &u, sizeof f);
        *out = f;
        return true;
    }
    char buf[64];
    if (!(vr_is(v->vr, "DS") || vr_is(v->vr, "IS")) ||
        !sp_dicom_string(d, a, index, buf, sizeof buf) || buf[0] == '\0') {
        return false;
    }
    char *end;
    double x = sp_strtod(buf, &end); /* DS always uses '.', whatever the host's locale */
    if (*end != '\0' || x != x) {
        return false;
    }
    *out = x;
    return true;
}

/* ---- frames ------------------------------------------------------------------------------- */

static sp_status index_native(sp_dicom *d, sp_err *err) {
    int64_t rows, cols, spp, bits;
    if (!sp_dicom_int(d, SP_DICOM_ROWS, &rows) || !sp_dicom_int(d, SP_DICOM_COLUMNS, &cols) ||
        !sp_dicom_int(d, SP_DICOM_BITS_ALLOCATED, &bits)) {
        return sp_err_set(err, SP_E_CORRUPT,
                          "DICOM: native pixel data without Rows, Columns or BitsAllocated");
    }
    if (!sp_dicom_int(d, SP_DICOM_SAMPLES_PER_PIXEL, &spp)) {
        spp = 1;
    }
    if (rows <= 0 || cols <= 0 || spp <= 0 || bits <= 0) {
        return sp_err_set(err, SP_E_CORRUPT,
                          "DICOM: native pixel data with Rows %lld, Columns %lld, "
                          "SamplesPerPixel %lld, BitsAllocated %lld",
                          (long long)rows, (long long)cols, (long long)spp, (long long)bits);
    }
    if (bits % 8 != 0) {
        return sp_err_set(err, SP_E_UNSUPPORTED, "DICOM: native pixel data with BitsAllocated %lld",
                          (long long)bits);
    }
    uint64_t size, total;
    if (!sp_mul_u64((uint64_t)rows, (uint64_t)cols, &size) ||
        !sp_mul_u64(size, (uint64_t)spp, &size) || !sp_mul_u64(size, (uint64_t)bits / 8, &size) ||
        !sp_mul_u64(size, d->n_frames, &total) || total > d->pixel_length) {
        return sp_err_set(err, SP_E_CORRUPT,
                          "DICOM: native pixel data of %llu bytes cannot hold %llu frames of "
                          "%lldx%lldx%lld samples of %lld bits",
                          (unsigned long long)d->pixel_length, (unsigned long long)d->n_frames,
                          (long long)cols, (long long)rows, (long long)spp, (long long)bits);
    }
    sp_status st = sp_calloc(&d->limits, d->n_frames, sizeof *d->frames, "DICOM frame table",
                             (void **)&d->frames, err);
    if (st == SP_OK) {
        st = sp_calloc(&d->limits, d->n_frames, sizeof *d->fragments, "DICOM frame table",
                       (void **)&d->fragments, err);
    }
    if (st != SP_OK) {
        return st;
    }
    d->n_fragments = d->n_frames;
    for (uint64_t i = 0; i < d->n_frames; i++) {
        d->fragments[i] = (sp_dicom_fragment){d->pixel_offset + i * size, size};
        d->frames[i] = (sp_dicom_frame){i, size, 1};
    }
    return SP_OK;
}

/* Walk the fragment items after the Basic Offset Table (at `first`) to the sequence delimiter. */
static sp_status walk_fragments(sp_dicom *d, reader *r, uint64_t first, sp_err *err) {
    uint64_t cap = 0, pos = first;
    for (;;) {
        uint32_t tag, len;
        sp_status st = read_item_header(r, pos, &tag, &len, err);
        if (st != SP_OK) {
            return st;
        }
        if (tag == TAG_SEQ_DELIM) {
            return SP_OK;
        }
        if (tag != TAG_ITEM || len == UNDEFINED_LENGTH) {
            return sp_err_set(err, SP_E_CORRUPT,
                              "DICOM: pixel data: expected a fragment item at offset %llu, found "
                              "(%04X,%04X)",
                              (unsigned long long)pos, GROUP(tag), ELEM(tag));
        }
        if (len > r->size - (pos + 8)) {
            return sp_err_set(err, SP_E_CORRUPT,
                              "DICOM: pixel data: fragment %llu at offset %llu (%u bytes) runs "
                              "past the end of the file (%llu bytes)",
                              (unsigned long long)d->n_fragments, (unsigned long long)pos, len,
                              (unsigned long long)r->size);
        }
        if (d->n_fragments == cap) {
            if (cap >= d->options.max_frames) {
                return sp_err_set(err, SP_E_LIMIT,
                                  "DICOM: more than %llu pixel data fragments (the frame limit)",
                                  (unsigned long long)d->options.max_frames);
            }
            cap = cap ? cap * 2 : 64;
            sp_dicom_fragment *grown = NULL;
            st = sp_alloc(&d->limits, cap * sizeof *grown, "DICOM fragment table", (void **)&grown,
                          err);
            if (st != SP_OK) {
                return st;
            }
            if (d->n_fragments) {
                memcpy(grown, d->fragments, d->n_fragments * sizeof *grown);
            }
            free(d->fragments);
            d->fragments = grown;
        }
        d->fragments[d->n_fragments++] = (sp_dicom_fragment){pos + 8, len};
        pos += 8 + (uint64_t)len;
    }
}

/* The fragment whose item starts `rel` bytes after the first fragment item, or UINT64_MAX. */
static uint64_t fragment_at(const sp_dicom *d, uint64_t first, uint64_t rel) {
    uint64_t lo = 0, hi = d->n_fragments;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        uint64_t at = d->fragments[mid].offset - 8 - first;
        if (at == rel) {
            return mid;
        }
        if (at < rel) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return UINT64_MAX;
}

/* Does a fragment begin a JPEG, JPEG 2000 codestream or JP2 file? */
static sp_status starts_codestream(const sp_dicom *d, reader *r, uint64_t i, bool *yes,
                                   sp_err *err) {
    uint8_t b[4] = {0};
    *yes = false;
    if (d->fragments[i].length < 4) {
        return SP_OK;
    }
    sp_status st = rd(r, d->fragments[i].offset, b, 4, err);
    *yes = (b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF) ||
           (b[0] == 0xFF && b[1] == 0x4F && b[2] == 0xFF && b[3] == 0x51) ||
           (b[0] == 0 && b[1] == 0 && b[2] == 0 && b[3] == 0x0C);
    return st;
}

static sp_status index_encapsulated(sp_dicom *d, reader *r, sp_err *err) {
    uint8_t h[8];
    sp_status st = rd(r, d->pixel_offset, h, 8, err);
    if (st != SP_OK) {
        return st;
    }
    uint32_t tag = TAG(le16(h), le16(h + 2));
    uint32_t bot_len = le32(h + 4);
    if (tag != TAG_ITEM || bot_len == UNDEFINED_LENGTH || bot_len % 4 != 0) {
        return sp_err_set(err, SP_E_CORRUPT,
                          "DICOM: encapsulated pixel data does not start with a Basic Offset "
                          "Table item");
    }
    uint64_t first = d->pixel_offset + 8 + (uint64_t)bot_len;
    if (bot_len > r->size - (d->pixel_offset + 8)) {
        return truncated(r, d->pixel_offset + 8, bot_len, err);
    }
    if ((st = walk_fragments(d, r, first, err)) != SP_OK) {
        return st;
    }
    /* Frame start offsets (relative to the first fragment item), when a table gives them. */
    const sp_dicom_value *eot = &d->attrs[SP_DICOM_EXTENDED_OFFSET_TABLE];
    const sp_dicom_value *eotl = &d->attrs[SP_DICOM_EXTENDED_OFFSET_TABLE_LENGTHS];
    bool has_table = eot->present || bot_len > 0;
    const char *table = eot->present ? "Extended Offset Table" : "Basic Offset Table";
    if (eot->present) {
        if (eot->len / 8 != d->n_frames || eot->len % 8 != 0 || !eotl->present ||
            eotl->len != eot->len) {
            return sp_err_set(err, SP_E_CORRUPT,
                              "DICOM: the Extended Offset Table (%u bytes) and its lengths (%u "
                              "bytes) do not hold %llu frames",
                              eot->len, eotl->present ? eotl->len : 0,
                              (unsigned long long)d->n_frames);
        }
    } else if (bot_len > 0 && bot_len / 4 != d->n_frames) {
        return sp_err_set(err, SP_E_CORRUPT,
                          "DICOM: the Basic Offset Table has %u entries for %llu frames",
                          bot_len / 4, (unsigned long long)d->n_frames);
    }
    uint32_t *bot = NULL;
    if (!eot->present && bot_len > 0) {
        if ((st = sp_alloc(&d->limits, bot_len, "DICOM Basic Offset Table", (void **)&bot, err)) !=
            SP_OK) {
            return st;
        }
        st = bot_len <= WINDOW ? rd(r, d->pixel_offset + 8, bot, bot_len, err)
                               : sp_source_read(r->src, d->pixel_offset + 8, bot, bot_len, err);
        if (st != SP_OK) {
            free(bot);
            return st;
        }
    }
    if ((st = sp_calloc(&d->limits, d->n_frames, sizeof *d->frames, "DICOM frame table",
                        (void **)&d->frames, err)) != SP_OK) {
        free(bot);
        return st;
    }
    uint64_t *first_of = NULL; /* the first fragment of each frame */
    if ((st = sp_calloc(&d->limits, d->n_frames + 1, sizeof *first_of, "DICOM frame table",
                        (void **)&first_of, err)) != SP_OK) {
        free(bot);
        return st;
    }
    if (has_table) {
        for (uint64_t i = 0; st == SP_OK && i < d->n_frames; i++) {
            uint64_t rel = eot->present ? le64(eot->data + 8 * i) : le32((uint8_t *)&bot[i]);
            uint64_t j = fragment_at(d, first, rel);
            if (j == UINT64_MAX || (i > 0 && j <= first_of[i - 1]) || (i == 0 && j != 0)) {
                st = sp_err_set(err, SP_E_CORRUPT,
                                "DICOM: %s entry %llu (%llu) is not the start of a fragment "
                                "after the previous frame",
                                table, (unsigned long long)i, (unsigned long long)rel);
            }
            first_of[i] = j;
        }
        first_of[d->n_frames] = d->n_fragments;
    } else if (d->n_fragments == d->n_frames) {
        for (uint64_t i = 0; i <= d->n_frames; i++) {
            first_of[i] = i;
        }
    } else if (d->n_frames == 1 && d->n_fragments > 0) {
        first_of[1] = d->n_fragments;
    } else if (d->n_fragments > d->n_frames) {
        /* No table and more fragments than frames: a fragment that opens a codestream starts a
         * frame, if that gives exactly the frame count. */
        uint64_t k = 0;
        for (uint64_t j = 0; st == SP_OK && j < d->n_fragments; j++) {
            bool starts;
            st = starts_codestream(d, r, j, &starts, err);
            if (st == SP_OK && (starts || j == 0)) {
                if (k == d->n_frames) {
                    k++;
                    break;
                }
                first_of[k++] = j;
            }
        }
        first_of[d->n_frames] = d->n_fragments;
        if (st == SP_OK && k != d->n_frames) {
            st = sp_err_set(err, SP_E_CORRUPT,
                            "DICOM: %llu fragments for %llu frames and no offset table",
                            (unsigned long long)d->n_fragments, (unsigned long long)d->n_frames);
        }
    } else {
        st = sp_err_set(err, SP_E_CORRUPT, "DICOM: %llu fragments for %llu frames",
                        (unsigned long long)d->n_fragments, (unsigned long long)d->n_frames);
    }
    for (uint64_t i = 0; st == SP_OK && i < d->n_frames; i++) {
        sp_dicom_frame *f = &d->frames[i];
        f->first_fragment = first_of[i];
        uint64_t n = first_of[i + 1] - first_of[i];
        if (n == 0 || n > UINT32_MAX) {
            st = sp_err_set(err, SP_E_CORRUPT, "DICOM: frame %llu has no fragment",
                            (unsigned long long)i);
            break;
        }
        f->n_fragments = (uint32_t)n;
        for (uint64_t j = first_of[i]; j < first_of[i + 1]; j++) {
            f->length += d->fragments[j].length; /* bounded by the file size */
        }
        if (eot->present && f->length != le64(eotl->data + 8 * i)) {
            st = sp_err_set(err, SP_E_CORRUPT,
                            "DICOM: frame %llu holds %llu bytes but the Extended Offset Table "
                            "Lengths say %llu",
                            (unsigned long long)i, (unsigned long long)f->length,
                            (unsigned long long)le64(eotl->data + 8 * i));
        }
    }
    free(first_of);
    free(bot);
    return st;
}

sp_status sp_dicom_index_frames(sp_dicom *d, sp_err *err) {
    free(d->frames);
    free(d->fragments);
    d->frames = NULL;
    d->fragments = NULL;
    d->n_frames = d->n_fragments = 0;
    if (!d->has_pixel_data) {
        return sp_err_set(err, SP_E_CORRUPT, "DICOM: no Pixel Data element");
    }
    int64_t frames = 1;
    if (sp_dicom_has(d, SP_DICOM_NUMBER_OF_FRAMES) &&
        !sp_dicom_int(d, SP_DICOM_NUMBER_OF_FRAMES, &frames)) {
        return sp_err_set(err, SP_E_CORRUPT, "DICOM: NumberOfFrames is not a number");
    }
    if (frames <= 0) {
        return sp_err_set(err, SP_E_CORRUPT, "DICOM: NumberOfFrames is %lld", (long long)frames);
    }
    if ((uint64_t)frames > d->options.max_frames) {
        return sp_err_set(err, SP_E_LIMIT, "DICOM: %lld frames exceed the frame limit (%llu)",
                          (long long)frames, (unsigned long long)d->options.max_frames);
    }
    d->n_frames = (uint64_t)frames;
    sp_status st;
    if (!d->encapsulated) {
        st = index_native(d, err);
    } else {
        reader r = {.src = d->src, .size = sp_source_size(d->src)};
        r.buf = malloc(WINDOW);
        if (r.buf == NULL) {
            return sp_err_set(err, SP_E_NOMEM, "out of memory indexing DICOM frames");
        }
        st = index_encapsulated(d, &r, err);
        free(r.buf);
    }
    if (st != SP_OK) {
        free(d->frames);
        free(d->fragments);
        d->frames = NULL;
        d->fragments = NULL;
        d->n_frames = d->n_fragments = 0;
    }
    return st;
}

size_t sp_dicom_frame_ranges(const sp_dicom *d, uint64_t index, sp_byte_range *ranges,
                             size_t cap) {
    if (index >= d->n_frames) {
        return 0;
    }
    const sp_dicom_frame *f = &d->frames[index];
    size_t n = 0;
    for (uint32_t k = 0; k < f->n_fragments && n < cap; k++) {
        const sp_dicom_fragment *g = &d->fragments[f->first_fragment + k];
        ranges[n++] = (sp_byte_range){g->offset, g->length};
    }
    return n;
}

sp_status sp_dicom_read_frame(const sp_dicom *d, uint64_t index, uint8_t **data, size_t *len,
                              sp_err *err) {
    *data = NULL;
    *len = 0;
    if (index >= d->n_frames) {
        return sp_err_set(err, SP_E_CORRUPT, "DICOM: frame %llu of %llu does not exist",
                          (unsigned long long)index, (unsigned long long)d->n_frames);
    }
    const sp_dicom_frame *f = &d->frames[index];
    uint8_t *buf = NULL;
    sp_status st = sp_alloc(&d->limits, f->length, "DICOM frame", (void **)&buf, err);
    uint64_t at = 0;
    for (uint32_t k = 0; st == SP_OK && k < f->n_fragments; k++) {
        const sp_dicom_fragment *g = &d->fragments[f->first_fragment + k];
        st = sp_source_read(d->src, g->offset, buf + at, (size_t)g->length, err);
        at += g->length;
    }
    if (st != SP_OK) {
        free(buf);
        return st;
    }
    *data = buf;
    *len = (size_t)f->length;
    return SP_OK;
}
