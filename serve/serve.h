/* serve.h — what the files of `slidepipe serve` share: the served set (slides and OME-Zarr
 * stores opened once at start, addressed in URLs by a short id and never by a path), the
 * server's limits, the request parsers of IIIF Image API 3 and Deep Zoom (pure functions, so
 * tests can feed them anything), the image encoders and the HTTP daemon's entry point. */
#ifndef SP_SERVE_H
#define SP_SERVE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "slidepipe.h"

/* One slide or store given on the command line. */
typedef struct serve_slide {
    char *path; /* as given; never derived from a URL */
    char *id;   /* [A-Za-z0-9_-]+, unique within the server */
    sp_slide *slide;
    int64_t width, height; /* level 0 */
    double mpp;            /* microns per level-0 pixel, 0 when unknown */
    double objective;      /* objective power, 0 when unknown */
    /* Overlays computed on first request, then kept (guarded by `lock`). */
    pthread_mutex_t lock;
    bool overlays_done;
    char *overlay_error; /* why the tissue overlays could not be computed */
    uint8_t *mask_png;
    size_t mask_png_len;
    double mask_downsample;
    int64_t mask_width, mask_height;
    char *grid_json;
} serve_slide;

/* A GeoJSON annotation file given with --annotations, served to every viewer. */
typedef struct serve_annotations {
    char *name; /* the file's base name, for the layer list */
    char *json; /* the file's bytes (checked by sp_annotations_load at start) */
    size_t len;
} serve_annotations;

typedef struct serve_config {
    const char *bind;        /* address to listen on; "127.0.0.1" unless told */
    int port;                /* 0 = any free port (printed on stdout) */
    int threads;             /* worker threads answering requests */
    int max_connections;     /* open connections at once */
    int max_per_client;      /* open connections from one address */
    int timeout_s;           /* idle connection timeout */
    int64_t max_side;        /* largest output width or height */
    int64_t max_area;        /* largest output width x height */
    const char *token;       /* when set, required on every request */
    const char *leaflet_dir; /* where Debian's libjs-leaflet lives */
} serve_config;

typedef struct serve_state {
    serve_config cfg;
    serve_slide *slides;
    int n_slides;
    serve_annotations *annotations;
    int n_annotations;
} serve_state;

/* ---- Image requests ------------------------------------------------------------------- */

typedef enum { SERVE_JPEG, SERVE_PNG, SERVE_WEBP } serve_format;
typedef enum { SERVE_COLOR, SERVE_GRAY, SERVE_BITONAL } serve_quality;

/* One rendered image: a level-0 region scaled to out_w x out_h, then turned and coloured. */
typedef struct serve_render {
    int64_t x, y, w, h;   /* region in level-0 pixels, inside the image */
    int64_t out_w, out_h; /* size before rotation */
    int rotation;         /* 0, 90, 180, 270 (clockwise) */
    bool mirror;          /* flip horizontally before rotating */
    serve_quality quality;
    serve_format format;
} serve_render;

/* Parse IIIF Image API 3 parameters (region, size, rotation, quality.format, each one path
 * segment, already percent-decoded) for an image of width x height into *out. Returns 0, or
 * the HTTP status (400 for bad syntax or a request outside the image or the limits, 501 for a
 * valid request of a feature not implemented) with `msg` saying why. `scales` lists the
 * advertised tile scale factors (so "w," tile requests get the tile's height exactly). */
int serve_iiif_parse(const char *region, const char *size, const char *rotation,
                     const char *quality_format, int64_t width, int64_t height, int64_t max_side,
                     int64_t max_area, const int64_t *scales, int n_scales, serve_render *out,
                     char *msg, size_t msg_len);

/* The scale factors advertised for tiles of an image: powers of two from 1 until the image fits
 * one tile. Returns the count (at most max). */
int serve_scale_factors(int64_t width, int64_t height, int64_t tile, int64_t *out, int max);

/* The info.json of an image (IIIF Image API 3, level 1 and the extra features implemented);
 * `base` is the image's base URI. Returns a malloc'd string or NULL. */
char *serve_iiif_info(const char *base, int64_t width, int64_t height, int64_t tile,
                      int64_t max_side, int64_t max_area);

/* Deep Zoom. */
#define SERVE_DZI_TILE 256

/* The highest Deep Zoom level of an image (level 0 is 1x1, the highest is full resolution). */
int serve_dzi_max_level(int64_t width, int64_t height);

/* The .dzi XML (tile size SERVE_DZI_TILE, no overlap, JPEG). Returns a malloc'd string. */
char *serve_dzi_xml(int64_t width, int64_t height);

/* Parse a Deep Zoom tile name "COL_ROW.EXT" at `level` into *out. Returns 0, 400 for bad
 * syntax or 404 for a tile outside the image, with `msg` saying why. */
int serve_dzi_parse(int level, const char *name, int64_t width, int64_t height, serve_render *out,
                    char *msg, size_t msg_len);

/* Read and encode one render from `slide`. On success *body is malloc'd (length *len) and
 * *mime names its type; returns 0. Otherwise an HTTP status (500 for a read error) and `msg`. */
int serve_render_image(sp_slide *slide, const serve_render *r, uint8_t **body, size_t *len,
                       const char **mime, char *msg, size_t msg_len);

/* ---- Encoders -------------------------------------------------------------------------- */

/* Encode width x height pixels (RGBA8 when channels is 4, RGB8 when 3, grey when 1, rows of
 * `stride` bytes) into a malloc'd buffer. JPEG drops alpha (pass RGB or grey). Returns false on
 * failure (out of memory). */
bool serve_encode(serve_format format, const uint8_t *px, int64_t width, int64_t height,
                  int64_t stride, int channels, uint8_t **out, size_t *out_len);

/* MIME type and file extension of a format. */
const char *serve_format_mime(serve_format format);
/* A format from its extension ("jpg", "jpeg", "png", "webp"); false for anything else. */
bool serve_format_from_ext(const char *ext, serve_format *out);

/* ---- Pages and overlays ----------------------------------------------------------------- */

/* The index page listing the slides, and a slide's viewer page (malloc'd HTML). */
char *serve_page_index(const serve_state *st);
char *serve_page_viewer(const serve_state *st, int index);

/* The overlays of a slide, computed on first use: the tissue mask as a PNG and the tile grid
 * with tissue and QC scores as JSON. Returns 0 or 500 with `msg`. */
int serve_overlays_get(serve_slide *s, char *msg, size_t msg_len);

/* ---- The daemon ------------------------------------------------------------------------ */

/* Run the HTTP server over `st` until SIGINT or SIGTERM. Prints the address it listens on as
 * one line on stdout. Returns a CLI exit code. */
int serve_run(serve_state *st);

#endif
