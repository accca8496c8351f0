/* unit.c — the harness main for every unit-test binary (see unit.h). */
#include "unit.h"

#include <stdlib.h>
#include <sys/stat.h>

int unit_passed, unit_failed;
static int skipped;

void unit_skip(const char *why) {
    printf("SKIPPED: %s\n", why);
    skipped = 1;
}

const char *unit_testdata(void) {
    const char *dir = getenv("SP_TESTDATA");
    struct stat st;
    if (dir == NULL || stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        return NULL;
    }
    return dir;
}

int main(void) {
    unit_run();
    printf("%d passed, %d failed\n", unit_passed, unit_failed);
    if (unit_failed) {
        return 1;
    }
    return skipped ? 77 : 0;
}
