/* azure_sign.c — Azure Storage Shared Key signing (see azure_sign.h): the string to sign, its
 * HMAC-SHA256, the account key's base64 and the x-ms-date stamp.
 *
 * Everything the string to sign holds comes from its arguments; nothing is read from the
 * environment or the clock here, so the unit tests check it against strings computed elsewhere.
 */
#include "io/azure_sign.h"

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#define MAX_HEADERS 64
#define MAX_PARAMS 64

/* The standard headers of the string to sign, in its order. */
static const char *const STANDARD[] = {
    "Content-Encoding",
    "Content-Language",
    "Content-Length",
    "Content-MD5",
    "Content-Type",
    "Date",
    "If-Modified-Since",
    "If-Match",
    "If-None-Match",
    "If-Unmodified-Since",
    "Range",
};

/* Appends into the caller's buffer; `full` once something did not fit. */
typedef struct writer {
    char *out;
    size_t cap, len;
    bool full;
} writer;

static void put(writer *w, const char *s, size_t n) {
    if (w->full || n >= w->cap - w->len) {
        w->full = true;
        return;
    }
    memcpy(w->out + w->len, s, n);
    w->len += n;
    w->out[w->len] = '\0';
}

static void put_str(writer *w, const char *s) {
    put(w, s, strlen(s));
}

static bool has_control(const char *s) {
    for (; *s != '\0'; s++) {
        if ((unsigned char)*s < 0x20 && *s != '\t') {
            return true;
        }
        if ((unsigned char)*s == 0x7f) {
            return true;
        }
    }
    return false;
}

/* A header value as signed: leading and trailing spaces and tabs dropped, each inner run of them
 * one space. */
static void put_value(writer *w, const char *v) {
    while (*v == ' ' || *v == '\t') {
        v++;
    }
    bool space = false;
    for (; *v != '\0'; v++) {
        if (*v == ' ' || *v == '\t') {
            space = true;
            continue;
        }
        if (space) {
            put(w, " ", 1);
            space = false;
        }
        put(w, v, 1);
    }
}

/* "0", with spaces or tabs around it or not. */
static bool is_zero(const char *v) {
    v += strspn(v, " \t");
    return v[0] == '0' && v[1 + strspn(v + 1, " \t")] == '\0';
}

static const char *header_lookup(const sp_azure_header *h, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++) {
        if (strcasecmp(h[i].name, name) == 0) {
            return h[i].value;
        }
    }
    return NULL;
}

typedef struct pair {
    char *name; /* lower case */
    const char *value;
} pair;

static int pair_cmp(const void *a, const void *b) {
    const pair *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c != 0 ? c : strcmp(x->value, y->value);
}

static void lower(char *s) {
    for (; *s != '\0'; s++) {
        if (*s >= 'A' && *s <= 'Z') {
            *s = (char)(*s - 'A' + 'a');
        }
    }
}

static int hex_digit(char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* %XX-decode s in place; false for a malformed escape or one that decodes to NUL. */
static bool url_decode(char *s) {
    char *o = s;
    for (char *p = s; *p != '\0'; p++) {
        if (*p != '%') {
            *o++ = *p;
            continue;
        }
        int hi = hex_digit(p[1]), lo = hi >= 0 ? hex_digit(p[2]) : -1;
        if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
            return false;
        }
        *o++ = (char)(hi * 16 + lo);
        p += 2;
    }
    *o = '\0';
    return true;
}

/* CanonicalizedHeaders: the x-ms-* headers, lower-cased and sorted. */
static sp_status put_ms_headers(writer *w, const sp_azure_header *headers, size_t n, sp_err *err) {
    pair ms[MAX_HEADERS];
    size_t k = 0;
    sp_status st = SP_OK;
    for (size_t i = 0; i < n && st == SP_OK; i++) {
        if (strncasecmp(headers[i].name, "x-ms-", 5) != 0) {
            continue;
        }
        if (k == MAX_HEADERS) {
            st = sp_err_set(err, SP_E_INVALID_ARG, "Azure signing: more than %d x-ms-* headers",
                            MAX_HEADERS);
        } else if ((ms[k].name = strdup(headers[i].name)) == NULL) {
            st = sp_err_set(err, SP_E_NOMEM, "Azure signing: out of memory");
        } else {
            lower(ms[k].name);
            ms[k++].value = headers[i].value;
        }
    }
    if (st == SP_OK && k > 1) {
        qsort(ms, k, sizeof *ms, pair_cmp);
        for (size_t i = 1; i < k && st == SP_OK; i++) {
            if (strcmp(ms[i - 1].name, ms[i].name) == 0) {
                st = sp_err_set(err, SP_E_INVALID_ARG, "Azure signing: header %s given twice",
                                ms[i].name);
            }
        }
    }
    for (size_t i = 0; i < k; i++) {
        if (st == SP_OK) {
            put_str(w, ms[i].name);
            put(w, ":", 1);
            put_value(w, ms[i].value);
            put(w, "\n", 1);
        }
        free(ms[i].name);
    }
    return st;
}

/* The query part of CanonicalizedResource: "\nname:v1,v2" per name, sorted, decoded. */
static sp_status put_query(writer *w, const char *query, sp_err *err) {
    char *copy = strdup(query);
    if (copy == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "Azure signing: out of memory");
    }
    pair params[MAX_PARAMS];
    size_t k = 0;
    sp_status st = SP_OK;
    char *save = NULL;
    for (char *p = strtok_r(copy, "&", &save); p != NULL && st == SP_OK;
         p = strtok_r(NULL, "&", &save)) {
        char *eq = strchr(p, '=');
        if (eq != NULL) {
            *eq = '\0';
        }
        const char *value = eq != NULL ? eq + 1 : "";
        if (k == MAX_PARAMS) {
            st = sp_err_set(err, SP_E_INVALID_ARG, "Azure signing: more than %d query parameters",
                            MAX_PARAMS);
        } else if (!url_decode(p) || !url_decode((char *)value)) {
            st = sp_err_set(err, SP_E_INVALID_ARG,
                            "Azure signing: malformed %%-escape in the "
                            "query string");
        } else {
            lower(p);
            params[k++] = (pair){p, value};
        }
    }
    if (st == SP_OK) {
        qsort(params, k, sizeof *params, pair_cmp);
        for (size_t i = 0; i < k; i++) {
            bool same = i > 0 && strcmp(params[i - 1].name, params[i].name) == 0;
            if (same) {
                put(w, ",", 1);
            } else {
                put(w, "\n", 1);
                put_str(w, params[i].name);
                put(w, ":", 1);
            }
            put_str(w, params[i].value);
        }
    }
    free(copy);
    return st;
}

sp_status sp_azure_string_to_sign(const char *method, const char *account, const char *path,
                                  const char *query, const sp_azure_header *headers,
                                  size_t n_headers, char *out, size_t cap, sp_err *err) {
    if (out == NULL || cap == 0) {
        return sp_err_set(err, SP_E_INVALID_ARG, "Azure signing: no output buffer");
    }
    out[0] = '\0';
    if (method == NULL || method[0] == '\0' || account == NULL || account[0] == '\0' ||
        path == NULL || path[0] != '/' || (headers == NULL && n_headers > 0) ||
        has_control(method) || has_control(account) || has_control(path) ||
        (query != NULL && has_control(query))) {
        return sp_err_set(err, SP_E_INVALID_ARG, "Azure signing: malformed request");
    }
    for (size_t i = 0; i < n_headers; i++) {
        if (headers[i].name == NULL || headers[i].value == NULL || headers[i].name[0] == '\0' ||
            has_control(headers[i].name) || has_control(headers[i].value)) {
            return sp_err_set(err, SP_E_INVALID_ARG, "Azure signing: malformed header");
        }
    }
    writer w = {out, cap, 0, false};
    put_str(&w, method);
    put(&w, "\n", 1);
    for (size_t i = 0; i < sizeof STANDARD / sizeof *STANDARD; i++) {
        const char *v = header_lookup(headers, n_headers, STANDARD[i]);
        /* Since version 2015-02-21 a zero Content-Length is signed as an empty line. */
        bool zero_length = v != NULL && strcmp(STANDARD[i], "Content-Length") == 0 && is_zero(v);
        if (v != NULL && !zero_length) {
            put_value(&w, v);
        }
        put(&w, "\n", 1);
    }
    sp_status st = put_ms_headers(&w, headers, n_headers, err);
    if (st == SP_OK) {
        put(&w, "/", 1);
        put_str(&w, account);
        put_str(&w, path);
        if (query != NULL && query[0] != '\0') {
            st = put_query(&w, query, err);
        }
    }
    if (st == SP_OK && w.full) {
        st = sp_err_set(err, SP_E_INVALID_ARG,
                        "Azure signing: the string to sign is longer than "
                        "%zu bytes",
                        cap - 1);
    }
    if (st != SP_OK) {
        out[0] = '\0';
    }
    return st;
}

sp_status sp_azure_signature(const unsigned char *key, size_t key_len, const char *string_to_sign,
                             char *out, size_t cap, sp_err *err) {
    unsigned char mac[32];
    unsigned int mac_len = 0;
    if (out == NULL || cap < 45 || key == NULL || string_to_sign == NULL || key_len > INT_MAX) {
        return sp_err_set(err, SP_E_INVALID_ARG, "Azure signing: bad arguments");
    }
    if (HMAC(EVP_sha256(), key, (int)key_len, (const unsigned char *)string_to_sign,
             strlen(string_to_sign), mac, &mac_len) == NULL ||
        mac_len != sizeof mac) {
        out[0] = '\0';
        return sp_err_set(err, SP_E_IO, "Azure signing: HMAC-SHA256 failed");
    }
    EVP_EncodeBlock((unsigned char *)out, mac, (int)sizeof mac); /* 44 characters and a NUL */
    OPENSSL_cleanse(mac, sizeof mac);
    return SP_OK;
}

static int base64_value(char c) {
    return c >= 'A' && c <= 'Z'   ? c - 'A'
           : c >= 'a' && c <= 'z' ? c - 'a' + 26
           : c >= '0' && c <= '9' ? c - '0' + 52
           : c == '+'             ? 62
           : c == '/'             ? 63
                                  : -1;
}

sp_status sp_azure_decode_key(const char *base64, unsigned char *key, size_t *key_len,
                              sp_err *err) {
    *key_len = 0;
    size_t n = base64 != NULL ? strlen(base64) : 0;
    size_t pad = n >= 1 && base64[n - 1] == '=' ? (n >= 2 && base64[n - 2] == '=' ? 2 : 1) : 0;
    bool ok = n > 0 && n % 4 == 0 && n / 4 * 3 - pad <= SP_AZURE_KEY_MAX;
    size_t out = 0;
    unsigned acc = 0;
    for (size_t i = 0; ok && i < n - pad; i++) {
        int v = base64_value(base64[i]);
        ok = v >= 0;
        acc = (acc << 6) | (unsigned)(v & 63);
        if (ok && i % 4 == 3) {
            key[out++] = (unsigned char)(acc >> 16);
            key[out++] = (unsigned char)(acc >> 8);
            key[out++] = (unsigned char)acc;
            acc = 0;
        }
    }
    if (ok && pad == 1) { /* 3 characters: 18 bits, the last 2 must be 0 */
        ok = (acc & 3) == 0;
        key[out++] = (unsigned char)(acc >> 10);
        key[out++] = (unsigned char)(acc >> 2);
    } else if (ok && pad == 2) { /* 2 characters: 12 bits, the last 4 must be 0 */
        ok = (acc & 15) == 0;
        key[out++] = (unsigned char)(acc >> 4);
    }
    if (!ok) {
        OPENSSL_cleanse(key, SP_AZURE_KEY_MAX);
        return sp_err_set(err, SP_E_INVALID_ARG,
                          "the account key is not base64 (an Azure Storage key is the 88 "
                          "characters the portal or `az storage account keys list` shows)");
    }
    *key_len = out;
    return SP_OK;
}

void sp_azure_date(time_t t, char out[SP_AZURE_DATE_LEN]) {
    static const char *const DAY[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static const char *const MONTH[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                        "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    struct tm tm;
    gmtime_r(&t, &tm);
    snprintf(out, SP_AZURE_DATE_LEN, "%s, %02d %s %04d %02d:%02d:%02d GMT", DAY[tm.tm_wday % 7],
             tm.tm_mday, MONTH[tm.tm_mon % 12], (tm.tm_year + 1900) % 10000, tm.tm_hour, tm.tm_min,
             tm.tm_sec);
}
