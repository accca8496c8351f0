/* s3.h — s3://bucket/key objects: where they are and how requests to them are signed (s3_target.c),
 * and writing or deleting whole objects (s3_write.c). Reading goes through the byte source
 * (sp_source_open_s3, http_source.h).
 *
 * Credentials, region and endpoint come from the usual AWS environment: AWS_ACCESS_KEY_ID,
 * AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION (or AWS_DEFAULT_REGION; default
 * us-east-1) and AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL (a non-Amazon server, path-style
 * requests); without an endpoint the requests go to Amazon (virtual-hosted unless the bucket name
 * has a dot). Without credentials requests are unsigned, as for a public bucket.
 */
#ifndef SP_IO_S3_H
#define SP_IO_S3_H

#include <curl/curl.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

typedef struct sp_s3_target {
    char *uri;           /* s3://bucket/key, for messages */
    char *url;           /* the request URL */
    char *host;          /* the Host header, as signed */
    char *canonical_uri; /* the encoded path, as signed */
    char *access_key;    /* NULL: unsigned requests */
    char *secret_key;
    char *session_token; /* NULL when none */
    char *region;
} sp_s3_target;

/* Resolve `uri` (s3://BUCKET/KEY) with the environment. SP_E_INVALID_ARG for a malformed URI,
 * bucket name or endpoint, or only one of the key pair. */
sp_status sp_s3_target_resolve(const char *uri, sp_s3_target *t, sp_err *err);

/* Free what resolve filled (the secret wiped first); a zeroed target is accepted. */
void sp_s3_target_clear(sp_s3_target *t);

/* Append the headers that sign a request (Host, x-amz-content-sha256 = payload_sha256,
 * x-amz-date, x-amz-security-token, Authorization) to *headers; nothing for an unsigned target. */
sp_status sp_s3_sign_headers(const sp_s3_target *t, const char *method, const char *range,
                             const char *payload_sha256, struct curl_slist **headers, sp_err *err);

/* One part of a request body. */
typedef struct sp_bytes {
    const void *data;
    size_t len;
} sp_bytes;

/* PUT the concatenation of `parts` as object `uri`, whose SHA-256 (64 lower-case hex digits) the
 * caller has computed and which is signed. S3 stores an object whole or not at all, so a reader
 * sees the old object or the new one, never a torn one. Connection failures, 5xx and 429 are
 * retried (a PUT may be repeated); any other answer but 200 is SP_E_IO with the HTTP status and
 * S3's error code. */
sp_status sp_s3_put(const char *uri, const sp_bytes *parts, size_t nparts, const char *sha256_hex,
                    sp_err *err);

/* DELETE object `uri`; one that does not exist is not an error (S3 answers 204 either way). */
sp_status sp_s3_delete(const char *uri, sp_err *err);

#endif
