/* gcs.h — gs://bucket/object objects: where their requests go and how they are signed
 * (gcs_target.c). Reading goes through the byte source (sp_source_open_gcs, http_source.h);
 * writing and deleting objects through the write target (write_target.h, write_target_gcs.c).
 *
 * Where: STORAGE_EMULATOR_HOST (host:port or http(s)://host:port, what Google's client libraries
 * read for an emulator) or else https://storage.googleapis.com; path-style URLs of the XML API,
 * ENDPOINT/bucket/object. How signed, the first that is set: HMAC keys (GS_ACCESS_KEY_ID and
 * GS_SECRET_ACCESS_KEY) sign with AWS Signature Version 4, region "auto", which the XML API
 * accepts for HMAC keys; an OAuth 2 access token (GOOGLE_OAUTH_ACCESS_TOKEN or
 * CLOUDSDK_AUTH_ACCESS_TOKEN) goes as a Bearer header; a service-account key file
 * (GOOGLE_APPLICATION_CREDENTIALS) mints such tokens (gcs_token.h); with none of them, requests
 * are unsigned (a public bucket, an emulator).
 */
#ifndef SP_IO_GCS_H
#define SP_IO_GCS_H

#include <curl/curl.h>

#include "base/err.h"
#include "io/s3.h"

typedef struct sp_gcs_target {
    char *uri;          /* gs://bucket/object, for messages */
    char *url;          /* the XML API's URL of the object: reads and PUTs go there */
    char *delete_url;   /* where a DELETE goes: the XML URL with HMAC keys (the JSON API does not
                         * take them), else the JSON API's ENDPOINT/storage/v1/b/BUCKET/o/OBJECT */
    sp_s3_target *hmac; /* HMAC keys: what SigV4 signs; NULL otherwise */
    char *token;        /* an access token from the environment, or NULL */
    char *key_file;     /* a service-account key file that mints tokens, or NULL */
} sp_gcs_target;

/* Resolve `uri` (gs://BUCKET/OBJECT) with the environment; nothing is requested. SP_E_INVALID_ARG
 * for a malformed URI, bucket name or STORAGE_EMULATOR_HOST, or only one of the HMAC pair. */
sp_status sp_gcs_target_resolve(const char *uri, sp_gcs_target *t, sp_err *err);

/* Free what resolve filled (secrets wiped first); a zeroed target is accepted. */
void sp_gcs_target_clear(sp_gcs_target *t);

/* Append the headers that authorise one request to the object (`method` GET, PUT or DELETE to
 * the URL above that the method uses; `range` the Range header's value or NULL;
 * `payload_sha256` the body's hex SHA-256, SP_S3_EMPTY_SHA256 without one) to *headers: SigV4's
 * with HMAC keys, else "Authorization: Bearer" with a token (from a key file, minted or refreshed
 * as needed, which can fail with the key file named), else nothing. */
sp_status sp_gcs_sign_headers(const sp_gcs_target *t, const char *method, const char *range,
                              const char *payload_sha256, struct curl_slist **headers, sp_err *err);

#endif
