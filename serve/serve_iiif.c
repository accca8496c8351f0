/* serve_iiif.c — IIIF Image API 3.0 for `slidepipe serve`: parses the four path segments of an
 * image request (region, size, rotation, quality.format) into a render, strictly by the spec's
 * grammar (https://iiif.io/api/image/3.0/#4-image-requests), and writes an image's info.json.
 * A request with bad syntax, a region outside the image, a size above the region without "^"
 * or above the server's limits is 400 with a message; a valid request of a feature the server
 * does not implement (rotation by other than 90s, tif/gif/jp2/pdf) is 501. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

static int fail(char *msg, size_t len, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(char *msg, size_t len, int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, len, fmt, ap);
    va_end(ap);
    return status;
}

/* A whole non-negative decimal number (no sign, no spaces), at most 2^40. */
static bool parse_uint(const char *s, size_t n, int64_t *out) {
    if (n == 0 || n > 13) {
        return false;
    }
    int64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return false;
        }
        v = v * 10 + (s[i] - '0');
    }
    if (v > (INT64_C(1) << 40)) {
        return false;
    }
    *out = v;
    return true;
}

/* A non-negative decimal number with an optional fraction ("12", "12.5", ".5"), finite. */
static bool parse_float(const char *s, size_t n, double *out) {
    if (n == 0 || n > 32) {
        return false;
    }
    int dots = 0, digits = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '.') {
            dots++;
        } else if (s[i] >= '0' && s[i] <= '9') {
            digits++;
        } else {
            return false;
        }
    }
    if (dots > 1 || digits == 0) {
        return false;
    }
    char buf[40];
    memcpy(buf, s, n);
    buf[n] = '\0';
    *out = strtod(buf, NULL);
    return isfinite(*out);
}

/* Split "a,b,c,d" (count fields) into field starts and lengths. */
static bool split(const char *s, int count, const char **f, size_t *n) {
    for (int i = 0; i < count; i++) {
        const char *comma = strchr(s, ',');
        if ((comma == NULL) != (i == count - 1)) {
            return false;
        }
        f[i] = s;
        n[i] = comma ? (size_t)(comma - s) : strlen(s);
        s = comma ? comma + 1 : s;
    }
    return true;
}

static int parse_region(const char *region, int64_t W, int64_t H, serve_render *r, char *msg,
                        size_t len) {
    int64_t x, y, w, h;
    if (strcmp(region, "full") == 0) {
        x = y = 0, w = W, h = H;
    } else if (strcmp(region, "square") == 0) {
        int64_t side = W < H ? W : H;
        x = (W - side) / 2, y = (H - side) / 2, w = h = side;
    } else if (strncmp(region, "pct:", 4) == 0) {
        const char *f[4];
        size_t n[4];
        double v[4];
        if (!split(region + 4, 4, f, n)) {
            return fail(msg, len, 400, "region 'pct:x,y,w,h' needs four numbers: '%s'", region);
        }
        for (int i = 0; i < 4; i++) {
            if (!parse_float(f[i], n[i], &v[i])) {
                return fail(msg, len, 400, "region '%s': '%.*s' is not a non-negative number",
                            region, (int)n[i], f[i]);
            }
        }
        if (v[2] <= 0 || v[3] <= 0) {
            return fail(msg, len, 400, "region '%s' has a zero width or height", region);
        }
        for (int i = 0; i < 4; i++) { /* beyond 100 % is outside or cropped anyway */
            v[i] = v[i] > 1000.0 ? 1000.0 : v[i];
        }
        x = (int64_t)floor(v[0] / 100.0 * (double)W);
        y = (int64_t)floor(v[1] / 100.0 * (double)H);
        w = (int64_t)ceil((v[0] + v[2]) / 100.0 * (double)W) - x;
        h = (int64_t)ceil((v[1] + v[3]) / 100.0 * (double)H) - y;
    } else {
        const char *f[4];
        size_t n[4];
        int64_t v[4];
        if (!split(region, 4, f, n)) {
            return fail(msg, len, 400,
                        "region must be full, square, x,y,w,h or pct:x,y,w,h, not '%s'", region);
        }
        for (int i = 0; i < 4; i++) {
            if (!parse_uint(f[i], n[i], &v[i])) {
                return fail(msg, len, 400, "region '%s': '%.*s' is not a whole number", region,
                            (int)n[i], f[i]);
            }
        }
        x = v[0], y = v[1], w = v[2], h = v[3];
        if (w == 0 || h == 0) {
            return fail(msg, len, 400, "region '%s' has a zero width or height", region);
        }
    }
    if (x >= W || y >= H) {
        return fail(msg, len, 400, "region '%s' lies outside the %lldx%lld image", region,
                    (long long)W, (long long)H);
    }
    /* The part of the region inside the image (spec 4.1: cropped to the image). */
    r->x = x, r->y = y;
    r->w = x + w > W ? W - x : w;
    r->h = y + h > H ? H - y : h;
    if (r->w <= 0 || r->h <= 0) {
        return fail(msg, len, 400, "region '%s' is empty inside the image", region);
    }
    return 0;
}

/* The height for width `ow` keeping the region's aspect; a tile request (ow is the region's
 * width over an advertised scale factor, rounded up) gets the tile's height the same way. */
static int64_t height_for_width(const serve_render *r, int64_t ow, const int64_t *scales, int ns) {
    for (int i = 0; i < ns; i++) {
        if ((r->w + scales[i] - 1) / scales[i] == ow) {
            return (r->h + scales[i] - 1) / scales[i];
        }
    }
    double oh = fmin((double)r->h * (double)ow / (double)r->w, 1e15); /* no overflow */
    return oh < 1 ? 1 : (int64_t)llround(oh);
}

static int64_t width_for_height(const serve_render *r, int64_t oh, const int64_t *scales, int ns) {
    for (int i = 0; i < ns; i++) {
        if ((r->h + scales[i] - 1) / scales[i] == oh) {
            return (r->w + scales[i] - 1) / scales[i];
        }
    }
    double ow = fmin((double)r->w * (double)oh / (double)r->h, 1e15);
    return ow < 1 ? 1 : (int64_t)llround(ow);
}

static int parse_size(const char *size, serve_render *r, int64_t max_side, int64_t max_area,
                      const int64_t *scales, int ns, char *msg, size_t len) {
    const char *s = size;
    bool up = false, confined = false;
    if (*s == '^') {
        up = true, s++;
    }
    int64_t ow, oh;
    if (strcmp(s, "max") == 0) {
        double k = 1.0;
        if (r->w > max_side || r->h > max_side) {
            k = fmin((double)max_side / (double)r->w, (double)max_side / (double)r->h);
        }
        if ((double)r->w * (double)r->h * k * k > (double)max_area) {
            k = sqrt((double)max_area / ((double)r->w * (double)r->h));
        }
        ow = (int64_t)floor((double)r->w * k), oh = (int64_t)floor((double)r->h * k);
        ow = ow < 1 ? 1 : ow, oh = oh < 1 ? 1 : oh;
        if (k == 1.0) {
            ow = r->w, oh = r->h;
        }
    } else if (strncmp(s, "pct:", 4) == 0) {
        double p;
        if (!parse_float(s + 4, strlen(s + 4), &p) || p <= 0) {
            return fail(msg, len, 400, "size '%s': pct:n needs a positive number", size);
        }
        p = p > 1e6 ? 1e6 : p; /* far above any limit, and no overflow below */
        ow = (int64_t)llround((double)r->w * p / 100.0);
        oh = (int64_t)llround((double)r->h * p / 100.0);
        if (ow < 1 || oh < 1) {
            return fail(msg, len, 400, "size '%s' scales the region to nothing", size);
        }
        if (p > 100 && !up) {
            return fail(msg, len, 400, "size '%s' is above 100%% without '^'", size);
        }
    } else {
        if (*s == '!') {
            confined = true, s++;
        }
        const char *f[2];
        size_t n[2];
        if (!split(s, 2, f, n)) {
            return fail(msg, len, 400, "size must be max, w,, ,h, w,h, !w,h or pct:n, not '%s'",
                        size);
        }
        int64_t w = 0, h = 0;
        bool has_w = n[0] > 0, has_h = n[1] > 0;
        if ((has_w && !parse_uint(f[0], n[0], &w)) || (has_h && !parse_uint(f[1], n[1], &h)) ||
            (!has_w && !has_h) || (has_w && w == 0) || (has_h && h == 0)) {
            return fail(msg, len, 400, "size '%s': width and height must be whole numbers above 0",
                        size);
        }
        if (confined) {
            if (!has_w || !has_h) {
                return fail(msg, len, 400, "size '%s': !w,h needs both w and h", size);
            }
            double k = fmin((double)w / (double)r->w, (double)h / (double)r->h);
            ow = (int64_t)floor((double)r->w * k + 1e-9);
            oh = (int64_t)floor((double)r->h * k + 1e-9);
            ow = ow < 1 ? 1 : ow, oh = oh < 1 ? 1 : oh;
        } else if (has_w && has_h) {
            ow = w, oh = h;
        } else if (has_w) {
            ow = w, oh = height_for_width(r, w, scales, ns);
        } else {
            oh = h, ow = width_for_height(r, h, scales, ns);
        }
        if (!up && (ow > r->w || oh > r->h)) {
            return fail(msg, len, 400,
                        "size '%s' (%lldx%lld) is larger than the %lldx%lld region without '^'",
                        size, (long long)ow, (long long)oh, (long long)r->w, (long long)r->h);
        }
    }
    if (ow > max_side || oh > max_side || ow * oh > max_area) {
        return fail(msg, len, 400,
                    "size %lldx%lld is over the server's limits (maxWidth = maxHeight = %lld, "
                    "maxArea = %lld)",
                    (long long)ow, (long long)oh, (long long)max_side, (long long)max_area);
    }
    r->out_w = ow, r->out_h = oh;
    return 0;
}

int serve_iiif_parse(const char *region, const char *size, const char *rotation,
                     const char *quality_format, int64_t width, int64_t height, int64_t max_side,
                     int64_t max_area, const int64_t *scales, int n_scales, serve_render *out,
                     char *msg, size_t msg_len) {
    serve_render r;
    memset(&r, 0, sizeof r);
    int st = parse_region(region, width, height, &r, msg, msg_len);
    if (st == 0) {
        st = parse_size(size, &r, max_side, max_area, scales, n_scales, msg, msg_len);
    }
    if (st != 0) {
        return st;
    }
    const char *rot = rotation;
    if (*rot == '!') {
        r.mirror = true, rot++;
    }
    double deg;
    if (!parse_float(rot, strlen(rot), &deg) || deg > 360) {
        return fail(msg, msg_len, 400,
                    "rotation must be a number of degrees 0..360 (with an "
                    "optional leading '!'), not '%s'",
                    rotation);
    }
    double turns = deg / 90.0;
    if (turns != floor(turns)) {
        return fail(msg, msg_len, 501, "rotation '%s': only multiples of 90 are implemented",
                    rotation);
    }
    r.rotation = ((int)turns % 4) * 90;
    const char *dot = strrchr(quality_format, '.');
    if (dot == NULL) {
        return fail(msg, msg_len, 400, "'%s' is not quality.format", quality_format);
    }
    size_t qn = (size_t)(dot - quality_format);
    if (qn == 7 && strncmp(quality_format, "default", 7) == 0) {
        r.quality = SERVE_COLOR;
    } else if (qn == 5 && strncmp(quality_format, "color", 5) == 0) {
        r.quality = SERVE_COLOR;
    } else if (qn == 4 && strncmp(quality_format, "gray", 4) == 0) {
        r.quality = SERVE_GRAY;
    } else if (qn == 7 && strncmp(quality_format, "bitonal", 7) == 0) {
        r.quality = SERVE_BITONAL;
    } else {
        return fail(msg, msg_len, 400,
                    "quality must be default, color, gray or bitonal, not "
                    "'%.*s'",
                    (int)qn, quality_format);
    }
    const char *ext = dot + 1;
    if (strcmp(ext, "jpeg") == 0 || !serve_format_from_ext(ext, &r.format)) {
        static const char *const known[] = {"tif", "gif", "jp2", "pdf"};
        for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
            if (strcmp(ext, known[i]) == 0) {
                return fail(msg, msg_len, 501,
                            "format '%s' is not implemented (jpg, png, webp are)", ext);
            }
        }
        return fail(msg, msg_len, 400, "format must be jpg, png or webp, not '%s'", ext);
    }
    *out = r;
    return 0;
}

int serve_scale_factors(int64_t width, int64_t height, int64_t tile, int64_t *out, int max) {
    int n = 0;
    for (int64_t s = 1; n < max; s *= 2) {
        out[n++] = s;
        if ((width + s - 1) / s <= tile && (height + s - 1) / s <= tile) {
            break;
        }
    }
    return n;
}

char *serve_iiif_info(const char *base, int64_t width, int64_t height, int64_t tile,
                      int64_t max_side, int64_t max_area) {
    cJSON *root = cJSON_CreateObject();
    if (root == NULL) {
        return NULL;
    }
    cJSON_AddStringToObject(root, "@context", "http://iiif.io/api/image/3/context.json");
    cJSON_AddStringToObject(root, "id", base);
    cJSON_AddStringToObject(root, "type", "ImageService3");
    cJSON_AddStringToObject(root, "protocol", "http://iiif.io/api/image");
    cJSON_AddStringToObject(root, "profile", "level1");
    cJSON_AddNumberToObject(root, "width", (double)width);
    cJSON_AddNumberToObject(root, "height", (double)height);
    cJSON_AddNumberToObject(root, "maxWidth", (double)max_side);
    cJSON_AddNumberToObject(root, "maxHeight", (double)max_side);
    cJSON_AddNumberToObject(root, "maxArea", (double)max_area);
    int64_t scales[48];
    int ns = serve_scale_factors(width, height, tile, scales, 48);
    cJSON *sizes = cJSON_AddArrayToObject(root, "sizes");
    for (int i = ns - 1; i >= 0; i--) {
        int64_t w = (width + scales[i] - 1) / scales[i], h = (height + scales[i] - 1) / scales[i];
        if (w <= max_side && h <= max_side && w * h <= max_area) {
            cJSON *s = cJSON_CreateObject();
            cJSON_AddNumberToObject(s, "width", (double)w);
            cJSON_AddNumberToObject(s, "height", (double)h);
            cJSON_AddItemToArray(sizes, s);
        }
    }
    cJSON *tiles = cJSON_AddArrayToObject(root, "tiles");
    cJSON *t = cJSON_CreateObject();
    cJSON_AddNumberToObject(t, "width", (double)tile);
    cJSON_AddNumberToObject(t, "height", (double)tile);
    cJSON *sf = cJSON_AddArrayToObject(t, "scaleFactors");
    for (int i = 0; i < ns; i++) {
        cJSON_AddItemToArray(sf, cJSON_CreateNumber((double)scales[i]));
    }
    cJSON_AddItemToArray(tiles, t);
    static const char *const formats[] = {"png", "webp"};
    cJSON_AddItemToObject(root, "extraFormats", cJSON_CreateStringArray(formats, 2));
    static const char *const qualities[] = {"color", "gray", "bitonal"};
    cJSON_AddItemToObject(root, "extraQualities", cJSON_CreateStringArray(qualities, 3));
    static const char *const features[] = {
        "baseUriRedirect", "cors",         "jsonldMediaType", "mirroring",        "regionByPct",
        "regionByPx",      "regionSquare", "rotationBy90s",   "sizeByConfinedWh", "sizeByH",
        "sizeByPct",       "sizeByW",      "sizeByWh",        "sizeUpscaling"};
    cJSON_AddItemToObject(root, "extraFeatures",
                          cJSON_CreateStringArray(features, sizeof features / sizeof features[0]));
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return text;
}
