/* cmd_bench.c — `slidepipe bench read SLIDE [--level L] [--size N] [--count N] [--threads T]
 * [--seed S] [--aligned] [--rgb] [--whole-level] [--json]`: how fast this machine can feed
 * regions out of a slide.
 *
 * Regions are drawn exactly as the OpenSlide baseline (bench/osbench.c in the shared folder)
 * draws them, so the two read the same pixels: worker k of T seeds glibc's rand_r with
 * S + 7919 k and takes regions k, k + T, k + 2T, ...; each region's level position is
 * (rand_r % (level width - N), rand_r % (level height - N)), scaled by the level's downsample to
 * level 0. --aligned rounds that position down to the tile grid. The regions are read through
 * sp_read_regions in batches of 8 per thread (into reused buffers, so memory stays bounded).
 * --whole-level instead reads the whole level into one buffer, one tile row per request. Buffers
 * are touched before the clock starts.
 * Figures: regions/s and MP/s of requested pixels, wall time, peak RSS, tile-cache counters.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

static const char USAGE[] =
    "slidepipe bench read SLIDE [--level L] [--size N] [--count N] [--threads T] [--seed S] "
    "[--aligned] [--rgb] [--whole-level] [--json]";

#define BATCH_PER_THREAD 8

typedef struct bench_opts {
    int64_t level, size, count, threads, seed;
    bool aligned, rgb, whole, json;
} bench_opts;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double peak_rss_mib(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_maxrss / 1024.0; /* Linux reports KiB */
}

/* The level-0 origin of every region, in osbench's order of draws (see the top). */
static void draw_regions(const bench_opts *o, int64_t lw, int64_t lh, int64_t tw, int64_t th,
                         double ds, int64_t *xs, int64_t *ys) {
    for (int64_t k = 0; k < o->threads; k++) {
        unsigned s = (unsigned)o->seed + (unsigned)(k * 7919);
        for (int64_t i = k; i < o->count; i += o->threads) {
            int64_t x = rand_r(&s) % (lw - o->size);
            int64_t y = rand_r(&s) % (lh - o->size);
            if (o->aligned) {
                x = x / tw * tw;
                y = y / th * th;
            }
            xs[i] = (int64_t)((double)x * ds);
            ys[i] = (int64_t)((double)y * ds);
        }
    }
}

static int parse(int argc, char **argv, bench_opts *o, const char **path) {
    static const struct option opts[] = {
        {"level", required_argument, NULL, 'l'},   {"size", required_argument, NULL, 'n'},
        {"count", required_argument, NULL, 'c'},   {"threads", required_argument, NULL, 't'},
        {"seed", required_argument, NULL, 's'},    {"aligned", no_argument, NULL, 'a'},
        {"rgb", no_argument, NULL, 'r'},           {"whole-level", no_argument, NULL, 'W'},
        {"json", no_argument, NULL, 'j'},          {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    *o = (bench_opts){.level = 0, .size = 256, .count = 1000, .threads = 0, .seed = 1};
    if (argc < 2 || strcmp(argv[1], "read") != 0) {
        if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
            printf("usage: %s\n", USAGE);
            return -1;
        }
        return cli_usage_error(USAGE, "expected 'bench read'");
    }
    argc--;
    argv++;
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        int64_t *v = NULL, lo = 0, hi = 0;
        switch (c) {
        case 'l': v = &o->level; hi = 1 << 20; break;
        case 'n': v = &o->size; lo = 1; hi = 1 << 14; break;
        case 'c': v = &o->count; lo = 1; hi = INT64_C(1) << 30; break;
        case 't': v = &o->threads; lo = 0; hi = 1024; break;
        case 's': v = &o->seed; lo = 0; hi = UINT32_MAX; break;
        case 'a': o->aligned = true; continue;
        case 'r': o->rgb = true; continue;
        case 'W': o->whole = true; continue;
        case 'j': o->json = true; continue;
        case 'h': printf("usage: %s\n", USAGE); return -1;
        case ':': return cli_usage_error(USAGE, "option '%s' needs a value", argv[optind - 1]);
        default: return cli_usage_error(USAGE, "unknown option '%s'", argv[optind - 1]);
        }
        if (!cli_parse_int(optarg, lo, hi, v)) {
            return cli_usage_error(USAGE, "bad value '%s' for %s (an integer in %lld..%lld)",
                                   optarg, argv[optind - 1], (long long)lo, (long long)hi);
        }
    }
    if (optind != argc - 1) {
        return cli_usage_error(USAGE, "expected exactly one SLIDE");
    }
    *path = argv[optind];
    return CLI_OK;
}

/* Read the regions in batches; returns the first failure's status. */
static sp_status run_regions(sp_slide *slide, const bench_opts *o, const int64_t *xs,
                             const int64_t *ys, uint8_t *bufs, int64_t per_batch) {
    sp_pixel_format fmt = o->rgb ? SP_PIXEL_RGB8 : SP_PIXEL_RGBA8;
    int64_t stride = o->size * sp_pixel_format_bytes(fmt);
    sp_region_request reqs[1024 * BATCH_PER_THREAD];
    sp_status st = SP_OK;
    for (int64_t i = 0; i < o->count && st == SP_OK; i += per_batch) {
        int64_t n = o->count - i < per_batch ? o->count - i : per_batch;
        for (int64_t k = 0; k < n; k++) {
            reqs[k] = (sp_region_request){slide, (int32_t)o->level, xs[i + k], ys[i + k],
                                          o->size, o->size, fmt,
                                          bufs + k * stride * o->size, stride};
        }
        st = sp_read_regions(reqs, (size_t)n, (int)o->threads, NULL);
    }
    return st;
}

/* Read the whole level into one buffer, one tile row (full width) per request. */
static sp_status run_whole(sp_slide *slide, const bench_opts *o, int64_t lw, int64_t lh,
                           int64_t th, double ds, uint8_t *buf) {
    sp_pixel_format fmt = o->rgb ? SP_PIXEL_RGB8 : SP_PIXEL_RGBA8;
    int64_t stride = lw * sp_pixel_format_bytes(fmt);
    int64_t rows = (lh + th - 1) / th;
    sp_region_request *reqs = calloc((size_t)rows, sizeof *reqs);
    if (reqs == NULL) {
        return SP_E_NOMEM;
    }
    for (int64_t r = 0; r < rows; r++) {
        int64_t h = lh - r * th < th ? lh - r * th : th;
        reqs[r] = (sp_region_request){slide, (int32_t)o->level, 0, (int64_t)((double)(r * th) * ds),
                                      lw, h, fmt, buf + r * th * stride, stride};
    }
    sp_status st = sp_read_regions(reqs, (size_t)rows, (int)o->threads, NULL);
    free(reqs);
    return st;
}

int cmd_bench(int argc, char **argv) {
    bench_opts o;
    const char *path = NULL;
    int rc = parse(argc, argv, &o, &path);
    if (rc != CLI_OK) {
        return rc < 0 ? CLI_OK : rc;
    }
    sp_slide *slide = cli_open_slide(path);
    if (slide == NULL) {
        return CLI_RUNTIME_ERROR;
    }
    int64_t lw = 0, lh = 0, tw = 1, th = 1;
    double ds = 1;
    if (o.level >= sp_slide_level_count(slide)) {
        rc = cli_usage_error(USAGE, "level %lld does not exist (the slide has %d levels)",
                             (long long)o.level, sp_slide_level_count(slide));
        sp_slide_close(slide);
        return rc;
    }
    sp_slide_level_dimensions(slide, (int32_t)o.level, &lw, &lh);
    sp_slide_level_tile_size(slide, (int32_t)o.level, &tw, &th);
    sp_slide_level_downsample(slide, (int32_t)o.level, &ds);
    if (o.threads == 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN); /* what sp_read_regions uses for 0 */
        o.threads = cores > 0 && cores <= 1024 ? cores : 1;
    }
    if (!o.whole && (lw <= o.size || lh <= o.size)) {
        sp_slide_close(slide);
        return cli_fail("level %lld (%lldx%lld) is not larger than a %lld-pixel region",
                        (long long)o.level, (long long)lw, (long long)lh, (long long)o.size);
    }
    int bpp = o.rgb ? 3 : 4;
    int64_t per_batch = o.threads * BATCH_PER_THREAD;
    uint64_t bytes = o.whole ? (uint64_t)lw * (uint64_t)lh * (uint64_t)bpp
                             : (uint64_t)per_batch * (uint64_t)(o.size * o.size * bpp);
    int64_t *xs = o.whole ? NULL : malloc((size_t)o.count * sizeof *xs);
    int64_t *ys = o.whole ? NULL : malloc((size_t)o.count * sizeof *ys);
    uint8_t *bufs = bytes <= (UINT64_C(64) << 30) ? malloc((size_t)bytes) : NULL;
    if (bufs == NULL || (!o.whole && (xs == NULL || ys == NULL))) {
        free(xs);
        free(ys);
        free(bufs);
        sp_slide_close(slide);
        return cli_fail("out of memory for %llu bytes of region buffers",
                        (unsigned long long)bytes);
    }
    if (!o.whole) {
        draw_regions(&o, lw, lh, tw, th, ds, xs, ys);
    }
    /* Touch the buffers first: the kernel's first-touch page faults are the caller's memory
     * cost, not the reader's (TurboJPEG's tjbench loop reuses its buffer the same way). */
    memset(bufs, 0, (size_t)bytes);
    double t0 = now_s();
    sp_status st = o.whole ? run_whole(slide, &o, lw, lh, th, ds, bufs)
                           : run_regions(slide, &o, xs, ys, bufs, per_batch);
    double secs = now_s() - t0;
    if (st != SP_OK) {
        const char *msg = sp_slide_error(slide);
        rc = cli_fail("%s: %s", path, msg ? msg : sp_status_str(st));
    } else {
        double regions = o.whole ? 1.0 : (double)o.count;
        double pixels = o.whole ? (double)lw * (double)lh : regions * (double)(o.size * o.size);
        double secs_safe = secs > 1e-9 ? secs : 1e-9;
        sp_cache_stats cs = {.struct_size = sizeof cs};
        sp_cache_get_stats(&cs);
        if (o.json) {
            printf("{\"slide\": \"%s\", \"mode\": \"%s\", \"level\": %lld, \"size\": %lld, "
                   "\"count\": %lld, \"threads\": %lld, \"seed\": %lld, \"aligned\": %s, "
                   "\"format\": \"%s\", \"seconds\": %.6f, \"regions_per_s\": %.3f, "
                   "\"mp_per_s\": %.3f, \"peak_rss_mib\": %.1f, \"cache\": {\"capacity_bytes\": "
                   "%lld, \"used_bytes\": %lld, \"hits\": %lld, \"misses\": %lld}}\n",
                   path, o.whole ? "whole-level" : "regions", (long long)o.level,
                   (long long)(o.whole ? lw : o.size), (long long)(o.whole ? 1 : o.count),
                   (long long)o.threads, (long long)o.seed, o.aligned ? "true" : "false",
                   o.rgb ? "rgb8" : "rgba8", secs, regions / secs_safe,
                   pixels / secs_safe / 1e6, peak_rss_mib(), (long long)cs.capacity_bytes,
                   (long long)cs.used_bytes, (long long)cs.hits, (long long)cs.misses);
        } else if (o.whole) {
            printf("read level %lld (%lldx%lld) whole on %lld threads in %.3f s: %.1f MP/s, "
                   "peak RSS %.0f MiB\n",
                   (long long)o.level, (long long)lw, (long long)lh, (long long)o.threads, secs,
                   pixels / secs_safe / 1e6, peak_rss_mib());
        } else {
            printf("read %lld %s %lldx%lld regions of level %lld on %lld threads in %.3f s: "
                   "%.1f regions/s, %.1f MP/s, peak RSS %.0f MiB, cache hits %lld misses %lld\n",
                   (long long)o.count, o.aligned ? "aligned" : "unaligned", (long long)o.size,
                   (long long)o.size, (long long)o.level, (long long)o.threads, secs,
                   regions / secs_safe, pixels / secs_safe / 1e6, peak_rss_mib(),
                   (long long)cs.hits, (long long)cs.misses);
        }
    }
    free(xs);
    free(ys);
    free(bufs);
    sp_slide_close(slide);
    return rc;
}
