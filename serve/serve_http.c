/* serve_http.c — the HTTP side of `slidepipe serve` on libmicrohttpd: the daemon with its
 * bounds (connections in all and per client address, an idle timeout, a per-connection memory
 * limit that caps the request line and headers, a fixed pool of worker threads), the optional
 * token, and the routes. URLs name slides by their id, leaflet's files by a fixed table, never
 * by a path: no request can reach a file outside the served set, however it is encoded. */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "cli.h"
#include "serve.h"

#define MAX_SEGMENTS 8
#define MAX_SEGMENT 512

typedef struct reply {
    unsigned status;
    uint8_t *body;
    size_t len;
    const char *mime;
    bool cacheable;  /* tiles and images: the browser may keep them */
    bool set_cookie; /* a page opened with ?token=: keep the token in a cookie */
    char location[760];
} reply;

static void set_error(reply *rp, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_error(reply *rp, unsigned status, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    free(rp->body);
    rp->body = malloc(strlen(msg) + 40);
    if (rp->body != NULL) {
        rp->len = (size_t)sprintf((char *)rp->body, "%u: %s\n", status, msg);
    }
    rp->status = status;
    rp->mime = "text/plain; charset=utf-8";
    rp->cacheable = false;
}

static void set_text(reply *rp, char *text, const char *mime) {
    if (text == NULL) {
        set_error(rp, 500, "out of memory");
        return;
    }
    rp->status = 200;
    rp->body = (uint8_t *)text;
    rp->len = strlen(text);
    rp->mime = mime;
}

static serve_slide *find_slide(serve_state *st, const char *id, size_t n) {
    for (int i = 0; i < st->n_slides; i++) {
        if (strlen(st->slides[i].id) == n && memcmp(st->slides[i].id, id, n) == 0) {
            return &st->slides[i];
        }
    }
    return NULL;
}

/* The base URI of a slide's image service, from the request's Host header when it is a plain
 * host[:port], else from the address the server listens on. */
static void iiif_base(struct MHD_Connection *c, serve_state *st, const serve_slide *s, char *out,
                      size_t len) {
    const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host");
    bool ok = host != NULL && *host != '\0' && strlen(host) < 256;
    for (const char *p = host; ok && *p; p++) {
        ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
             strchr(".-:[]", *p) != NULL;
    }
    if (ok) {
        snprintf(out, len, "http://%s/iiif/%s", host, s->id);
    } else {
        snprintf(out, len, "http://%s:%d/iiif/%s", st->cfg.bind, st->cfg.port, s->id);
    }
}

static void render(reply *rp, serve_slide *s, const serve_render *r) {
    char msg[512];
    const char *mime;
    int status = serve_render_image(s->slide, r, &rp->body, &rp->len, &mime, msg, sizeof msg);
    if (status != 0) {
        set_error(rp, (unsigned)status, "%s", msg);
        return;
    }
    rp->status = 200;
    rp->mime = mime;
    rp->cacheable = true;
}

static void route_iiif(struct MHD_Connection *c, serve_state *st, char **seg, int n, reply *rp) {
    serve_slide *s = n >= 2 ? find_slide(st, seg[1], strlen(seg[1])) : NULL;
    if (s == NULL) {
        set_error(rp, 404, "no such image; /slides.json lists them");
        return;
    }
    char base[700];
    iiif_base(c, st, s, base, sizeof base);
    if (n == 2) { /* the base URI redirects to the image information */
        set_text(rp, strdup("see info.json\n"), "text/plain");
        if (rp->status == 200) {
            rp->status = 303;
            snprintf(rp->location, sizeof rp->location, "%s/info.json", base);
        }
        return;
    }
    if (n == 3 && strcmp(seg[2], "info.json") == 0) {
        const char *accept = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Accept");
        bool ld = accept != NULL && strstr(accept, "application/ld+json") != NULL;
        set_text(rp,
                 serve_iiif_info(base, s->width, s->height, SERVE_DZI_TILE, st->cfg.max_side,
                                 st->cfg.max_area),
                 ld ? "application/ld+json;profile=\"http://iiif.io/api/image/3/context.json\""
                    : "application/json");
        return;
    }
    if (n != 6) {
        set_error(rp, 400,
                  "an image request is /iiif/ID/REGION/SIZE/ROTATION/QUALITY.FORMAT (or "
                  "/iiif/ID/info.json)");
        return;
    }
    int64_t scales[48];
    int ns = serve_scale_factors(s->width, s->height, SERVE_DZI_TILE, scales, 48);
    serve_render r;
    char msg[512];
    int status =
        serve_iiif_parse(seg[2], seg[3], seg[4], seg[5], s->width, s->height, st->cfg.max_side,
                         st->cfg.max_area, scales, ns, &r, msg, sizeof msg);
    if (status != 0) {
        set_error(rp, (unsigned)status, "%s", msg);
        return;
    }
    render(rp, s, &r);
}

static void route_dzi(serve_state *st, char **seg, int n, reply *rp) {
    size_t len = strlen(seg[1]);
    if (n == 2 && len > 4 && strcmp(seg[1] + len - 4, ".dzi") == 0) {
        serve_slide *s = find_slide(st, seg[1], len - 4);
        if (s == NULL) {
            set_error(rp, 404, "no such slide '%.*s'", (int)(len - 4), seg[1]);
            return;
        }
        set_text(rp, serve_dzi_xml(s->width, s->height), "application/xml");
        return;
    }
    if (n == 4 && len > 6 && strcmp(seg[1] + len - 6, "_files") == 0) {
        serve_slide *s = find_slide(st, seg[1], len - 6);
        int64_t level;
        if (s == NULL) {
            set_error(rp, 404, "no such slide '%.*s'", (int)(len - 6), seg[1]);
            return;
        }
        if (!cli_parse_int(seg[2], 0, 62, &level)) {
            set_error(rp, 400, "Deep Zoom level must be a whole number, not '%s'", seg[2]);
            return;
        }
        serve_render r;
        char msg[512];
        int status = serve_dzi_parse((int)level, seg[3], s->width, s->height, &r, msg, sizeof msg);
        if (status != 0) {
            set_error(rp, (unsigned)status, "%s", msg);
            return;
        }
        render(rp, s, &r);
        return;
    }
    set_error(rp, 404, "Deep Zoom paths are /dzi/ID.dzi and /dzi/ID_files/LEVEL/COL_ROW.jpeg");
}

static char *slides_json(serve_state *st) {
    cJSON *root = cJSON_CreateArray();
    for (int i = 0; root != NULL && i < st->n_slides; i++) {
        const serve_slide *s = &st->slides[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "id", s->id);
        cJSON_AddStringToObject(o, "format", sp_slide_format(s->slide));
        cJSON_AddNumberToObject(o, "width", (double)s->width);
        cJSON_AddNumberToObject(o, "height", (double)s->height);
        cJSON_AddItemToObject(o, "mpp",
                              s->mpp > 0 ? cJSON_CreateNumber(s->mpp) : cJSON_CreateNull());
        cJSON_AddItemToObject(o, "objective_power",
                              s->objective > 0 ? cJSON_CreateNumber(s->objective)
                                               : cJSON_CreateNull());
        cJSON_AddItemToArray(root, o);
    }
    cJSON *doc = cJSON_CreateObject();
    cJSON_AddItemToObject(doc, "slides", root);
    cJSON *ann = cJSON_AddArrayToObject(doc, "annotations");
    for (int i = 0; i < st->n_annotations; i++) {
        cJSON_AddItemToArray(ann, cJSON_CreateString(st->annotations[i].name));
    }
    char *text = cJSON_PrintUnformatted(doc);
    cJSON_Delete(doc);
    return text;
}

static void route_slides(serve_state *st, char **seg, int n, reply *rp) {
    serve_slide *s = n >= 3 ? find_slide(st, seg[1], strlen(seg[1])) : NULL;
    if (s == NULL) {
        set_error(rp, 404, "no such slide; /slides.json lists them");
        return;
    }
    char msg[512];
    if (n == 3 && strcmp(seg[2], "info.json") == 0) {
        cJSON *doc = cli_info_json(s->slide);
        set_text(rp, doc ? cJSON_PrintUnformatted(doc) : NULL, "application/json");
        cJSON_Delete(doc);
    } else if (n == 3 && (strcmp(seg[2], "tissue.png") == 0 || strcmp(seg[2], "tiles.json") == 0)) {
        if (serve_overlays_get(s, msg, sizeof msg) != 0) {
            set_error(rp, 500, "%s", msg);
        } else if (strcmp(seg[2], "tissue.png") == 0) {
            rp->body = malloc(s->mask_png_len);
            if (rp->body == NULL) {
                set_error(rp, 500, "out of memory");
                return;
            }
            memcpy(rp->body, s->mask_png, s->mask_png_len);
            rp->len = s->mask_png_len;
            rp->status = 200;
            rp->mime = "image/png";
        } else {
            set_text(rp, strdup(s->grid_json), "application/json");
        }
    } else if (n == 4 && strcmp(seg[2], "associated") == 0) {
        const char *dot = strrchr(seg[3], '.');
        serve_format format;
        if (dot == NULL || !serve_format_from_ext(dot + 1, &format)) {
            set_error(rp, 400, "an associated image is NAME.jpg|png|webp, not '%s'", seg[3]);
            return;
        }
        const char *name = NULL;
        for (int32_t i = 0; i < sp_slide_associated_count(s->slide); i++) {
            const char *cand = sp_slide_associated_name(s->slide, i);
            if (strlen(cand) == (size_t)(dot - seg[3]) && memcmp(cand, seg[3], strlen(cand)) == 0) {
                name = cand;
            }
        }
        int64_t w, h;
        if (name == NULL || sp_slide_associated_dimensions(s->slide, name, &w, &h) != SP_OK) {
            set_error(rp, 404, "slide '%s' has no associated image '%.*s'", s->id,
                      (int)(dot - seg[3]), seg[3]);
            return;
        }
        if (w > st->cfg.max_side || h > st->cfg.max_side || w * h > st->cfg.max_area) {
            set_error(rp, 400, "associated image '%s' (%lldx%lld) is over the server's limits",
                      name, (long long)w, (long long)h);
            return;
        }
        uint8_t *px = malloc((size_t)(w * h * 4));
        sp_status rs =
            px ? sp_slide_read_associated(s->slide, name, SP_PIXEL_RGBA8, px, w * 4) : SP_E_NOMEM;
        if (rs != SP_OK) {
            set_error(rp, 500, "reading '%s' failed: %s", name, sp_status_str(rs));
        } else {
            int channels = 4;
            if (format == SERVE_JPEG) { /* drop alpha in place */
                for (int64_t i = 0; i < w * h; i++) {
                    memmove(px + i * 3, px + i * 4, 3);
                }
                channels = 3;
            }
            if (serve_encode(format, px, w, h, w * channels, channels, &rp->body, &rp->len)) {
                rp->status = 200;
                rp->mime = serve_format_mime(format);
                rp->cacheable = true;
            } else {
                set_error(rp, 500, "out of memory encoding '%s'", name);
            }
        }
        free(px);
    } else {
        set_error(rp, 404,
                  "slide paths are info.json, tissue.png, tiles.json, associated/NAME.EXT");
    }
}

/* Leaflet from Debian's libjs-leaflet: a fixed list of names, each read from its folder. */
static void route_leaflet(serve_state *st, const char *rest, reply *rp) {
    static const struct {
        const char *name, *mime;
    } files[] = {
        {"leaflet.js", "text/javascript"},        {"leaflet.css", "text/css"},
        {"images/layers.png", "image/png"},       {"images/layers-2x.png", "image/png"},
        {"images/marker-icon.png", "image/png"},  {"images/marker-icon-2x.png", "image/png"},
        {"images/marker-shadow.png", "image/png"}};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        if (strcmp(rest, files[i].name) != 0) {
            continue;
        }
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", st->cfg.leaflet_dir, files[i].name);
        FILE *f = fopen(path, "rb");
        if (f == NULL) {
            set_error(rp, 404, "%s is missing (apt-get install libjs-leaflet)", path);
            return;
        }
        size_t cap = 1 << 20, n = 0;
        uint8_t *buf = malloc(cap);
        while (buf != NULL) {
            size_t got = fread(buf + n, 1, cap - n, f);
            n += got;
            if (got == 0 || n == cap) {
                break;
            }
        }
        fclose(f);
        if (buf == NULL || n == cap) {
            free(buf);
            set_error(rp, 500, "%s could not be read (or is over 1 MiB)", path);
            return;
        }
        rp->body = buf, rp->len = n, rp->status = 200, rp->mime = files[i].mime;
        rp->cacheable = true;
        return;
    }
    set_error(rp, 404, "no such leaflet file");
}

static void route(struct MHD_Connection *c, serve_state *st, const char *url, reply *rp) {
    char copy[MAX_SEGMENTS * (MAX_SEGMENT + 1)];
    char *seg[MAX_SEGMENTS];
    int n = 0;
    if (url[0] != '/' || strlen(url) >= sizeof copy) {
        set_error(rp, 400, "the path must start with '/' and be under %zu bytes", sizeof copy);
        return;
    }
    if (strncmp(url, "/leaflet/", 9) == 0) {
        route_leaflet(st, url + 9, rp);
        return;
    }
    strcpy(copy, url + 1);
    for (char *p = copy; *p != '\0' || n == 0;) {
        char *slash = strchr(p, '/');
        if (slash != NULL) {
            *slash = '\0';
        }
        if (n == MAX_SEGMENTS || strlen(p) > MAX_SEGMENT) {
            set_error(rp, 400, "the path has too many or too long segments");
            return;
        }
        seg[n++] = p;
        if (slash == NULL) {
            break;
        }
        p = slash + 1;
    }
    if (n == 1 && seg[0][0] == '\0') {
        set_text(rp, serve_page_index(st), "text/html; charset=utf-8");
        rp->set_cookie = true;
    } else if (n == 1 && strcmp(seg[0], "slides.json") == 0) {
        set_text(rp, slides_json(st), "application/json");
    } else if (n == 2 && strcmp(seg[0], "viewer") == 0) {
        serve_slide *s = find_slide(st, seg[1], strlen(seg[1]));
        if (s == NULL) {
            set_error(rp, 404, "no such slide '%s'", seg[1]);
            return;
        }
        set_text(rp, serve_page_viewer(st, (int)(s - st->slides)), "text/html; charset=utf-8");
        rp->set_cookie = true;
    } else if (n == 2 && strcmp(seg[0], "annotations") == 0) {
        for (int i = 0; i < st->n_annotations; i++) {
            if (strcmp(seg[1], st->annotations[i].name) == 0) {
                rp->body = malloc(st->annotations[i].len);
                if (rp->body == NULL) {
                    set_error(rp, 500, "out of memory");
                    return;
                }
                memcpy(rp->body, st->annotations[i].json, st->annotations[i].len);
                rp->len = st->annotations[i].len, rp->status = 200;
                rp->mime = "application/geo+json";
                return;
            }
        }
        set_error(rp, 404, "no such annotation file");
    } else if (strcmp(seg[0], "iiif") == 0) {
        route_iiif(c, st, seg, n, rp);
    } else if (strcmp(seg[0], "dzi") == 0 && n >= 2) {
        route_dzi(st, seg, n, rp);
    } else if (strcmp(seg[0], "slides") == 0) {
        route_slides(st, seg, n, rp);
    } else {
        set_error(rp, 404, "no such page; / lists the slides");
    }
}

/* Whether the request carries the token (constant-time comparison of equal lengths). */
static bool token_ok(struct MHD_Connection *c, const char *token, bool *from_query) {
    const char *cands[3] = {
        MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "token"),
        MHD_lookup_connection_value(c, MHD_COOKIE_KIND, "sp_token"),
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization"),
    };
    if (cands[2] != NULL) {
        cands[2] = strncmp(cands[2], "Bearer ", 7) == 0 ? cands[2] + 7 : NULL;
    }
    size_t n = strlen(token);
    for (int i = 0; i < 3; i++) {
        if (cands[i] == NULL || strlen(cands[i]) != n) {
            continue;
        }
        unsigned diff = 0;
        for (size_t k = 0; k < n; k++) {
            diff |= (unsigned)(cands[i][k] ^ token[k]);
        }
        if (diff == 0) {
            *from_query = i == 0;
            return true;
        }
    }
    return false;
}

static enum MHD_Result answer(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **con_cls) {
    (void)version, (void)upload, (void)upload_size, (void)con_cls;
    serve_state *st = cls;
    reply rp = {0};
    bool query_token = false;
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        set_error(&rp, 405, "only GET and HEAD are served");
    } else if (st->cfg.token != NULL && !token_ok(c, st->cfg.token, &query_token)) {
        set_error(&rp, 401, "this server needs its token (?token=, a Bearer header or the cookie)");
    } else {
        route(c, st, url, &rp);
    }
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(rp.len, rp.body, MHD_RESPMEM_MUST_FREE);
    if (resp == NULL) {
        free(rp.body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", rp.mime ? rp.mime : "text/plain");
    MHD_add_response_header(resp, "Access-Control-Allow-Origin", "*");
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, "Cache-Control",
                            rp.cacheable && st->cfg.token == NULL ? "max-age=3600" : "no-store");
    if (rp.status == 405) {
        MHD_add_response_header(resp, "Allow", "GET, HEAD");
    }
    if (rp.location[0] != '\0') {
        MHD_add_response_header(resp, "Location", rp.location);
    }
    if (rp.set_cookie && query_token) {
        char cookie[600];
        snprintf(cookie, sizeof cookie, "sp_token=%s; Path=/; HttpOnly; SameSite=Strict",
                 st->cfg.token);
        MHD_add_response_header(resp, "Set-Cookie", cookie);
    }
    if (rp.mime != NULL && strncmp(rp.mime, "text/html", 9) == 0) {
        MHD_add_response_header(resp, "Content-Security-Policy",
                                "default-src 'self'; script-src 'self' 'unsafe-inline'; "
                                "style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:");
    }
    enum MHD_Result ret = MHD_queue_response(c, rp.status ? rp.status : 500, resp);
    MHD_destroy_response(resp);
    return ret;
}

int serve_run(serve_state *st) {
    struct sockaddr_in6 a6;
    struct sockaddr_in a4;
    struct sockaddr *addr;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL;
    memset(&a4, 0, sizeof a4);
    memset(&a6, 0, sizeof a6);
    if (inet_pton(AF_INET, st->cfg.bind, &a4.sin_addr) == 1) {
        a4.sin_family = AF_INET;
        a4.sin_port = htons((uint16_t)st->cfg.port);
        addr = (struct sockaddr *)&a4;
    } else if (inet_pton(AF_INET6, st->cfg.bind, &a6.sin6_addr) == 1) {
        a6.sin6_family = AF_INET6;
        a6.sin6_port = htons((uint16_t)st->cfg.port);
        addr = (struct sockaddr *)&a6;
        flags |= MHD_USE_IPv6;
    } else {
        return cli_fail("--bind '%s' is not a numeric IPv4 or IPv6 address", st->cfg.bind);
    }
    /* The signals that stop the server are taken by sigwait below, in no other thread. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, (uint16_t)st->cfg.port, NULL, NULL, answer, st, MHD_OPTION_SOCK_ADDR, addr,
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned)st->cfg.threads, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)st->cfg.max_connections, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        (unsigned)st->cfg.max_per_client, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)st->cfg.timeout_s, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)32768,
        MHD_OPTION_END);
    if (d == NULL) {
        return cli_fail("could not listen on %s:%d (in use, or not an address of this machine)",
                        st->cfg.bind, st->cfg.port);
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    if (info != NULL) {
        st->cfg.port = info->port;
    }
    bool v6 = addr->sa_family == AF_INET6;
    printf("serving %d slide%s on http://%s%s%s:%d/\n", st->n_slides, st->n_slides == 1 ? "" : "s",
           v6 ? "[" : "", st->cfg.bind, v6 ? "]" : "", st->cfg.port);
    fflush(stdout);
    bool loopback = (!v6 && (ntohl(a4.sin_addr.s_addr) >> 24) == 127) ||
                    (v6 && IN6_IS_ADDR_LOOPBACK(&a6.sin6_addr));
    if (!loopback && st->cfg.token == NULL) {
        fprintf(stderr,
                "slidepipe: warning: serving on %s without --token: anyone who can reach "
                "this address can read these slides\n",
                st->cfg.bind);
    }
    int sig = 0;
    sigwait(&stop, &sig);
    MHD_stop_daemon(d);
    return CLI_OK;
}
