/* s3_sign.h — AWS Signature Version 4 for S3: the Authorization header of a GET or HEAD request
 * without a body (the byte source), of a PUT whose body's SHA-256 is signed or a DELETE (the Zarr
 * writer), the path encoding its canonical request and URL share, and the x-amz-date stamp.
 *
 * Only what reading and writing whole objects needs is covered: no query string, service "s3". The
 * signer does no I/O and keeps no state, so any thread may sign; the caller sends exactly the
 * headers it signed (see sp_s3_authorization), because S3 recomputes the signature from what
 * arrives.
 */
#ifndef SP_IO_S3_SIGN_H
#define SP_IO_S3_SIGN_H

#include <stddef.h>
#include <time.h>

#include "base/err.h"

typedef struct sp_s3_credentials {
    const char *access_key;    /* AWS_ACCESS_KEY_ID */
    const char *secret_key;    /* AWS_SECRET_ACCESS_KEY */
    const char *session_token; /* AWS_SESSION_TOKEN, or NULL */
    const char *region;        /* e.g. "us-east-1" */
} sp_s3_credentials;

/* SHA-256 of the empty string in lower-case hex: the x-amz-content-sha256 value of a request
 * without a body. */
#define SP_S3_EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

/* Percent-encode an object path for the canonical request and the URL: bytes A-Z a-z 0-9 - . _ ~
 * and '/' are kept, every other byte becomes %XX (upper-case hex). SP_E_INVALID_ARG when out (cap
 * bytes, including the NUL) is too small. */
sp_status sp_s3_encode_path(const char *path, char *out, size_t cap, sp_err *err);

/* The Authorization header value (without "Authorization: ") for a request with an empty body,
 * service "s3".
 * method: "GET" or "HEAD". host: the Host header value exactly as sent (with ":port" when not the
 * default). canonical_uri: the already-encoded path, starting with '/'. range: the Range header
 * value ("bytes=0-9") or NULL when the request has none. amz_date: "YYYYMMDDTHHMMSSZ" (the
 * x-amz-date header sent). The query string is empty.
 * Signed headers, in this order: host, range (when given), x-amz-content-sha256 (value
 * SP_S3_EMPTY_SHA256), x-amz-date, x-amz-security-token (when cred->session_token is non-NULL).
 * The caller sends exactly those headers with those values.
 * SP_E_INVALID_ARG for NULL or malformed arguments (amz_date not 16 chars ending in Z with 'T' at
 * index 8, canonical_uri not starting with '/', out too small); never writes past cap, and leaves
 * "" in out on failure. Also refused, since S3 would check a different request from the one
 * signed: a method other than GET or HEAD; a canonical_uri byte that sp_s3_encode_path would have
 * encoded, or a '%' not starting an upper-case escape; an empty (or all-space) host, range or
 * session token, or one holding a control character; an empty access key, secret or region, or
 * an access key or region holding a space, '/' or ','. Header values are signed trimmed of
 * leading and trailing spaces. */
sp_status sp_s3_authorization(const char *method, const char *host, const char *canonical_uri,
                              const char *range, const char *amz_date,
                              const sp_s3_credentials *cred, char *out, size_t cap, sp_err *err);

/* The same for any of GET, HEAD, PUT and DELETE, with `payload_sha256` (64 lower-case hex digits)
 * as the x-amz-content-sha256 value signed and sent: the SHA-256 of a PUT's body, or
 * SP_S3_EMPTY_SHA256 for a request without one. */
sp_status sp_s3_authorization_payload(const char *method, const char *host,
                                      const char *canonical_uri, const char *range,
                                      const char *payload_sha256, const char *amz_date,
                                      const sp_s3_credentials *cred, char *out, size_t cap,
                                      sp_err *err);

/* Format a UNIX time as an x-amz-date value ("YYYYMMDDTHHMMSSZ", UTC) into out[17]. */
void sp_s3_amz_date(time_t t, char out[17]);

#endif
