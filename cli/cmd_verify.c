/* cmd_verify.c — `slidepipe verify OUT.zarr [--json]`: re-hash every file that the manifest of a
 * converted store lists and recompute the pixel hash it records from its pixels (sp_zarr_verify),
 * and report each file that is missing or changed and a pixel hash that changed. Exit 0 when the
 * store is intact, 1 when any file is missing or changed, the pixels no longer give the recorded
 * pixel hash, or the store has no manifest or completion marker (an unfinished conversion). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"

static const char USAGE[] = "slidepipe verify OUT.zarr [--json]";

typedef struct report_state {
    bool json;
    cJSON *list; /* with --json: [{"path", "problem"}] */
} report_state;

static void report(void *user, const char *path, const char *problem) {
    report_state *r = user;
    if (r->json) {
        cJSON *p = cJSON_CreateObject();
        cJSON_AddStringToObject(p, "path", path);
        cJSON_AddStringToObject(p, "problem", problem);
        cJSON_AddItemToArray(r->list, p);
    } else {
        printf("%s %s\n", problem, path);
    }
}

int cmd_verify(int argc, char **argv) {
    report_state r = {0};
    int rc = cli_parse_json_only(argc, argv, USAGE, 1, "one OUT.zarr", &r.json);
    if (rc != CLI_OK) {
        return rc < 0 ? CLI_OK : rc;
    }
    const char *path = argv[argc - 1];
    if (r.json && (r.list = cJSON_CreateArray()) == NULL) {
        return cli_fail("out of memory");
    }
    int64_t problems = 0;
    char hash[65] = "", pixels[65] = "";
    char err[1024];
    sp_status st = sp_zarr_verify(path, report, &r, &problems, hash, pixels, err, sizeof err);
    if (st != SP_OK) {
        cJSON_Delete(r.list);
        return cli_fail("%s", err);
    }
    if (r.json) {
        cJSON *root = cJSON_CreateObject();
        cJSON_AddBoolToObject(root, "intact", problems == 0);
        cJSON_AddNumberToObject(root, "problem_count", (double)problems);
        cJSON_AddItemToObject(root, "problems", r.list);
        cJSON_AddStringToObject(root, "dataset_hash", hash);
        if (pixels[0] != '\0') {
            cJSON_AddStringToObject(root, "pixel_hash", pixels);
        } else {
            cJSON_AddNullToObject(root, "pixel_hash");
        }
        if (cli_print_json(root, false) != CLI_OK) {
            return CLI_RUNTIME_ERROR;
        }
    } else {
        printf("%lld problem%s; dataset_hash %s\n", (long long)problems, problems == 1 ? "" : "s",
               hash);
        /* A store that records no pixel hash (older stores, float32 results) has no line. */
        if (pixels[0] != '\0') {
            printf("pixel_hash %s\n", pixels);
        }
    }
    return problems == 0 ? CLI_OK : CLI_RUNTIME_ERROR;
}
