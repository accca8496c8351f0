/* mirax_index.c — reading a MIRAX slide's Slidedat.ini (through libinih) and Index.dat
 * (mirax_index.h).
 *
 * Slidedat.ini is read as OpenSlide reads it through GKeyFile: integers and doubles must be
 * whole values, the zoom levels are HIER_0's values ("Slide zoom level"), the camera positions
 * are the VIMSLIDE_POSITION_BUFFER record or else the zlib-compressed StitchingIntensityLayer,
 * and macro, label and thumbnail are the "Scan data layer" values ScanDataLayer_SlideThumbnail,
 * _SlideBarcode and _SlidePreview (JPEG only). Index.dat starts with "01.02" and the slide
 * identifier; then a pointer to the hierarchical table (one pointer per zoom level, each to a
 * list head: 0, then a pointer to its first page) and one to the non-hierarchical table (one
 * pointer per record, each to a list head whose page holds one record). A page is a record count,
 * a "next" pointer and the records (image index, offset, length, file number); as in OpenSlide,
 * the pages of a list are read one after the other from the first, the next pointer saying only
 * whether another follows. Every pointer, count and file number is checked, and a list may not
 * hold more pages than the file has room for, so a loop in the pointers ends.
 */
#include "formats/mirax_index.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/numbers.h"

/* ---- Slidedat.ini --------------------------------------------------------------------------- */

static bool has_section(const sp_mirax_ini *ini, const char *section) {
    for (size_t i = 0; i < ini->n; i++) {
        if (strcmp(ini->entries[i].section, section) == 0) {
            return true;
        }
    }
    return false;
}

/* ---- typed values, read as GKeyFile reads them ---------------------------------------------- */

static sp_status need_value(const sp_mirax_ini *ini, const char *section, const char *key,
                            const char **out, sp_err *err) {
    *out = sp_mirax_ini_get(ini, section, key);
    if (*out == NULL) {
        return sp_err_set(err, SP_E_CORRUPT, "Slidedat.ini has no key %s in [%s]", key, section);
    }
    return SP_OK;
}

static bool parse_int(const char *v, int *out) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || errno != 0 || x < INT_MIN || x > INT_MAX) {
        return false;
    }
    while (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n') {
        end++;
    }
    *out = (int)x;
    return *end == '\0';
}

static sp_status need_int(const sp_mirax_ini *ini, const char *section, const char *key, int *out,
                          sp_err *err) {
    const char *v;
    sp_status st = need_value(ini, section, key, &v, err);
    if (st == SP_OK && !parse_int(v, out)) {
        st = sp_err_set(err, SP_E_CORRUPT, "Slidedat.ini [%s] %s = \"%.40s\" is not an integer",
                        section, key, v);
    }
    return st;
}

static sp_status need_double(const sp_mirax_ini *ini, const char *section, const char *key,
                             double *out, sp_err *err) {
    const char *v;
    sp_status st = need_value(ini, section, key, &v, err);
    if (st == SP_OK) {
        char *end;
        *out = sp_strtod(v, &end);
        if (end == v || *end != '\0') {
            st = sp_err_set(err, SP_E_CORRUPT, "Slidedat.ini [%s] %s = \"%.40s\" is not a number",
                            section, key, v);
        }
    }
    return st;
}

static sp_status need_positive(int v, const char *what, bool zero_ok, sp_err *err) {
    if (v < 0 || (v == 0 && !zero_ok)) {
        return sp_err_set(err, SP_E_CORRUPT, "Slidedat.ini: %s is %d", what, v);
    }
    return SP_OK;
}

static bool parse_format(const char *v, sp_mirax_image_format *out) {
    static const struct {
        const char *name;
        sp_mirax_image_format f;
    } names[] = {{"JPEG", SP_MIRAX_JPEG}, {"PNG", SP_MIRAX_PNG}, {"BMP24", SP_MIRAX_BMP}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(v, names[i].name) == 0) {
            *out = names[i].f;
            return true;
        }
    }
    return false;
}

/* ---- non-hierarchical record numbers ---------------------------------------------------------- */

static const char HIER[] = "HIERARCHICAL";

/* The first record number of NONHIER name `target` (the sum of the counts before it), or -1;
 * *index and *count receive its position and value count. Names and counts before it must be
 * there and counts non-zero, as OpenSlide requires. */
static sp_status nonhier_name_offset(const sp_mirax_ini *ini, int nonhier_count, const char *target,
                                     int *offset, int *index, int *count, sp_err *err) {
    *offset = -1;
    int sum = 0;
    for (int i = 0; i < nonhier_count; i++) {
        char key[64];
        const char *name;
        snprintf(key, sizeof key, "NONHIER_%d_NAME", i);
        sp_status st = need_value(ini, HIER, key, &name, err);
        int n = 0;
        snprintf(key, sizeof key, "NONHIER_%d_COUNT", i);
        if (st == SP_OK) {
            st = need_int(ini, HIER, key, &n, err);
        }
        if (st == SP_OK && n == 0) {
            st = sp_err_set(err, SP_E_CORRUPT, "Slidedat.ini: %s is 0", key);
        }
        if (st != SP_OK) {
            return st;
        }
        if (strcmp(name, target) == 0) {
            *offset = sum;
            *index = i;
            *count = n;
            return SP_OK;
        }
        if (__builtin_add_overflow(sum, n, &sum)) {
            return sp_err_set(err, SP_E_CORRUPT, "Slidedat.ini: NONHIER counts overflow");
        }
    }
    return SP_OK;
}

/* The record number of value `value` of NONHIER name `name` whose section's `format_key` must
 * say JPEG, or -1. */
static sp_status associated_record(const sp_mirax_ini *ini, int nonhier_count, const char *name,
                                   const char *value, const char *format_key, int *record,
                                   sp_err *err) {
    *record = -1;
    int offset, index = 0, count = 0;
    sp_status st = nonhier_name_offset(ini, nonhier_count, name, &offset, &index, &count, err);
    if (st != SP_OK || offset < 0) {
        return st;
    }
    for (int i = 0; i < count; i++) {
        char key[80];
        const char *v;
        snprintf(key, sizeof key, "NONHIER_%d_VAL_%d", index, i);
        if ((st = need_value(ini, HIER, key, &v, err)) != SP_OK) {
            return st;
        }
        if (strcmp(v, value) != 0) {
            continue;
        }
        const char *section, *format;
        snprintf(key, sizeof key, "NONHIER_%d_VAL_%d_SECTION", index, i);
        if ((st = need_value(ini, HIER, key, &section, err)) != SP_OK ||
            (st = need_value(ini, section, format_key, &format, err)) != SP_OK) {
            return st;
        }
        sp_mirax_image_format f;
        if (!parse_format(format, &f) || f != SP_MIRAX_JPEG) {
            return sp_err_set(err, SP_E_UNSUPPORTED,
                              "Slidedat.ini: associated image %s is %.20s (JPEG is read)", value,
                              format);
        }
        *record = offset + i;
        return SP_OK;
    }
    return SP_OK;
}

/* ---- the layout ------------------------------------------------------------------------------ */

static sp_status read_zoom(const sp_mirax_ini *ini, const char *section, int level,
                           sp_mirax_zoom *z, sp_err *err) {
    if (!has_section(ini, section)) {
        return sp_err_set(err, SP_E_CORRUPT, "Slidedat.ini has no [%s] section", section);
    }
    int bgr = 0;
    const char *format;
    sp_status st = need_int(ini, section, "IMAGE_CONCAT_FACTOR", &z->concat_exponent, err);
    if (st == SP_OK) st = need_double(ini, section, "OVERLAP_X", &z->overlap_x, err);
    if (st == SP_OK) st = need_double(ini, section, "OVERLAP_Y", &z->overlap_y, err);
    if (st == SP_OK) st = need_double(ini, section, "MICROMETER_PER_PIXEL_X", &z->mpp_x, err);
    if (st == SP_OK) st = need_double(ini, section, "MICROMETER_PER_PIXEL_Y", &z->mpp_y, err);
    if (st == SP_OK) st = need_int(ini, section, "IMAGE_FILL_COLOR_BGR", &bgr, err);
    if (st == SP_OK) st = need_int(ini, section, "DIGITIZER_WIDTH", &z->image_w, err);
    if (st == SP_OK) st = need_int(ini, section, "DIGITIZER_HEIGHT", &z->image_h, err);
    if (st == SP_OK) st = need_positive(z->concat_exponent, "IMAGE_CONCAT_FACTOR", level == 0, err);
    if (st == SP_OK) st = need_positive(z->image_w, "DIGITIZER_WIDTH", false, err);
    if (st == SP_OK) st = need_positive(z->image_h, "DIGITIZER_HEIGHT", false, err);
    if (st == SP_OK) st = need_value(ini, section, "IMAGE_FORMAT", &format, err);
    if (st == SP_OK && !parse_format(format, &z->format)) {
        st = sp_err_set(err, SP_E_CORRUPT, "Slidedat.ini [%s]: unknown IMAGE_FORMAT %.20s",
                        section, format);
    }
    z->fill_bgr = (uint32_t)bgr;
    return st;
}

sp_status sp_mirax_layout_read(const sp_mirax_ini *ini, sp_mirax_layout *L, sp_err *err) {
    memset(L, 0, sizeof *L);
    L->position_record = L->macro_record = L->label_record = L->thumbnail_record = -1;
    static const char GENERAL[] = "GENERAL";
    const char *v;
    sp_status st = SP_OK;
    if (!has_section(ini, GENERAL)) {
        return sp_err_set(err, SP_E_CORRUPT, "Slidedat.ini has no [GENERAL] section");
    }
    if ((st = need_value(ini, GENERAL, "SLIDE_VERSION", &v, err)) != SP_OK ||
        (st = need_value(ini, GENERAL, "SLIDE_ID", &v, err)) != SP_OK) {
        return st;
    }
    if ((L->slide_id = strdup(v)) == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory reading Slidedat.ini");
    }
    if ((st = need_int(ini, GENERAL, "IMAGENUMBER_X", &L->images_x, err)) != SP_OK ||
        (st = need_int(ini, GENERAL, "IMAGENUMBER_Y", &L->images_y, err)) != SP_OK ||
        (st = need_int(ini, GENERAL, "OBJECTIVE_MAGNIFICATION", &L->objective, err)) != SP_OK) {
        return st;
    }
    v = sp_mirax_ini_get(ini, GENERAL, "CameraImageDivisionsPerSide");
    if (v == NULL || !parse_int(v, &L->divisions)) {
        L->divisions = 1;
    }
    if ((st = need_positive(L->images_x, "IMAGENUMBER_X", false, err)) != SP_OK ||
        (st = need_positive(L->images_y, "IMAGENUMBER_Y", false, err)) != SP_OK ||
        (st = need_positive(L->divisions, "CameraImageDivisionsPerSide", false, err)) != SP_OK) {
        return st;
    }
    if (L->images_x > SP_MIRAX_MAX_IMAGES_PER_SIDE || L->images_y > SP_MIRAX_MAX_IMAGES_PER_SIDE) {
        return sp_err_set(err, SP_E_LIMIT, "Slidedat.ini: %d x %d images is more than %d a side",
                          L->images_x, L->images_y, SP_MIRAX_MAX_IMAGES_PER_SIDE);
    }

    if (!has_section(ini, HIER)) {
        return sp_err_set(err, SP_E_CORRUPT, "Slidedat.ini has no [HIERARCHICAL] section");
    }
    int hier_count, nonhier_count;
    if ((st = need_int(ini, HIER, "HIER_COUNT", &hier_count, err)) != SP_OK ||
        (st = need_int(ini, HIER, "NONHIER_COUNT", &nonhier_count, err)) != SP_OK ||
        (st = need_positive(hier_count, "HIER_COUNT", false, err)) != SP_OK ||
        (st = need_positive(nonhier_count, "NONHIER_COUNT", true, err)) != SP_OK) {
        return st;
    }
    int zoom_hier = -1;
    for (int i = 0; i < hier_count && zoom_hier < 0; i++) {
        char key[64];
        snprintf(key, sizeof key, "HIER_%d_NAME", i);
        if ((st = need_value(ini, HIER, key, &v, err)) != SP_OK) {
            return st;
        }
        zoom_hier = strcmp(v, "Slide zoom level") == 0 ? i : -1;
    }
    if (zoom_hier != 0) {
        return sp_err_set(err, SP_E_UNSUPPORTED, "Slidedat.ini: %s",
                          zoom_hier < 0 ? "no \"Slide zoom level\" hierarchy"
                                        : "the \"Slide zoom level\" hierarchy is not HIER_0");
    }
    if ((st = need_value(ini, HIER, "INDEXFILE", &v, err)) != SP_OK) {
        return st;
    }
    if ((L->index_file = strdup(v)) == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory reading Slidedat.ini");
    }
    if ((st = need_int(ini, HIER, "HIER_0_COUNT", &L->n_zoom, err)) != SP_OK ||
        (st = need_positive(L->n_zoom, "HIER_0_COUNT", false, err)) != SP_OK) {
        return st;
    }
    if (L->n_zoom > SP_MIRAX_MAX_LEVELS) {
        return sp_err_set(err, SP_E_LIMIT, "Slidedat.ini: %d zoom levels (at most %d are read)",
                          L->n_zoom, SP_MIRAX_MAX_LEVELS);
    }
    const char *sections[SP_MIRAX_MAX_LEVELS];
    for (int i = 0; i < L->n_zoom; i++) {
        char key[64];
        snprintf(key, sizeof key, "HIER_0_VAL_%d_SECTION", i);
        if ((st = need_value(ini, HIER, key, &sections[i], err)) != SP_OK) {
            return st;
        }
    }

    if (!has_section(ini, "DATAFILE")) {
        return sp_err_set(err, SP_E_CORRUPT, "Slidedat.ini has no [DATAFILE] section");
    }
    if ((st = need_int(ini, "DATAFILE", "FILE_COUNT", &L->n_files, err)) != SP_OK ||
        (st = need_positive(L->n_files, "FILE_COUNT", false, err)) != SP_OK) {
        return st;
    }
    if (L->n_files > SP_MIRAX_MAX_FILES) {
        return sp_err_set(err, SP_E_LIMIT, "Slidedat.ini: %d data files (at most %d)", L->n_files,
                          SP_MIRAX_MAX_FILES);
    }
    if ((L->files = calloc((size_t)L->n_files, sizeof *L->files)) == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory reading Slidedat.ini");
    }
    for (int i = 0; i < L->n_files; i++) {
        char key[64];
        snprintf(key, sizeof key, "FILE_%d", i);
        if ((st = need_value(ini, "DATAFILE", key, &v, err)) != SP_OK) {
            return st;
        }
        if ((L->files[i] = strdup(v)) == NULL) {
            return sp_err_set(err, SP_E_NOMEM, "out of memory reading Slidedat.ini");
        }
    }
    int total_exponent = 0;
    for (int i = 0; i < L->n_zoom; i++) {
        if ((st = read_zoom(ini, sections[i], i, &L->zoom[i], err)) != SP_OK) {
            return st;
        }
        total_exponent += L->zoom[i].concat_exponent;
        if (total_exponent > 24) {
            return sp_err_set(err, SP_E_UNSUPPORTED,
                              "Slidedat.ini: zoom level %d concatenates 2^%d images a side", i,
                              total_exponent);
        }
    }

    int index, count;
    st = nonhier_name_offset(ini, nonhier_count, "VIMSLIDE_POSITION_BUFFER", &L->position_record,
                             &index, &count, err);
    if (st == SP_OK && L->position_record < 0) {
        st = nonhier_name_offset(ini, nonhier_count, "StitchingIntensityLayer",
                                 &L->position_record, &index, &count, err);
        L->positions_compressed = L->position_record >= 0;
    }
    static const char SCAN[] = "Scan data layer";
    if (st == SP_OK) {
        st = associated_record(ini, nonhier_count, SCAN, "ScanDataLayer_SlideThumbnail",
                               "THUMBNAIL_IMAGE_TYPE", &L->macro_record, err);
    }
    if (st == SP_OK) {
        st = associated_record(ini, nonhier_count, SCAN, "ScanDataLayer_SlideBarcode",
                               "BARCODE_IMAGE_TYPE", &L->label_record, err);
    }
    if (st == SP_OK) {
        st = associated_record(ini, nonhier_count, SCAN, "ScanDataLayer_SlidePreview",
                               "PREVIEW_IMAGE_TYPE", &L->thumbnail_record, err);
    }
    return st;
}

void sp_mirax_layout_free(sp_mirax_layout *L) {
    if (L == NULL) {
        return;
    }
    free(L->slide_id);
    free(L->index_file);
    for (int i = 0; L->files != NULL && i < L->n_files; i++) {
        free(L->files[i]);
    }
    free(L->files);
    memset(L, 0, sizeof *L);
}

/* ---- Index.dat ------------------------------------------------------------------------------- */

typedef struct index_file {
    sp_source *src;
    const char *name;
    uint64_t size;
} index_file;

static sp_status read_i32(const index_file *f, uint64_t at, int32_t *out, const char *what,
                          sp_err *err) {
    uint8_t b[4] = {0};
    *out = 0;
    if (at > f->size || f->size - at < 4) {
        return sp_err_set(err, SP_E_CORRUPT, "%s: %s at byte %llu lies past the end", f->name,
                          what, (unsigned long long)at);
    }
    sp_status st = sp_source_read(f->src, at, b, 4, err);
    *out = (int32_t)((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                     (uint32_t)b[3] << 24);
    return st;
}

/* A pointer read at `at`: non-negative and inside the file. */
static sp_status read_ptr(const index_file *f, uint64_t at, uint64_t *out, const char *what,
                          sp_err *err) {
    int32_t v = 0;
    sp_status st = read_i32(f, at, &v, what, err);
    if (st == SP_OK && (v < 0 || (uint64_t)v >= f->size)) {
        st = sp_err_set(err, SP_E_CORRUPT, "%s: %s (%d) points outside the file", f->name, what,
                        (int)v);
    }
    *out = st == SP_OK ? (uint64_t)v : 0;
    return st;
}

static sp_status read_nonhier(const index_file *f, uint64_t nonhier_root,
                              const sp_mirax_layout *L, int recordno, sp_mirax_record *out,
                              sp_err *err) {
    uint64_t table, head, page;
    int32_t v[7] = {0};
    sp_status st = read_ptr(f, nonhier_root, &table, "the non-hierarchical root", err);
    if (st == SP_OK) {
        st = read_ptr(f, table + 4 * (uint64_t)recordno, &head, "a record pointer", err);
    }
    if (st == SP_OK) {
        st = read_i32(f, head, &v[0], "a record's list head", err);
    }
    if (st == SP_OK && v[0] != 0) {
        st = sp_err_set(err, SP_E_CORRUPT, "%s: record %d's list does not start with 0", f->name,
                        recordno);
    }
    if (st == SP_OK) {
        st = read_ptr(f, head + 4, &page, "a record's page pointer", err);
    }
    for (int i = 0; st == SP_OK && i < 7; i++) {
        st = read_i32(f, page + 4 * (uint64_t)i, &v[i], "a record's page", err);
    }
    /* 1 (one record), the next pointer (any), 0, 0, then offset, length, file number. */
    if (st == SP_OK && (v[0] != 1 || v[2] != 0 || v[3] != 0)) {
        st = sp_err_set(err, SP_E_CORRUPT, "%s: record %d's page is not a single record", f->name,
                        recordno);
    }
    if (st == SP_OK && (v[4] < 0 || v[5] < 0 || v[6] < 0 || v[6] >= L->n_files)) {
        st = sp_err_set(err, SP_E_CORRUPT,
                        "%s: record %d has offset %d, length %d in data file %d (of %d)", f->name,
                        recordno, (int)v[4], (int)v[5], (int)v[6], L->n_files);
    }
    if (st == SP_OK) {
        *out = (sp_mirax_record){-1, v[6], (uint32_t)v[4], (uint32_t)v[5]};
    }
    return st;
}

static sp_status read_level(const index_file *f, uint64_t table, int level,
                            const sp_mirax_layout *L, const sp_limits *limits,
                            sp_mirax_index *out, sp_err *err) {
    int concat_exp = 0;
    for (int i = 0; i <= level; i++) {
        concat_exp += L->zoom[i].concat_exponent;
    }
    int64_t concat = (int64_t)1 << concat_exp;
    uint64_t head, at;
    int32_t zero;
    sp_status st = read_ptr(f, table + 4 * (uint64_t)level, &head, "a zoom level pointer", err);
    if (st == SP_OK) {
        st = read_i32(f, head, &zero, "a zoom level's list head", err);
    }
    if (st == SP_OK && zero != 0) {
        st = sp_err_set(err, SP_E_CORRUPT, "%s: zoom level %d's list does not start with 0",
                        f->name, level);
    }
    if (st == SP_OK) {
        st = read_ptr(f, head + 4, &at, "a zoom level's first page", err);
    }
    size_t cap = 0;
    uint64_t max_pages = f->size / 8 + 1;
    for (uint64_t pages = 0; st == SP_OK; pages++) {
        int32_t n, next;
        if (pages >= max_pages) {
            return sp_err_set(err, SP_E_CORRUPT, "%s: zoom level %d's pages do not end", f->name,
                              level);
        }
        if ((st = read_i32(f, at, &n, "a page length", err)) != SP_OK ||
            (st = read_i32(f, at + 4, &next, "a next-page pointer", err)) != SP_OK) {
            return st;
        }
        at += 8;
        if (n < 0 || (uint64_t)n > (f->size - at) / 16) {
            return sp_err_set(err, SP_E_CORRUPT, "%s: a page of zoom level %d claims %d records",
                              f->name, level, (int)n);
        }
        uint8_t *buf = NULL;
        if (n > 0 && (st = sp_alloc(limits, (uint64_t)n * 16, "MIRAX index page", (void **)&buf,
                                    err)) != SP_OK) {
            return st;
        }
        if (n > 0 && (st = sp_source_read(f->src, at, buf, (size_t)n * 16, err)) != SP_OK) {
            free(buf);
            return st;
        }
        if (out->n_records[level] + (size_t)n > cap) {
            size_t grown_cap = (out->n_records[level] + (size_t)n) * 2;
            sp_mirax_record *grown = NULL;
            st = sp_calloc(limits, grown_cap, sizeof *grown, "MIRAX index records",
                           (void **)&grown, err);
            if (st != SP_OK) {
                free(buf);
                return st;
            }
            if (out->records[level] != NULL) {
                memcpy(grown, out->records[level], out->n_records[level] * sizeof *grown);
            }
            free(out->records[level]);
            out->records[level] = grown;
            cap = grown_cap;
        }
        for (int32_t i = 0; i < n; i++) {
            int32_t r[4];
            for (int k = 0; k < 4; k++) {
                const uint8_t *b = buf + 16 * (size_t)i + 4 * (size_t)k;
                r[k] = (int32_t)((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                                 (uint32_t)b[3] << 24);
            }
            int64_t x = r[0] >= 0 ? r[0] % L->images_x : 0, y = r[0] >= 0 ? r[0] / L->images_x : 0;
            if (r[0] < 0 || r[1] < 0 || r[2] < 0 || r[3] < 0 || r[3] >= L->n_files) {
                st = sp_err_set(err, SP_E_CORRUPT,
                                "%s: zoom level %d has a record with image %d, offset %d, length "
                                "%d in data file %d (of %d)",
                                f->name, level, (int)r[0], (int)r[1], (int)r[2], (int)r[3],
                                L->n_files);
            } else if (y >= L->images_y || x % concat != 0 || y % concat != 0) {
                st = sp_err_set(err, SP_E_CORRUPT,
                                "%s: zoom level %d has image (%lld, %lld), outside the %d x %d "
                                "grid or not on a multiple of %lld",
                                f->name, level, (long long)x, (long long)y, L->images_x,
                                L->images_y, (long long)concat);
            }
            if (st != SP_OK) {
                break;
            }
            out->records[level][out->n_records[level]++] =
                (sp_mirax_record){r[0], r[3], (uint32_t)r[1], (uint32_t)r[2]};
        }
        free(buf);
        at += (uint64_t)n * 16;
        if (next == 0) {
            break;
        }
    }
    return st;
}

sp_status sp_mirax_index_read(sp_source *src, const char *name, const sp_mirax_layout *L,
                              const sp_limits *limits, sp_mirax_index *out, sp_err *err) {
    memset(out, 0, sizeof *out);
    index_file f = {src, name, sp_source_size(src)};
    static const char VERSION[] = "01.02";
    size_t vlen = strlen(VERSION), idlen = strlen(L->slide_id);
    if (idlen > 4096 || f.size < vlen + idlen + 8) {
        return sp_err_set(err, SP_E_CORRUPT, "%s: too short for its header", name);
    }
    char head[5 + 4096];
    sp_status st = sp_source_read(src, 0, head, vlen + idlen, err);
    if (st != SP_OK) {
        return st;
    }
    if (memcmp(head, VERSION, vlen) != 0) {
        return sp_err_set(err, SP_E_CORRUPT, "%s: not version %s of the MIRAX index", name,
                          VERSION);
    }
    if (memcmp(head + vlen, L->slide_id, idlen) != 0) {
        return sp_err_set(err, SP_E_CORRUPT,
                          "%s: the slide identifier differs from Slidedat.ini's", name);
    }
    uint64_t hier_root = vlen + idlen, nonhier_root = hier_root + 4;
    struct {
        int record;
        sp_mirax_record *rec;
        bool *has;
    } nonhier[] = {{L->position_record, &out->position, &out->has_position},
                   {L->macro_record, &out->macro, &out->has_macro},
                   {L->label_record, &out->label, &out->has_label},
                   {L->thumbnail_record, &out->thumbnail, &out->has_thumbnail}};
    for (size_t i = 0; st == SP_OK && i < sizeof nonhier / sizeof nonhier[0]; i++) {
        if (nonhier[i].record >= 0) {
            st = read_nonhier(&f, nonhier_root, L, nonhier[i].record, nonhier[i].rec, err);
            *nonhier[i].has = st == SP_OK;
        }
    }
    uint64_t table = 0;
    if (st == SP_OK) {
        st = read_ptr(&f, hier_root, &table, "the hierarchical root", err);
    }
    for (int level = 0; st == SP_OK && level < L->n_zoom; level++) {
        st = read_level(&f, table, level, L, limits, out, err);
    }
    if (st != SP_OK) {
        sp_mirax_index_free(out);
    }
    return st;
}

void sp_mirax_index_free(sp_mirax_index *index) {
    if (index == NULL) {
        return;
    }
    for (int i = 0; i < SP_MIRAX_MAX_LEVELS; i++) {
        free(index->records[i]);
    }
    memset(index, 0, sizeof *index);
}
