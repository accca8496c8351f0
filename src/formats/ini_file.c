/* ini_file.c — key files through libinih (ini_file.h).
 *
 * libinih reads lines through a callback here, over memory, so that a file need not be written
 * anywhere; each key = value becomes an entry (section, key and value copied).
 */
#include "formats/ini_file.h"

#include <ini.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* libinih's line buffer (Debian builds it with INI_MAX_LINE 200; the reader below keeps lines
 * within it so that a longer one is cut, not split into a second, made-up line). */
#define INI_LINE_MAX 200

typedef struct ini_reader_state {
    const char *p, *end;
} ini_reader_state;

/* fgets for libinih over memory: one line (cut to fit `num`, the rest of it skipped). */
static char *ini_read_line(char *str, int num, void *stream) {
    ini_reader_state *r = stream;
    if (r->p >= r->end || num < 3) {
        return NULL;
    }
    const char *nl = memchr(r->p, '\n', (size_t)(r->end - r->p));
    const char *line_end = nl != NULL ? nl + 1 : r->end;
    size_t len = (size_t)(line_end - r->p);
    size_t room = (size_t)num - 1;
    if (len > room) {
        memcpy(str, r->p, room - 1);
        str[room - 1] = '\n';
        str[room] = '\0';
    } else {
        memcpy(str, r->p, len);
        str[len] = '\0';
    }
    r->p = line_end;
    return str;
}

typedef struct ini_build {
    sp_ini *ini;
    bool nomem;
} ini_build;

static int ini_on_pair(void *user, const char *section, const char *name, const char *value) {
    ini_build *b = user;
    sp_ini *ini = b->ini;
    if (ini->n == ini->cap) {
        size_t cap = ini->cap ? ini->cap * 2 : 64;
        sp_ini_entry *grown = realloc(ini->entries, cap * sizeof *grown);
        if (grown == NULL) {
            b->nomem = true;
            return 0;
        }
        ini->entries = grown;
        ini->cap = cap;
    }
    sp_ini_entry e = {strdup(section), strdup(name), strdup(value)};
    if (e.section == NULL || e.key == NULL || e.value == NULL) {
        free(e.section);
        free(e.key);
        free(e.value);
        b->nomem = true;
        return 0;
    }
    ini->entries[ini->n++] = e;
    return 1;
}

sp_status sp_ini_parse(const char *text, const char *name, sp_ini *out, sp_err *err) {
    memset(out, 0, sizeof *out);
    ini_reader_state r = {text, text + strlen(text)};
    ini_build b = {out, false};
    int line = ini_parse_stream(ini_read_line, &r, ini_on_pair, &b);
    if (b.nomem) {
        sp_ini_free(out);
        return sp_err_set(err, SP_E_NOMEM, "out of memory reading %s", name);
    }
    if (line != 0) {
        sp_ini_free(out);
        return sp_err_set(err, SP_E_CORRUPT,
                          "%s line %d is neither a [section] nor a key = value pair", name, line);
    }
    return SP_OK;
}

void sp_ini_free(sp_ini *ini) {
    if (ini == NULL) {
        return;
    }
    for (size_t i = 0; i < ini->n; i++) {
        free(ini->entries[i].section);
        free(ini->entries[i].key);
        free(ini->entries[i].value);
    }
    free(ini->entries);
    memset(ini, 0, sizeof *ini);
}

const char *sp_ini_get(const sp_ini *ini, const char *section, const char *key) {
    for (size_t i = ini->n; i-- > 0;) { /* the last of repeated keys, as GKeyFile */
        const sp_ini_entry *e = &ini->entries[i];
        if (strcmp(e->key, key) == 0 && strcmp(e->section, section) == 0) {
            return e->value;
        }
    }
    return NULL;
}
