/* numbers.h — reading and writing decimal numbers the same way whatever the host's locale.
 *
 * File metadata (Aperio "MPP = 0.4990", OME-XML, DICOM decimal strings) always uses '.', and our
 * property strings must too; the C library's strtod and printf follow LC_NUMERIC, which a host
 * program may have set to a comma locale. These use the "C" locale explicitly.
 */
#ifndef SP_BASE_NUMBERS_H
#define SP_BASE_NUMBERS_H

#include <stddef.h>

/* strtod in the "C" locale. */
double sp_strtod(const char *text, char **end);

/* Format a double the shortest way that reads back exactly ("0.499", "20"), in the "C" locale. */
void sp_format_double(double value, char *buf, size_t len);

#endif
