/* cmd_serve.c — `slidepipe serve PATH... [--port N] [--bind ADDR] [--token T] ...`: opens every
 * slide and OME-Zarr store given (local or remote) once, checks the annotation files, gives
 * each slide a short URL id, and runs the HTTP server (serve_http.c) until interrupted. Safe by
 * default: loopback only, bounded connections, request and image sizes, an idle timeout. */
#include <ctype.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "serve.h"

static const char USAGE[] =
    "slidepipe serve PATH... [--port N] [--bind ADDR] [--token T] [--annotations FILE.geojson]...\n"
    "  [--threads N] [--max-connections N] [--max-per-client N] [--timeout S] [--max-size N]\n"
    "  [--leaflet DIR]\n"
    "  PATH: slides and OME-Zarr stores (local paths or URLs), each served under a short id.\n"
    "  --port N            port (default 8000; 0 takes a free one, printed on stdout)\n"
    "  --bind ADDR         numeric address to listen on (default 127.0.0.1, loopback only)\n"
    "  --token T           require T on every request (?token=T once in a browser, then a\n"
    "                      cookie; or 'Authorization: Bearer T'); also SLIDEPIPE_SERVE_TOKEN\n"
    "  --annotations FILE  a GeoJSON file shown over every viewer (may repeat, up to 16)\n"
    "  --threads N         worker threads (default: cores, at least 2)\n"
    "  --max-connections N open connections at once (default 256)\n"
    "  --max-per-client N  open connections from one address (default 64)\n"
    "  --timeout S         close a connection idle for S seconds (default 15)\n"
    "  --max-size N        largest image side served (default 4096; area at most N x N)\n"
    "  --leaflet DIR       Debian's libjs-leaflet (default /usr/share/javascript/leaflet)";

#define MAX_ANNOTATIONS 16
#define MAX_ANNOTATION_BYTES (INT64_C(64) << 20)

/* A URL id from a path: the last path segment before its first dot, other characters than
 * letters, digits, '-' and '_' as '_', at most 48 characters, then "-2", "-3"... if taken. */
static char *make_id(const char *path, const serve_slide *taken, int n_taken) {
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/') {
        len--;
    }
    size_t start = len;
    while (start > 0 && path[start - 1] != '/') {
        start--;
    }
    char base[64];
    size_t k = 0;
    for (size_t i = start; i < len && path[i] != '.' && k < 48; i++) {
        unsigned char ch = (unsigned char)path[i];
        base[k++] = (isalnum(ch) || ch == '-' || ch == '_') ? (char)ch : '_';
    }
    if (k == 0) {
        base[k++] = 's';
    }
    base[k] = '\0';
    char *id = malloc(64);
    if (id == NULL) {
        return NULL;
    }
    for (int suffix = 1;; suffix++) {
        if (suffix == 1) {
            snprintf(id, 64, "%s", base);
        } else {
            snprintf(id, 64, "%s-%d", base, suffix);
        }
        bool clash = false;
        for (int i = 0; i < n_taken && !clash; i++) {
            clash = strcmp(taken[i].id, id) == 0;
        }
        if (!clash) {
            return id;
        }
    }
}

static double number_property(const sp_slide *slide, const char *key) {
    const char *v = sp_slide_property_value(slide, key);
    if (v == NULL) {
        return 0;
    }
    char *end;
    double d = strtod(v, &end);
    return (end != v && *end == '\0' && d > 0 && d < 1e6) ? d : 0;
}

static bool load_annotations(const char *path, serve_annotations *out) {
    char err[512];
    sp_annotations *ann = NULL;
    if (sp_annotations_load(path, &ann, err, sizeof err) != SP_OK) {
        cli_fail("%s", err);
        return false;
    }
    sp_annotations_free(ann);
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        cli_fail("%s: cannot be read (only local annotation files are served)", path);
        return false;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf != NULL) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap || (int64_t)cap >= MAX_ANNOTATION_BYTES) {
            break;
        }
        cap *= 2;
        char *p = realloc(buf, cap + 1);
        if (p == NULL) {
            free(buf);
        }
        buf = p;
    }
    bool err_read = ferror(f) != 0;
    fclose(f);
    if (buf == NULL || err_read || n == cap) {
        free(buf);
        cli_fail("%s: cannot be read whole (at most 64 MiB)", path);
        return false;
    }
    buf[n] = '\0';
    const char *slash = strrchr(path, '/');
    out->name = strdup(slash ? slash + 1 : path);
    out->json = buf;
    out->len = n;
    for (char *p = out->name; p && *p; p++) { /* a plain URL segment */
        if (!isalnum((unsigned char)*p) && *p != '.' && *p != '-' && *p != '_') {
            *p = '_';
        }
    }
    return out->name != NULL;
}

static void free_state(serve_state *st) {
    for (int i = 0; i < st->n_slides; i++) {
        serve_slide *s = &st->slides[i];
        sp_slide_close(s->slide);
        free(s->id);
        free(s->mask_png);
        free(s->grid_json);
        free(s->overlay_error);
        pthread_mutex_destroy(&s->lock);
    }
    free(st->slides);
    for (int i = 0; i < st->n_annotations; i++) {
        free(st->annotations[i].name);
        free(st->annotations[i].json);
    }
    free(st->annotations);
}

int cmd_serve(int argc, char **argv) {
    static const struct option opts[] = {{"port", required_argument, NULL, 'p'},
                                         {"bind", required_argument, NULL, 'b'},
                                         {"token", required_argument, NULL, 't'},
                                         {"annotations", required_argument, NULL, 'a'},
                                         {"threads", required_argument, NULL, 'j'},
                                         {"max-connections", required_argument, NULL, 'c'},
                                         {"max-per-client", required_argument, NULL, 'C'},
                                         {"timeout", required_argument, NULL, 'T'},
                                         {"max-size", required_argument, NULL, 'm'},
                                         {"leaflet", required_argument, NULL, 'L'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    serve_state st = {.cfg = {.bind = "127.0.0.1",
                              .port = 8000,
                              .threads = cores > 2 ? (int)cores : 2,
                              .max_connections = 256,
                              .max_per_client = 64,
                              .timeout_s = 15,
                              .max_side = 4096,
                              .token = getenv("SLIDEPIPE_SERVE_TOKEN"),
                              .leaflet_dir = "/usr/share/javascript/leaflet"}};
    const char *ann_paths[MAX_ANNOTATIONS];
    int n_ann = 0;
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        int64_t v = 0;
        switch (c) {
        case 'b': st.cfg.bind = optarg; continue;
        case 't': st.cfg.token = optarg; continue;
        case 'L': st.cfg.leaflet_dir = optarg; continue;
        case 'a':
            if (n_ann == MAX_ANNOTATIONS) {
                return cli_usage_error(USAGE, "at most %d --annotations files", MAX_ANNOTATIONS);
            }
            ann_paths[n_ann++] = optarg;
            continue;
        case 'h':
        case ':':
        case '?': return cli_option_other(USAGE, c, argv);
        default: break;
        }
        static const struct {
            int opt;
            int64_t lo, hi;
        } ranges[] = {{'p', 0, 65535},  {'j', 1, 256},  {'c', 1, 100000},
                      {'C', 1, 100000}, {'T', 1, 3600}, {'m', 64, 65536}};
        for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++) {
            if (ranges[i].opt != c) {
                continue;
            }
            if (!cli_parse_int(optarg, ranges[i].lo, ranges[i].hi, &v)) {
                return cli_usage_error(USAGE, "bad value '%s' for %s (%lld..%lld)", optarg,
                                       argv[optind - 1], (long long)ranges[i].lo,
                                       (long long)ranges[i].hi);
            }
        }
        switch (c) {
        case 'p': st.cfg.port = (int)v; break;
        case 'j': st.cfg.threads = (int)v; break;
        case 'c': st.cfg.max_connections = (int)v; break;
        case 'C': st.cfg.max_per_client = (int)v; break;
        case 'T': st.cfg.timeout_s = (int)v; break;
        case 'm': st.cfg.max_side = v; break;
        default: break;
        }
    }
    st.cfg.max_area = st.cfg.max_side * st.cfg.max_side;
    if (st.cfg.token != NULL &&
        (strlen(st.cfg.token) < 8 || strlen(st.cfg.token) > 256 ||
         strspn(st.cfg.token, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnop"
                              "qrstuvwxyz0123456789-_.~") != strlen(st.cfg.token))) {
        return cli_usage_error(USAGE, "the token must be 8..256 letters, digits or -_.~");
    }
    if (optind >= argc) {
        return cli_usage_error(USAGE, "expected at least one PATH");
    }
    st.slides = calloc((size_t)(argc - optind), sizeof *st.slides);
    st.annotations = calloc((size_t)n_ann + 1, sizeof *st.annotations);
    if (st.slides == NULL || st.annotations == NULL) {
        free(st.slides);
        free(st.annotations);
        return cli_fail("out of memory");
    }
    int rc = CLI_OK;
    for (int i = optind; i < argc && rc == CLI_OK; i++) {
        serve_slide *s = &st.slides[st.n_slides];
        s->slide = cli_open_slide(argv[i]);
        if (s->slide == NULL) {
            rc = CLI_RUNTIME_ERROR;
            break;
        }
        pthread_mutex_init(&s->lock, NULL);
        st.n_slides++;
        s->path = argv[i];
        s->id = make_id(argv[i], st.slides, st.n_slides - 1);
        if (s->id == NULL) {
            rc = cli_fail("out of memory");
            break;
        }
        sp_slide_level_dimensions(s->slide, 0, &s->width, &s->height);
        s->mpp = number_property(s->slide, SP_PROPERTY_MPP_X);
        s->objective = number_property(s->slide, SP_PROPERTY_OBJECTIVE_POWER);
    }
    for (int i = 0; i < n_ann && rc == CLI_OK; i++) {
        if (!load_annotations(ann_paths[i], &st.annotations[st.n_annotations])) {
            rc = CLI_RUNTIME_ERROR;
        } else {
            st.n_annotations++;
        }
    }
    if (rc == CLI_OK) {
        rc = serve_run(&st);
    }
    free_state(&st);
    return rc;
}
