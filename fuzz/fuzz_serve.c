/* fuzz_serve.c — libFuzzer target for the request parsers of `slidepipe serve`
 * (serve/serve_iiif.c, serve/serve_dzi.c): the first 8 bytes give an image size, the rest is a
 * request path whose first four '/'-separated segments go to the IIIF parser and whose last
 * two to the Deep Zoom parser. Whatever they accept must be inside the image and the limits:
 * a region of positive size within the image, an output of 1..max_side pixels a side and at
 * most max_area; anything else must come back as an HTTP status with a message. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

#define MAX_SIDE 4096
#define MAX_AREA (INT64_C(4096) * 4096)

static void check(const serve_render *r, int64_t w, int64_t h) {
    if (r->w < 1 || r->h < 1 || r->x < 0 || r->y < 0 || r->x + r->w > w || r->y + r->h > h ||
        r->out_w < 1 || r->out_h < 1 || r->out_w > MAX_SIDE || r->out_h > MAX_SIDE ||
        r->out_w * r->out_h > MAX_AREA) {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 8 || size > 4096) {
        return 0;
    }
    uint32_t a, b;
    memcpy(&a, data, 4);
    memcpy(&b, data + 4, 4);
    int64_t w = 1 + (int64_t)(a % (1u << 24)), h = 1 + (int64_t)(b % (1u << 24));
    char *text = malloc(size - 8 + 1), *seg[6] = {0};
    if (text == NULL) {
        return 0;
    }
    memcpy(text, data + 8, size - 8);
    text[size - 8] = '\0';
    int n = 0;
    for (char *p = text; n < 6;) {
        seg[n++] = p;
        char *slash = strchr(p, '/');
        if (slash == NULL) {
            break;
        }
        *slash = '\0';
        p = slash + 1;
    }
    char msg[512];
    serve_render r;
    if (n >= 4) {
        int64_t scales[48];
        int ns = serve_scale_factors(w, h, SERVE_DZI_TILE, scales, 48);
        int st = serve_iiif_parse(seg[0], seg[1], seg[2], seg[3], w, h, MAX_SIDE, MAX_AREA, scales,
                                  ns, &r, msg, sizeof msg);
        if (st == 0) {
            check(&r, w, h);
        } else if ((st != 400 && st != 501) || msg[0] == '\0') {
            abort();
        }
    }
    if (n >= 2) {
        int level = (int)(strlen(seg[n - 2]) % 30);
        int st = serve_dzi_parse(level, seg[n - 1], w, h, &r, msg, sizeof msg);
        if (st == 0) {
            check(&r, w, h);
        } else if ((st != 400 && st != 404) || msg[0] == '\0') {
            abort();
        }
    }
    free(text);
    return 0;
}
