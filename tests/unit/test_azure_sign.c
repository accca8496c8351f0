/* test_azure_sign.c — the Azure Shared Key signer (io/azure_sign.h) against known answers.
 *
 * The expected strings to sign and signatures of the two worked examples were computed once,
 * independently of this C code, by a short Python program written from Microsoft's "Authorize
 * with Shared Key" page (hmac/hashlib/base64 of the standard library: the twelve lines, the
 * x-ms-* headers lower-cased and sorted with their whitespace collapsed, "/account" + path, the
 * query's decoded names lower-cased and sorted with repeated names' values joined by ','), and
 * pasted here. The first is a ranged, ETag-pinned GET of a blob through a path-style emulator
 * endpoint (the account appears twice) with a made-up key (bytes 0..63); the second a PUT with
 * a zero Content-Length, a Content-Type and a query string, under Azurite's published development
 * key. The page's own example string to sign (a container's metadata, no key published, so no
 * signature) is checked too. Also the key's strict base64, the date format, malformed requests
 * and a short output buffer.
 */
#include <stdio.h>
#include <string.h>

#include "io/azure_sign.h"
#include "unit.h"

static const char KEY1_B64[] =
    "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1Njc4OTo7PD0+Pw==";

static const char GET_EXPECTED[] =
    "GET\n\n\n\n\n\n\n\n\"0x8DCB1E2A3F4B5C6\"\n\n\nbytes=0-65535\n"
    "x-ms-date:Fri, 27 Nov 2026 16:00:00 GMT\nx-ms-meta-note:two words here\n"
    "x-ms-version:2021-08-06\n"
    "/devstoreaccount1/devstoreaccount1/slides/cohort%201/CMU-1%2Bsmall.svs";
static const char GET_SIGNATURE[] = "AGH154GZK356BPV0ggo0u5i9fdwKihN2qgZ2zao7DUE=";

static const char DEV_KEY_B64[] =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

static const char PUT_EXPECTED[] =
    "PUT\n\n\n\n\napplication/octet-stream\n\n\n\n\n\n\nx-ms-blob-type:BlockBlob\n"
    "x-ms-date:Sun, 11 Oct 2009 21:49:13 GMT\nx-ms-version:2009-09-19\n"
    "/myaccount/mycontainer/a%20b\nblockid:QUFB=\ncomp:block,list\ntimeout:20";
static const char PUT_SIGNATURE[] = "SkxoibZTjCXE4Q/HQ7bHNujQX+GaYjfaW5xK8nyCs3g=";

static void test_ranged_get(void) {
    const sp_azure_header h[] = {
        {"Range", "bytes=0-65535"},
        {"If-Match", "\"0x8DCB1E2A3F4B5C6\""},
        {"x-ms-version", "2021-08-06"},
        {"x-ms-date", "Fri, 27 Nov 2026 16:00:00 GMT"},
        {"X-Ms-Meta-Note", "  two   words\there  "},
        {"Accept", "*/*"}, /* not signed */
    };
    char out[1024], sig[64];
    sp_err err = {0};
    CHECK_EQ_INT(sp_azure_string_to_sign("GET", "devstoreaccount1",
                                         "/devstoreaccount1/slides/cohort%201/CMU-1%2Bsmall.svs",
                                         NULL, h, 6, out, sizeof out, &err),
                 SP_OK);
    CHECK(strcmp(out, GET_EXPECTED) == 0);
    unsigned char key[SP_AZURE_KEY_MAX];
    size_t key_len = 0;
    CHECK_EQ_INT(sp_azure_decode_key(KEY1_B64, key, &key_len, &err), SP_OK);
    CHECK_EQ_INT(key_len, 64);
    CHECK(key[0] == 0 && key[63] == 63);
    CHECK_EQ_INT(sp_azure_signature(key, key_len, out, sig, sizeof sig, &err), SP_OK);
    CHECK(strcmp(sig, GET_SIGNATURE) == 0);
}

static void test_put_with_query(void) {
    const sp_azure_header h[] = {
        {"Content-Length", "0"},
        {"Content-Type", "application/octet-stream"},
        {"x-ms-date", "Sun, 11 Oct 2009 21:49:13 GMT"},
        {"x-ms-version", "2009-09-19"},
        {"x-ms-blob-type", "BlockBlob"},
    };
    char out[1024], sig[64];
    sp_err err = {0};
    CHECK_EQ_INT(sp_azure_string_to_sign("PUT", "myaccount", "/mycontainer/a%20b",
                                         "timeout=20&Comp=block&blockid=QUFB%3D&comp=list", h, 5,
                                         out, sizeof out, &err),
                 SP_OK);
    CHECK(strcmp(out, PUT_EXPECTED) == 0);
    unsigned char key[SP_AZURE_KEY_MAX];
    size_t key_len = 0;
    CHECK_EQ_INT(sp_azure_decode_key(DEV_KEY_B64, key, &key_len, &err), SP_OK);
    CHECK_EQ_INT(key_len, 64);
    CHECK_EQ_INT(sp_azure_signature(key, key_len, out, sig, sizeof sig, &err), SP_OK);
    CHECK(strcmp(sig, PUT_SIGNATURE) == 0);
}

/* The example string to sign of "Authorize with Shared Key" (Get Container Metadata). */
static void test_documented_string(void) {
    const sp_azure_header h[] = {
        {"x-ms-version", "2009-09-19"},
        {"x-ms-date", "Sun, 11 Oct 2009 21:49:13 GMT"},
    };
    char out[512];
    sp_err err = {0};
    CHECK_EQ_INT(sp_azure_string_to_sign("GET", "myaccount", "/myaccount/mycontainer",
                                         "restype=container&comp=metadata&timeout=20", h, 2, out,
                                         sizeof out, &err),
                 SP_OK);
    CHECK(strcmp(out, "GET\n\n\n\n\n\n\n\n\n\n\n\nx-ms-date:Sun, 11 Oct 2009 21:49:13 GMT\n"
                      "x-ms-version:2009-09-19\n/myaccount/myaccount/mycontainer\n"
                      "comp:metadata\nrestype:container\ntimeout:20") == 0);
}

static void test_decode_key(void) {
    unsigned char key[SP_AZURE_KEY_MAX];
    size_t n = 99;
    sp_err err = {0};
    CHECK_EQ_INT(sp_azure_decode_key("TWFu", key, &n, &err), SP_OK);
    CHECK(n == 3 && memcmp(key, "Man", 3) == 0);
    CHECK_EQ_INT(sp_azure_decode_key("TWE=", key, &n, &err), SP_OK);
    CHECK(n == 2 && memcmp(key, "Ma", 2) == 0);
    CHECK_EQ_INT(sp_azure_decode_key("TQ==", key, &n, &err), SP_OK);
    CHECK(n == 1 && key[0] == 'M');
    const char *bad[] = {"", "TWF", "TWFu!", "TW=u", "TWF=x===", "TR==", "TWF\n", "T===", NULL};
    for (int i = 0; bad[i] != NULL; i++) {
        n = 99;
        CHECK_EQ_INT(sp_azure_decode_key(bad[i], key, &n, &err), SP_E_INVALID_ARG);
        CHECK_EQ_INT(n, 0);
    }
    CHECK(strstr(err.msg, "not base64") != NULL);
    CHECK_EQ_INT(sp_azure_decode_key(NULL, key, &n, &err), SP_E_INVALID_ARG);
    /* Longer than SP_AZURE_KEY_MAX bytes. */
    char big[400];
    memset(big, 'A', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    CHECK_EQ_INT(sp_azure_decode_key(big, key, &n, &err), SP_E_INVALID_ARG);
}

static void test_date(void) {
    char d[SP_AZURE_DATE_LEN];
    sp_azure_date(1255297753, d); /* 2009-10-11 21:49:13 UTC */
    CHECK(strcmp(d, "Sun, 11 Oct 2009 21:49:13 GMT") == 0);
    sp_azure_date(0, d);
    CHECK(strcmp(d, "Thu, 01 Jan 1970 00:00:00 GMT") == 0);
}

static void test_malformed(void) {
    char out[256];
    sp_err err = {0};
    const sp_azure_header ok[] = {{"x-ms-version", "2021-08-06"}};
    const sp_azure_header twice[] = {{"x-ms-version", "a"}, {"X-MS-VERSION", "b"}};
    const sp_azure_header crlf[] = {{"x-ms-meta-a", "a\r\nAuthorization: x"}};
    CHECK_EQ_INT(
        sp_azure_string_to_sign("GET", "a", "no-slash", NULL, ok, 1, out, sizeof out, &err),
        SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_azure_string_to_sign("", "a", "/c/b", NULL, ok, 1, out, sizeof out, &err),
                 SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_azure_string_to_sign("GET", "", "/c/b", NULL, ok, 1, out, sizeof out, &err),
                 SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_azure_string_to_sign("GET", "a", "/c/b", NULL, twice, 2, out, sizeof out, &err),
                 SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_azure_string_to_sign("GET", "a", "/c/b", NULL, crlf, 1, out, sizeof out, &err),
                 SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_azure_string_to_sign("GET", "a", "/c/b", "x=%4", ok, 1, out, sizeof out, &err),
                 SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_azure_string_to_sign("GET", "a", "/c/b", "x=%00", ok, 1, out, sizeof out, &err),
                 SP_E_INVALID_ARG);
    CHECK(out[0] == '\0');
    /* Too small: refused, nothing written past the end. */
    char small[40];
    memset(small, 'x', sizeof small);
    CHECK_EQ_INT(sp_azure_string_to_sign("GET", "a", "/c/b", NULL, ok, 1, small, 30, &err),
                 SP_E_INVALID_ARG);
    CHECK(small[0] == '\0' && small[30] == 'x' && small[39] == 'x');
    char sig[20];
    unsigned char key[4] = {1, 2, 3, 4};
    CHECK_EQ_INT(sp_azure_signature(key, 4, "s", sig, sizeof sig, &err), SP_E_INVALID_ARG);
}

void unit_run(void) {
    test_ranged_get();
    test_put_with_query();
    test_documented_string();
    test_decode_key();
    test_date();
    test_malformed();
}
