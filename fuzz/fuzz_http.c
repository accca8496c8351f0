/* fuzz_http.c — libFuzzer target for what slidepipe parses out of an HTTP response itself: the
 * Content-Range header (src/io/http_source.c). An accepted value must describe a real range
 * (FIRST <= LAST < TOTAL) and print back to the same numbers; the input is copied to an
 * exact-size buffer without a terminator, so a read past its length is caught. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/http_source.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *value = malloc(size ? size : 1);
    if (value == NULL) {
        return 0;
    }
    memcpy(value, data, size);
    uint64_t first = 0, last = 0, total = 0;
    if (sp_http_parse_content_range(value, size, &first, &last, &total)) {
        char again[96];
        snprintf(again, sizeof again, "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, first, last, total);
        uint64_t f2 = 0, l2 = 0, t2 = 0;
        if (first > last || last >= total ||
            !sp_http_parse_content_range(again, strlen(again), &f2, &l2, &t2) || f2 != first ||
            l2 != last || t2 != total) {
            abort();
        }
    }
    free(value);
    return 0;
}
