/* azure_sign.h — Azure Storage Shared Key authorization for Blob service requests (version
 * 2009-09-19 and later, with the empty Content-Length of 2015-02-21 and later): the string to
 * sign built from a request's method, headers and resource, its HMAC-SHA256 under the account
 * key, the strict base64 decoding of that key, and the x-ms-date stamp.
 *
 * The signer does no I/O and keeps no state, so any thread may sign. It signs exactly the headers
 * it is given, and the caller sends exactly those: the Blob service recomputes the signature from
 * what arrives and refuses the request (403 AuthenticationFailed) when they differ.
 */
#ifndef SP_IO_AZURE_SIGN_H
#define SP_IO_AZURE_SIGN_H

#include <stddef.h>
#include <time.h>

#include "base/err.h"

/* The x-ms-version every request sends: a Blob service version that signs an empty
 * Content-Length for a request without a body. */
#define SP_AZURE_VERSION "2021-08-06"

/* Account keys are 64 bytes (88 base64 characters); keys up to this size are accepted. */
#define SP_AZURE_KEY_MAX 256

/* "Sun, 11 Oct 2009 21:49:13 GMT" and its NUL. */
#define SP_AZURE_DATE_LEN 30

typedef struct sp_azure_header {
    const char *name; /* any case, as sent */
    const char *value;
} sp_azure_header;

/* The Shared Key string to sign for one request, into out (cap bytes including the NUL):
 *
 *   VERB \n Content-Encoding \n Content-Language \n Content-Length (empty for 0) \n Content-MD5 \n
 *   Content-Type \n Date \n If-Modified-Since \n If-Match \n If-None-Match \n
 *   If-Unmodified-Since \n Range \n CanonicalizedHeaders CanonicalizedResource
 *
 * The standard headers are looked up in `headers` by name, ignoring case (absent: empty).
 * CanonicalizedHeaders: every x-ms-* header as "name:value\n", the name in lower case, sorted by
 * name, the value with each run of spaces and tabs made one space and trimmed.
 * CanonicalizedResource:
 * "/" account path, then for each query parameter, sorted by its lower-cased name, "\nname:value",
 * name and value URL-decoded, a repeated name's values sorted and joined with ','.
 *
 * `path` is the request URI's path as sent (percent-encoded, starting with '/'; with a path-style
 * endpoint such as an emulator's it starts with the account again); `query` the query string
 * without '?', or NULL. SP_E_INVALID_ARG for a NULL or empty method or account, a path not
 * starting with '/', a header holding a control character, an x-ms-* header given twice, a
 * malformed %-escape in the query, or out too small; out is "" then. */
sp_status sp_azure_string_to_sign(const char *method, const char *account, const char *path,
                                  const char *query, const sp_azure_header *headers,
                                  size_t n_headers, char *out, size_t cap, sp_err *err);

/* Base64 of HMAC-SHA256(key, string_to_sign) into out (at least 45 bytes). */
sp_status sp_azure_signature(const unsigned char *key, size_t key_len, const char *string_to_sign,
                             char *out, size_t cap, sp_err *err);

/* Decode an account key (standard base64 alphabet, '=' padding, length a multiple of 4, nothing
 * else) into key[SP_AZURE_KEY_MAX]. SP_E_INVALID_ARG otherwise, with a message that does not
 * show the key. */
sp_status sp_azure_decode_key(const char *base64, unsigned char *key, size_t *key_len, sp_err *err);

/* Format a UNIX time as an RFC 1123 date in GMT (the x-ms-date value), English names whatever
 * the locale. */
void sp_azure_date(time_t t, char out[SP_AZURE_DATE_LEN]);

#endif
