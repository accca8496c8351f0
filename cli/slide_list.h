/* slide_list.h — the slides a command runs over: paths given on the command line and the lines
 * of a --list file, kept as a growing array of strings (shared by the spectrum and convert front
 * ends and the MPI runner). */
#ifndef SP_CLI_SLIDE_LIST_H
#define SP_CLI_SLIDE_LIST_H

#include <stdbool.h>
#include <stdint.h>

/* Append a copy of `path`; false when out of memory (the list is unchanged). */
bool slide_list_add(char ***paths, int64_t *n, const char *path);

/* Append the lines of `file`, skipping blank lines and lines starting with '#'. Prints the error
 * ("slidepipe: cannot read the list ...") and returns false when it cannot be read. */
bool slide_list_load(char ***paths, int64_t *n, const char *file);

void slide_list_free(char ***paths, int64_t *n);

#endif
