/* gcs_token.h — OAuth 2 access tokens for Google Cloud Storage minted from a service-account key
 * file (the JSON file GOOGLE_APPLICATION_CREDENTIALS names), as Google's client libraries do:
 * a JWT signed with the key (RS256) exchanged at the key's token_uri (gcs_token.c).
 */
#ifndef SP_IO_GCS_TOKEN_H
#define SP_IO_GCS_TOKEN_H

#include <stddef.h>

#include "base/err.h"

/* The longest token taken, its NUL included (what fits one Authorization header line). */
#define SP_GCS_TOKEN_MAX 2000

/* The current access token of the service-account key file `key_file`, NUL-terminated into `out`
 * (cap bytes, at least SP_GCS_TOKEN_MAX). The first call for a key file, and the first after its
 * token came within 5 minutes of expiring (half its lifetime for a short-lived one), reads the
 * file, signs a JWT for the scope devstorage.read_write with its private key and exchanges it at
 * its token_uri; the other calls copy the token kept. The process keeps one token (a second key
 * file replaces it), behind a lock, so concurrent callers wait for one exchange; a forked child
 * may go on using it. Errors name the key file and never hold a secret: SP_E_INVALID_ARG for a
 * file that cannot be read or is not a service-account key with an RSA private key, SP_E_IO for a
 * token endpoint that fails (after retries) or refuses, with what it said. */
sp_status sp_gcs_token(const char *key_file, char *out, size_t cap, sp_err *err);

#endif
