/* object_write.h — one request that writes or deletes a whole object in an object store (S3, GCS,
 * Azure Blob), shared by their write targets (write_target_s3.c, write_target_gcs.c,
 * write_target_azure.c): a PUT whose body is sent from the caller's parts without joining them, or
 * a DELETE, with the store's signer, the same retries as reads, and an error that names the object
 * and what the store answered.
 */
#ifndef SP_IO_OBJECT_WRITE_H
#define SP_IO_OBJECT_WRITE_H

#include <curl/curl.h>

#include "base/err.h"
#include "base/hash.h"

/* Adds the headers that authorise one request (`method` "PUT" or "DELETE", `payload_sha256` the
 * body's hex SHA-256, or SP_S3_EMPTY_SHA256 without one) to *headers, with any other header the
 * store wants sent and signed (Azure's Content-MD5). Called for every try, so a signature never
 * carries a stale date; from any thread. */
typedef sp_status (*sp_object_sign_fn)(const void *ctx, const char *method,
                                       const char *payload_sha256, struct curl_slist **headers,
                                       sp_err *err);

typedef struct sp_object_request {
    const char *uri;       /* the object as the user named it, for messages */
    const char *url;       /* where the request goes */
    const char *method;    /* "PUT" or "DELETE" */
    const sp_bytes *parts; /* a PUT's body: the concatenation of parts[0..nparts) */
    size_t nparts;
    const char *payload_sha256; /* NULL where the signer does not use it */
    sp_object_sign_fn sign;     /* NULL: unsigned */
    const void *sign_ctx;
} sp_object_request;

/* Send the request through the process's pool of libcurl handles (their connections are reused),
 * without "Expect: 100-continue". Failures that another try may cure (connection failures, 5xx,
 * 429) are retried as reads are (http_source.h): a PUT or DELETE may be repeated. Success is 200
 * or 201 (Azure's Put Blob) for a PUT and 200, 202 (Azure's Delete Blob) or 204 for a DELETE, and
 * also 404 for a DELETE (the object is not there) unless the store says the bucket is missing.
 * Anything else is SP_E_IO, "URI: METHOD answered HTTP N (CODE)" with the error code of an XML
 * error document or the message of a JSON one. */
sp_status sp_object_write(const sp_object_request *r, sp_err *err);

#endif
