/* cmd_info.c — `slidepipe info SLIDE [--json]`: the slide's format, levels, resolution,
 * associated images and properties, as text for people or as one JSON object (DESIGN.md's
 * contract) for programs. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char USAGE[] = "slidepipe info SLIDE [--json]";

/* A property as a JSON number when it parses as one, else null. */
static cJSON *number_or_null(const sp_slide *slide, const char *key) {
    const char *v = sp_slide_property_value(slide, key);
    if (v != NULL) {
        char *end;
        double d = strtod(v, &end);
        if (end != v && *end == '\0') {
            return cJSON_CreateNumber(d);
        }
    }
    return cJSON_CreateNull();
}

cJSON *cli_info_json(const sp_slide *slide) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "format", sp_slide_format(slide));
    cJSON *levels = cJSON_AddArrayToObject(root, "levels");
    for (int32_t i = 0; i < sp_slide_level_count(slide); i++) {
        int64_t w, h, tw, th;
        double ds;
        sp_slide_level_dimensions(slide, i, &w, &h);
        sp_slide_level_tile_size(slide, i, &tw, &th);
        sp_slide_level_downsample(slide, i, &ds);
        cJSON *l = cJSON_CreateObject();
        cJSON_AddNumberToObject(l, "width", (double)w);
        cJSON_AddNumberToObject(l, "height", (double)h);
        cJSON_AddNumberToObject(l, "downsample", ds);
        cJSON_AddNumberToObject(l, "tile_width", (double)tw);
        cJSON_AddNumberToObject(l, "tile_height", (double)th);
        cJSON_AddStringToObject(l, "compression", sp_slide_level_compression(slide, i));
        cJSON_AddItemToArray(levels, l);
    }
    cJSON_AddItemToObject(root, "mpp_x", number_or_null(slide, SP_PROPERTY_MPP_X));
    cJSON_AddItemToObject(root, "mpp_y", number_or_null(slide, SP_PROPERTY_MPP_Y));
    cJSON_AddItemToObject(root, "objective_power",
                          number_or_null(slide, SP_PROPERTY_OBJECTIVE_POWER));
    /* A store written by `slidepipe convert`: its reader publishes the manifest's hash. */
    const char *dataset_hash = sp_slide_property_value(slide, "slidepipe.dataset-hash");
    if (dataset_hash != NULL) {
        cJSON_AddStringToObject(root, "dataset_hash", dataset_hash);
    }
    /* The pixel hash the writer recorded (docs/pixel-hash.md); `slidepipe hash` recomputes it. */
    const char *pixel_hash = sp_slide_property_value(slide, "slidepipe.pixel-hash");
    if (pixel_hash != NULL) {
        cJSON_AddStringToObject(root, "pixel_hash", pixel_hash);
    }
    /* The embedded ICC profile's size in bytes (null: none); `region --icc` converts with it. */
    const uint8_t *icc;
    size_t icc_len;
    if (sp_slide_icc_profile(slide, &icc, &icc_len) == SP_OK) {
        cJSON_AddNumberToObject(root, "icc_profile_size", (double)icc_len);
    } else {
        cJSON_AddNullToObject(root, "icc_profile_size");
    }
    /* Planes: how many along each axis, and the one shown (region --z/--c/--t pick another). */
    cJSON *planes = cJSON_AddObjectToObject(root, "planes");
    static const char *const AXES[3] = {"z", "c", "t"};
    for (int i = 0; i < 3; i++) {
        cJSON_AddNumberToObject(planes, AXES[i], (double)sp_slide_plane_count(slide, i));
    }
    cJSON *shown = cJSON_AddObjectToObject(root, "plane");
    for (int i = 0; i < 3; i++) {
        cJSON_AddNumberToObject(shown, AXES[i], (double)sp_slide_plane(slide, i));
    }
    cJSON *assoc = cJSON_AddObjectToObject(root, "associated");
    for (int32_t i = 0; i < sp_slide_associated_count(slide); i++) {
        const char *name = sp_slide_associated_name(slide, i);
        int64_t w, h;
        sp_slide_associated_dimensions(slide, name, &w, &h);
        cJSON *a = cJSON_AddObjectToObject(assoc, name);
        cJSON_AddNumberToObject(a, "width", (double)w);
        cJSON_AddNumberToObject(a, "height", (double)h);
    }
    cJSON *props = cJSON_AddObjectToObject(root, "properties");
    for (int32_t i = 0; i < sp_slide_property_count(slide); i++) {
        const char *key = sp_slide_property_name(slide, i);
        cJSON_AddStringToObject(props, key, sp_slide_property_value(slide, key));
    }
    return root;
}

static void print_text(sp_slide *slide, const char *path) {
    printf("%s\n  format: %s\n", path, sp_slide_format(slide));
    const char *mx = sp_slide_property_value(slide, SP_PROPERTY_MPP_X);
    const char *my = sp_slide_property_value(slide, SP_PROPERTY_MPP_Y);
    const char *obj = sp_slide_property_value(slide, SP_PROPERTY_OBJECTIVE_POWER);
    printf("  microns per pixel: %s x %s\n", mx ? mx : "unknown", my ? my : "unknown");
    printf("  objective power: %s\n", obj ? obj : "unknown");
    const char *dataset_hash = sp_slide_property_value(slide, "slidepipe.dataset-hash");
    if (dataset_hash != NULL) {
        printf("  dataset hash: %s\n", dataset_hash);
    }
    const char *pixel_hash = sp_slide_property_value(slide, "slidepipe.pixel-hash");
    if (pixel_hash != NULL) {
        printf("  pixel hash (recorded): %s\n", pixel_hash);
    }
    const uint8_t *icc;
    size_t icc_len;
    if (sp_slide_icc_profile(slide, &icc, &icc_len) == SP_OK) {
        printf("  ICC profile: %zu bytes\n", icc_len);
    } else {
        printf("  ICC profile: none\n");
    }
    printf("  planes: z %lld, c %lld, t %lld\n", (long long)sp_slide_plane_count(slide, SP_PLANE_Z),
           (long long)sp_slide_plane_count(slide, SP_PLANE_C),
           (long long)sp_slide_plane_count(slide, SP_PLANE_T));
    printf("  levels: %d\n", sp_slide_level_count(slide));
    for (int32_t i = 0; i < sp_slide_level_count(slide); i++) {
        int64_t w, h, tw, th;
        double ds;
        sp_slide_level_dimensions(slide, i, &w, &h);
        sp_slide_level_tile_size(slide, i, &tw, &th);
        sp_slide_level_downsample(slide, i, &ds);
        printf("    %d: %lld x %lld  downsample %g  tiles %lld x %lld  %s\n", i, (long long)w,
               (long long)h, ds, (long long)tw, (long long)th,
               sp_slide_level_compression(slide, i));
    }
    printf("  associated images: %d\n", sp_slide_associated_count(slide));
    for (int32_t i = 0; i < sp_slide_associated_count(slide); i++) {
        const char *name = sp_slide_associated_name(slide, i);
        int64_t w, h;
        sp_slide_associated_dimensions(slide, name, &w, &h);
        printf("    %s: %lld x %lld\n", name, (long long)w, (long long)h);
    }
    printf("  properties: %d (--json lists them)\n", sp_slide_property_count(slide));
}

int cmd_info(int argc, char **argv) {
    bool json;
    int rc = cli_parse_json_only(argc, argv, USAGE, 1, "one SLIDE", &json);
    if (rc != CLI_OK) {
        return rc < 0 ? CLI_OK : rc;
    }
    sp_slide *slide = cli_open_slide(argv[argc - 1]);
    if (slide == NULL) {
        return CLI_RUNTIME_ERROR;
    }
    if (json) {
        rc = cli_print_json(cli_info_json(slide), false);
    } else {
        print_text(slide, argv[argc - 1]);
    }
    sp_slide_close(slide);
    return rc;
}
