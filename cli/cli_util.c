/* cli_util.c — shared helpers of the command-line front end (see cli.h). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "png_encode.h"

static void print_one_line(const char *fmt, va_list ap) {
    char msg[2048];
    vsnprintf(msg, sizeof msg, fmt, ap);
    for (char *p = msg; *p; p++) {
        if (*p == '\n' || *p == '\r') {
            *p = ' ';
        }
    }
    fprintf(stderr, "slidepipe: %s\n", msg);
}

int cli_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    print_one_line(fmt, ap);
    va_end(ap);
    return CLI_RUNTIME_ERROR;
}

int cli_usage_error(const char *usage, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    print_one_line(fmt, ap);
    va_end(ap);
    fprintf(stderr, "usage: %s\n", usage);
    return CLI_USAGE_ERROR;
}

int cli_option_other(const char *usage, int code, char **argv) {
    if (code == 'h') {
        printf("usage: %s\n", usage);
        return CLI_OK;
    }
    if (code == ':') {
        return cli_usage_error(usage, "option '%s' needs a value", argv[optind - 1]);
    }
    return cli_usage_error(usage, "unknown option '%s'", argv[optind - 1]);
}

bool cli_parse_int(const char *text, int64_t min, int64_t max, int64_t *out) {
    if (text == NULL || *text == '\0') {
        return false;
    }
    errno = 0;
    char *end;
    long long v = strtoll(text, &end, 10);
    if (errno != 0 || *end != '\0' || v < min || v > max) {
        return false;
    }
    *out = v;
    return true;
}

sp_slide *cli_open_slide(const char *path) {
    sp_slide *slide = NULL;
    char err[1024];
    if (sp_slide_open(path, &slide, err, sizeof err) != SP_OK) {
        cli_fail("%s", err);
        return NULL;
    }
    return slide;
}

sp_slide *cli_open_slide_plane(const char *path, const int64_t plane[3]) {
    if (plane[0] == 0 && plane[1] == 0 && plane[2] == 0) {
        return cli_open_slide(path);
    }
    sp_options *options = NULL;
    if (sp_options_create(&options) != SP_OK) {
        cli_fail("out of memory");
        return NULL;
    }
    sp_options_set_plane(options, plane[0], plane[1], plane[2]);
    sp_slide *slide = NULL;
    char err[1024];
    sp_status st = sp_slide_open_with(path, options, &slide, err, sizeof err);
    sp_options_destroy(options);
    if (st != SP_OK) {
        cli_fail("%s", err);
        return NULL;
    }
    return slide;
}

bool cli_slide_icc(sp_slide *slide) {
    char err[1024];
    sp_status st = sp_slide_set_icc_transform(slide, 1, err, sizeof err);
    if (st != SP_OK && st != SP_E_NOT_FOUND) {
        cli_fail("%s", err);
        return false;
    }
    return true;
}

int cli_plane_option(int code, const char *arg, int64_t plane[3], const char *usage) {
    int axis = code == 'Z' ? 0 : code == 'C' ? 1 : 2;
    if (!cli_parse_int(arg, 0, INT64_C(1) << 31, &plane[axis])) {
        return cli_usage_error(usage, "bad value '%s' for --%c (an integer from 0)", arg,
                               "zct"[axis]);
    }
    return CLI_OK;
}

bool cli_has_extension(const char *path, const char *ext) {
    size_t n = strlen(path), e = strlen(ext);
    return n > e && strcasecmp(path + n - e, ext) == 0;
}

bool cli_write_image(const char *path, const uint8_t *rgba, int64_t w, int64_t h, int64_t stride,
                     bool raw) {
    if (!raw && (w > 0x7fffffff || h > 0x7fffffff || w == 0 || h == 0)) {
        cli_fail("%s: a PNG cannot hold %lldx%lld pixels", path, (long long)w, (long long)h);
        return false;
    }
    char *tmp = NULL;
    FILE *f = cli_create_temp(path, &tmp);
    if (f == NULL) {
        return false;
    }
    bool ok;
    if (raw) {
        ok = true;
        for (int64_t y = 0; ok && y < h; y++) {
            ok = fwrite(rgba + y * stride, 4, (size_t)w, f) == (size_t)w;
        }
    } else {
        uint8_t *png = NULL;
        size_t len = 0;
        ok = png_encode(rgba, w, h, stride, 4, 3, &png, &len) && fwrite(png, 1, len, f) == len;
        free(png);
    }
    return cli_commit_temp(f, tmp, path, ok);
}

FILE *cli_create_temp(const char *path, char **tmp_out) {
    *tmp_out = NULL;
    size_t n = strlen(path) + 16;
    char *tmp = malloc(n);
    if (tmp == NULL) {
        cli_fail("out of memory");
        return NULL;
    }
    snprintf(tmp, n, "%s.tmp-XXXXXX", path);
    int fd = mkstemp(tmp);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (f == NULL) {
        cli_fail("cannot create %s: %s", path, strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        free(tmp);
        return NULL;
    }
    /* mkstemp makes the file private (0600); give it the mode a plain create would. */
    mode_t mask = umask(0);
    umask(mask);
    (void)fchmod(fd, 0666 & ~mask);
    *tmp_out = tmp;
    return f;
}

bool cli_commit_temp(FILE *f, char *tmp, const char *path, bool ok) {
    int saved = 0;
    if (fflush(f) != 0 || ferror(f)) {
        saved = errno;
        ok = false;
    }
    if (fclose(f) != 0 && ok) {
        saved = errno;
        ok = false;
    }
    if (ok && rename(tmp, path) != 0) {
        saved = errno;
        ok = false;
    }
    if (!ok) {
        unlink(tmp);
        cli_fail("cannot write %s: %s", path, strerror(saved ? saved : EIO));
    }
    free(tmp);
    return ok;
}

double cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void cli_progress_show(void *user, int64_t done, int64_t total) {
    cli_progress *p = user;
    double t = cli_now();
    if (done < total && t - p->last_print < 0.2) {
        return;
    }
    p->last_print = t;
    double frac = total > 0 ? (double)done / (double)total : 1.0;
    double elapsed = t - p->start;
    double mps = elapsed > 0 ? frac * p->pixels / elapsed / 1e6 : 0;
    double eta = frac > 0 ? elapsed * (1 - frac) / frac : 0;
    int eta_s = (int)(eta + 0.5);
    fprintf(stderr, "\r%s: %5.1f%%  %lld/%lld %s  %.0f MP/s  ETA %d:%02d   ", p->label, frac * 100,
            (long long)done, (long long)total, p->unit, mps, eta_s / 60, eta_s % 60);
    fflush(stderr);
    p->shown = true;
}

void cli_json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            fputc('\\', f);
            fputc(*p, f);
        } else if (*p < 0x20) {
            fprintf(f, "\\u%04x", *p);
        } else {
            fputc(*p, f);
        }
    }
    fputc('"', f);
}

bool cli_parse_name(const char *text, const char *const *names, int count, int *out) {
    for (int i = 0; i < count; i++) {
        if (strcmp(text, names[i]) == 0) {
            *out = i;
            return true;
        }
    }
    return false;
}

int cli_parse_codec(const char *usage, const char *text, int64_t *codec) {
    sp_zarr_codec c;
    if (sp_zarr_codec_from_name(text, &c) != SP_OK) {
        return cli_usage_error(usage, "bad --codec '%s' (zstd, blosc-lz4, blosc-zstd, gzip or none)",
                               text);
    }
    *codec = c;
    return CLI_OK;
}

int cli_check_codec_level(const char *usage, int codec, int64_t level, const char *option) {
    int max = 0;
    if (level <= 0 || sp_zarr_codec_levels((sp_zarr_codec)codec, NULL, &max, NULL) != SP_OK ||
        level <= max) {
        return CLI_OK;
    }
    if (max == 0) {
        return cli_usage_error(usage, "--codec none takes no %s", option);
    }
    return cli_usage_error(usage, "%s %lld is out of range for %s (1..%d)", option,
                           (long long)level, sp_zarr_codec_name((sp_zarr_codec)codec), max);
}

/* OpenJPEG allocates and frees tile-sized buffers for every JPEG 2000 tile it decodes. Above
 * glibc's mmap threshold each such block is a fresh mapping, so every decode paid page faults
 * and the kernel's zeroing of new pages: about a third of a J2K region read's time (see
 * docs/reading.md). Kept in the heap instead, the blocks are reused. The trim threshold keeps
 * freed heap from being handed back at every free; both settings are the process's, so the
 * library leaves them to its programs. */
void cli_tune_allocator(void) {
    mallopt(M_MMAP_THRESHOLD, 64 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
}

int cli_parse_json_only(int argc, char **argv, const char *usage, int nargs, const char *what,
                        bool *json) {
    static const struct option opts[] = {
        {"json", no_argument, NULL, 'j'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    *json = false;
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        switch (c) {
        case 'j': *json = true; break;
        case 'h': printf("usage: %s\n", usage); return -1;
        default: return cli_usage_error(usage, "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (argc - optind != nargs) {
        return nargs == 0 ? cli_usage_error(usage, "unexpected argument '%s'", argv[optind])
                          : cli_usage_error(usage, "expected exactly %s", what);
    }
    return CLI_OK;
}

int cli_print_json(cJSON *root, bool compact) {
    char *text = root == NULL ? NULL : compact ? cJSON_PrintUnformatted(root) : cJSON_Print(root);
    cJSON_Delete(root);
    if (text == NULL) {
        return cli_fail("out of memory formatting JSON");
    }
    puts(text);
    free(text);
    return CLI_OK;
}

int cli_parse_max_side(const char *usage, const char *text, int64_t *out) {
    if (!cli_parse_int(text, 1, 16384, out)) {
        return cli_usage_error(usage, "bad --max-side '%s' (an integer in 1..16384)", text);
    }
    return CLI_OK;
}

int cli_batch_status(int64_t failed, int64_t total) {
    if (failed > 0) {
        fprintf(stderr, "slidepipe: %lld of %lld slides failed\n", (long long)failed,
                (long long)total);
        return CLI_PARTIAL_FAILURE;
    }
    return CLI_OK;
}
