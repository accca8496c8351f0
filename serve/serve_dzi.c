/* serve_dzi.c — Deep Zoom for `slidepipe serve`: the .dzi descriptor and the tile addressing
 * (level L of a Deep Zoom pyramid is the image scaled by 2^(max - L); tile COL_ROW covers
 * SERVE_DZI_TILE pixels of it, no overlap, partial at the right and bottom edges), the same
 * layout OpenSlide's DeepZoomGenerator gives with overlap 0. The viewer's Leaflet layer asks
 * these tiles too: its zoom z is Deep Zoom level z. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

int serve_dzi_max_level(int64_t width, int64_t height) {
    int64_t side = width > height ? width : height;
    int level = 0;
    while ((INT64_C(1) << level) < side) {
        level++;
    }
    return level;
}

char *serve_dzi_xml(int64_t width, int64_t height) {
    char *xml = malloc(512);
    if (xml != NULL) {
        snprintf(xml, 512,
                 "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                 "<Image xmlns=\"http://schemas.microsoft.com/deepzoom/2008\" Format=\"jpeg\" "
                 "Overlap=\"0\" TileSize=\"%d\"><Size Width=\"%lld\" Height=\"%lld\"/></Image>\n",
                 SERVE_DZI_TILE, (long long)width, (long long)height);
    }
    return xml;
}

int serve_dzi_parse(int level, const char *name, int64_t width, int64_t height, serve_render *out,
                    char *msg, size_t msg_len) {
    int max = serve_dzi_max_level(width, height);
    if (level < 0 || level > max) {
        snprintf(msg, msg_len, "Deep Zoom level %d does not exist (0..%d)", level, max);
        return 404;
    }
    long long col, row;
    char ext[8];
    int used = 0;
    if (strlen(name) > 40 || sscanf(name, "%11lld_%11lld.%5[a-z]%n", &col, &row, ext, &used) != 3 ||
        name[used] != '\0' || col < 0 || row < 0 || name[0] < '0' || name[0] > '9' ||
        strchr(name, '+') != NULL) {
        snprintf(msg, msg_len, "a Deep Zoom tile is named COL_ROW.jpeg|png|webp, not '%s'", name);
        return 400;
    }
    serve_format format;
    if (!serve_format_from_ext(ext, &format)) {
        snprintf(msg, msg_len, "tile format must be jpeg, png or webp, not '%s'", ext);
        return 400;
    }
    int64_t scale = INT64_C(1) << (max - level);
    int64_t lw = (width + scale - 1) / scale, lh = (height + scale - 1) / scale;
    int64_t x = col * SERVE_DZI_TILE, y = row * SERVE_DZI_TILE;
    if (x >= lw || y >= lh) {
        snprintf(msg, msg_len, "tile %s is outside level %d (%lldx%lld)", name, level,
                 (long long)lw, (long long)lh);
        return 404;
    }
    memset(out, 0, sizeof *out);
    out->out_w = lw - x < SERVE_DZI_TILE ? lw - x : SERVE_DZI_TILE;
    out->out_h = lh - y < SERVE_DZI_TILE ? lh - y : SERVE_DZI_TILE;
    out->x = x * scale, out->y = y * scale;
    out->w = out->out_w * scale, out->h = out->out_h * scale;
    if (out->x + out->w > width) {
        out->w = width - out->x;
    }
    if (out->y + out->h > height) {
        out->h = height - out->y;
    }
    out->format = format;
    out->quality = SERVE_COLOR;
    return 0;
}
