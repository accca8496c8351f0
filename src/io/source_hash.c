/* source_hash.c — SHA-256 of a byte source's whole content (see source_hash.h). One 1 MiB buffer
 * bounds the memory whatever the source's size; the read goes through the source, so a local
 * file, an HTTP or S3 object and an injected read fault are all treated alike. */
#include "io/source_hash.h"

#include <stdint.h>
#include <stdlib.h>

#include <openssl/evp.h>

#include "base/hash.h"

sp_status sp_sha256_source(sp_source *src, char *out, sp_err *err) {
    out[0] = '\0';
    enum { BLOCK = 1 << 20 };
    const char *name = sp_source_name(src);
    uint8_t *buf = malloc(BLOCK);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    sp_status st = SP_OK;
    if (buf == NULL || ctx == NULL || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
        st = sp_err_set(err, SP_E_NOMEM, "out of memory hashing %s", name);
        goto done;
    }
    uint64_t size = sp_source_size(src);
    for (uint64_t off = 0; off < size;) {
        size_t n = size - off < BLOCK ? (size_t)(size - off) : BLOCK;
        st = sp_source_read(src, off, buf, n, err);
        if (st != SP_OK) {
            goto done;
        }
        if (EVP_DigestUpdate(ctx, buf, n) != 1) {
            st = sp_err_set(err, SP_E_NOMEM, "hashing %s failed", name);
            goto done;
        }
        off += n;
    }
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    if (EVP_DigestFinal_ex(ctx, md, &mdlen) != 1 || mdlen != 32) {
        st = sp_err_set(err, SP_E_NOMEM, "hashing %s failed", name);
        goto done;
    }
    sp_hex_digest32(md, out);
done:
    EVP_MD_CTX_free(ctx);
    free(buf);
    return st;
}
