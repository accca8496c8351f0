/* vendor_xml.c — safe parsing of the vendors' XML metadata through libxml2 (see vendor_xml.h). */
#include "formats/vendor_xml.h"

#include <pthread.h>
#include <string.h>

/* libxml2 2.9 wants its global state set up once, before threads parse concurrently. */
static pthread_once_t xml_once = PTHREAD_ONCE_INIT;

static void xml_init(void) {
    xmlInitParser();
}

/* No network, no messages; without XML_PARSE_NOENT, XML_PARSE_DTDLOAD and XML_PARSE_DTDATTR no
 * entity is substituted and nothing outside the text is read. */
#define VENDOR_XML_OPTIONS (XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING)

static xmlDoc *parse(const char *text, size_t len) {
    pthread_once(&xml_once, xml_init);
    if (len > (size_t)INT32_MAX) {
        return NULL;
    }
    xmlDoc *doc = xmlReadMemory(text, (int)len, NULL, NULL, VENDOR_XML_OPTIONS);
    if (doc != NULL &&
        (doc->intSubset != NULL || doc->extSubset != NULL || xmlDocGetRootElement(doc) == NULL)) {
        xmlFreeDoc(doc); /* a DTD could declare entities; vendors' metadata has none */
        doc = NULL;
    }
    return doc;
}

sp_status sp_vendor_xml_parse(const char *text, size_t len, const sp_limits *limits,
                              const char *what, xmlDoc **doc, sp_err *err) {
    *doc = NULL;
    if ((int64_t)len > limits->value[SP_LIMIT_MAX_METADATA]) {
        return sp_err_set(err, SP_E_LIMIT, "%s: %zu bytes of XML, over the metadata limit", what,
                          len);
    }
    *doc = parse(text, len);
    if (*doc == NULL) {
        return sp_err_set(err, SP_E_CORRUPT, "%s is not well-formed XML (or declares a DTD)", what);
    }
    return SP_OK;
}

bool sp_vendor_xml_root_is(const char *text, const sp_limits *limits, const char *root,
                           const char *attr, const char *value) {
    size_t len = text != NULL ? strlen(text) : 0;
    if (len == 0 || (int64_t)len > limits->value[SP_LIMIT_MAX_METADATA]) {
        return false;
    }
    xmlDoc *doc = parse(text, len);
    if (doc == NULL) {
        return false;
    }
    xmlNode *r = xmlDocGetRootElement(doc);
    bool ok = sp_vendor_xml_is(r, root);
    if (ok && attr != NULL) {
        xmlChar *v = xmlGetProp(r, (const xmlChar *)attr);
        ok = v != NULL && strcmp((const char *)v, value) == 0;
        xmlFree(v);
    }
    xmlFreeDoc(doc);
    return ok;
}

xmlXPathObject *sp_vendor_xml_select(xmlDoc *doc, xmlNode *node, const char *xpath) {
    xmlXPathContext *ctx = xmlXPathNewContext(doc);
    if (ctx == NULL) {
        return NULL;
    }
    xmlNode *root = xmlDocGetRootElement(doc);
    ctx->node = node != NULL ? node : root;
    /* "d:" names the root's default namespace (Leica's), as OpenSlide's queries do. */
    if (root != NULL && root->ns != NULL && root->ns->prefix == NULL && root->ns->href != NULL &&
        xmlXPathRegisterNs(ctx, (const xmlChar *)"d", root->ns->href) != 0) {
        xmlXPathFreeContext(ctx);
        return NULL;
    }
    xmlXPathObject *r = xmlXPathEvalExpression((const xmlChar *)xpath, ctx);
    xmlXPathFreeContext(ctx);
    if (r != NULL &&
        (r->type != XPATH_NODESET || r->nodesetval == NULL || r->nodesetval->nodeNr == 0)) {
        xmlXPathFreeObject(r);
        r = NULL;
    }
    return r;
}

char *sp_vendor_xml_string(xmlDoc *doc, xmlNode *node, const char *xpath) {
    xmlXPathObject *r = sp_vendor_xml_select(doc, node, xpath);
    char *text = r != NULL ? (char *)xmlNodeGetContent(r->nodesetval->nodeTab[0]) : NULL;
    xmlXPathFreeObject(r);
    return text;
}

bool sp_vendor_xml_is(const xmlNode *node, const char *name) {
    return node != NULL && node->type == XML_ELEMENT_NODE &&
           strcmp((const char *)node->name, name) == 0;
}
