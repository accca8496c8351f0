/* strings.h — small string helpers the library shares: formatted allocation and path joining. */
#ifndef SP_BASE_STRINGS_H
#define SP_BASE_STRINGS_H

/* A malloc'd string formatted like printf, or NULL when out of memory. */
char *sp_strdup_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* "dir/name" (no doubled '/'), malloc'd, or NULL when out of memory. */
char *sp_path_join(const char *dir, const char *name);

#endif
