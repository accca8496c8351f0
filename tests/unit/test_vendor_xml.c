/* test_vendor_xml.c — the vendors' XML parser (src/formats/vendor_xml.c) refuses what could make
 * hostile metadata dangerous or costly: a DTD (internal entities, a billion-laughs expansion, an
 * external entity naming a local file), text over the metadata limit, malformed text; and it
 * still parses the vendors' documents, with entities of the XML standard decoded and XPath "d:"
 * naming the root's default namespace (Leica). */
#include <string.h>

#include "formats/vendor_xml.h"
#include "unit.h"

static sp_status parse(const char *text, sp_limits *limits, xmlDoc **doc, sp_err *err) {
    return sp_vendor_xml_parse(text, strlen(text), limits, "test XML", doc, err);
}

static void test_dtd_refused(void) {
    sp_limits limits;
    sp_limits_default(&limits);
    static const char *const hostile[] = {
        /* billion laughs, cut short */
        "<?xml version=\"1.0\"?><!DOCTYPE r [<!ENTITY a \"aaaaaaaaaa\">"
        "<!ENTITY b \"&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;\"><!ENTITY c \"&b;&b;&b;&b;&b;&b;&b;&b;\">]>"
        "<r>&c;</r>",
        /* an external entity naming a local file */
        "<?xml version=\"1.0\"?><!DOCTYPE r [<!ENTITY x SYSTEM \"file:///etc/passwd\">]><r>&x;</r>",
        /* an external DTD */
        "<?xml version=\"1.0\"?><!DOCTYPE r SYSTEM \"http://127.0.0.1:9/x.dtd\"><r/>",
    };
    for (size_t i = 0; i < sizeof hostile / sizeof hostile[0]; i++) {
        xmlDoc *doc = NULL;
        sp_err err = {0};
        CHECK_EQ_INT(parse(hostile[i], &limits, &doc, &err), SP_E_CORRUPT);
        CHECK(doc == NULL);
        CHECK(strstr(err.msg, "test XML") != NULL);
    }
}

static void test_malformed_and_limit(void) {
    sp_limits limits;
    sp_limits_default(&limits);
    xmlDoc *doc = NULL;
    sp_err err = {0};
    CHECK_EQ_INT(parse("<a><b></a>", &limits, &doc, &err), SP_E_CORRUPT);
    CHECK_EQ_INT(parse("", &limits, &doc, &err), SP_E_CORRUPT);
    limits.value[SP_LIMIT_MAX_METADATA] = 8;
    CHECK_EQ_INT(parse("<abcdefgh/>", &limits, &doc, &err), SP_E_LIMIT);
    CHECK(doc == NULL);
    CHECK(!sp_vendor_xml_root_is("<abcdefgh/>", &limits, "abcdefgh", NULL, NULL));
}

static void test_documents(void) {
    sp_limits limits;
    sp_limits_default(&limits);
    xmlDoc *doc = NULL;
    sp_err err = {0};
    CHECK_EQ_INT(parse("<DataObject ObjectType=\"DPUfsImport\"><Attribute Name=\"A\">x &amp; "
                       "&#65;</Attribute></DataObject>",
                       &limits, &doc, &err),
                 SP_OK);
    char *text = sp_vendor_xml_string(doc, NULL, "/DataObject/Attribute[@Name='A']/text()");
    CHECK(text != NULL && strcmp(text, "x & A") == 0);
    xmlFree(text);
    CHECK(sp_vendor_xml_select(doc, NULL, "/DataObject/Nothing") == NULL);
    xmlFreeDoc(doc);
    CHECK(sp_vendor_xml_root_is("<DataObject ObjectType=\"DPUfsImport\"/>", &limits, "DataObject",
                                "ObjectType", "DPUfsImport"));
    CHECK(!sp_vendor_xml_root_is("<DataObject ObjectType=\"Other\"/>", &limits, "DataObject",
                                 "ObjectType", "DPUfsImport"));

    doc = NULL;
    CHECK_EQ_INT(parse("<scn xmlns=\"http://www.leica-microsystems.com/scn/2010/10/01\">"
                       "<collection sizeX=\"5\"><barcode>QQ==</barcode></collection></scn>",
                       &limits, &doc, &err),
                 SP_OK);
    text = sp_vendor_xml_string(doc, NULL, "/d:scn/d:collection/@sizeX");
    CHECK(text != NULL && strcmp(text, "5") == 0);
    xmlFree(text);
    xmlFreeDoc(doc);
}

void unit_run(void) {
    test_dtd_refused();
    test_malformed_and_limit();
    test_documents();
}
