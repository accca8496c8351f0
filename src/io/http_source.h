/* http_source.h — byte sources over remote objects: HTTP(S) URLs read with Range requests, and
 * S3 objects (s3://bucket/key) read the same way with SigV4-signed requests (s3_source.c).
 *
 * Every response is untrusted: a read succeeds only on a 206 whose Content-Range names exactly the
 * bytes asked for, of an object of the size (and ETag) seen when it was opened, with a body of
 * exactly that length. Transient failures (connection errors, 5xx, 429) are retried a few times;
 * a stalled transfer times out (SLIDEPIPE_HTTP_TIMEOUT seconds, default 30). Reads are
 * thread-safe: each concurrent reader borrows its own libcurl handle, which keeps its connection.
 */
#ifndef SP_IO_HTTP_SOURCE_H
#define SP_IO_HTTP_SOURCE_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stdint.h>

#include "io/source.h"

/* Adds the headers that authorise one request (method "GET", the Range header's value) to
 * *headers. Called for every request, retries included, from any thread. *headers already holds
 * the request's own headers as they will be sent (Range, and If-Match once the ETag is known),
 * for a signer that signs headers (Azure's Shared Key) to read there. */
typedef sp_status (*sp_http_sign_fn)(void *ctx, const char *method, const char *range,
                                     struct curl_slist **headers, sp_err *err);

typedef struct sp_http_signer {
    sp_http_sign_fn sign;
    void *ctx;
    void (*free_ctx)(void *ctx);
} sp_http_signer;

/* A libcurl handle from the process's pool (which keeps its connections open), or a new one when
 * none is idle; NULL when out of memory. It carries the options every request shares (http and
 * https only, at most 5 redirects, connect timeout, keep-alive, user agent); whoever takes it sets
 * the URL, callbacks and method of each request, and gives it back as a GET without a body. */
typedef struct sp_http_handle {
    CURL *curl;
    char error[CURL_ERROR_SIZE];
} sp_http_handle;

sp_http_handle *sp_http_handle_take(sp_err *err);
void sp_http_handle_give(sp_http_handle *h);

/* How many times a request is sent at most (a first try and three retries), whether a result is
 * worth another try (a connection failure, a timeout, 5xx or 429), and the pause before try
 * `attempt` + 1 (0.1, 0.4, 1.6 s). */
#define SP_HTTP_ATTEMPTS 4
bool sp_http_retryable(CURLcode rc, long code);
void sp_http_backoff(int attempt);

/* Seconds without a byte after which a transfer is abandoned: SLIDEPIPE_HTTP_TIMEOUT (1-3600),
 * default 30. */
long sp_http_stall_timeout(void);

/* Requests that one read sends at once when it knows it needs several (prefetching):
 * SLIDEPIPE_HTTP_PARALLEL (1-64; 1 sends them one after another), default 16. */
int sp_http_parallel(void);

/* Whether sending requests at once saves time here: the process's recent requests have waited a
 * millisecond or more for their first byte (a remote store's round trip), rather than the tens
 * of microseconds of a server on the same machine, where other threads would only add their
 * cost. */
bool sp_http_prefetch_pays(void);

/* As sp_http_prefetch_pays where more threads read than there are cores: even the quickest of
 * the process's recent requests (the last 32 to 64, least_wait.h) waited a millisecond or more.
 * There a thread whose answer has come may wait for a core before it reads it, which the
 * average counts too (8 threads on 2 cores reading from nginx on loopback: an average of
 * 3.4 ms, the least about 0.1 ms). */
bool sp_http_prefetch_pays_busy(void);

/* Whether requests for files that may not exist (a guess at a store's layout) are worth sending
 * at once: as sp_http_prefetch_pays, and also before the process has timed any request, where
 * one round trip saved is worth a few requests answered 404 (a near server answers each in tens
 * of microseconds). */
bool sp_http_guessing_pays(void);

/* Whether this thread's requests are left out of the timing above (while on): a store's opening
 * sends some 30 guesses in one burst, whose waits measure the burst on this machine, not the
 * server's round trip, and would turn requests sent ahead on for a server next door. */
void sp_http_untimed(bool on);

/* The <Code> of an S3 error document in `body`, printable, or "" (for messages). */
void sp_http_s3_error_code(const char *body, char *out, size_t cap);

/* Append "name: value" to *list; false when out of memory or too long (the list stays as it was).
 * For signers. */
bool sp_http_add_header(struct curl_slist **list, const char *name, const char *value);

/* Open `url` (http:// or https://). `name` is what messages call it (the URL when NULL). With a
 * signer, its ctx is owned by the source from here on, also on failure. The opening request reads
 * the object's first `head_len` bytes (at least 64 KiB; 0 for that), which later reads within them
 * are served from: a caller that will read a small object whole passes its expected size. An
 * object that does not exist (HTTP 404) is SP_E_NOT_FOUND; every other failure SP_E_IO. */
sp_status sp_source_open_http(const char *url, const char *name, const sp_http_signer *signer,
                              size_t head_len, sp_source **out, sp_err *err);

/* Open s3://bucket/key with the AWS environment: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
 * AWS_SESSION_TOKEN, AWS_REGION (or AWS_DEFAULT_REGION; default us-east-1) and an endpoint from
 * AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL (path-style requests) or else Amazon's (virtual-hosted).
 * Without credentials the requests are unsigned, as for a public bucket. `head_len` as for
 * sp_source_open_http. */
sp_status sp_source_open_s3(const char *uri, size_t head_len, sp_source **out, sp_err *err);

/* Open gs://bucket/object through the XML API (gcs_source.c): STORAGE_EMULATOR_HOST or Google's
 * endpoint, HMAC keys (GS_ACCESS_KEY_ID, GS_SECRET_ACCESS_KEY; SigV4) or an OAuth access token
 * (GOOGLE_OAUTH_ACCESS_TOKEN, CLOUDSDK_AUTH_ACCESS_TOKEN), else unsigned. `head_len` as for
 * sp_source_open_http. */
sp_status sp_source_open_gcs(const char *uri, size_t head_len, sp_source **out, sp_err *err);

/* Open az://container/blob or abfs(s)://container@account.dfs.core.windows.net/path through the
 * Blob service (azure_source.c): the account from the URL, AZURE_STORAGE_ACCOUNT or
 * AZURE_STORAGE_CONNECTION_STRING; Shared Key signing with AZURE_STORAGE_KEY (or the connection
 * string's AccountKey), else a SAS token (AZURE_STORAGE_SAS_TOKEN, SharedAccessSignature), else
 * anonymous; the endpoint from the connection string's BlobEndpoint or
 * AZURE_STORAGE_SERVICE_ENDPOINT (path-style), else https://ACCOUNT.blob.core.windows.net.
 * `head_len` as for sp_source_open_http. */
sp_status sp_source_open_azure(const char *uri, size_t head_len, sp_source **out, sp_err *err);

/* Parse a Content-Range value "bytes FIRST-LAST/TOTAL" strictly (decimal, FIRST <= LAST < TOTAL).
 * Returns false for anything else, "*" totals included. */
bool sp_http_parse_content_range(const char *value, size_t len, uint64_t *first, uint64_t *last,
                                 uint64_t *total);

#endif
