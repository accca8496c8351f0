/* write_target_azure.c — how a write target on an az:// or abfs(s):// prefix
 * (write_target_object.c) reaches Azure Blob Storage: each file a block blob, put whole by one
 * Put Blob and removed by Delete Blob (object_write.h sends them).
 *
 * A PUT sends Content-Length and Content-MD5 (Azure refuses a body that does not match it: 400
 * Md5Mismatch), both signed with Shared Key when a key is used (a SAS token, in the request URL's
 * query, needs write permission, 'w' or 'c', and 'd' to remove; anonymous writes are refused
 * before anything is sent). Failures that another try may cure are retried; any other answer is
 * SP_E_IO with the HTTP status and Azure's error code, read from the response body.
 */
#include <stdio.h>
#include <string.h>

#include <openssl/evp.h>

#include "io/azure.h"
#include "io/http_source.h"
#include "io/object_write.h"
#include "io/write_target_impl.h"

/* What a request's signer adds before Shared Key signs: a PUT's length and MD5. */
typedef struct blob_request {
    const sp_azure_target *blob;
    const char *md5; /* base64 Content-MD5; NULL: a DELETE, no body */
    uint64_t len;
} blob_request;

/* Base64 of the MD5 of the concatenated parts (the Content-MD5 value) into out[25]. */
static bool md5_base64(const sp_bytes *parts, size_t nparts, char out[25]) {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    bool ok = md != NULL && EVP_DigestInit_ex(md, EVP_md5(), NULL) == 1;
    for (size_t i = 0; ok && i < nparts; i++) {
        ok = parts[i].len == 0 || EVP_DigestUpdate(md, parts[i].data, parts[i].len) == 1;
    }
    ok = ok && EVP_DigestFinal_ex(md, digest, &n) == 1 && n == 16;
    EVP_MD_CTX_free(md);
    if (ok) {
        EVP_EncodeBlock((unsigned char *)out, digest, 16);
    }
    return ok;
}

static sp_status sign(const void *ctx, const char *method, const char *payload_sha256,
                      struct curl_slist **headers, sp_err *err) {
    (void)payload_sha256; /* Azure checks the body against its MD5 instead */
    const blob_request *r = ctx;
    char length[24];
    snprintf(length, sizeof length, "%llu", (unsigned long long)r->len);
    if (r->md5 != NULL && !(sp_http_add_header(headers, "Content-Length", length) &&
                            sp_http_add_header(headers, "Content-MD5", r->md5) &&
                            sp_http_add_header(headers, "x-ms-blob-type", "BlockBlob"))) {
        return sp_err_set(err, SP_E_NOMEM, "%s: out of memory", r->blob->uri);
    }
    return sp_azure_sign_headers(r->blob, method, headers, err);
}

/* The URL and credentials: a key or a SAS token, since anonymous writes cannot succeed. */
static sp_status check(const char *root, const char *uri, sp_err *err) {
    sp_azure_target probe;
    sp_status st = sp_azure_target_resolve(uri, &probe, err);
    if (st == SP_OK && probe.key_len == 0 && !probe.sas) {
        st = sp_err_set(err, SP_E_INVALID_ARG,
                        "%s: writing to Azure needs an account key (AZURE_STORAGE_KEY) or a SAS "
                        "token with write permission (AZURE_STORAGE_SAS_TOKEN), or a connection "
                        "string with either",
                        root);
    }
    sp_azure_target_clear(&probe);
    return st;
}

static sp_status send_request(const char *uri, const char *method, const sp_bytes *parts,
                              size_t nparts, const char *sha256, sp_err *err) {
    (void)sha256;
    blob_request r = {NULL, NULL, 0};
    char md5[25];
    if (strcmp(method, "PUT") == 0) {
        if (!md5_base64(parts, nparts, md5)) {
            return sp_err_set(err, SP_E_NOMEM, "hashing %s failed", uri);
        }
        r.md5 = md5;
        for (size_t i = 0; i < nparts; i++) {
            r.len += parts[i].len;
        }
    }
    sp_azure_target blob;
    sp_status st = sp_azure_target_resolve(uri, &blob, err);
    if (st == SP_OK) {
        r.blob = &blob;
        sp_object_request req = {blob.uri, blob.url, method, parts, nparts, NULL, sign, &r};
        st = sp_object_write(&req, err);
    }
    sp_azure_target_clear(&blob);
    return st;
}

static const sp_object_store AZURE_STORE = {.check = check, .send_request = send_request};

sp_status sp_write_target_init_azure(sp_write_target *t, sp_err *err) {
    return sp_write_target_init_object(t, &AZURE_STORE, err);
}
