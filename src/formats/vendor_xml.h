/* vendor_xml.h — the vendors' XML metadata (Philips, Leica, Ventana) parsed through libxml2, one
 * way for all of them: no network access, no external DTD or entity loaded, no entity expanded,
 * a document carrying a DTD refused, the input bounded by the metadata limit, and libxml2's
 * messages kept off stderr (the library never prints). Formats then walk the tree or evaluate
 * XPath on it with libxml2 itself instead of parsing text by hand. */
#ifndef SP_FORMATS_VENDOR_XML_H
#define SP_FORMATS_VENDOR_XML_H

#include <libxml/parser.h>
#include <libxml/tree.h>
#include <libxml/xpath.h>
#include <libxml/xpathInternals.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"
#include "base/limits.h"

/* Parse `len` bytes of `text` into *doc (to free with xmlFreeDoc). SP_E_LIMIT when `len` is over
 * the metadata limit, SP_E_CORRUPT (naming `what`) when the text is not well-formed XML or
 * declares a DTD. */
sp_status sp_vendor_xml_parse(const char *text, size_t len, const sp_limits *limits,
                              const char *what, xmlDoc **doc, sp_err *err);

/* Whether `text` parses as XML whose root element is named `root` (and, when `attr` is not NULL,
 * carries attribute `attr` equal to `value`): for detect(), which has no error to report. */
bool sp_vendor_xml_root_is(const char *text, const sp_limits *limits, const char *root,
                           const char *attr, const char *value);

/* The nodes `xpath` selects from `node` (the document root when NULL), or NULL when none or
 * when out of memory; free with xmlXPathFreeObject. The prefix "d" names the root element's
 * default namespace, when it has one. */
xmlXPathObject *sp_vendor_xml_select(xmlDoc *doc, xmlNode *node, const char *xpath);

/* The text content of the first node `xpath` selects from `node` (an element's text, an
 * attribute's value), to free with xmlFree; NULL when nothing is selected. */
char *sp_vendor_xml_string(xmlDoc *doc, xmlNode *node, const char *xpath);

/* Whether element `node` is named `name` (no namespace check). */
bool sp_vendor_xml_is(const xmlNode *node, const char *name);

#endif
