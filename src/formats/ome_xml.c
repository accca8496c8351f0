/* ome_xml.c — OME-XML for OME-TIFF (see ome_xml.h): a bounded XML tokenizer and, driven by it,
 * a builder that keeps Images, their Pixels, Channels and TiffData, and the Objectives that
 * give the magnification.
 *
 * Why our own tokenizer rather than libxml2: OME-XML needs a tiny subset of XML (elements,
 * attributes, a little text), the input is hostile, and a subset that cannot load DTDs or
 * expand entities has no XXE or billion-laughs surface to configure away. The tokenizer is a
 * single forward pass over the input: every construct is found with a bounded scan, so the time
 * is linear in the input and the memory is the kept metadata plus one scratch buffer of at most
 * SP_OME_XML_MAX_VALUE bytes. It is non-validating: it checks well-formedness (matched tags,
 * quoted attributes, valid references, one root) but not the schema. Namespace prefixes are
 * ignored: elements and attributes are matched by local name, and the context (which element
 * holds which) decides what an element means, so an "Image" inside an annotation is not an
 * Image.
 */
#include "base/numbers.h"
#include "formats/ome_xml.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- the tokenizer ------------------------------------------------------------------------ */

typedef struct xml_attr {
    const char *name; /* qualified name, pointing into the input */
    size_t name_len;
    size_t value_off; /* decoded, NUL-terminated value at scratch + value_off */
} xml_attr;

typedef struct xml {
    const char *start, *p, *end;
    sp_err *err;
    int depth;
    struct {
        const char *name;
        size_t len;
    } stack[SP_OME_XML_MAX_DEPTH];
    bool root_seen, root_closed;
    char *buf; /* scratch: decoded attribute values of the current tag, or decoded text */
    size_t buf_len, buf_cap;
    int n_attrs;
    xml_attr attrs[SP_OME_XML_MAX_ATTRS];
} xml;

typedef struct ome_builder ome_builder;
static sp_status on_start(ome_builder *b, xml *x, const char *name, size_t len, int depth);
static sp_status on_end(ome_builder *b, int depth);
static bool wants_text(const ome_builder *b);
static sp_status on_text(ome_builder *b, const char *text, size_t len);

static sp_status xml_fail(xml *x, const char *what) {
    return sp_err_set(x->err, SP_E_CORRUPT, "malformed OME-XML at byte %llu: %s",
                      (unsigned long long)(x->p - x->start), what);
}

static sp_status xml_truncated(xml *x) {
    return sp_err_set(x->err, SP_E_CORRUPT, "malformed OME-XML: truncated (ends inside %s)",
                      x->depth > 0 ? "an element" : "markup");
}

static bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static bool is_name_start(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' || c >= 0x80;
}

static bool is_name_char(unsigned char c) {
    return is_name_start(c) || (c >= '0' && c <= '9') || c == '-' || c == '.';
}

static size_t skip_space(xml *x) {
    const char *from = x->p;
    while (x->p < x->end && is_space(*x->p)) {
        x->p++;
    }
    return (size_t)(x->p - from);
}

static bool starts_with(const xml *x, const char *lit) {
    size_t n = strlen(lit);
    return (size_t)(x->end - x->p) >= n && memcmp(x->p, lit, n) == 0;
}

/* The first occurrence of `lit` at or after `from`, or NULL. */
static const char *find(const xml *x, const char *from, const char *lit) {
    size_t n = strlen(lit);
    while ((size_t)(x->end - from) >= n) {
        const char *c = memchr(from, lit[0], (size_t)(x->end - from) - n + 1);
        if (c == NULL) {
            return NULL;
        }
        if (memcmp(c, lit, n) == 0) {
            return c;
        }
        from = c + 1;
    }
    return NULL;
}

static sp_status parse_name(xml *x, const char **name, size_t *len) {
    if (x->p >= x->end) {
        return xml_truncated(x);
    }
    if (!is_name_start((unsigned char)*x->p)) {
        return xml_fail(x, "expected a name");
    }
    const char *from = x->p;
    while (x->p < x->end && is_name_char((unsigned char)*x->p)) {
        if ((size_t)(x->p - from) >= SP_OME_XML_MAX_NAME) {
            return sp_err_set(x->err, SP_E_LIMIT, "OME-XML name longer than %d bytes",
                              SP_OME_XML_MAX_NAME);
        }
        x->p++;
    }
    *name = from;
    *len = (size_t)(x->p - from);
    return SP_OK;
}

static const char *local_name(const char *name, size_t len, size_t *local_len) {
    const char *colon = NULL;
    for (size_t i = 0; i < len; i++) {
        if (name[i] == ':') {
            colon = name + i;
        }
    }
    const char *local = colon ? colon + 1 : name;
    *local_len = len - (size_t)(local - name);
    return local;
}

static sp_status buf_put(xml *x, const char *s, size_t n) {
    if (n > SP_OME_XML_MAX_VALUE - x->buf_len) {
        return sp_err_set(x->err, SP_E_LIMIT,
                          "OME-XML attributes of one element, or a text, larger than %u bytes",
                          SP_OME_XML_MAX_VALUE);
    }
    if (x->buf_len + n > x->buf_cap) {
        size_t cap = x->buf_cap ? x->buf_cap : 4096;
        while (cap < x->buf_len + n) {
            cap *= 2;
        }
        char *grown = realloc(x->buf, cap);
        if (grown == NULL) {
            return sp_err_set(x->err, SP_E_NOMEM, "out of memory parsing OME-XML");
        }
        x->buf = grown;
        x->buf_cap = cap;
    }
    memcpy(x->buf + x->buf_len, s, n);
    x->buf_len += n;
    return SP_OK;
}

/* XML's Char production: what a character reference may name. */
static bool is_xml_char(uint32_t c) {
    return c == 0x9 || c == 0xA || c == 0xD || (c >= 0x20 && c <= 0xD7FF) ||
           (c >= 0xE000 && c <= 0xFFFD) || (c >= 0x10000 && c <= 0x10FFFF);
}

static size_t utf8_encode(uint32_t c, char *out) {
    if (c < 0x80) {
        out[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        out[0] = (char)(0xC0 | (c >> 6));
        out[1] = (char)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        out[0] = (char)(0xE0 | (c >> 12));
        out[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        out[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (c >> 18));
    out[1] = (char)(0x80 | ((c >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((c >> 6) & 0x3F));
    out[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

/* Decode a reference starting at `s` ('&') before `e` into out (up to 4 bytes); *used is its
 * length in the input. */
static sp_status decode_reference(xml *x, const char *s, const char *e, char *out, size_t *out_len,
                                  size_t *used) {
    /* "&#x10FFFF;" is the longest valid reference: 10 bytes. */
    const char *semi = memchr(s, ';', (size_t)(e - s) < 12 ? (size_t)(e - s) : 12);
    x->p = s;
    if (semi == NULL) {
        return xml_fail(x, "'&' that does not start a reference");
    }
    const char *n = s + 1;
    size_t len = (size_t)(semi - n);
    *used = (size_t)(semi + 1 - s);
    static const struct {
        const char *name;
        char c;
    } predefined[] = {{"lt", '<'}, {"gt", '>'}, {"amp", '&'}, {"apos", '\''}, {"quot", '"'}};
    for (size_t i = 0; i < sizeof predefined / sizeof predefined[0]; i++) {
        if (len == strlen(predefined[i].name) && memcmp(n, predefined[i].name, len) == 0) {
            out[0] = predefined[i].c;
            *out_len = 1;
            return SP_OK;
        }
    }
    if (len == 0 || n[0] != '#') {
        return xml_fail(x, "unknown entity (only the five predefined ones are read)");
    }
    bool hex = len >= 2 && n[1] == 'x';
    const char *d = n + (hex ? 2 : 1);
    if (d == semi) {
        return xml_fail(x, "empty character reference");
    }
    uint32_t c = 0;
    for (; d < semi; d++) {
        unsigned v;
        if (*d >= '0' && *d <= '9') {
            v = (unsigned)(*d - '0');
        } else if (hex && *d >= 'a' && *d <= 'f') {
            v = (unsigned)(*d - 'a' + 10);
        } else if (hex && *d >= 'A' && *d <= 'F') {
            v = (unsigned)(*d - 'A' + 10);
        } else {
            return xml_fail(x, "bad digit in a character reference");
        }
        c = c * (hex ? 16 : 10) + v;
        if (c > 0x10FFFF) {
            return xml_fail(x, "character reference beyond U+10FFFF");
        }
    }
    if (!is_xml_char(c)) {
        return xml_fail(x, "character reference to a character XML does not allow");
    }
    *out_len = utf8_encode(c, out);
    return SP_OK;
}

/* Check (and with `store`, decode into the scratch buffer) character data from s to e: an
 * attribute value (whitespace normalised to spaces, '<' refused) or text. */
static sp_status decode_chars(xml *x, const char *s, const char *e, bool attribute, bool store) {
    const char *run = s; /* start of plain bytes not yet stored */
    sp_status st = SP_OK;
    while (st == SP_OK && s < e) {
        unsigned char c = (unsigned char)*s;
        if (c != '&' && c != '<' && c >= 0x20) {
            s++;
            continue;
        }
        if (store && s > run) {
            st = buf_put(x, run, (size_t)(s - run));
            if (st != SP_OK) {
                break;
            }
        }
        if (c == '&') {
            char ch[4];
            size_t n = 0, used = 0;
            st = decode_reference(x, s, e, ch, &n, &used);
            if (st == SP_OK && store) {
                st = buf_put(x, ch, n);
            }
            s += used;
        } else if (c == '<') {
            x->p = s;
            return xml_fail(x, "'<' inside an attribute value");
        } else if (c == '\t' || c == '\n' || c == '\r') {
            if (store) {
                /* Attribute values normalise each line end (CR LF counts as one) to a space. */
                char out = attribute ? ' ' : (char)c;
                bool crlf = c == '\r' && s + 1 < e && s[1] == '\n';
                st = buf_put(x, &out, 1);
                s += crlf && attribute ? 2 : 1;
            } else {
                s++;
            }
        } else {
            x->p = s;
            return xml_fail(x, "control character");
        }
        run = s;
    }
    if (st == SP_OK && store && s > run) {
        st = buf_put(x, run, (size_t)(s - run));
    }
    return st;
}

static sp_status parse_start_tag(xml *x, ome_builder *b) {
    x->p++; /* '<' */
    const char *name;
    size_t name_len;
    sp_status st = parse_name(x, &name, &name_len);
    if (st != SP_OK) {
        return st;
    }
    x->n_attrs = 0;
    x->buf_len = 0;
    bool empty = false;
    for (;;) {
        size_t spaces = skip_space(x);
        if (x->p >= x->end) {
            return xml_truncated(x);
        }
        if (*x->p == '>') {
            x->p++;
            break;
        }
        if (*x->p == '/') {
            if (x->p + 1 >= x->end) {
                return xml_truncated(x);
            }
            if (x->p[1] != '>') {
                return xml_fail(x, "expected '>' after '/'");
            }
            x->p += 2;
            empty = true;
            break;
        }
        if (spaces == 0) {
            return xml_fail(x, "attributes must be separated by whitespace");
        }
        if (x->n_attrs == SP_OME_XML_MAX_ATTRS) {
            return sp_err_set(x->err, SP_E_LIMIT, "an OME-XML element with more than %d attributes",
                              SP_OME_XML_MAX_ATTRS);
        }
        xml_attr *a = &x->attrs[x->n_attrs];
        st = parse_name(x, &a->name, &a->name_len);
        if (st != SP_OK) {
            return st;
        }
        skip_space(x);
        if (x->p >= x->end) {
            return xml_truncated(x);
        }
        if (*x->p != '=') {
            return xml_fail(x, "expected '=' after an attribute name");
        }
        x->p++;
        skip_space(x);
        if (x->p >= x->end) {
            return xml_truncated(x);
        }
        char quote = *x->p;
        if (quote != '"' && quote != '\'') {
            return xml_fail(x, "attribute value without quotes");
        }
        const char *value = x->p + 1;
        const char *close = memchr(value, quote, (size_t)(x->end - value));
        if (close == NULL) {
            return xml_truncated(x);
        }
        a->value_off = x->buf_len;
        st = decode_chars(x, value, close, true, true);
        if (st == SP_OK) {
            st = buf_put(x, "", 1);
        }
        if (st != SP_OK) {
            return st;
        }
        x->p = close + 1;
        x->n_attrs++;
    }
    if (x->root_closed) {
        return xml_fail(x, "a second root element");
    }
    if (x->depth == SP_OME_XML_MAX_DEPTH) {
        return sp_err_set(x->err, SP_E_LIMIT, "OME-XML nested deeper than %d elements",
                          SP_OME_XML_MAX_DEPTH);
    }
    x->root_seen = true;
    size_t local_len;
    const char *local = local_name(name, name_len, &local_len);
    st = on_start(b, x, local, local_len, x->depth);
    if (st != SP_OK) {
        return st;
    }
    if (empty) {
        st = on_end(b, x->depth);
        x->root_closed = x->depth == 0;
        return st;
    }
    x->stack[x->depth].name = name;
    x->stack[x->depth].len = name_len;
    x->depth++;
    return SP_OK;
}

static sp_status parse_end_tag(xml *x, ome_builder *b) {
    x->p += 2; /* "</" */
    const char *name;
    size_t len;
    sp_status st = parse_name(x, &name, &len);
    if (st != SP_OK) {
        return st;
    }
    skip_space(x);
    if (x->p >= x->end) {
        return xml_truncated(x);
    }
    if (*x->p != '>') {
        return xml_fail(x, "expected '>' ending an end tag");
    }
    if (x->depth == 0) {
        return xml_fail(x, "end tag without a start tag");
    }
    if (x->stack[x->depth - 1].len != len || memcmp(x->stack[x->depth - 1].name, name, len) != 0) {
        return xml_fail(x, "end tag does not match the open element");
    }
    x->p++;
    x->depth--;
    x->root_closed = x->depth == 0;
    return on_end(b, x->depth);
}

/* Skip markup from the cursor to just past `terminator`. */
static sp_status skip_past(xml *x, const char *from, const char *terminator) {
    const char *t = find(x, from, terminator);
    if (t == NULL) {
        return xml_truncated(x);
    }
    x->p = t + strlen(terminator);
    return SP_OK;
}

static sp_status parse_text(xml *x, ome_builder *b) {
    const char *lt = memchr(x->p, '<', (size_t)(x->end - x->p));
    const char *e = lt ? lt : x->end;
    if (x->depth == 0) {
        for (const char *c = x->p; c < e; c++) {
            if (!is_space(*c)) {
                x->p = c;
                return xml_fail(x, "text outside the root element");
            }
        }
        x->p = e;
        return SP_OK;
    }
    bool store = wants_text(b);
    x->buf_len = 0;
    sp_status st = decode_chars(x, x->p, e, false, store);
    x->p = e;
    if (st == SP_OK && store) {
        st = on_text(b, x->buf, x->buf_len);
    }
    return st;
}

static sp_status xml_run(xml *x, ome_builder *b) {
    const unsigned char *u = (const unsigned char *)x->p;
    size_t n = (size_t)(x->end - x->p);
    if (n >= 2 && ((u[0] == 0xFE && u[1] == 0xFF) || (u[0] == 0xFF && u[1] == 0xFE))) {
        return sp_err_set(x->err, SP_E_UNSUPPORTED, "UTF-16 OME-XML (UTF-8 is read)");
    }
    if (n >= 3 && u[0] == 0xEF && u[1] == 0xBB && u[2] == 0xBF) {
        x->p += 3;
    }
    sp_status st = SP_OK;
    while (st == SP_OK && x->p < x->end) {
        if (*x->p != '<') {
            st = parse_text(x, b);
        } else if (starts_with(x, "<?")) {
            st = skip_past(x, x->p + 2, "?>");
        } else if (starts_with(x, "<!--")) {
            st = skip_past(x, x->p + 4, "-->");
        } else if (starts_with(x, "<![CDATA[")) {
            if (x->depth == 0) {
                return xml_fail(x, "CDATA outside the root element");
            }
            const char *from = x->p + 9;
            const char *close = find(x, from, "]]>");
            if (close == NULL) {
                return xml_truncated(x);
            }
            if (wants_text(b)) {
                x->buf_len = 0;
                st = buf_put(x, from, (size_t)(close - from));
                if (st == SP_OK) {
                    st = on_text(b, x->buf, x->buf_len);
                }
            }
            x->p = close + 3;
        } else if (starts_with(x, "<!DOCTYPE")) {
            return sp_err_set(x->err, SP_E_UNSUPPORTED,
                              "OME-XML with a DOCTYPE (DTDs are not read)");
        } else if (starts_with(x, "<!")) {
            return xml_fail(x, "unknown markup declaration");
        } else if (starts_with(x, "</")) {
            st = parse_end_tag(x, b);
        } else {
            st = parse_start_tag(x, b);
        }
    }
    if (st != SP_OK) {
        return st;
    }
    if (!x->root_seen) {
        return xml_fail(x, "no root element");
    }
    if (x->depth > 0) {
        return xml_truncated(x);
    }
    return SP_OK;
}

/* The decoded value of the attribute with local name `name`, or NULL. */
static const char *attr(const xml *x, const char *name) {
    size_t want = strlen(name);
    for (int i = 0; i < x->n_attrs; i++) {
        size_t len;
        const char *local = local_name(x->attrs[i].name, x->attrs[i].name_len, &len);
        if (len == want && memcmp(local, name, len) == 0) {
            return x->buf + x->attrs[i].value_off;
        }
    }
    return NULL;
}

/* ---- numbers ------------------------------------------------------------------------------ */

static const char *trim_start(const char *s) {
    while (is_space(*s)) {
        s++;
    }
    return s;
}

static bool only_space(const char *s) {
    return *trim_start(s) == '\0';
}

/* A non-negative decimal integer up to `max` (XML Schema integers: surrounding whitespace, an
 * optional '+'). */
static bool parse_uint(const char *s, uint64_t max, uint64_t *out) {
    s = trim_start(s);
    if (*s == '+') {
        s++;
    }
    if (*s < '0' || *s > '9') {
        return false;
    }
    uint64_t v = 0;
    for (; *s >= '0' && *s <= '9'; s++) {
        v = v * 10 + (uint64_t)(*s - '0');
        if (v > max) {
            return false;
        }
    }
    *out = v;
    return only_space(s);
}

static bool parse_int32(const char *s, int32_t *out) {
    s = trim_start(s);
    bool negative = *s == '-';
    uint64_t v;
    if (!parse_uint(negative ? s + 1 : s, negative ? 0x80000000u : 0x7FFFFFFFu, &v)) {
        return false;
    }
    *out = negative ? (int32_t)(-(int64_t)v) : (int32_t)v;
    return true;
}

/* A positive, finite decimal number; anything else (INF, NaN, hex, garbage) is false. */
static bool parse_positive(const char *s, double *out) {
    s = trim_start(s);
    for (const char *c = s; *c && !is_space(*c); c++) {
        if (!((*c >= '0' && *c <= '9') || *c == '.' || *c == '-' || *c == '+' || *c == 'e' ||
              *c == 'E')) {
            return false;
        }
    }
    char *end;
    double v = sp_strtod(s, &end);
    if (end == s || !only_space(end) || !isfinite(v) || v <= 0) {
        return false;
    }
    *out = v;
    return true;
}

bool sp_ome_length_to_microns(double value, const char *unit, double *microns) {
    static const struct {
        const char *symbol;
        double microns;
    } units[] = {
        {"\xC2\xB5m", 1}, /* µm, MICRO SIGN: the OME default */
        {"\xCE\xBCm", 1}, /* μm, GREEK SMALL LETTER MU */
        {"um", 1},
        {"nm", 1e-3},
        {"pm", 1e-6},
        {"mm", 1e3},
        {"cm", 1e4},
        {"dm", 1e5},
        {"m", 1e6},
        {"\xC3\x85", 1e-4},     /* Å, LATIN CAPITAL A WITH RING */
        {"\xE2\x84\xAB", 1e-4}, /* Å, ANGSTROM SIGN */
        {"in", 25400},
    };
    if (unit == NULL) {
        unit = "\xC2\xB5m";
    }
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcmp(unit, units[i].symbol) == 0) {
            *microns = value * units[i].microns;
            return isfinite(*microns) && *microns > 0;
        }
    }
    return false;
}

/* ---- the builder -------------------------------------------------------------------------- */

/* What an open element means, by its position under the root. */
enum {
    CTX_OTHER,
    CTX_OME,
    CTX_IMAGE,
    CTX_PIXELS,
    CTX_TIFFDATA,
    CTX_UUID,
    CTX_INSTRUMENT,
};

typedef struct objective {
    char *id;
    double magnification;
} objective;

struct ome_builder {
    sp_ome *ome;
    sp_err *err;
    uint8_t ctx[SP_OME_XML_MAX_DEPTH];
    uint32_t images_cap;
    uint32_t channels_cap, tiffdata_cap; /* of the current Image */
    uint64_t total_tiffdata;
    int cur;        /* depth of the innermost open element, -1 before the root */
    char uuid[256]; /* text of the current UUID element */
    size_t uuid_len;
    objective *objectives;
    uint32_t n_objectives, objectives_cap;
};

/* Grow an array of `size`-byte items so that it holds n + 1; counts are bounded by the
 * SP_OME_MAX_* constants, so the sizes cannot overflow. */
static sp_status grow(void **items, uint32_t n, uint32_t *cap, size_t size, sp_err *err) {
    if (n < *cap) {
        return SP_OK;
    }
    uint32_t want = *cap ? *cap * 2 : 4;
    void *grown = realloc(*items, (size_t)want * size);
    if (grown == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory parsing OME-XML");
    }
    memset((char *)grown + (size_t)*cap * size, 0, (size_t)(want - *cap) * size);
    *items = grown;
    *cap = want;
    return SP_OK;
}

static sp_status dup_attr(ome_builder *b, const xml *x, const char *name, char **out) {
    const char *v = attr(x, name);
    if (v == NULL) {
        return SP_OK;
    }
    free(*out);
    *out = strdup(v);
    return *out ? SP_OK : sp_err_set(b->err, SP_E_NOMEM, "out of memory parsing OME-XML");
}

static sp_status bad_number(ome_builder *b, const char *element, const char *name,
                            const char *value) {
    return sp_err_set(b->err, SP_E_CORRUPT, "OME-XML %s %s=\"%.40s\" is not a valid number",
                      element, name, value);
}

/* A size attribute of Pixels: a positive int; `fallback` when absent (0: required). */
static sp_status pixels_size(ome_builder *b, const xml *x, const char *name, uint32_t fallback,
                             uint32_t *out) {
    const char *v = attr(x, name);
    if (v == NULL) {
        if (fallback == 0) {
            return sp_err_set(b->err, SP_E_CORRUPT, "OME-XML Pixels without %s", name);
        }
        *out = fallback;
        return SP_OK;
    }
    uint64_t n;
    if (!parse_uint(v, 0x7FFFFFFF, &n) || n == 0) {
        return bad_number(b, "Pixels", name, v);
    }
    *out = (uint32_t)n;
    return SP_OK;
}

static bool valid_dimension_order(const char *v) {
    static const char *const orders[] = {"XYZCT", "XYZTC", "XYCTZ", "XYCZT", "XYTCZ", "XYTZC"};
    for (size_t i = 0; i < sizeof orders / sizeof orders[0]; i++) {
        if (strcmp(v, orders[i]) == 0) {
            return true;
        }
    }
    return false;
}

static sp_status start_pixels(ome_builder *b, const xml *x, sp_ome_image *im) {
    im->has_pixels = true;
    sp_status st = pixels_size(b, x, "SizeX", 0, &im->size_x);
    if (st == SP_OK) {
        st = pixels_size(b, x, "SizeY", 0, &im->size_y);
    }
    if (st == SP_OK) {
        st = pixels_size(b, x, "SizeZ", 1, &im->size_z);
    }
    if (st == SP_OK) {
        st = pixels_size(b, x, "SizeC", 1, &im->size_c);
    }
    if (st == SP_OK) {
        st = pixels_size(b, x, "SizeT", 1, &im->size_time);
    }
    if (st != SP_OK) {
        return st;
    }
    const char *order = attr(x, "DimensionOrder");
    if (order != NULL && !valid_dimension_order(order)) {
        return sp_err_set(b->err, SP_E_CORRUPT,
                          "OME-XML Pixels DimensionOrder=\"%.40s\" is not "
                          "one of XYZCT, XYZTC, XYCTZ, XYCZT, XYTCZ, XYTZC",
                          order);
    }
    memcpy(im->dimension_order, order ? order : "XYZCT", 6);
    st = dup_attr(b, x, "Type", &im->type);
    if (st != SP_OK) {
        return st;
    }
    /* Physical sizes only feed the MPP: a value that is not a positive length is left out. */
    double v;
    const char *px = attr(x, "PhysicalSizeX"), *py = attr(x, "PhysicalSizeY");
    if (px != NULL && parse_positive(px, &v)) {
        sp_ome_length_to_microns(v, attr(x, "PhysicalSizeXUnit"), &im->physical_size_x);
    }
    if (py != NULL && parse_positive(py, &v)) {
        sp_ome_length_to_microns(v, attr(x, "PhysicalSizeYUnit"), &im->physical_size_y);
    }
    const char *inter = attr(x, "Interleaved");
    im->interleaved = inter != NULL && (strcmp(trim_start(inter), "true") == 0 ||
                                        strcmp(trim_start(inter), "1") == 0);
    return SP_OK;
}

static sp_status start_channel(ome_builder *b, const xml *x, sp_ome_image *im) {
    if (im->n_channels == SP_OME_MAX_CHANNELS) {
        return sp_err_set(b->err, SP_E_LIMIT, "OME-XML Image with more than %d Channels",
                          SP_OME_MAX_CHANNELS);
    }
    sp_status st = grow((void **)&im->channels, im->n_channels, &b->channels_cap,
                        sizeof *im->channels, b->err);
    if (st != SP_OK) {
        return st;
    }
    sp_ome_channel *c = &im->channels[im->n_channels++];
    st = dup_attr(b, x, "Name", &c->name);
    const char *spp = attr(x, "SamplesPerPixel"), *color = attr(x, "Color");
    uint64_t n;
    if (st == SP_OK && spp != NULL) {
        if (!parse_uint(spp, 0x7FFFFFFF, &n) || n == 0) {
            return bad_number(b, "Channel", "SamplesPerPixel", spp);
        }
        c->samples_per_pixel = (uint32_t)n;
    }
    if (st == SP_OK && color != NULL) {
        if (!parse_int32(color, &c->color)) {
            return bad_number(b, "Channel", "Color", color);
        }
        c->has_color = true;
    }
    return st;
}

static sp_status tiffdata_number(ome_builder *b, const xml *x, const char *name, uint64_t *out,
                                 bool *present) {
    const char *v = attr(x, name);
    if (present != NULL) {
        *present = v != NULL;
    }
    if (v != NULL && !parse_uint(v, 0x7FFFFFFF, out)) {
        return bad_number(b, "TiffData", name, v);
    }
    return SP_OK;
}

static sp_status start_tiffdata(ome_builder *b, const xml *x, sp_ome_image *im) {
    if (b->total_tiffdata == SP_OME_MAX_TIFFDATA) {
        return sp_err_set(b->err, SP_E_LIMIT, "OME-XML with more than %u TiffData elements",
                          SP_OME_MAX_TIFFDATA);
    }
    sp_status st = grow((void **)&im->tiffdata, im->n_tiffdata, &b->tiffdata_cap,
                        sizeof *im->tiffdata, b->err);
    if (st != SP_OK) {
        return st;
    }
    b->total_tiffdata++;
    sp_ome_tiffdata *td = &im->tiffdata[im->n_tiffdata++];
    st = tiffdata_number(b, x, "IFD", &td->ifd, &td->has_ifd);
    if (st == SP_OK) {
        st = tiffdata_number(b, x, "FirstZ", &td->first_z, NULL);
    }
    if (st == SP_OK) {
        st = tiffdata_number(b, x, "FirstC", &td->first_c, NULL);
    }
    if (st == SP_OK) {
        st = tiffdata_number(b, x, "FirstT", &td->first_t, NULL);
    }
    if (st == SP_OK) {
        st = tiffdata_number(b, x, "PlaneCount", &td->plane_count, &td->has_plane_count);
    }
    return st;
}

static sp_status start_objective(ome_builder *b, const xml *x) {
    const char *id = attr(x, "ID"), *mag = attr(x, "NominalMagnification");
    double v;
    if (id == NULL || mag == NULL || !parse_positive(mag, &v)) {
        return SP_OK;
    }
    if (b->n_objectives == SP_OME_MAX_IMAGES) {
        return sp_err_set(b->err, SP_E_LIMIT, "OME-XML with more than %d Objectives",
                          SP_OME_MAX_IMAGES);
    }
    sp_status st = grow((void **)&b->objectives, b->n_objectives, &b->objectives_cap,
                        sizeof *b->objectives, b->err);
    if (st != SP_OK) {
        return st;
    }
    objective *o = &b->objectives[b->n_objectives];
    o->id = strdup(id);
    if (o->id == NULL) {
        return sp_err_set(b->err, SP_E_NOMEM, "out of memory parsing OME-XML");
    }
    o->magnification = v;
    b->n_objectives++;
    return SP_OK;
}

static bool is(const char *name, size_t len, const char *want) {
    return len == strlen(want) && memcmp(name, want, len) == 0;
}

static sp_status on_start(ome_builder *b, xml *x, const char *name, size_t len, int depth) {
    sp_ome *ome = b->ome;
    int parent = depth > 0 ? b->ctx[depth - 1] : -1;
    sp_ome_image *im = ome->n_images > 0 ? &ome->images[ome->n_images - 1] : NULL;
    b->ctx[depth] = CTX_OTHER;
    b->cur = depth;
    sp_status st = SP_OK;
    if (depth == 0) {
        if (!is(name, len, "OME")) {
            return sp_err_set(b->err, SP_E_CORRUPT,
                              "OME-XML whose root element is <%.*s>, not "
                              "<OME>",
                              (int)(len < 40 ? len : 40), name);
        }
        b->ctx[0] = CTX_OME;
        return dup_attr(b, x, "UUID", &ome->uuid);
    }
    if (parent == CTX_OME && is(name, len, "Image")) {
        if (ome->n_images == SP_OME_MAX_IMAGES) {
            return sp_err_set(b->err, SP_E_LIMIT, "OME-XML with more than %d Images",
                              SP_OME_MAX_IMAGES);
        }
        st =
            grow((void **)&ome->images, ome->n_images, &b->images_cap, sizeof *ome->images, b->err);
        if (st != SP_OK) {
            return st;
        }
        im = &ome->images[ome->n_images++];
        b->channels_cap = b->tiffdata_cap = 0;
        b->ctx[depth] = CTX_IMAGE;
        st = dup_attr(b, x, "ID", &im->id);
        if (st == SP_OK) {
            st = dup_attr(b, x, "Name", &im->name);
        }
    } else if (parent == CTX_OME && is(name, len, "BinaryOnly")) {
        ome->binary_only = true;
    } else if (parent == CTX_OME && is(name, len, "Instrument")) {
        b->ctx[depth] = CTX_INSTRUMENT;
    } else if (parent == CTX_INSTRUMENT && is(name, len, "Objective")) {
        st = start_objective(b, x);
    } else if (parent == CTX_IMAGE && is(name, len, "Pixels") && !im->has_pixels) {
        b->ctx[depth] = CTX_PIXELS;
        st = start_pixels(b, x, im);
    } else if (parent == CTX_IMAGE && is(name, len, "ObjectiveSettings")) {
        st = dup_attr(b, x, "ID", &im->objective_ref);
    } else if (parent == CTX_PIXELS && is(name, len, "Channel")) {
        st = start_channel(b, x, im);
    } else if (parent == CTX_PIXELS && is(name, len, "TiffData")) {
        b->ctx[depth] = CTX_TIFFDATA;
        st = start_tiffdata(b, x, im);
    } else if (parent == CTX_TIFFDATA && is(name, len, "UUID")) {
        b->ctx[depth] = CTX_UUID;
        b->uuid_len = 0;
        st = dup_attr(b, x, "FileName", &im->tiffdata[im->n_tiffdata - 1].file_name);
    }
    return st;
}

static bool wants_text(const ome_builder *b) {
    return b->cur >= 0 && b->ctx[b->cur] == CTX_UUID;
}

static sp_status on_text(ome_builder *b, const char *text, size_t len) {
    if (len > sizeof b->uuid - 1 - b->uuid_len) {
        return sp_err_set(b->err, SP_E_LIMIT, "OME-XML TiffData UUID longer than %d bytes",
                          (int)sizeof b->uuid - 1);
    }
    memcpy(b->uuid + b->uuid_len, text, len);
    b->uuid_len += len;
    return SP_OK;
}

static sp_status on_end(ome_builder *b, int depth) {
    b->cur = depth - 1;
    if (b->ctx[depth] != CTX_UUID) {
        return SP_OK;
    }
    size_t from = 0, to = b->uuid_len;
    while (from < to && is_space(b->uuid[from])) {
        from++;
    }
    while (to > from && is_space(b->uuid[to - 1])) {
        to--;
    }
    if (from == to) {
        return SP_OK;
    }
    sp_ome_image *im = &b->ome->images[b->ome->n_images - 1];
    sp_ome_tiffdata *td = &im->tiffdata[im->n_tiffdata - 1];
    free(td->uuid);
    td->uuid = strndup(b->uuid + from, to - from);
    return td->uuid ? SP_OK : sp_err_set(b->err, SP_E_NOMEM, "out of memory parsing OME-XML");
}

/* ---- the document ------------------------------------------------------------------------- */

uint32_t sp_ome_image_channel_planes(const sp_ome_image *im) {
    if (im->n_channels == 0) {
        return im->size_c;
    }
    uint64_t samples = 0;
    for (uint32_t i = 0; i < im->n_channels; i++) {
        samples += im->channels[i].samples_per_pixel ? im->channels[i].samples_per_pixel : 1;
    }
    return samples == im->size_c ? im->n_channels : im->size_c;
}

uint64_t sp_ome_image_planes(const sp_ome_image *im) {
    if (!im->has_pixels) {
        return 0;
    }
    uint64_t n;
    if (!sp_mul_u64(sp_ome_image_channel_planes(im), im->size_z, &n) ||
        !sp_mul_u64(n, im->size_time, &n)) {
        return UINT64_MAX; /* refused at parse time */
    }
    return n;
}

uint64_t sp_ome_plane_index(const sp_ome_image *im, uint64_t z, uint64_t c, uint64_t t) {
    uint64_t index = 0;
    for (int i = 4; i >= 2; i--) {
        char d = im->dimension_order[i];
        uint64_t size = d == 'Z'   ? im->size_z
                        : d == 'C' ? sp_ome_image_channel_planes(im)
                                   : im->size_time;
        uint64_t v = d == 'Z' ? z : d == 'C' ? c : t;
        index = index * size + v;
    }
    return index;
}

sp_status sp_ome_plane_ifd(const sp_ome_image *im, uint64_t z, uint64_t c, uint64_t t,
                           uint64_t ifd_base, uint64_t *ifd, const sp_ome_tiffdata **covering,
                           sp_err *err) {
    *ifd = 0;
    *covering = NULL;
    uint32_t cp = sp_ome_image_channel_planes(im);
    if (!im->has_pixels || z >= im->size_z || c >= cp || t >= im->size_time) {
        return sp_err_set(err, SP_E_INVALID_ARG, "OME plane Z=%llu C=%llu T=%llu out of range",
                          (unsigned long long)z, (unsigned long long)c, (unsigned long long)t);
    }
    uint64_t planes = sp_ome_image_planes(im);
    uint64_t p = sp_ome_plane_index(im, z, c, t);
    for (uint32_t i = 0; i < im->n_tiffdata; i++) {
        const sp_ome_tiffdata *td = &im->tiffdata[i];
        if (td->first_z >= im->size_z || td->first_c >= cp || td->first_t >= im->size_time) {
            continue; /* starts outside the image: covers nothing */
        }
        uint64_t start = sp_ome_plane_index(im, td->first_z, td->first_c, td->first_t);
        uint64_t count = td->has_plane_count ? td->plane_count : td->has_ifd ? 1 : planes - start;
        if (p >= start && p - start < count) {
            *ifd = td->ifd + (p - start); /* both below 2^31 */
            *covering = td;
            return SP_OK;
        }
    }
    if (!sp_add_u64(ifd_base, p, ifd)) {
        return sp_err_set(err, SP_E_CORRUPT, "OME plane's IFD number overflows");
    }
    return SP_OK;
}

static const char *base_name(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

bool sp_ome_tiffdata_is_local(const sp_ome *ome, const sp_ome_tiffdata *td, const char *file_name) {
    bool have_uuids = td->uuid != NULL && ome->uuid != NULL;
    bool have_names = td->file_name != NULL && file_name != NULL;
    bool uuid_same = have_uuids && strcasecmp(td->uuid, ome->uuid) == 0;
    bool name_same = have_names && strcmp(base_name(td->file_name), base_name(file_name)) == 0;
    if (uuid_same || name_same) {
        return true;
    }
    /* Another file only on evidence: a different UUID or a different file name. */
    return !have_uuids && !have_names;
}

sp_status sp_ome_check_single_file(const sp_ome *ome, const sp_ome_image *im, const char *file_name,
                                   sp_err *err) {
    if (ome->binary_only) {
        return sp_err_set(err, SP_E_UNSUPPORTED,
                          "multi-file OME-TIFF: the metadata is in a "
                          "companion file (BinaryOnly); only single-file OME-TIFF is read");
    }
    for (uint32_t i = 0; i < im->n_tiffdata; i++) {
        const sp_ome_tiffdata *td = &im->tiffdata[i];
        if (!sp_ome_tiffdata_is_local(ome, td, file_name)) {
            return sp_err_set(err, SP_E_UNSUPPORTED,
                              "multi-file OME-TIFF: planes of Image %s "
                              "are in %.200s; only single-file OME-TIFF is read",
                              im->id ? im->id : "0",
                              td->file_name ? td->file_name
                              : td->uuid    ? td->uuid
                                            : "?");
        }
    }
    return SP_OK;
}

void sp_ome_free(sp_ome *ome) {
    if (ome == NULL) {
        return;
    }
    for (uint32_t i = 0; i < ome->n_images; i++) {
        sp_ome_image *im = &ome->images[i];
        for (uint32_t c = 0; c < im->n_channels; c++) {
            free(im->channels[c].name);
        }
        for (uint32_t k = 0; k < im->n_tiffdata; k++) {
            free(im->tiffdata[k].uuid);
            free(im->tiffdata[k].file_name);
        }
        free(im->channels);
        free(im->tiffdata);
        free(im->id);
        free(im->name);
        free(im->type);
        free(im->objective_ref);
    }
    free(ome->images);
    free(ome->uuid);
    free(ome);
}

/* After the whole document: refuse plane counts that overflow, and resolve objectives. */
static sp_status finish(ome_builder *b) {
    sp_ome *ome = b->ome;
    for (uint32_t i = 0; i < ome->n_images; i++) {
        sp_ome_image *im = &ome->images[i];
        if (im->has_pixels && sp_ome_image_planes(im) == UINT64_MAX) {
            return sp_err_set(b->err, SP_E_CORRUPT,
                              "OME-XML Image %u has more planes than fit "
                              "in 64 bits (SizeZ x SizeC x SizeT)",
                              i);
        }
        for (uint32_t k = 0; im->objective_ref != NULL && k < b->n_objectives; k++) {
            if (strcmp(im->objective_ref, b->objectives[k].id) == 0) {
                im->nominal_magnification = b->objectives[k].magnification;
                break;
            }
        }
    }
    return SP_OK;
}

sp_status sp_ome_parse(const char *text, size_t len, const sp_limits *limits, sp_ome **out,
                       sp_err *err) {
    *out = NULL;
    if (limits != NULL && (int64_t)len > limits->value[SP_LIMIT_MAX_METADATA]) {
        return sp_err_set(err, SP_E_LIMIT,
                          "OME-XML of %llu bytes exceeds the metadata limit "
                          "(%lld bytes)",
                          (unsigned long long)len, (long long)limits->value[SP_LIMIT_MAX_METADATA]);
    }
    xml *x = calloc(1, sizeof *x);
    ome_builder *b = calloc(1, sizeof *b);
    sp_ome *ome = calloc(1, sizeof *ome);
    sp_status st;
    if (x == NULL || b == NULL || ome == NULL) {
        st = sp_err_set(err, SP_E_NOMEM, "out of memory parsing OME-XML");
    } else {
        x->start = x->p = text;
        x->end = text + len;
        x->err = err;
        b->ome = ome;
        b->err = err;
        b->cur = -1;
        st = xml_run(x, b);
        if (st == SP_OK) {
            st = finish(b);
        }
    }
    if (b != NULL) {
        for (uint32_t i = 0; i < b->n_objectives; i++) {
            free(b->objectives[i].id);
        }
        free(b->objectives);
    }
    if (x != NULL) {
        free(x->buf);
    }
    free(x);
    free(b);
    if (st != SP_OK) {
        sp_ome_free(ome);
        return st;
    }
    *out = ome;
    return SP_OK;
}
