/* azure.h — Azure Blob Storage blobs (az://CONTAINER/BLOB, abfs(s)://CONTAINER@ACCOUNT.dfs.
 * core.windows.net/PATH): where they are and how requests to them are authorised
 * (azure_target.c). Reading goes through the byte source (sp_source_open_azure, http_source.h);
 * writing and deleting blobs through the write target (write_target.h, write_target_azure.c).
 *
 * Account, credentials and endpoint come from the usual Azure environment (azure_target.c and
 * docs/remote.md say which variables): an account key signs each request with Shared Key, a SAS
 * token goes in the URL's query, and with neither requests are anonymous.
 */
#ifndef SP_IO_AZURE_H
#define SP_IO_AZURE_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"
#include "io/azure_sign.h"

#define SP_AZURE_ACCOUNT_MAX 24

typedef struct sp_azure_target {
    char *uri;  /* the az:// or abfs:// URL, for messages */
    char *url;  /* the request URL; it holds the SAS token when one is used: never print it */
    char *path; /* the request path as sent and signed (percent-encoded) */
    char account[SP_AZURE_ACCOUNT_MAX + 1];
    unsigned char key[SP_AZURE_KEY_MAX]; /* the decoded account key */
    size_t key_len;                      /* 0: no Shared Key signing */
    bool sas;                            /* the URL carries a SAS token */
} sp_azure_target;

/* Resolve `uri` with the environment. SP_E_INVALID_ARG for a malformed URL, account, connection
 * string, endpoint or SAS token, a key that is not base64, credentials for another account than
 * the URL's, or no account where one is needed; messages name the URL, never a secret. */
sp_status sp_azure_target_resolve(const char *uri, sp_azure_target *t, sp_err *err);

/* Free what resolve filled (the key and the URL wiped first); a zeroed target is accepted. */
void sp_azure_target_clear(sp_azure_target *t);

/* Append x-ms-version, and with a key x-ms-date and the Shared Key Authorization, to *headers,
 * which must already hold every other header the request sends that Azure signs (Range,
 * If-Match, Content-Length, Content-MD5, x-ms-*), exactly as sent. */
sp_status sp_azure_sign_headers(const sp_azure_target *t, const char *method,
                                struct curl_slist **headers, sp_err *err);

#endif
