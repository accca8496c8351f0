/* azure_target.c — an az:// or abfs(s):// URL resolved with the Azure environment (azure.h): the
 * blob's request URL and the path that is signed, the account and its key; and the headers that
 * authorise one request to it (azure_sign.c computes the Shared Key signature).
 *
 * Which account: the abfs URL's host names it; for az:// it comes from AZURE_STORAGE_ACCOUNT
 * (the Azure CLI's name; AZURE_STORAGE_ACCOUNT_NAME, adlfs' and object_store's, also works) or the
 * connection string. Where: https://ACCOUNT.blob.core.windows.net/CONTAINER/BLOB (an abfs URL's
 * other cloud suffix, or the connection string's EndpointSuffix and DefaultEndpointsProtocol,
 * kept), or, for an emulator or a private endpoint, ENDPOINT/CONTAINER/BLOB (path-style) with
 * ENDPOINT the connection string's BlobEndpoint or AZURE_STORAGE_SERVICE_ENDPOINT (what the Azure
 * CLI's --blob-endpoint reads), e.g. http://127.0.0.1:10000/devstoreaccount1 for Azurite;
 * UseDevelopmentStorage=true means exactly that with Azurite's well-known account and key. How
 * signed: an account key (AZURE_STORAGE_KEY, or AZURE_STORAGE_ACCOUNT_KEY, or the connection
 * string's AccountKey) signs every request with Shared Key, each when it is sent, so retries and
 * long jobs never carry a stale x-ms-date; else a SAS token (AZURE_STORAGE_SAS_TOKEN or the
 * connection string's SharedAccessSignature; a leading '?' is dropped) goes in the query string;
 * else requests are anonymous (a public container). AZURE_STORAGE_CONNECTION_STRING, when set,
 * is the only source of credentials and endpoint. Secrets never appear in messages: they name
 * the az:// or abfs:// URL, not the request URL.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/crypto.h>

#include "base/strings.h"
#include "io/azure.h"
#include "io/azure_sign.h"
#include "io/http_source.h"
#include "io/s3_sign.h"

#define HEADERS_MAX 32
#define STRING_TO_SIGN_MAX 8192

/* Azurite's and the old storage emulator's account and key, published by Microsoft for local
 * development (not a secret). */
#define DEV_ACCOUNT "devstoreaccount1"
#define DEV_KEY                                                                                    \
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
#define DEV_ENDPOINT "http://127.0.0.1:10000/" DEV_ACCOUNT

static const char *env(const char *name) {
    const char *v = getenv(name);
    return v != NULL && v[0] != '\0' ? v : NULL;
}

/* Where a blob is and what signs its requests, from the URL and the environment. The strings
 * point into the environment or the connection string's copy (conn). */
typedef struct azure_place {
    char container[64];
    const char *blob; /* into the URI */
    char account[SP_AZURE_ACCOUNT_MAX + 1];
    char url_account[SP_AZURE_ACCOUNT_MAX + 1]; /* the abfs URL's; "" for az:// */
    char suffix[128];                           /* "core.windows.net" */
    char protocol[6];                           /* "https" */
    const char *endpoint;                       /* NULL: ACCOUNT.blob.SUFFIX */
    const char *key;                            /* base64 */
    const char *sas;
    char *conn; /* the connection string, split in place */
    size_t conn_len;
} azure_place;

/* Storage account names: 3-24 characters of a-z and 0-9. */
static bool valid_account(const char *a, size_t n) {
    if (n < 3 || n > SP_AZURE_ACCOUNT_MAX) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (!((a[i] >= 'a' && a[i] <= 'z') || (a[i] >= '0' && a[i] <= '9'))) {
            return false;
        }
    }
    return true;
}

/* Container names: 3-63 characters of a-z, 0-9 and '-', starting and ending with a letter or
 * digit, no "--"; or one of the special containers $root, $web and $logs. */
static bool valid_container(const char *c, size_t n) {
    if ((n == 5 && strncmp(c, "$root", 5) == 0) || (n == 4 && strncmp(c, "$web", 4) == 0) ||
        (n == 5 && strncmp(c, "$logs", 5) == 0)) {
        return true;
    }
    if (n < 3 || n > 63 || c[0] == '-' || c[n - 1] == '-') {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        bool ok = (c[i] >= 'a' && c[i] <= 'z') || (c[i] >= '0' && c[i] <= '9') ||
                  (c[i] == '-' && c[i + 1] != '-');
        if (!ok) {
            return false;
        }
    }
    return true;
}

/* az://CONTAINER/BLOB or abfs(s)://CONTAINER@ACCOUNT.dfs.SUFFIX/PATH into p. */
static sp_status parse_uri(const char *uri, azure_place *p, sp_err *err) {
    bool az = strncmp(uri, "az://", 5) == 0;
    size_t skip = az ? 5 : strncmp(uri, "abfs://", 7) == 0 ? 7 : 8;
    const char *c = uri + skip;
    const char *slash = strchr(c, '/');
    const char *at = az ? NULL : memchr(c, '@', slash != NULL ? (size_t)(slash - c) : strlen(c));
    const char *container_end = az ? slash : at;
    size_t n = container_end != NULL ? (size_t)(container_end - c) : 0;
    bool ok = slash != NULL && slash[1] != '\0' && valid_container(c, n) && (az || at != NULL);
    if (ok && !az) {
        /* ACCOUNT.dfs.SUFFIX (or ACCOUNT.blob.SUFFIX) */
        const char *host = at + 1;
        size_t host_len = (size_t)(slash - host);
        const char *dot = memchr(host, '.', host_len);
        size_t account_len = dot != NULL ? (size_t)(dot - host) : 0;
        const char *service = dot != NULL ? dot + 1 : NULL;
        size_t rest = dot != NULL ? host_len - account_len - 1 : 0;
        size_t service_len = rest >= 4 && strncmp(service, "dfs.", 4) == 0    ? 4
                             : rest >= 5 && strncmp(service, "blob.", 5) == 0 ? 5
                                                                              : 0;
        size_t suffix_len = rest - service_len;
        ok = valid_account(host, account_len) && service_len > 0 && suffix_len > 0 &&
             suffix_len < sizeof p->suffix &&
             strspn(service + service_len, "abcdefghijklmnopqrstuvwxyz0123456789-.") == suffix_len;
        if (ok) {
            memcpy(p->url_account, host, account_len);
            p->url_account[account_len] = '\0';
            memcpy(p->suffix, service + service_len, suffix_len);
            p->suffix[suffix_len] = '\0';
        }
    }
    if (!ok) {
        return sp_err_set(err, SP_E_INVALID_ARG,
                          "%s: expected %.*s%s with a container name of 3-63 characters a-z, "
                          "0-9 and '-'%s",
                          uri, (int)skip, uri,
                          az ? "CONTAINER/BLOB" : "CONTAINER@ACCOUNT.dfs.core.windows.net/PATH",
                          az ? "" : " and an account name of 3-24 characters a-z and 0-9");
    }
    memcpy(p->container, c, n);
    p->container[n] = '\0';
    p->blob = slash + 1;
    return SP_OK;
}

/* AZURE_STORAGE_CONNECTION_STRING's KEY=VALUE pairs (separated by ';', keys in any case; the
 * value runs to the ';', '=' padding included) into p. Unknown keys (QueueEndpoint, ...) are
 * ignored. */
static sp_status parse_connection_string(const char *uri, const char *cs, azure_place *p,
                                         sp_err *err) {
    p->conn = strdup(cs);
    p->conn_len = strlen(cs);
    if (p->conn == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory opening %s", uri);
    }
    const char *account = NULL;
    char *save = NULL;
    for (char *kv = strtok_r(p->conn, ";", &save); kv != NULL; kv = strtok_r(NULL, ";", &save)) {
        while (*kv == ' ') {
            kv++;
        }
        char *eq = strchr(kv, '=');
        if (*kv == '\0') {
            continue;
        }
        if (eq == NULL || eq == kv) {
            return sp_err_set(err, SP_E_INVALID_ARG,
                              "%s: AZURE_STORAGE_CONNECTION_STRING is malformed (expected "
                              "KEY=VALUE pairs separated by ';')",
                              uri);
        }
        *eq = '\0';
        const char *v = eq + 1;
        if (strcasecmp(kv, "AccountName") == 0) {
            account = v;
        } else if (strcasecmp(kv, "AccountKey") == 0) {
            p->key = v;
        } else if (strcasecmp(kv, "SharedAccessSignature") == 0) {
            p->sas = v;
        } else if (strcasecmp(kv, "BlobEndpoint") == 0) {
            p->endpoint = v;
        } else if (strcasecmp(kv, "EndpointSuffix") == 0 && p->url_account[0] == '\0' &&
                   strlen(v) < sizeof p->suffix) {
            snprintf(p->suffix, sizeof p->suffix, "%s", v);
        } else if (strcasecmp(kv, "DefaultEndpointsProtocol") == 0) {
            if (strcmp(v, "http") != 0 && strcmp(v, "https") != 0) {
                return sp_err_set(err, SP_E_INVALID_ARG,
                                  "%s: AZURE_STORAGE_CONNECTION_STRING: DefaultEndpointsProtocol "
                                  "must be http or https",
                                  uri);
            }
            snprintf(p->protocol, sizeof p->protocol, "%s", v);
        } else if (strcasecmp(kv, "UseDevelopmentStorage") == 0 && strcasecmp(v, "true") == 0) {
            account = DEV_ACCOUNT;
            p->key = DEV_KEY;
            p->endpoint = DEV_ENDPOINT;
        }
    }
    if (account != NULL) {
        if (!valid_account(account, strlen(account))) {
            return sp_err_set(err, SP_E_INVALID_ARG,
                              "%s: AZURE_STORAGE_CONNECTION_STRING: AccountName must be 3-24 "
                              "characters a-z and 0-9",
                              uri);
        }
        snprintf(p->account, sizeof p->account, "%s", account);
    }
    return SP_OK;
}

/* The account, endpoint and credentials from the environment. */
static sp_status read_environment(const char *uri, azure_place *p, sp_err *err) {
    snprintf(p->protocol, sizeof p->protocol, "https");
    if (p->suffix[0] == '\0') {
        snprintf(p->suffix, sizeof p->suffix, "core.windows.net");
    }
    const char *cs = env("AZURE_STORAGE_CONNECTION_STRING");
    if (cs != NULL) {
        sp_status st = parse_connection_string(uri, cs, p, err);
        if (st != SP_OK) {
            return st;
        }
    } else {
        const char *account = env("AZURE_STORAGE_ACCOUNT") != NULL
                                  ? env("AZURE_STORAGE_ACCOUNT")
                                  : env("AZURE_STORAGE_ACCOUNT_NAME");
        if (account != NULL && !valid_account(account, strlen(account))) {
            return sp_err_set(err, SP_E_INVALID_ARG,
                              "%s: AZURE_STORAGE_ACCOUNT must be 3-24 characters a-z and 0-9", uri);
        }
        if (account != NULL) {
            snprintf(p->account, sizeof p->account, "%s", account);
        }
        p->key = env("AZURE_STORAGE_KEY") != NULL ? env("AZURE_STORAGE_KEY")
                                                  : env("AZURE_STORAGE_ACCOUNT_KEY");
        p->sas = env("AZURE_STORAGE_SAS_TOKEN");
        p->endpoint = env("AZURE_STORAGE_SERVICE_ENDPOINT");
    }
    if (p->sas != NULL && p->sas[0] == '?') {
        p->sas++;
    }
    static const char QUERY_CHARS[] = "!$%&'()*+,-./0123456789:;=?@ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                      "[]_abcdefghijklmnopqrstuvwxyz~";
    if (p->sas != NULL && (p->sas[0] == '\0' || strspn(p->sas, QUERY_CHARS) != strlen(p->sas))) {
        return sp_err_set(err, SP_E_INVALID_ARG,
                          "%s: the SAS token holds characters a URL query cannot (it should be "
                          "the URL-encoded query string the portal or `az storage blob "
                          "generate-sas` gives)",
                          uri);
    }
    /* The URL's account wins; credentials for another account would only be refused. */
    if (p->url_account[0] != '\0') {
        if (p->account[0] != '\0' && strcmp(p->account, p->url_account) != 0 &&
            (p->key != NULL || p->sas != NULL)) {
            return sp_err_set(err, SP_E_INVALID_ARG,
                              "%s: the credentials in the environment are for storage account "
                              "%s, not %s",
                              uri, p->account, p->url_account);
        }
        memcpy(p->account, p->url_account, sizeof p->account);
    }
    if (p->account[0] == '\0' && (p->endpoint == NULL || p->key != NULL)) {
        return sp_err_set(err, SP_E_INVALID_ARG,
                          "%s: no storage account: set AZURE_STORAGE_ACCOUNT (or "
                          "AZURE_STORAGE_CONNECTION_STRING), or name it in the URL "
                          "(abfss://CONTAINER@ACCOUNT.dfs.core.windows.net/PATH)",
                          uri);
    }
    return SP_OK;
}

/* "scheme://host[:port]" and the path prefix ("" or "/devstoreaccount1") of the blob endpoint. */
static sp_status endpoint_parts(const char *uri, const azure_place *p, char *base, size_t base_cap,
                                const char **prefix, size_t *prefix_len, sp_err *err) {
    *prefix = "";
    *prefix_len = 0;
    if (p->endpoint == NULL) {
        snprintf(base, base_cap, "%s://%s.blob.%s", p->protocol, p->account, p->suffix);
        return SP_OK;
    }
    const char *e = p->endpoint;
    size_t scheme = strncmp(e, "http://", 7) == 0 ? 7 : strncmp(e, "https://", 8) == 0 ? 8 : 0;
    size_t host = scheme > 0 ? strcspn(e + scheme, "/") : 0;
    size_t total = strlen(e);
    size_t end = total;
    while (end > scheme + host && e[end - 1] == '/') {
        end--;
    }
    if (scheme == 0 || host == 0 || scheme + host >= base_cap || strcspn(e, "?# \t\r\n") != total) {
        /* Not shown: a BlobEndpoint pasted with its SAS query would show the signature. */
        return sp_err_set(
            err, SP_E_INVALID_ARG,
            "%s: the blob endpoint (AZURE_STORAGE_SERVICE_ENDPOINT, or the "
            "connection string's BlobEndpoint) is not an http(s)://HOST[:PORT][/PATH] "
            "URL without a query",
            uri);
    }
    memcpy(base, e, scheme + host);
    base[scheme + host] = '\0';
    *prefix = e + scheme + host;
    *prefix_len = end - scheme - host;
    return SP_OK;
}

/* The list's "Name: value" lines as name/value pairs over a copy (lines), for the signer; false
 * when they do not all fit (a request signed without one of its headers would be refused). */
static bool split_headers(const struct curl_slist *list, char *lines, size_t cap,
                          sp_azure_header *out, size_t max, size_t *n) {
    size_t used = 0;
    *n = 0;
    for (; list != NULL; list = list->next) {
        size_t len = strlen(list->data);
        char *colon = strchr(list->data, ':');
        if (colon == NULL) {
            continue;
        }
        if (*n == max || len + 1 > cap - used) {
            return false;
        }
        char *line = lines + used;
        memcpy(line, list->data, len + 1);
        used += len + 1;
        line[colon - list->data] = '\0';
        const char *v = line + (colon - list->data) + 1;
        while (*v == ' ') {
            v++;
        }
        out[(*n)++] = (sp_azure_header){line, v};
    }
    return true;
}

sp_status sp_azure_sign_headers(const sp_azure_target *s, const char *method,
                                struct curl_slist **headers, sp_err *err) {
    char date[SP_AZURE_DATE_LEN];
    sp_azure_date(time(NULL), date);
    bool ok = sp_http_add_header(headers, "x-ms-version", SP_AZURE_VERSION) &&
              (s->key_len == 0 || sp_http_add_header(headers, "x-ms-date", date));
    if (!ok) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory signing an Azure request");
    }
    if (s->key_len == 0) {
        return SP_OK;
    }
    char lines[4096];
    sp_azure_header list[HEADERS_MAX];
    size_t n = 0;
    if (!split_headers(*headers, lines, sizeof lines, list, HEADERS_MAX, &n)) {
        return sp_err_set(err, SP_E_INVALID_ARG, "%s: the request's headers are too long to sign",
                          s->uri);
    }
    char *to_sign = malloc(STRING_TO_SIGN_MAX);
    if (to_sign == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory signing an Azure request");
    }
    char sig[64], auth[128];
    sp_err why = {0};
    sp_status st = sp_azure_string_to_sign(method, s->account, s->path, NULL, list, n, to_sign,
                                           STRING_TO_SIGN_MAX, &why);
    if (st == SP_OK) {
        st = sp_azure_signature(s->key, s->key_len, to_sign, sig, sizeof sig, &why);
    }
    free(to_sign);
    if (st != SP_OK) {
        return sp_err_set(err, st, "%s: %s", s->uri, why.msg);
    }
    if (st == SP_OK) {
        snprintf(auth, sizeof auth, "SharedKey %s:%s", s->account, sig);
        st = sp_http_add_header(headers, "Authorization", auth)
                 ? SP_OK
                 : sp_err_set(err, SP_E_NOMEM, "out of memory signing an Azure request");
    }
    return st;
}

void sp_azure_target_clear(sp_azure_target *t) {
    if (t == NULL) {
        return;
    }
    if (t->url != NULL) {
        OPENSSL_cleanse(t->url, strlen(t->url)); /* it may hold a SAS */
    }
    free(t->uri);
    free(t->url);
    free(t->path);
    OPENSSL_cleanse(t, sizeof *t);
}

sp_status sp_azure_target_resolve(const char *uri, sp_azure_target *t, sp_err *err) {
    memset(t, 0, sizeof *t);
    azure_place p = {0};
    sp_status st = parse_uri(uri, &p, err);
    if (st == SP_OK) {
        st = read_environment(uri, &p, err);
    }
    if (st == SP_OK && p.key != NULL) {
        sp_err key_err = {0};
        st = sp_azure_decode_key(p.key, t->key, &t->key_len, &key_err);
        if (st != SP_OK) {
            st = sp_err_set(err, st, "%s: %s", uri, key_err.msg);
        }
    }
    char base[512];
    const char *prefix = "";
    size_t prefix_len = 0;
    if (st == SP_OK) {
        st = endpoint_parts(uri, &p, base, sizeof base, &prefix, &prefix_len, err);
    }
    char *encoded = NULL;
    if (st == SP_OK) {
        size_t cap = 3 * strlen(p.blob) + 1;
        encoded = malloc(cap);
        st = encoded != NULL ? sp_s3_encode_path(p.blob, encoded, cap, err)
                             : sp_err_set(err, SP_E_NOMEM, "out of memory opening %s", uri);
    }
    if (st == SP_OK) {
        snprintf(t->account, sizeof t->account, "%s", p.account);
        t->uri = strdup(uri);
        t->path = sp_strdup_printf("%.*s/%s/%s", (int)prefix_len, prefix, p.container, encoded);
        /* With a key the request is signed and the SAS, if any, is not sent. */
        t->sas = p.sas != NULL && p.key == NULL;
        t->url = t->path != NULL ? sp_strdup_printf("%s%s%s%s", base, t->path, t->sas ? "?" : "",
                                                    t->sas ? p.sas : "")
                                 : NULL;
        if (t->uri == NULL || t->url == NULL) {
            st = sp_err_set(err, SP_E_NOMEM, "out of memory opening %s", uri);
        }
    }
    free(encoded);
    if (p.conn != NULL) {
        OPENSSL_cleanse(p.conn, p.conn_len); /* it may hold the key */
        free(p.conn);
    }
    if (st != SP_OK) {
        sp_azure_target_clear(t);
    }
    return st;
}
