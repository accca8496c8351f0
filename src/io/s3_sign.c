/* s3_sign.c — AWS Signature Version 4 for S3 requests: GET and HEAD without a body, PUT with one
 * whose SHA-256 is signed, DELETE (see s3_sign.h).
 *
 * The canonical request is hashed piece by piece as it is produced, so a long host, key or
 * session token needs no buffer of its own; only the string to sign and the first HMAC key are
 * allocated. Arguments that would make S3 build a different canonical request from the one
 * signed here (a path byte it would re-encode, a control character in a header value) are
 * refused with a message naming the cause, instead of surfacing later as a bare 403
 * SignatureDoesNotMatch.
 */
#define _POSIX_C_SOURCE 200809L
#include "io/s3_sign.h"

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#define ALGORITHM "AWS4-HMAC-SHA256"
#define SCOPE_TAIL "/s3/aws4_request"

static int is_unreserved(unsigned char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_' || c == '~';
}

static int is_upper_hex(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F');
}

sp_status sp_s3_encode_path(const char *path, char *out, size_t cap, sp_err *err) {
    if (path == NULL || out == NULL || cap == 0) {
        return sp_err_set(err, SP_E_INVALID_ARG, "S3 path encoding: null path or no output buffer");
    }
    size_t need = 1;
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
        need += is_unreserved(*p) || *p == '/' ? 1 : 3;
    }
    if (need > cap) {
        out[0] = '\0';
        return sp_err_set(err, SP_E_INVALID_ARG,
                          "S3 path encoding: the encoded path needs %zu bytes, the buffer has %zu",
                          need, cap);
    }
    static const char HEX[] = "0123456789ABCDEF";
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
        if (is_unreserved(*p) || *p == '/') {
            out[n++] = (char)*p;
        } else {
            out[n++] = '%';
            out[n++] = HEX[*p >> 4];
            out[n++] = HEX[*p & 15];
        }
    }
    out[n] = '\0';
    return SP_OK;
}

static int is_amz_date(const char *d) {
    if (strlen(d) != 16 || d[8] != 'T' || d[15] != 'Z') {
        return 0;
    }
    for (int i = 0; i < 15; i++) {
        if (i != 8 && (d[i] < '0' || d[i] > '9')) {
            return 0;
        }
    }
    return 1;
}

/* S3 hashes the path as it would encode it, so any byte sp_s3_encode_path would have encoded,
 * or a '%' that does not start an upper-case escape, signs a path S3 never sees. */
static int is_canonical_uri(const char *uri) {
    if (uri[0] != '/') {
        return 0;
    }
    for (const unsigned char *p = (const unsigned char *)uri; *p; p++) {
        if (*p == '%') {
            if (!is_upper_hex(p[1]) || !is_upper_hex(p[2])) {
                return 0;
            }
            p += 2;
        } else if (!is_unreserved(*p) && *p != '/') {
            return 0;
        }
    }
    return 1;
}

/* A header value is sent as given: a control character (CR or LF above all) would end the
 * header early or split the request. It must also hold something besides spaces, since S3 signs
 * the trimmed value and an empty one means a different request. */
static int is_header_value(const char *v) {
    int content = 0;
    for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
        if (*p < 0x20 || *p == 0x7f) {
            return 0;
        }
        content |= *p != ' ';
    }
    return content;
}

/* The access key and region sit inside "Credential=KEY/DATE/REGION/s3/aws4_request," where '/'
 * and ',' are separators and spaces would end the parameter. */
static int is_credential_field(const char *s) {
    if (s[0] == '\0') {
        return 0;
    }
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p <= 0x20 || *p >= 0x7f || *p == '/' || *p == ',') {
            return 0;
        }
    }
    return 1;
}

static int digest_str(EVP_MD_CTX *md, const char *s) {
    return EVP_DigestUpdate(md, s, strlen(s)) == 1;
}

/* "name:value\n" with the value trimmed of leading and trailing spaces, as S3 canonicalises it
 * whatever spacing arrives on the wire. */
static int digest_header(EVP_MD_CTX *md, const char *name, const char *value) {
    while (*value == ' ') {
        value++;
    }
    size_t len = strlen(value);
    while (len > 0 && value[len - 1] == ' ') {
        len--;
    }
    return digest_str(md, name) && digest_str(md, ":") && EVP_DigestUpdate(md, value, len) == 1 &&
           digest_str(md, "\n");
}

static void hex_lower(const unsigned char *bytes, size_t n, char *out) {
    static const char HEX[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = HEX[bytes[i] >> 4];
        out[2 * i + 1] = HEX[bytes[i] & 15];
    }
    out[2 * n] = '\0';
}

static int hash_canonical_request(const char *method, const char *host, const char *uri,
                                  const char *range, const char *payload, const char *amz_date,
                                  const char *token, const char *signed_headers, char hex[65]) {
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int digest_len = 0;
    int ok = md != NULL && EVP_DigestInit_ex(md, EVP_sha256(), NULL) == 1 &&
             digest_str(md, method) && digest_str(md, "\n") && digest_str(md, uri) &&
             digest_str(md, "\n\n") && digest_header(md, "host", host) &&
             (range == NULL || digest_header(md, "range", range)) &&
             digest_header(md, "x-amz-content-sha256", payload) &&
             digest_header(md, "x-amz-date", amz_date) &&
             (token == NULL || digest_header(md, "x-amz-security-token", token)) &&
             digest_str(md, "\n") && digest_str(md, signed_headers) && digest_str(md, "\n") &&
             digest_str(md, payload) && EVP_DigestFinal_ex(md, digest, &digest_len) == 1 &&
             digest_len == 32;
    EVP_MD_CTX_free(md);
    if (ok) {
        hex_lower(digest, 32, hex);
    }
    return ok;
}

static int hmac_sha256(const void *key, size_t key_len, const void *data, size_t data_len,
                       unsigned char out[32]) {
    unsigned int out_len = 0;
    return key_len <= INT_MAX &&
           HMAC(EVP_sha256(), key, (int)key_len, data, data_len, out, &out_len) != NULL &&
           out_len == 32;
}

/* The signing key of the day, region and service, then the signature of string_to_sign. */
static int sign(const char *secret, const char *amz_date, const char *region,
                const char *string_to_sign, char hex[65]) {
    size_t secret_len = strlen(secret);
    char *first_key = malloc(secret_len + 5);
    if (first_key == NULL) {
        return 0;
    }
    memcpy(first_key, "AWS4", 4);
    memcpy(first_key + 4, secret, secret_len + 1);
    /* Two buffers in turn: each step's key is never also its output. */
    unsigned char k1[32], k2[32], sig[32];
    int ok = hmac_sha256(first_key, secret_len + 4, amz_date, 8, k1) &&
             hmac_sha256(k1, 32, region, strlen(region), k2) && hmac_sha256(k2, 32, "s3", 2, k1) &&
             hmac_sha256(k1, 32, "aws4_request", 12, k2) &&
             hmac_sha256(k2, 32, string_to_sign, strlen(string_to_sign), sig);
    /* Wiped so that no copy lingers in freed memory: the secret signs anything, and a derived
     * key anything in its region for a whole day. */
    OPENSSL_cleanse(first_key, secret_len + 4);
    OPENSSL_cleanse(k1, sizeof k1);
    OPENSSL_cleanse(k2, sizeof k2);
    free(first_key);
    if (ok) {
        hex_lower(sig, 32, hex);
    }
    return ok;
}

static bool is_sha256_hex(const char *p) {
    size_t n = 0;
    for (; p[n] != '\0'; n++) {
        if (!((p[n] >= '0' && p[n] <= '9') || (p[n] >= 'a' && p[n] <= 'f'))) {
            return false;
        }
    }
    return n == 64;
}

sp_status sp_s3_authorization(const char *method, const char *host, const char *canonical_uri,
                              const char *range, const char *amz_date,
                              const sp_s3_credentials *cred, char *out, size_t cap, sp_err *err) {
    if (method != NULL && strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        if (out != NULL && cap > 0) {
            out[0] = '\0';
        }
        return sp_err_set(err, SP_E_INVALID_ARG, "S3 signing: method must be GET or HEAD");
    }
    return sp_s3_authorization_payload(method, host, canonical_uri, range, SP_S3_EMPTY_SHA256,
                                       amz_date, cred, out, cap, err);
}

sp_status sp_s3_authorization_payload(const char *method, const char *host,
                                      const char *canonical_uri, const char *range,
                                      const char *payload_sha256, const char *amz_date,
                                      const sp_s3_credentials *cred, char *out, size_t cap,
                                      sp_err *err) {
    if (out == NULL || cap == 0) {
        return sp_err_set(err, SP_E_INVALID_ARG, "S3 signing: no output buffer");
    }
    out[0] = '\0';
    if (method == NULL || host == NULL || canonical_uri == NULL || payload_sha256 == NULL ||
        amz_date == NULL || cred == NULL || cred->access_key == NULL || cred->secret_key == NULL ||
        cred->region == NULL) {
        return sp_err_set(err, SP_E_INVALID_ARG, "S3 signing: null argument");
    }
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0 && strcmp(method, "PUT") != 0 &&
        strcmp(method, "DELETE") != 0) {
        return sp_err_set(err, SP_E_INVALID_ARG,
                          "S3 signing: method must be GET, HEAD, PUT or DELETE");
    }
    if (!is_sha256_hex(payload_sha256)) {
        return sp_err_set(err, SP_E_INVALID_ARG,
                          "S3 signing: the payload hash must be 64 lower-case hex digits");
    }
    if (!is_header_value(host)) {
        return sp_err_set(err, SP_E_INVALID_ARG, "S3 signing: empty host or control character");
    }
    if (!is_canonical_uri(canonical_uri)) {
        return sp_err_set(err, SP_E_INVALID_ARG,
                          "S3 signing: the path must start with '/' and be encoded as "
                          "sp_s3_encode_path encodes it");
    }
    if (range != NULL && !is_header_value(range)) {
        return sp_err_set(err, SP_E_INVALID_ARG, "S3 signing: empty range or control character");
    }
    if (!is_amz_date(amz_date)) {
        return sp_err_set(err, SP_E_INVALID_ARG, "S3 signing: x-amz-date must be YYYYMMDDTHHMMSSZ");
    }
    if (!is_credential_field(cred->access_key) || !is_credential_field(cred->region)) {
        return sp_err_set(err, SP_E_INVALID_ARG,
                          "S3 signing: empty access key or region, or one holding a space, '/' "
                          "or ','");
    }
    if (cred->secret_key[0] == '\0') {
        return sp_err_set(err, SP_E_INVALID_ARG, "S3 signing: empty secret key");
    }
    const char *token = cred->session_token;
    if (token != NULL && !is_header_value(token)) {
        return sp_err_set(err, SP_E_INVALID_ARG,
                          "S3 signing: empty session token (pass NULL for none) or control "
                          "character");
    }

    char signed_headers[96];
    snprintf(signed_headers, sizeof signed_headers, "host;%sx-amz-content-sha256;x-amz-date%s",
             range != NULL ? "range;" : "", token != NULL ? ";x-amz-security-token" : "");
    /* Checked before any hashing so that a short buffer costs nothing and writes nothing. */
    size_t scope_len = 8 + 1 + strlen(cred->region) + strlen(SCOPE_TAIL);
    size_t need = strlen(ALGORITHM " Credential=") + strlen(cred->access_key) + 1 + scope_len +
                  strlen(",SignedHeaders=") + strlen(signed_headers) + strlen(",Signature=") + 64 +
                  1;
    if (need > cap) {
        return sp_err_set(err, SP_E_INVALID_ARG,
                          "S3 signing: the Authorization value needs %zu bytes, the buffer has %zu",
                          need, cap);
    }

    char request_hash[65];
    if (!hash_canonical_request(method, host, canonical_uri, range, payload_sha256, amz_date, token,
                                signed_headers, request_hash)) {
        return sp_err_set(err, SP_E_NOMEM, "S3 signing: SHA-256 failed (out of memory?)");
    }
    size_t sts_len = strlen(ALGORITHM "\n") + 16 + 1 + scope_len + 1 + 64 + 1;
    char *string_to_sign = malloc(sts_len);
    if (string_to_sign == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "S3 signing: out of memory");
    }
    snprintf(string_to_sign, sts_len, ALGORITHM "\n%s\n%.8s/%s" SCOPE_TAIL "\n%s", amz_date,
             amz_date, cred->region, request_hash);
    char signature[65];
    int ok = sign(cred->secret_key, amz_date, cred->region, string_to_sign, signature);
    free(string_to_sign);
    if (!ok) {
        return sp_err_set(err, SP_E_NOMEM, "S3 signing: HMAC-SHA256 failed (out of memory?)");
    }
    snprintf(out, cap,
             ALGORITHM " Credential=%s/%.8s/%s" SCOPE_TAIL ",SignedHeaders=%s,Signature=%s",
             cred->access_key, amz_date, cred->region, signed_headers, signature);
    return SP_OK;
}

static void put_digits(char *out, int value, int width) {
    for (int i = width - 1; i >= 0; i--) {
        out[i] = (char)('0' + value % 10);
        value /= 10;
    }
}

void sp_s3_amz_date(time_t t, char out[17]) {
    struct tm tm;
    if (gmtime_r(&t, &tm) == NULL || tm.tm_year < -1900 || tm.tm_year > 9999 - 1900) {
        /* Out of the four-digit years: the nearest representable instant keeps the format
         * valid (S3 will still refuse a date that far from now). */
        int past = t < 0;
        tm = (struct tm){.tm_year = past ? -1900 : 9999 - 1900,
                         .tm_mon = past ? 0 : 11,
                         .tm_mday = past ? 1 : 31,
                         .tm_hour = past ? 0 : 23,
                         .tm_min = past ? 0 : 59,
                         .tm_sec = past ? 0 : 59};
    }
    put_digits(out, tm.tm_year + 1900, 4);
    put_digits(out + 4, tm.tm_mon + 1, 2);
    put_digits(out + 6, tm.tm_mday, 2);
    out[8] = 'T';
    put_digits(out + 9, tm.tm_hour, 2);
    put_digits(out + 11, tm.tm_min, 2);
    /* A leap second (tm_sec 60) is not a valid x-amz-date second. */
    put_digits(out + 13, tm.tm_sec > 59 ? 59 : tm.tm_sec, 2);
    out[15] = 'Z';
    out[16] = '\0';
}
