/* test_s3_sign.c — the S3 request signer (io/s3_sign.h) against known answers: the "GET Object"
 * example of the AWS S3 Signature Version 4 documentation, and further cases (HEAD without a
 * range, a session token, a custom endpoint with a port and an encoded path) whose expected
 * values were computed with botocore's S3SigV4Auth, as were those of a PUT with a signed body and
 * a DELETE (the Zarr writer's requests). Also the path encoding, the x-amz-date
 * format, the refusal of malformed arguments, and short output buffers, which must fail without
 * a byte written past their end.
 */
#include <stdio.h>
#include <string.h>

#include "io/s3_sign.h"
#include "unit.h"

#define AWS_DATE "20130524T000000Z"
#define AWS_HOST "examplebucket.s3.amazonaws.com"
#define AWS_SCOPE "AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request"

static const sp_s3_credentials AWS_CRED = {
    "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", NULL, "us-east-1"};

static const char AWS_EXPECTED[] =
    "AWS4-HMAC-SHA256 Credential=" AWS_SCOPE
    ",SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
    "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41";

static void test_aws_example(void) {
    char out[512];
    sp_err err = {0};
    CHECK_EQ_INT(sp_s3_authorization("GET", AWS_HOST, "/test.txt", "bytes=0-9", AWS_DATE, &AWS_CRED,
                                     out, sizeof out, &err),
                 SP_OK);
    CHECK_EQ_INT(err.status, SP_OK);
    CHECK(strcmp(out, AWS_EXPECTED) == 0);
    CHECK(
        strstr(out, "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"));

    /* S3 signs trimmed values, so spaces around them must not change the signature. */
    CHECK_EQ_INT(sp_s3_authorization("GET", "  " AWS_HOST " ", "/test.txt", " bytes=0-9  ",
                                     AWS_DATE, &AWS_CRED, out, sizeof out, NULL),
                 SP_OK);
    CHECK(strcmp(out, AWS_EXPECTED) == 0);
}

static void test_head_without_range(void) {
    char out[512];
    CHECK_EQ_INT(sp_s3_authorization("HEAD", AWS_HOST, "/test.txt", NULL, AWS_DATE, &AWS_CRED, out,
                                     sizeof out, NULL),
                 SP_OK);
    CHECK(strcmp(out,
                 "AWS4-HMAC-SHA256 Credential=" AWS_SCOPE
                 ",SignedHeaders=host;x-amz-content-sha256;x-amz-date,"
                 "Signature=69463d8f0bf59cfd12d6fc9f45cd84a5323d7bf3c5bd316736a2f8e50c8959a7") ==
          0);
    CHECK(strstr(out, "range") == NULL);

    CHECK_EQ_INT(sp_s3_authorization("GET", AWS_HOST, "/test.txt", NULL, AWS_DATE, &AWS_CRED, out,
                                     sizeof out, NULL),
                 SP_OK);
    CHECK(strstr(out, ",SignedHeaders=host;x-amz-content-sha256;x-amz-date,") != NULL);
    CHECK(strstr(out, "69463d8f0bf59cfd12d6fc9f45cd84a5323d7bf3c5bd316736a2f8e50c8959a7") == NULL);
}

static void test_session_token(void) {
    sp_s3_credentials cred = AWS_CRED;
    cred.session_token = "FQoGZXIvYXdzEXAMPLETOKEN//+==";
    char out[512];
    CHECK_EQ_INT(sp_s3_authorization("GET", AWS_HOST, "/test.txt", "bytes=0-9", AWS_DATE, &cred,
                                     out, sizeof out, NULL),
                 SP_OK);
    CHECK(strcmp(out,
                 "AWS4-HMAC-SHA256 Credential=" AWS_SCOPE
                 ",SignedHeaders=host;range;x-amz-content-sha256;x-amz-date;"
                 "x-amz-security-token,"
                 "Signature=5e7458cdc48097b57a9764c0f4a950353fd2d1b8ea6dbeeabec5f9ce8f443628") ==
          0);
    CHECK(strcmp(out, AWS_EXPECTED) != 0);

    /* The token is signed: another token, another signature. */
    char other[512];
    cred.session_token = "FQoGZXIvYXdzEXAMPLETOKEN//+=A";
    CHECK_EQ_INT(sp_s3_authorization("GET", AWS_HOST, "/test.txt", "bytes=0-9", AWS_DATE, &cred,
                                     other, sizeof other, NULL),
                 SP_OK);
    CHECK(strcmp(out, other) != 0);
}

/* An S3-compatible server on a port of its own, with a key that needs encoding, a secret holding
 * '/' and '+', another region and a leap day. */
static void test_custom_endpoint(void) {
    char uri[128];
    CHECK_EQ_INT(sp_s3_encode_path("/slides/dir/a b+c%\xc3\xa9.svs", uri, sizeof uri, NULL), SP_OK);
    CHECK(strcmp(uri, "/slides/dir/a%20b%2Bc%25%C3%A9.svs") == 0);
    sp_s3_credentials cred = {"minioadmin", "minio/secret+key", NULL, "eu-west-2"};
    char out[512];
    CHECK_EQ_INT(sp_s3_authorization("GET", "localhost:9000", uri, "bytes=100-4195",
                                     "20240229T235959Z", &cred, out, sizeof out, NULL),
                 SP_OK);
    CHECK(strcmp(out,
                 "AWS4-HMAC-SHA256 Credential=minioadmin/20240229/eu-west-2/s3/aws4_request,"
                 "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
                 "Signature=8b4ac8b8f3994bc96df45e3c9f1c0488f6998bd67564109c08cbaad986f527a7") ==
          0);
}

/* Whether every byte of buf from `from` to `to` (exclusive) is still `fill`. */
static int untouched(const char *buf, size_t from, size_t to, char fill) {
    for (size_t i = from; i < to; i++) {
        if (buf[i] != fill) {
            return 0;
        }
    }
    return 1;
}

static void test_encode_path(void) {
    char out[64];
    sp_err err = {0};
    CHECK_EQ_INT(sp_s3_encode_path("/dir/a b+c%\xc3\xa9.svs", out, sizeof out, &err), SP_OK);
    CHECK(strcmp(out, "/dir/a%20b%2Bc%25%C3%A9.svs") == 0);
    CHECK_EQ_INT(err.status, SP_OK);

    CHECK_EQ_INT(sp_s3_encode_path("/AZaz09-._~/x", out, sizeof out, NULL), SP_OK);
    CHECK(strcmp(out, "/AZaz09-._~/x") == 0);
    CHECK_EQ_INT(sp_s3_encode_path("?=&:@!*'()\x7f", out, sizeof out, NULL), SP_OK);
    CHECK(strcmp(out, "%3F%3D%26%3A%40%21%2A%27%28%29%7F") == 0);
    CHECK_EQ_INT(sp_s3_encode_path("", out, sizeof out, NULL), SP_OK);
    CHECK(strcmp(out, "") == 0);

    /* "/a b" encodes to "/a%20b": 6 bytes and the NUL. */
    char small[16];
    memset(small, 'X', sizeof small);
    CHECK_EQ_INT(sp_s3_encode_path("/a b", small, 7, NULL), SP_OK);
    CHECK(strcmp(small, "/a%20b") == 0);
    CHECK(untouched(small, 7, sizeof small, 'X'));
    memset(small, 'X', sizeof small);
    CHECK_EQ_INT(sp_s3_encode_path("/a b", small, 6, &err), SP_E_INVALID_ARG);
    CHECK_EQ_INT(err.status, SP_E_INVALID_ARG);
    CHECK(err.msg[0] != '\0');
    CHECK_EQ_INT(small[0], '\0');
    CHECK(untouched(small, 1, sizeof small, 'X'));
    /* Short by one byte of an escape: nothing of it is written, not even a partial "%C". */
    CHECK_EQ_INT(sp_s3_encode_path("/\xc3\xa9", small, 8, NULL), SP_OK);
    CHECK(strcmp(small, "/%C3%A9") == 0);
    memset(small, 'X', sizeof small);
    CHECK_EQ_INT(sp_s3_encode_path("/\xc3\xa9", small, 7, NULL), SP_E_INVALID_ARG);
    CHECK_EQ_INT(small[0], '\0');
    CHECK(untouched(small, 1, sizeof small, 'X'));

    CHECK_EQ_INT(sp_s3_encode_path("/", small, 0, NULL), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_s3_encode_path(NULL, small, sizeof small, NULL), SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_s3_encode_path("/", NULL, 16, NULL), SP_E_INVALID_ARG);
}

static void test_small_output(void) {
    size_t len = strlen(AWS_EXPECTED);
    char buf[600];
    memset(buf, 'X', sizeof buf);
    CHECK_EQ_INT(sp_s3_authorization("GET", AWS_HOST, "/test.txt", "bytes=0-9", AWS_DATE, &AWS_CRED,
                                     buf, len + 1, NULL),
                 SP_OK);
    CHECK(strcmp(buf, AWS_EXPECTED) == 0);
    CHECK(untouched(buf, len + 1, sizeof buf, 'X'));

    size_t caps[] = {len, len - 1, 64, 1};
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
        memset(buf, 'X', sizeof buf);
        sp_err err = {0};
        CHECK_EQ_INT(sp_s3_authorization("GET", AWS_HOST, "/test.txt", "bytes=0-9", AWS_DATE,
                                         &AWS_CRED, buf, caps[i], &err),
                     SP_E_INVALID_ARG);
        CHECK_EQ_INT(err.status, SP_E_INVALID_ARG);
        CHECK_EQ_INT(buf[0], '\0');
        CHECK(untouched(buf, 1, sizeof buf, 'X'));
    }
    CHECK_EQ_INT(sp_s3_authorization("GET", AWS_HOST, "/test.txt", "bytes=0-9", AWS_DATE, &AWS_CRED,
                                     buf, 0, NULL),
                 SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_s3_authorization("GET", AWS_HOST, "/test.txt", "bytes=0-9", AWS_DATE, &AWS_CRED,
                                     NULL, sizeof buf, NULL),
                 SP_E_INVALID_ARG);
}

/* Every call here must fail with SP_E_INVALID_ARG and leave an empty string in out. */
static void check_rejected(const char *method, const char *host, const char *uri, const char *range,
                           const char *date, const sp_s3_credentials *cred, int line) {
    char out[512];
    memset(out, 'X', sizeof out);
    sp_err err = {0};
    sp_status st = sp_s3_authorization(method, host, uri, range, date, cred, out, sizeof out, &err);
    if (st != SP_E_INVALID_ARG || err.status != SP_E_INVALID_ARG || out[0] != '\0') {
        fprintf(stderr, "check_rejected at line %d: status %d\n", line, (int)st);
    }
    CHECK_EQ_INT(st, SP_E_INVALID_ARG);
    CHECK_EQ_INT(err.status, SP_E_INVALID_ARG);
    CHECK(err.msg[0] != '\0');
    CHECK_EQ_INT(out[0], '\0');
}

#define REJECTED(method, host, uri, range, date, cred)                                             \
    check_rejected(method, host, uri, range, date, cred, __LINE__)

static void test_malformed(void) {
    const char *bad_dates[] = {"",
                               "20130524T000000",
                               "20130524T0000000Z",
                               "20130524X000000Z",
                               "20130524T000000z",
                               "2013-05-24T00:00Z",
                               "2013052AT000000Z",
                               "20130524T00000AZ",
                               "20130524 000000Z"};
    for (size_t i = 0; i < sizeof bad_dates / sizeof bad_dates[0]; i++) {
        REJECTED("GET", AWS_HOST, "/test.txt", "bytes=0-9", bad_dates[i], &AWS_CRED);
    }
    const char *bad_uris[] = {"", "test.txt", "/a b", "/a+b", "/a%2fb", "/a%2", "/a%", "/\xc3\xa9"};
    for (size_t i = 0; i < sizeof bad_uris / sizeof bad_uris[0]; i++) {
        REJECTED("GET", AWS_HOST, bad_uris[i], "bytes=0-9", AWS_DATE, &AWS_CRED);
    }
    REJECTED("PUT", AWS_HOST, "/test.txt", NULL, AWS_DATE, &AWS_CRED);
    REJECTED("get", AWS_HOST, "/test.txt", NULL, AWS_DATE, &AWS_CRED);
    REJECTED("", AWS_HOST, "/test.txt", NULL, AWS_DATE, &AWS_CRED);
    REJECTED("GET", "", "/test.txt", NULL, AWS_DATE, &AWS_CRED);
    REJECTED("GET", "   ", "/test.txt", NULL, AWS_DATE, &AWS_CRED);
    REJECTED("GET", AWS_HOST "\r\nX-Evil: 1", "/test.txt", NULL, AWS_DATE, &AWS_CRED);
    REJECTED("GET", AWS_HOST, "/test.txt", "", AWS_DATE, &AWS_CRED);
    REJECTED("GET", AWS_HOST, "/test.txt", "bytes=0-9\n", AWS_DATE, &AWS_CRED);

    REJECTED(NULL, AWS_HOST, "/test.txt", NULL, AWS_DATE, &AWS_CRED);
    REJECTED("GET", NULL, "/test.txt", NULL, AWS_DATE, &AWS_CRED);
    REJECTED("GET", AWS_HOST, NULL, NULL, AWS_DATE, &AWS_CRED);
    REJECTED("GET", AWS_HOST, "/test.txt", NULL, NULL, &AWS_CRED);
    REJECTED("GET", AWS_HOST, "/test.txt", NULL, AWS_DATE, NULL);

    sp_s3_credentials c = AWS_CRED;
    c.access_key = NULL;
    REJECTED("GET", AWS_HOST, "/test.txt", NULL, AWS_DATE, &c);
    c.access_key = "";
    REJECTED("GET", AWS_HOST, "/test.txt", NULL, AWS_DATE, &c);
    c.access_key = "AKIA/EXAMPLE";
    REJECTED("GET", AWS_HOST, "/test.txt", NULL, AWS_DATE, &c);
    c = AWS_CRED;
    c.secret_key = NULL;
    REJECTED("GET", AWS_HOST, "/test.txt", NULL, AWS_DATE, &c);
    c.secret_key = "";
    REJECTED("GET", AWS_HOST, "/test.txt", NULL, AWS_DATE, &c);
    c = AWS_CRED;
    c.region = NULL;
    REJECTED("GET", AWS_HOST, "/test.txt", NULL, AWS_DATE, &c);
    c.region = "";
    REJECTED("GET", AWS_HOST, "/test.txt", NULL, AWS_DATE, &c);
    c.region = "us-east-1/x";
    REJECTED("GET", AWS_HOST, "/test.txt", NULL, AWS_DATE, &c);
    c.region = "us east";
    REJECTED("GET", AWS_HOST, "/test.txt", NULL, AWS_DATE, &c);
    c = AWS_CRED;
    c.session_token = "";
    REJECTED("GET", AWS_HOST, "/test.txt", NULL, AWS_DATE, &c);
    c.session_token = "abc\r\ndef";
    REJECTED("GET", AWS_HOST, "/test.txt", NULL, AWS_DATE, &c);

    /* The first error recorded wins, and a NULL err is accepted. */
    char out[512];
    sp_err err = {0};
    sp_err_set(&err, SP_E_IO, "earlier");
    CHECK_EQ_INT(sp_s3_authorization("GET", AWS_HOST, "test.txt", NULL, AWS_DATE, &AWS_CRED, out,
                                     sizeof out, &err),
                 SP_E_INVALID_ARG);
    CHECK(strcmp(err.msg, "earlier") == 0);
    CHECK_EQ_INT(sp_s3_authorization("GET", AWS_HOST, "test.txt", NULL, AWS_DATE, &AWS_CRED, out,
                                     sizeof out, NULL),
                 SP_E_INVALID_ARG);
}

static void test_amz_date(void) {
    struct {
        time_t t;
        const char *want;
    } cases[] = {{0, "19700101T000000Z"},
                 {1369353600, "20130524T000000Z"},
                 {951868799, "20000229T235959Z"},
                 {1234567890, "20090213T233130Z"},
                 {-1, "19691231T235959Z"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[17];
        memset(out, 'X', sizeof out);
        sp_s3_amz_date(cases[i].t, out);
        CHECK(strcmp(out, cases[i].want) == 0);
    }
    if (sizeof(time_t) >= 8) {
        char out[17];
        sp_s3_amz_date((time_t)253402300799LL, out);
        CHECK(strcmp(out, "99991231T235959Z") == 0);
        /* Past year 9999 the date stays well-formed: the last second of that year. */
        sp_s3_amz_date((time_t)253402300800LL, out);
        CHECK(strcmp(out, "99991231T235959Z") == 0);
    }
    /* What it formats, the signer takes. */
    char date[17], out[512];
    sp_s3_amz_date(1369353600, date);
    CHECK_EQ_INT(sp_s3_authorization("GET", AWS_HOST, "/test.txt", "bytes=0-9", date, &AWS_CRED,
                                     out, sizeof out, NULL),
                 SP_OK);
    CHECK(strcmp(out, AWS_EXPECTED) == 0);
}

/* botocore's S3SigV4Auth at the same date, key and host, for PUT /test%24file.text with the body
 * "Welcome to Amazon S3." and for DELETE of the same object. */
static void test_put_and_delete(void) {
    static const char body_sha256[] =
        "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072";
    static const char *const cases[][3] = {
        {"PUT", body_sha256, "1e15d288c066d54cc20d8f664ade3fa96e6744b2861304671f6eb633045a2d4a"},
        {"DELETE", SP_S3_EMPTY_SHA256,
         "f25f9cf56c1a0f25e13d950696e6da0adadeb2cb2823891c9610c797821f96ee"},
    };
    for (size_t i = 0; i < 2; i++) {
        char out[512], want[512];
        sp_err err = {0};
        CHECK_EQ_INT(sp_s3_authorization_payload(cases[i][0], AWS_HOST, "/test%24file.text", NULL,
                                                 cases[i][1], AWS_DATE, &AWS_CRED, out, sizeof out,
                                                 &err),
                     SP_OK);
        snprintf(want, sizeof want,
                 "AWS4-HMAC-SHA256 Credential=" AWS_SCOPE
                 ",SignedHeaders=host;x-amz-content-sha256;x-amz-date,Signature=%s",
                 cases[i][2]);
        CHECK(strcmp(out, want) == 0);
    }
    /* Only the four methods, only a well-formed payload hash; the GET/HEAD entry point refuses
     * PUT, whose body it could not sign. */
    char out[512];
    sp_err err = {0};
    CHECK_EQ_INT(sp_s3_authorization_payload("POST", AWS_HOST, "/x", NULL, SP_S3_EMPTY_SHA256,
                                             AWS_DATE, &AWS_CRED, out, sizeof out, &err),
                 SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_s3_authorization_payload("PUT", AWS_HOST, "/x", NULL, "44CE7DD6", AWS_DATE,
                                             &AWS_CRED, out, sizeof out, &err),
                 SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_s3_authorization_payload("PUT", AWS_HOST, "/x", NULL, NULL, AWS_DATE, &AWS_CRED,
                                             out, sizeof out, &err),
                 SP_E_INVALID_ARG);
    CHECK_EQ_INT(sp_s3_authorization("PUT", AWS_HOST, "/x", NULL, AWS_DATE, &AWS_CRED, out,
                                     sizeof out, &err),
                 SP_E_INVALID_ARG);
    CHECK(out[0] == '\0');
}

void unit_run(void) {
    test_put_and_delete();
    test_aws_example();
    test_head_without_range();
    test_session_token();
    test_custom_endpoint();
    test_encode_path();
    test_small_output();
    test_malformed();
    test_amz_date();
}
