/* cmd_tiles.c — `slidepipe tiles SLIDE --size N [--level L] [--stride S] [--min-tissue F]
 * [--max-side N] [--qc [--threads T]] [--json]`: the tiles of a level's grid that hold enough
 * tissue (sp_tissue_mask_compute, then sp_tissue_tiles; docs/tissue.md), one "x y tissue" line
 * each (level-0 top-left, fraction to 4 decimals), or one JSON object with the full-precision
 * fractions, for a training loader to read patches from. --qc adds each tile's quality scores
 * (sp_tile_qc_compute; docs/qc.md) to its line, or a "qc" list beside "tiles" in the JSON. */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char USAGE[] = "slidepipe tiles SLIDE --size N [--level L] [--stride S (default N)] "
                            "[--min-tissue F (default 0.5)] [--max-side N (default 2048)] "
                            "[--qc [--threads T (default all cores)]] [--json]";

static const char *const QC_FIELDS[7] = {"blur",      "pen",  "pen_blue",  "pen_green",
                                         "pen_black", "fold", "background"};

static void qc_values(const sp_tile_qc *q, double v[7]) {
    v[0] = q->blur, v[1] = q->pen, v[2] = q->pen_blue, v[3] = q->pen_green;
    v[4] = q->pen_black, v[5] = q->fold, v[6] = q->background;
}

/* A plain decimal number in [0, 1] ("0.5", "1", ".25", "5e-1"); false on anything else,
 * including hexadecimal, "nan" and "inf", which strtod would take. */
static bool parse_fraction(const char *text, double *out) {
    if (*text == '\0' || strspn(text, "0123456789.eE+-") != strlen(text)) {
        return false;
    }
    char *end;
    double v = strtod(text, &end);
    if (end == text || *end != '\0' || !(v >= 0 && v <= 1)) {
        return false;
    }
    *out = v;
    return true;
}

static int print_json(int64_t level, int64_t size, int64_t stride, const sp_tile *tiles,
                      size_t count, const sp_tile_qc *qc) {
    cJSON *root = cJSON_CreateObject();
    cJSON *list = cJSON_CreateArray();
    bool ok = root != NULL && list != NULL;
    if (ok) {
        cJSON_AddNumberToObject(root, "level", (double)level);
        cJSON_AddNumberToObject(root, "size", (double)size);
        cJSON_AddNumberToObject(root, "stride", (double)stride);
        cJSON_AddNumberToObject(root, "count", (double)count);
        cJSON_AddItemToObject(root, "tiles", list);
        list = NULL;
    }
    cJSON *tile_list = ok ? cJSON_GetObjectItem(root, "tiles") : NULL;
    for (size_t i = 0; ok && i < count; i++) {
        const double v[3] = {(double)tiles[i].x, (double)tiles[i].y, tiles[i].tissue};
        cJSON *t = cJSON_CreateDoubleArray(v, 3);
        ok = t != NULL && cJSON_AddItemToArray(tile_list, t);
    }
    cJSON *qc_list = ok && qc != NULL ? cJSON_AddArrayToObject(root, "qc") : NULL;
    ok = ok && (qc == NULL || qc_list != NULL);
    for (size_t i = 0; ok && qc != NULL && i < count; i++) {
        double v[7];
        qc_values(&qc[i], v);
        cJSON *o = cJSON_CreateObject();
        ok = o != NULL && cJSON_AddItemToArray(qc_list, o);
        for (int k = 0; ok && k < 7; k++) {
            ok = cJSON_AddNumberToObject(o, QC_FIELDS[k], v[k]) != NULL;
        }
    }
    cJSON_Delete(list);
    if (!ok) {
        cJSON_Delete(root);
        root = NULL;
    }
    return cli_print_json(root, true);
}

int cmd_tiles(int argc, char **argv) {
    static const struct option opts[] = {
        {"size", required_argument, NULL, 's'},     {"level", required_argument, NULL, 'l'},
        {"stride", required_argument, NULL, 't'},   {"min-tissue", required_argument, NULL, 'f'},
        {"max-side", required_argument, NULL, 'm'}, {"json", no_argument, NULL, 'j'},
        {"qc", no_argument, NULL, 'q'},             {"threads", required_argument, NULL, 'T'},
        {"help", no_argument, NULL, 'h'},           {NULL, 0, NULL, 0}};
    int64_t size = -1, level = 0, stride = 0, max_side = 2048;
    double min_tissue = 0.5;
    bool json = false, qc_wanted = false;
    int64_t threads = 0;
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        switch (c) {
        case 's':
            if (!cli_parse_int(optarg, 1, INT64_C(1) << 32, &size)) {
                return cli_usage_error(USAGE, "bad --size '%s' (a positive integer)", optarg);
            }
            break;
        case 'l':
            if (!cli_parse_int(optarg, 0, INT32_MAX, &level)) {
                return cli_usage_error(USAGE, "bad --level '%s' (a non-negative integer)", optarg);
            }
            break;
        case 't':
            if (!cli_parse_int(optarg, 1, INT64_C(1) << 32, &stride)) {
                return cli_usage_error(USAGE, "bad --stride '%s' (a positive integer)", optarg);
            }
            break;
        case 'f':
            if (!parse_fraction(optarg, &min_tissue)) {
                return cli_usage_error(USAGE, "bad --min-tissue '%s' (a number in [0, 1])", optarg);
            }
            break;
        case 'm':
            if (cli_parse_max_side(USAGE, optarg, &max_side) != CLI_OK) {
                return CLI_USAGE_ERROR;
            }
            break;
        case 'j': json = true; break;
        case 'q': qc_wanted = true; break;
        case 'T':
            if (!cli_parse_int(optarg, 0, 1024, &threads)) {
                return cli_usage_error(USAGE, "bad --threads '%s' (an integer in 0..1024)", optarg);
            }
            break;
        default: return cli_option_other(USAGE, c, argv);
        }
    }
    if (size < 0) {
        return cli_usage_error(USAGE, "--size is required");
    }
    if (optind != argc - 1) {
        return cli_usage_error(USAGE, "expected exactly one SLIDE");
    }
    if (stride == 0) {
        stride = size;
    }
    const char *slide_path = argv[optind];
    sp_slide *slide = cli_open_slide(slide_path);
    if (slide == NULL) {
        return CLI_RUNTIME_ERROR;
    }
    if (level >= sp_slide_level_count(slide)) {
        int n = sp_slide_level_count(slide);
        sp_slide_close(slide);
        return cli_usage_error(USAGE, "level %lld does not exist (the slide has %d level%s)",
                               (long long)level, n, n == 1 ? "" : "s");
    }
    sp_tissue_mask mask;
    sp_tile *tiles = NULL;
    sp_tile_qc *qc = NULL;
    size_t count = 0;
    char err[1024];
    int rc = CLI_OK;
    sp_status st;
    if (sp_tissue_mask_compute(slide, max_side, &mask, err, sizeof err) != SP_OK) {
        rc = cli_fail("%s: %s", slide_path, err);
    } else if ((st = sp_tissue_tiles(slide, &mask, (int32_t)level, size, stride, min_tissue, &tiles,
                                     &count)) != SP_OK) {
        rc = cli_fail("%s: listing tiles: %s", slide_path, sp_status_str(st));
    } else if (qc_wanted && count > 0 && (qc = calloc(count, sizeof *qc)) == NULL) {
        rc = cli_fail("out of memory for %zu tile scores", count);
    } else if (qc_wanted && sp_tile_qc_compute(slide, (int32_t)level, size, tiles, count,
                                               (int)threads, qc, err, sizeof err) != SP_OK) {
        rc = cli_fail("%s: %s", slide_path, err);
    } else if (json) {
        rc = print_json(level, size, stride, tiles, count, qc_wanted ? qc : NULL);
    } else {
        for (size_t i = 0; i < count; i++) {
            printf("%lld %lld %.4f", (long long)tiles[i].x, (long long)tiles[i].y,
                   tiles[i].tissue);
            if (qc_wanted) {
                const sp_tile_qc *q = &qc[i];
                printf(" blur=%.2f pen=%.4f pen_blue=%.4f pen_green=%.4f pen_black=%.4f "
                       "fold=%.4f background=%.4f",
                       q->blur, q->pen, q->pen_blue, q->pen_green, q->pen_black, q->fold,
                       q->background);
            }
            putchar('\n');
        }
    }
    free(qc);
    sp_tiles_free(tiles);
    sp_tissue_mask_free(&mask);
    sp_slide_close(slide);
    return rc;
}
