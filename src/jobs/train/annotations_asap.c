/* annotations_asap.c — ASAP's XML annotations into the builder of annotations.c:
 *   <ASAP_Annotations><Annotations>
 *     <Annotation Name="..." Type="Polygon" PartOfGroup="tumor" Color="#F4FA58">
 *       <Coordinates><Coordinate Order="0" X="10.5" Y="20,25"/>...</Coordinates>
 *     </Annotation>...
 * Each Annotation is one feature, its class PartOfGroup ("unclassified" when absent, empty or
 * "None"), its vertices the Coordinates sorted by Order (ties, and a missing Order, keep the
 * document's order). Polygon, Rectangle and Spline become one polygon (a spline through its
 * control points, joined by straight edges); Dot, PointSet and Measurement carry no area and
 * are skipped and counted. Numbers may use a comma as the decimal separator, as ASAP writes
 * them under some locales. The XML is read by a small tokenizer of our own for this subset: start
 * and end tags (checked to nest), attributes in either quote, the five predefined entities and
 * character references, comments, processing instructions and CDATA skipped; a DOCTYPE is
 * refused, so no entity can expand and nothing outside the file is read. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/numbers.h"
#include "jobs/train/annotations_internal.h"

#define MAX_DEPTH 64
#define MAX_ATTRS 64
#define MAX_VALUE 4096 /* decoded bytes of one attribute value we read */

typedef struct attr {
    const char *name, *value; /* value raw (entities not decoded) */
    size_t name_len, value_len;
} attr;

typedef struct vertex {
    double x, y, order;
    size_t seq; /* document position, for a stable sort */
} vertex;

typedef struct asap {
    sp_annotations *a;
    const char *text;
    size_t len, pos;
    /* the Annotation being read */
    bool in_annotation, area;
    vertex *v;
    size_t n, cap;
    double *xy;
} asap;

static bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static bool is_name_char(char c) {
    unsigned char u = (unsigned char)c;
    return u >= 0x80 || (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') ||
           (u >= '0' && u <= '9') || u == '_' || u == '-' || u == '.' || u == ':';
}

/* The 1-based line of byte `at`, for messages. */
static size_t line_of(const asap *x, size_t at) {
    size_t line = 1;
    for (size_t i = 0; i < at && i < x->len; i++) {
        line += x->text[i] == '\n';
    }
    return line;
}

static sp_status bad_xml(const asap *x, const char *what, sp_err *err) {
    return sp_ann_fail(x->a, err, SP_E_CORRUPT, "invalid XML at line %zu: %s", line_of(x, x->pos),
                       what);
}

static bool starts(const asap *x, const char *lit) {
    size_t n = strlen(lit);
    return x->len - x->pos >= n && memcmp(x->text + x->pos, lit, n) == 0;
}

/* Move past the next `lit` (false when there is none). */
static bool skip_past(asap *x, const char *lit) {
    size_t n = strlen(lit);
    for (size_t i = x->pos; i + n <= x->len; i++) {
        if (memcmp(x->text + i, lit, n) == 0) {
            x->pos = i + n;
            return true;
        }
    }
    return false;
}

static bool name_is(const char *s, size_t n, const char *lit) {
    return strlen(lit) == n && memcmp(s, lit, n) == 0;
}

static const attr *find_attr(const attr *attrs, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++) {
        if (name_is(attrs[i].name, attrs[i].name_len, name)) {
            return &attrs[i];
        }
    }
    return NULL;
}

/* Decode an attribute's entities into out (NUL-terminated, at most MAX_VALUE bytes); false for
 * an unknown or malformed reference or a value too long. */
static bool decode(const attr *at, char out[MAX_VALUE + 1]) {
    size_t o = 0;
    for (size_t i = 0; i < at->value_len; i++) {
        char c = at->value[i];
        if (c == '&') {
            const char *s = at->value + i + 1;
            const char *semi = memchr(s, ';', at->value_len - i - 1);
            if (semi == NULL || semi - s > 10) {
                return false;
            }
            size_t n = (size_t)(semi - s);
            unsigned long code = 0;
            if (name_is(s, n, "lt")) {
                code = '<';
            } else if (name_is(s, n, "gt")) {
                code = '>';
            } else if (name_is(s, n, "amp")) {
                code = '&';
            } else if (name_is(s, n, "quot")) {
                code = '"';
            } else if (name_is(s, n, "apos")) {
                code = '\'';
            } else if (n >= 2 && s[0] == '#') {
                bool hex = s[1] == 'x';
                for (size_t k = hex ? 2 : 1; k < n; k++) {
                    char d = s[k];
                    int v = d >= '0' && d <= '9'          ? d - '0'
                            : hex && d >= 'a' && d <= 'f' ? d - 'a' + 10
                            : hex && d >= 'A' && d <= 'F' ? d - 'A' + 10
                                                          : -1;
                    if (v < 0 || code > 0x10FFFF) {
                        return false;
                    }
                    code = code * (hex ? 16 : 10) + (unsigned long)v;
                }
                if (code == 0 || code > 0x10FFFF || (hex && n == 2)) {
                    return false;
                }
            } else {
                return false;
            }
            /* UTF-8 of the code point (up to 4 bytes). */
            unsigned char u[4];
            size_t k = 0;
            if (code < 0x80) {
                u[k++] = (unsigned char)code;
            } else if (code < 0x800) {
                u[k++] = (unsigned char)(0xC0 | (code >> 6));
                u[k++] = (unsigned char)(0x80 | (code & 0x3F));
            } else if (code < 0x10000) {
                u[k++] = (unsigned char)(0xE0 | (code >> 12));
                u[k++] = (unsigned char)(0x80 | ((code >> 6) & 0x3F));
                u[k++] = (unsigned char)(0x80 | (code & 0x3F));
            } else {
                u[k++] = (unsigned char)(0xF0 | (code >> 18));
                u[k++] = (unsigned char)(0x80 | ((code >> 12) & 0x3F));
                u[k++] = (unsigned char)(0x80 | ((code >> 6) & 0x3F));
                u[k++] = (unsigned char)(0x80 | (code & 0x3F));
            }
            if (o + k > MAX_VALUE) {
                return false;
            }
            memcpy(out + o, u, k);
            o += k;
            i += n + 1;
        } else {
            if (o + 1 > MAX_VALUE || c == '\0') {
                return false;
            }
            out[o++] = c;
        }
    }
    out[o] = '\0';
    return true;
}

bool sp_ann_parse_decimal(const char *text, size_t len, double *out) {
    char buf[64];
    size_t i = 0, n = 0;
    while (i < len && is_space(text[i])) {
        i++;
    }
    while (len > i && is_space(text[len - 1])) {
        len--;
    }
    if (i == len || len - i >= sizeof buf) {
        return false;
    }
    bool dot = memchr(text + i, '.', len - i) != NULL;
    int commas = 0;
    for (; i < len; i++) {
        char c = text[i];
        if (c == ',' && !dot && commas++ == 0) {
            c = '.';
        } else if (!((c >= '0' && c <= '9') || c == '.' || c == '-' || c == '+' || c == 'e' ||
                     c == 'E')) {
            return false;
        }
        buf[n++] = c;
    }
    buf[n] = '\0';
    char *end = NULL;
    double v = sp_strtod(buf, &end);
    if (end != buf + n) {
        return false;
    }
    *out = v;
    return true;
}

/* A numeric attribute; *present false when it is absent. */
static sp_status number_attr(asap *x, const attr *attrs, size_t n, const char *name, bool *present,
                             double *out, sp_err *err) {
    const attr *at = find_attr(attrs, n, name);
    *present = at != NULL;
    if (at == NULL) {
        return SP_OK;
    }
    char buf[MAX_VALUE + 1];
    if (!decode(at, buf) || !sp_ann_parse_decimal(buf, strlen(buf), out)) {
        return sp_ann_fail(x->a, err, SP_E_CORRUPT, "coordinate %zu: %s=\"%.40s\" is not a number",
                           x->n, name, decode(at, buf) ? buf : "?");
    }
    return SP_OK;
}

static sp_status start_annotation(asap *x, const attr *attrs, size_t n, sp_err *err) {
    size_t index = x->a->seen;
    if (x->in_annotation) {
        return sp_ann_fail(x->a, err, SP_E_CORRUPT, "an Annotation inside an Annotation");
    }
    char name[MAX_VALUE + 1] = "", group[MAX_VALUE + 1] = "", type[MAX_VALUE + 1] = "";
    const attr *an = find_attr(attrs, n, "Name"), *ag = find_attr(attrs, n, "PartOfGroup"),
               *at = find_attr(attrs, n, "Type");
    if ((an != NULL && !decode(an, name)) || (ag != NULL && !decode(ag, group)) ||
        (at != NULL && !decode(at, type))) {
        return sp_ann_fail_at(x->a, err, SP_E_CORRUPT, index,
                              "an attribute has a bad entity reference or is over %d bytes",
                              MAX_VALUE);
    }
    sp_status st = sp_ann_begin_feature(x->a, strcmp(group, "None") == 0 ? NULL : group, name, err);
    if (st != SP_OK) {
        return st;
    }
    if (strcmp(type, "Polygon") == 0 || strcmp(type, "Rectangle") == 0 ||
        strcmp(type, "Spline") == 0) {
        x->area = true;
    } else if (strcmp(type, "Dot") == 0 || strcmp(type, "PointSet") == 0 ||
               strcmp(type, "Measurement") == 0) {
        x->area = false;
    } else {
        return sp_ann_fail(x->a, err, at == NULL ? SP_E_CORRUPT : SP_E_UNSUPPORTED,
                           at == NULL ? "no Type attribute%s" : "unsupported Type \"%.40s\"",
                           at == NULL ? "" : type);
    }
    x->in_annotation = true;
    x->n = 0;
    return SP_OK;
}

static sp_status coordinate(asap *x, const attr *attrs, size_t n, sp_err *err) {
    if (x->n >= SP_ANN_MAX_POINTS) {
        return sp_ann_fail(x->a, err, SP_E_LIMIT, "more than %llu coordinates",
                           (unsigned long long)SP_ANN_MAX_POINTS);
    }
    vertex v = {.seq = x->n};
    bool has_x, has_y, has_order;
    sp_status st = number_attr(x, attrs, n, "X", &has_x, &v.x, err);
    if (st == SP_OK) {
        st = number_attr(x, attrs, n, "Y", &has_y, &v.y, err);
    }
    if (st == SP_OK) {
        st = number_attr(x, attrs, n, "Order", &has_order, &v.order, err);
    }
    if (st != SP_OK) {
        return st;
    }
    if (!has_x || !has_y) {
        return sp_ann_fail(x->a, err, SP_E_CORRUPT, "coordinate %zu has no %s attribute", x->n,
                           has_x ? "Y" : "X");
    }
    if (!has_order) {
        v.order = (double)x->n;
    } else if (!isfinite(v.order)) {
        return sp_ann_fail(x->a, err, SP_E_CORRUPT, "coordinate %zu: Order is not finite", x->n);
    }
    if (x->n == x->cap) {
        size_t cap = x->cap ? x->cap * 2 : 64;
        vertex *p = realloc(x->v, cap * sizeof *p);
        if (p == NULL) {
            return sp_err_set(err, SP_E_NOMEM, "out of memory");
        }
        x->v = p;
        x->cap = cap;
    }
    x->v[x->n++] = v;
    return SP_OK;
}

static int by_order(const void *pa, const void *pb) {
    const vertex *a = pa, *b = pb;
    if (a->order != b->order) {
        return a->order < b->order ? -1 : 1;
    }
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static sp_status end_annotation(asap *x, sp_err *err) {
    x->in_annotation = false;
    sp_status st = SP_OK;
    if (x->area) {
        if (x->n == 0) {
            return sp_ann_fail(x->a, err, SP_E_CORRUPT, "no coordinates");
        }
        qsort(x->v, x->n, sizeof *x->v, by_order);
        double *xy = realloc(x->xy, x->n * 2 * sizeof *xy);
        if (xy == NULL) {
            return sp_err_set(err, SP_E_NOMEM, "out of memory");
        }
        x->xy = xy;
        for (size_t i = 0; i < x->n; i++) {
            xy[2 * i] = x->v[i].x;
            xy[2 * i + 1] = x->v[i].y;
        }
        st = sp_ann_add_polygon(x->a, err);
        if (st == SP_OK) {
            st = sp_ann_add_ring(x->a, xy, x->n, err);
        }
    }
    return st != SP_OK ? st : sp_ann_end_feature(x->a, err);
}

/* A start tag at x->pos (just past '<'); *depth and the name stack updated. */
static sp_status start_tag(asap *x, const char **names, size_t *lens, int *depth, sp_err *err) {
    size_t s = x->pos;
    while (x->pos < x->len && is_name_char(x->text[x->pos])) {
        x->pos++;
    }
    if (x->pos == s) {
        return bad_xml(x, "a '<' not followed by a name", err);
    }
    const char *name = x->text + s;
    size_t name_len = x->pos - s;
    attr attrs[MAX_ATTRS];
    size_t n = 0;
    bool empty = false;
    for (;;) {
        size_t before = x->pos;
        while (x->pos < x->len && is_space(x->text[x->pos])) {
            x->pos++;
        }
        if (x->pos >= x->len) {
            return bad_xml(x, "the file ends inside a tag", err);
        }
        if (starts(x, "/>")) {
            x->pos += 2;
            empty = true;
            break;
        }
        if (x->text[x->pos] == '>') {
            x->pos++;
            break;
        }
        if (x->pos == before) {
            return bad_xml(x, "attributes must be separated by white space", err);
        }
        if (n == MAX_ATTRS) {
            return bad_xml(x, "too many attributes on one element", err);
        }
        attr *at = &attrs[n];
        at->name = x->text + x->pos;
        while (x->pos < x->len && is_name_char(x->text[x->pos])) {
            x->pos++;
        }
        at->name_len = (size_t)(x->text + x->pos - at->name);
        while (x->pos < x->len && is_space(x->text[x->pos])) {
            x->pos++;
        }
        if (at->name_len == 0 || x->pos >= x->len || x->text[x->pos] != '=') {
            return bad_xml(x, "an attribute without '=' and a value", err);
        }
        x->pos++;
        while (x->pos < x->len && is_space(x->text[x->pos])) {
            x->pos++;
        }
        char q = x->pos < x->len ? x->text[x->pos] : '\0';
        if (q != '"' && q != '\'') {
            return bad_xml(x, "an attribute value without quotes", err);
        }
        x->pos++;
        at->value = x->text + x->pos;
        while (x->pos < x->len && x->text[x->pos] != q && x->text[x->pos] != '<') {
            x->pos++;
        }
        if (x->pos >= x->len || x->text[x->pos] != q) {
            return bad_xml(x, "an unterminated attribute value", err);
        }
        at->value_len = (size_t)(x->text + x->pos - at->value);
        x->pos++;
        n++;
    }
    if (*depth == 0 && !name_is(name, name_len, "ASAP_Annotations")) {
        return sp_ann_fail(x->a, err, SP_E_UNSUPPORTED,
                           "XML whose root element is not ASAP_Annotations");
    }
    sp_status st = SP_OK;
    if (name_is(name, name_len, "Annotation")) {
        st = start_annotation(x, attrs, n, err);
    } else if (name_is(name, name_len, "Coordinate") && x->in_annotation) {
        st = coordinate(x, attrs, n, err);
    }
    if (st != SP_OK) {
        return st;
    }
    if (empty) {
        return name_is(name, name_len, "Annotation") ? end_annotation(x, err) : SP_OK;
    }
    if (*depth >= MAX_DEPTH) {
        return bad_xml(x, "elements nested too deep", err);
    }
    names[*depth] = name;
    lens[*depth] = name_len;
    (*depth)++;
    return SP_OK;
}

static sp_status end_tag(asap *x, const char **names, size_t *lens, int *depth, sp_err *err) {
    size_t s = x->pos;
    while (x->pos < x->len && is_name_char(x->text[x->pos])) {
        x->pos++;
    }
    const char *name = x->text + s;
    size_t n = x->pos - s;
    while (x->pos < x->len && is_space(x->text[x->pos])) {
        x->pos++;
    }
    if (x->pos >= x->len || x->text[x->pos] != '>') {
        return bad_xml(x, "a malformed end tag", err);
    }
    x->pos++;
    if (*depth == 0 || lens[*depth - 1] != n || memcmp(names[*depth - 1], name, n) != 0) {
        return bad_xml(x, "an end tag that does not match its start tag", err);
    }
    (*depth)--;
    return name_is(name, n, "Annotation") ? end_annotation(x, err) : SP_OK;
}

sp_status sp_ann_parse_asap(sp_annotations *a, const char *data, size_t len, sp_err *err) {
    asap x = {.a = a, .text = data, .len = len};
    const char *names[MAX_DEPTH];
    size_t lens[MAX_DEPTH];
    int depth = 0;
    bool root_done = false;
    sp_status st = SP_OK;
    if (len >= 3 && memcmp(data, "\xEF\xBB\xBF", 3) == 0) {
        x.pos = 3;
    }
    while (st == SP_OK && x.pos < x.len) {
        char c = x.text[x.pos];
        if (c != '<') {
            if (c == '\0' || (depth == 0 && !is_space(c))) {
                st = bad_xml(&x, "text outside the root element", err);
            }
            x.pos++;
        } else if (starts(&x, "<?")) {
            if (!skip_past(&x, "?>")) {
                st = bad_xml(&x, "an unterminated processing instruction", err);
            }
        } else if (starts(&x, "<!--")) {
            if (!skip_past(&x, "-->")) {
                st = bad_xml(&x, "an unterminated comment", err);
            }
        } else if (starts(&x, "<![CDATA[")) {
            if (depth == 0 || !skip_past(&x, "]]>")) {
                st = bad_xml(&x, "a misplaced or unterminated CDATA section", err);
            }
        } else if (starts(&x, "<!")) {
            st = sp_ann_fail(a, err, SP_E_UNSUPPORTED,
                             "XML with a DOCTYPE or declaration (not accepted)");
        } else if (root_done) {
            st = bad_xml(&x, "a second root element", err);
        } else if (starts(&x, "</")) {
            x.pos += 2;
            st = end_tag(&x, names, lens, &depth, err);
            root_done = depth == 0;
        } else {
            x.pos++;
            st = start_tag(&x, names, lens, &depth, err);
            root_done = st == SP_OK && depth == 0; /* an empty root element */
        }
    }
    if (st == SP_OK && !root_done) {
        st = bad_xml(&x, depth > 0 ? "the file ends inside an element" : "no root element", err);
    }
    free(x.v);
    free(x.xy);
    return st;
}
