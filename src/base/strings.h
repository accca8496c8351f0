/* strings.h — small string helpers the library shares: formatted allocation, path joining and
 * UTF-8 checking. */
#ifndef SP_BASE_STRINGS_H
#define SP_BASE_STRINGS_H

#include <stddef.h>
#include <stdint.h>

/* A malloc'd string formatted like printf, or NULL when out of memory. */
char *sp_strdup_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* "dir/name" (no doubled '/'), malloc'd, or NULL when out of memory. */
char *sp_path_join(const char *dir, const char *name);

/* The length of the well-formed UTF-8 sequence at p (n bytes left; RFC 3629: no overlong forms,
 * surrogates or code points past U+10FFFF), or 0 when there is none. */
size_t sp_utf8_char_len(const uint8_t *p, size_t n);

/* A malloc'd copy of `text` with every byte that does not begin a well-formed UTF-8 sequence
 * replaced by '?', so that JSON and Python take it; NULL when out of memory. */
char *sp_strdup_utf8(const char *text);

#endif
