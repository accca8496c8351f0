/* s3.h — s3://bucket/key objects: where they are and how requests to them are signed
 * (s3_target.c). Reading goes through the byte source (sp_source_open_s3, http_source.h); writing
 * and deleting objects through the write target (write_target.h, write_target_s3.c).
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

#endif
