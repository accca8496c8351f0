/* ini_file.h — the INI-style key files of the vendors that describe a slide in text (MIRAX's
 * Slidedat.ini, Hamamatsu's .vms and .vmu), read through libinih into every [section] key =
 * value in file order. GKeyFile (OpenSlide's reader) is the reference: a repeated key keeps its
 * last value. The readers of each format (mirax_index.c, hamamatsu_vms.c) interpret the values.
 */
#ifndef SP_FORMATS_INI_FILE_H
#define SP_FORMATS_INI_FILE_H

#include <stddef.h>

#include "base/err.h"

typedef struct sp_ini_entry {
    char *section, *key, *value;
} sp_ini_entry;

typedef struct sp_ini {
    sp_ini_entry *entries;
    size_t n, cap;
} sp_ini;

/* Parse `text` (NUL-terminated; a UTF-8 byte order mark is skipped) through libinih; `name` (the
 * file's) is used in messages. Lines longer than libinih's line buffer are cut there
 * (docs/formats.md). Free with sp_ini_free. */
sp_status sp_ini_parse(const char *text, const char *name, sp_ini *out, sp_err *err);
void sp_ini_free(sp_ini *ini);
/* The value of [section] key, or NULL. */
const char *sp_ini_get(const sp_ini *ini, const char *section, const char *key);

#endif
