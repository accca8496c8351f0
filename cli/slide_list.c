/* slide_list.c — building the list of slides a command runs over (slide_list.h). */
#include "slide_list.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

bool slide_list_add(char ***paths, int64_t *n, const char *path) {
    char **grown = realloc(*paths, (size_t)(*n + 1) * sizeof *grown);
    char *copy = strdup(path);
    if (grown == NULL || copy == NULL) {
        if (grown != NULL) {
            *paths = grown;
        }
        free(copy);
        return false;
    }
    *paths = grown;
    grown[(*n)++] = copy;
    return true;
}

bool slide_list_load(char ***paths, int64_t *n, const char *file) {
    FILE *f = fopen(file, "r");
    if (f == NULL) {
        cli_fail("cannot read the list %s: %s", file, strerror(errno));
        return false;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    bool ok = true;
    while (ok && (len = getline(&line, &cap, f)) >= 0) {
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) {
            line[--len] = '\0';
        }
        if (len == 0 || line[0] == '#') {
            continue;
        }
        ok = slide_list_add(paths, n, line);
    }
    bool read_error = ferror(f) != 0;
    free(line);
    fclose(f);
    if (!ok) {
        cli_fail("out of memory");
        return false;
    }
    if (read_error) {
        cli_fail("cannot read the list %s", file);
        return false;
    }
    return true;
}

void slide_list_free(char ***paths, int64_t *n) {
    for (int64_t i = 0; i < *n; i++) {
        free((*paths)[i]);
    }
    free(*paths);
    *paths = NULL;
    *n = 0;
}
