/* api_misc.c — the small public calls that belong to no slide: version, status names, pixel
 * format sizes, and the options object that carries limits into sp_slide_open_with. */
#include <stdlib.h>

#include "base/limits.h"
#include "slidepipe.h"

#define SP_STR2(x) #x
#define SP_STR(x) SP_STR2(x)

struct sp_options {
    sp_limits limits;
    int64_t plane[3]; /* z, c, t to open (sp_options_set_plane) */
};

const char *sp_version(void) {
    return SP_STR(SP_VERSION_MAJOR) "." SP_STR(SP_VERSION_MINOR) "." SP_STR(SP_VERSION_PATCH);
}

const char *sp_status_str(sp_status status) {
    switch (status) {
    case SP_OK: return "ok";
    case SP_E_INVALID_ARG: return "invalid argument";
    case SP_E_IO: return "I/O error";
    case SP_E_NOT_A_SLIDE: return "not a recognised slide";
    case SP_E_CORRUPT: return "corrupt data";
    case SP_E_UNSUPPORTED: return "unsupported feature";
    case SP_E_NOMEM: return "out of memory";
    case SP_E_LIMIT: return "safety limit exceeded";
    case SP_E_NOT_FOUND: return "not found";
    }
    return "unknown status";
}

int sp_pixel_format_bytes(sp_pixel_format format) {
    switch (format) {
    case SP_PIXEL_RGBA8: return 4;
    case SP_PIXEL_RGB8: return 3;
    }
    return 0;
}

sp_status sp_options_create(sp_options **out) {
    if (out == NULL) {
        return SP_E_INVALID_ARG;
    }
    *out = malloc(sizeof **out);
    if (*out == NULL) {
        return SP_E_NOMEM;
    }
    sp_limits_default(&(*out)->limits);
    (*out)->plane[0] = (*out)->plane[1] = (*out)->plane[2] = 0;
    return SP_OK;
}

void sp_options_destroy(sp_options *options) { free(options); }

sp_status sp_options_set_limit(sp_options *options, sp_limit limit, int64_t value) {
    if (options == NULL || (unsigned)limit >= SP_LIMIT_COUNT_ || value <= 0) {
        return SP_E_INVALID_ARG;
    }
    options->limits.value[limit] = value;
    return SP_OK;
}

int64_t sp_options_get_limit(const sp_options *options, sp_limit limit) {
    if (options == NULL || (unsigned)limit >= SP_LIMIT_COUNT_) {
        return -1;
    }
    return options->limits.value[limit];
}

/* Used by slide.c to read the limits out of an options object. */
const sp_limits *sp_options_limits(const sp_options *options) { return &options->limits; }

sp_status sp_options_set_plane(sp_options *options, int64_t z, int64_t c, int64_t t) {
    if (options == NULL || z < 0 || c < 0 || t < 0) {
        return SP_E_INVALID_ARG;
    }
    options->plane[0] = z;
    options->plane[1] = c;
    options->plane[2] = t;
    return SP_OK;
}

void sp_options_plane(const sp_options *options, int64_t plane[3]) {
    for (int i = 0; i < 3; i++) {
        plane[i] = options != NULL ? options->plane[i] : 0;
    }
}
