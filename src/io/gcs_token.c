/* gcs_token.c — access tokens from a service-account key file (see gcs_token.h), by OAuth 2's
 * JWT bearer grant (RFC 7523) as Google documents it for service accounts: the assertion is
 * base64url(header).base64url(claims).base64url(signature), header {"alg":"RS256","typ":"JWT"},
 * claims iss = the key's client_email, scope = devstorage.read_write, aud = its token_uri,
 * iat = now and exp = an hour later; the signature RSASSA-PKCS1-v1_5 with SHA-256 over the first
 * two parts (OpenSSL). The assertion is POSTed as a form to token_uri, whose JSON answer carries
 * access_token and expires_in.
 *
 * Everything read is untrusted: the key file is at most 64 KiB of JSON whose fields are checked
 * one by one; the token endpoint's answer (at most 64 KiB kept) must be a JSON object whose
 * access_token is printable without spaces (it goes into a header line). Error messages name the
 * key file and the endpoint and quote only the endpoint's error and error_description, made
 * printable and cut short; never the private key, the assertion or a token. The copies of the key
 * and the assertion are wiped before they are freed.
 */
#include "io/gcs_token.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/strings.h"
#include "io/http_source.h"

#define KEY_FILE_MAX (64 * 1024)
#define ANSWER_MAX (64 * 1024)
#define SCOPE "https://www.googleapis.com/auth/devstorage.read_write"
#define DEFAULT_TOKEN_URI "https://oauth2.googleapis.com/token"
#define JWT_LIFETIME_S 3600
#define REFRESH_MARGIN_S 300

/* The one token the process keeps. */
static struct {
    pthread_mutex_t lock;
    char *key_file;
    char token[SP_GCS_TOKEN_MAX];
    double refresh_at; /* monotonic seconds */
} kept = {.lock = PTHREAD_MUTEX_INITIALIZER};

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

/* Across fork() the lock is held, so a child never inherits it taken by a thread it lacks. */
static void lock_kept(void) {
    pthread_mutex_lock(&kept.lock);
}

static void unlock_kept(void) {
    pthread_mutex_unlock(&kept.lock);
}

static void register_fork_handlers(void) {
    pthread_atfork(lock_kept, unlock_kept, unlock_kept);
}

static double monotonic_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void wipe_free(char *s) {
    if (s != NULL) {
        memset(s, 0, strlen(s));
        free(s);
    }
}

/* `in` as base64url without padding (RFC 7515), malloc'd; NULL when out of memory. */
static char *base64url(const unsigned char *in, size_t len) {
    static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    char *out = malloc(4 * (len / 3) + 4 + 1);
    if (out == NULL) {
        return NULL;
    }
    char *o = out;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        v |= i + 1 < len ? (uint32_t)in[i + 1] << 8 : 0;
        v |= i + 2 < len ? in[i + 2] : 0;
        size_t n = len - i >= 3 ? 4 : len - i + 1; /* 2 digits for 1 byte, 3 for 2 */
        for (size_t k = 0; k < n; k++) {
            *o++ = digits[(v >> (18 - 6 * k)) & 63];
        }
    }
    *o = '\0';
    return out;
}

/* Printable ASCII, cut to fit `cap`: for quoting what a server said. */
static void printable(const char *s, char *out, size_t cap) {
    snprintf(out, cap, "%s", s);
    for (char *c = out; *c != '\0'; c++) {
        *c = *c < 0x20 || *c > 0x7e ? '?' : *c;
    }
}

typedef struct key {
    char *client_email;
    char *private_key; /* PEM */
    char *token_uri;
} key;

static void key_clear(key *k) {
    free(k->client_email);
    wipe_free(k->private_key);
    free(k->token_uri);
    memset(k, 0, sizeof *k);
}

/* The file's bytes, NUL-terminated; SP_E_INVALID_ARG naming it when it cannot be read. */
static sp_status read_file(const char *path, char **out, sp_err *err) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        return sp_err_set(err, SP_E_INVALID_ARG,
                          "%s: cannot read the service-account key file "
                          "(GOOGLE_APPLICATION_CREDENTIALS): %s",
                          path, strerror(errno));
    }
    char *text = malloc(KEY_FILE_MAX + 1);
    size_t n = text != NULL ? fread(text, 1, KEY_FILE_MAX + 1, f) : 0;
    bool failed = text != NULL && ferror(f);
    fclose(f);
    sp_status st = SP_OK;
    if (text == NULL) {
        st = sp_err_set(err, SP_E_NOMEM, "out of memory reading %s", path);
    } else if (failed) {
        st = sp_err_set(err, SP_E_INVALID_ARG,
                        "%s: cannot read the service-account key file "
                        "(GOOGLE_APPLICATION_CREDENTIALS)",
                        path);
    } else if (n > KEY_FILE_MAX) {
        st = sp_err_set(err, SP_E_INVALID_ARG,
                        "%s: not a service-account key file (larger than %d KiB)", path,
                        KEY_FILE_MAX / 1024);
    }
    if (st != SP_OK) {
        if (text != NULL) {
            memset(text, 0, n < KEY_FILE_MAX + 1 ? n : KEY_FILE_MAX + 1);
        }
        free(text);
        return st;
    }
    text[n] = '\0';
    *out = text;
    return SP_OK;
}

/* A member that must be a non-empty string, copied; SP_E_INVALID_ARG naming it otherwise. */
static sp_status string_member(const cJSON *doc, const char *path, const char *name, char **out,
                               sp_err *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(doc, name);
    if (!cJSON_IsString(v) || v->valuestring == NULL || v->valuestring[0] == '\0') {
        return sp_err_set(err, SP_E_INVALID_ARG, "%s: the service-account key has no \"%s\" string",
                          path, name);
    }
    *out = strdup(v->valuestring);
    return *out != NULL ? SP_OK : sp_err_set(err, SP_E_NOMEM, "out of memory reading %s", path);
}

static sp_status read_key(const char *path, key *k, sp_err *err) {
    memset(k, 0, sizeof *k);
    char *text = NULL;
    sp_status st = read_file(path, &text, err);
    if (st != SP_OK) {
        return st;
    }
    cJSON *doc = cJSON_Parse(text);
    memset(text, 0, strlen(text));
    free(text);
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(doc, "type");
    if (!cJSON_IsObject(doc)) {
        st = sp_err_set(err, SP_E_INVALID_ARG,
                        "%s: not a service-account key file (not a JSON object)", path);
    } else if (!cJSON_IsString(type) || type->valuestring == NULL ||
               strcmp(type->valuestring, "service_account") != 0) {
        char what[64];
        printable(cJSON_IsString(type) && type->valuestring ? type->valuestring : "", what,
                  sizeof what);
        st = sp_err_set(err, SP_E_INVALID_ARG,
                        "%s: not a service-account key (\"type\" is \"%s\", not "
                        "\"service_account\")",
                        path, what);
    }
    if (st == SP_OK) {
        st = string_member(doc, path, "client_email", &k->client_email, err);
    }
    if (st == SP_OK) {
        st = string_member(doc, path, "private_key", &k->private_key, err);
    }
    const cJSON *uri = cJSON_GetObjectItemCaseSensitive(doc, "token_uri");
    if (st == SP_OK && uri == NULL) {
        k->token_uri = strdup(DEFAULT_TOKEN_URI);
        st = k->token_uri != NULL ? SP_OK : sp_err_set(err, SP_E_NOMEM, "out of memory");
    } else if (st == SP_OK) {
        st = string_member(doc, path, "token_uri", &k->token_uri, err);
    }
    if (st == SP_OK && strncmp(k->token_uri, "https://", 8) != 0 &&
        strncmp(k->token_uri, "http://", 7) != 0) {
        st = sp_err_set(err, SP_E_INVALID_ARG,
                        "%s: the service-account key's token_uri is not an http(s) URL", path);
    }
    /* cJSON_Delete frees the key's string without wiping it. */
    const cJSON *pk = cJSON_GetObjectItemCaseSensitive(doc, "private_key");
    if (cJSON_IsString(pk) && pk->valuestring != NULL) {
        memset(pk->valuestring, 0, strlen(pk->valuestring));
    }
    cJSON_Delete(doc);
    if (st != SP_OK) {
        key_clear(k);
    }
    return st;
}

static int no_passphrase(char *buf, int size, int rwflag, void *user) {
    (void)buf, (void)size, (void)rwflag, (void)user;
    return -1; /* an encrypted key is refused, never prompted for */
}

/* The RS256 signature of `data` with the PEM private key, base64url; SP_E_INVALID_ARG naming the
 * key file when the key is not an RSA private key. */
static sp_status rs256(const char *path, const char *pem, const char *data, char **out,
                       sp_err *err) {
    *out = NULL;
    BIO *bio = BIO_new_mem_buf(pem, -1);
    EVP_PKEY *pkey = bio != NULL ? PEM_read_bio_PrivateKey(bio, NULL, no_passphrase, NULL) : NULL;
    BIO_free(bio);
    sp_status st = SP_OK;
    if (pkey == NULL || !EVP_PKEY_is_a(pkey, "RSA")) {
        st = sp_err_set(err, SP_E_INVALID_ARG,
                        "%s: the service-account key's private_key is not an unencrypted RSA "
                        "private key in PEM form",
                        path);
    }
    EVP_MD_CTX *md = st == SP_OK ? EVP_MD_CTX_new() : NULL;
    unsigned char *sig = NULL;
    size_t sig_len = 0;
    if (st == SP_OK &&
        (md == NULL || EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, pkey) != 1 ||
         EVP_DigestSign(md, NULL, &sig_len, (const unsigned char *)data, strlen(data)) != 1 ||
         (sig = malloc(sig_len)) == NULL ||
         EVP_DigestSign(md, sig, &sig_len, (const unsigned char *)data, strlen(data)) != 1)) {
        st = sp_err_set(err, SP_E_INVALID_ARG, "%s: signing with the service-account key failed",
                        path);
    }
    if (st == SP_OK && (*out = base64url(sig, sig_len)) == NULL) {
        st = sp_err_set(err, SP_E_NOMEM, "out of memory signing with %s", path);
    }
    free(sig);
    EVP_MD_CTX_free(md);
    EVP_PKEY_free(pkey);
    ERR_clear_error(); /* the thread's OpenSSL error queue is left as it was found */
    return st;
}

/* base64url of a JSON document. */
static char *encoded_json(const cJSON *doc) {
    char *text = cJSON_PrintUnformatted(doc);
    char *out = text != NULL ? base64url((const unsigned char *)text, strlen(text)) : NULL;
    free(text);
    return out;
}

/* The signed assertion for `k`, issued now. */
static sp_status make_assertion(const char *path, const key *k, char **out, sp_err *err) {
    *out = NULL;
    double now = (double)time(NULL);
    cJSON *header = cJSON_CreateObject();
    cJSON *claims = cJSON_CreateObject();
    bool ok = header != NULL && claims != NULL && cJSON_AddStringToObject(header, "alg", "RS256") &&
              cJSON_AddStringToObject(header, "typ", "JWT") &&
              cJSON_AddStringToObject(claims, "iss", k->client_email) &&
              cJSON_AddStringToObject(claims, "scope", SCOPE) &&
              cJSON_AddStringToObject(claims, "aud", k->token_uri) &&
              cJSON_AddNumberToObject(claims, "iat", now) &&
              cJSON_AddNumberToObject(claims, "exp", now + JWT_LIFETIME_S);
    char *h = ok ? encoded_json(header) : NULL;
    char *c = ok ? encoded_json(claims) : NULL;
    char *signing_input = h != NULL && c != NULL ? sp_strdup_printf("%s.%s", h, c) : NULL;
    cJSON_Delete(header);
    cJSON_Delete(claims);
    free(h);
    free(c);
    if (signing_input == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory signing with %s", path);
    }
    char *sig = NULL;
    sp_status st = rs256(path, k->private_key, signing_input, &sig, err);
    if (st == SP_OK) {
        *out = sp_strdup_printf("%s.%s", signing_input, sig);
        st = *out != NULL ? SP_OK : sp_err_set(err, SP_E_NOMEM, "out of memory");
    }
    free(signing_input);
    free(sig);
    return st;
}

typedef struct answer {
    char *body;
    size_t len;
} answer;

static size_t keep_answer(char *data, size_t size, size_t count, void *user) {
    answer *a = user;
    size_t n = size * count;
    size_t take = ANSWER_MAX - a->len < n ? ANSWER_MAX - a->len : n;
    memcpy(a->body + a->len, data, take);
    a->len += take;
    a->body[a->len] = '\0';
    return n;
}

static size_t ignore_headers(char *data, size_t size, size_t count, void *user) {
    (void)data, (void)user;
    return size * count;
}

/* POST `form` to the token endpoint; its status and body (NUL-terminated) on any HTTP answer. */
static sp_status post_form(const char *path, const char *uri, const char *form, long *code,
                           answer *a, sp_err *err) {
    sp_http_handle *h = sp_http_handle_take(err);
    if (h == NULL) {
        return SP_E_NOMEM;
    }
    CURL *c = h->curl;
    sp_status st = SP_OK;
    for (int attempt = 1;; attempt++) {
        a->len = 0;
        a->body[0] = '\0';
        h->error[0] = '\0';
        curl_easy_setopt(c, CURLOPT_URL, uri);
        curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
        curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, sp_http_stall_timeout());
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, ignore_headers);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, keep_answer);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, a);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, form);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(form));
        CURLcode rc = curl_easy_perform(c);
        *code = 0;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, code);
        /* Back to a plain GET for the next user of the handle. */
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, NULL);
        curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
        if (sp_http_retryable(rc, *code) && attempt < SP_HTTP_ATTEMPTS) {
            sp_http_backoff(attempt);
            continue;
        }
        if (rc != CURLE_OK) {
            st = sp_err_set(err, SP_E_IO, "%s: token endpoint %s: %s%s", path, uri,
                            h->error[0] ? h->error : curl_easy_strerror(rc),
                            attempt > 1 ? " (after retries)" : "");
        }
        break;
    }
    sp_http_handle_give(h);
    return st;
}

/* A token goes into a header line: printable, no spaces. */
static bool valid_token(const char *t) {
    size_t n = strlen(t);
    if (n == 0 || n >= SP_GCS_TOKEN_MAX) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (t[i] <= 0x20 || t[i] > 0x7e) {
            return false;
        }
    }
    return true;
}

/* The endpoint's answer: a token and its lifetime, or its refusal quoted. */
static sp_status read_answer(const char *path, const char *uri, long code, const char *body,
                             char *token, double *lifetime, sp_err *err) {
    cJSON *doc = cJSON_Parse(body);
    sp_status st = SP_OK;
    if (code != 200) {
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(doc, "error");
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(doc, "error_description");
        char what[128] = "", why[256] = "";
        printable(cJSON_IsString(e) && e->valuestring ? e->valuestring : "", what, sizeof what);
        printable(cJSON_IsString(d) && d->valuestring ? d->valuestring : "", why, sizeof why);
        st = sp_err_set(err, SP_E_IO, "%s: token endpoint %s answered HTTP %ld%s%s%s%s", path, uri,
                        code, what[0] || why[0] ? ": " : "", what, what[0] && why[0] ? ": " : "",
                        why);
    } else {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(doc, "access_token");
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(doc, "expires_in");
        if (!cJSON_IsString(t) || t->valuestring == NULL || !valid_token(t->valuestring)) {
            st = sp_err_set(err, SP_E_IO,
                            "%s: token endpoint %s answered without a usable access_token", path,
                            uri);
        } else if (e != NULL && (!cJSON_IsNumber(e) || !(e->valuedouble > 0))) {
            st = sp_err_set(err, SP_E_IO,
                            "%s: token endpoint %s answered with an expires_in that is not a "
                            "positive number",
                            path, uri);
        } else {
            memcpy(token, t->valuestring, strlen(t->valuestring) + 1);
            *lifetime = e != NULL ? e->valuedouble : JWT_LIFETIME_S;
        }
        if (cJSON_IsString(t) && t->valuestring != NULL) {
            memset(t->valuestring, 0, strlen(t->valuestring));
        }
    }
    cJSON_Delete(doc);
    return st;
}

/* Exchange a fresh assertion of the key file for a token (SP_GCS_TOKEN_MAX bytes). */
static sp_status mint(const char *path, char *token, double *lifetime, sp_err *err) {
    key k;
    sp_status st = read_key(path, &k, err);
    char *assertion = NULL;
    if (st == SP_OK) {
        st = make_assertion(path, &k, &assertion, err);
    }
    char *form = NULL;
    if (st == SP_OK) {
        /* The assertion is base64url and dots: nothing in it needs escaping in a form. */
        form = sp_strdup_printf("grant_type=urn%%3Aietf%%3Aparams%%3Aoauth%%3Agrant-type%%3Ajwt-"
                                "bearer&assertion=%s",
                                assertion);
        st = form != NULL ? SP_OK : sp_err_set(err, SP_E_NOMEM, "out of memory");
    }
    answer a = {malloc(ANSWER_MAX + 1), 0};
    if (st == SP_OK && a.body == NULL) {
        st = sp_err_set(err, SP_E_NOMEM, "out of memory");
    }
    long code = 0;
    if (st == SP_OK) {
        st = post_form(path, k.token_uri, form, &code, &a, err);
    }
    if (st == SP_OK) {
        st = read_answer(path, k.token_uri, code, a.body, token, lifetime, err);
    }
    if (a.body != NULL) {
        memset(a.body, 0, a.len);
    }
    free(a.body);
    wipe_free(form);
    wipe_free(assertion);
    key_clear(&k);
    return st;
}

sp_status sp_gcs_token(const char *key_file, char *out, size_t cap, sp_err *err) {
    out[0] = '\0';
    if (cap < SP_GCS_TOKEN_MAX) {
        return sp_err_set(err, SP_E_INVALID_ARG, "%s: no room for a token", key_file);
    }
    pthread_once(&fork_once, register_fork_handlers);
    pthread_mutex_lock(&kept.lock);
    sp_status st = SP_OK;
    double now = monotonic_s();
    bool fresh = kept.key_file != NULL && strcmp(kept.key_file, key_file) == 0 &&
                 kept.token[0] != '\0' && now < kept.refresh_at;
    if (!fresh) {
        memset(kept.token, 0, sizeof kept.token);
        free(kept.key_file);
        kept.key_file = strdup(key_file);
        double lifetime = 0;
        st = kept.key_file == NULL ? sp_err_set(err, SP_E_NOMEM, "out of memory")
                                   : mint(key_file, kept.token, &lifetime, err);
        if (st == SP_OK) {
            double margin = lifetime > 2 * REFRESH_MARGIN_S ? REFRESH_MARGIN_S : lifetime / 2;
            kept.refresh_at = now + lifetime - margin;
        } else {
            memset(kept.token, 0, sizeof kept.token);
        }
    }
    if (st == SP_OK) {
        memcpy(out, kept.token, strlen(kept.token) + 1);
    }
    pthread_mutex_unlock(&kept.lock);
    return st;
}
