/* read_region.c — the smallest complete libslidepipe program: open a slide, print its levels,
 * read a 512x512 RGBA region from the centre of level 0, and report the mean colour. Built with
 * the project (build/example_read_region) so that docs/api.md's example always compiles.
 *
 *   cc read_region.c -o read_region $(pkg-config ...) -lslidepipe     (or link libslidepipe.a)
 *   ./read_region SLIDE
 */
#include <slidepipe.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s SLIDE\n", argv[0]);
        return 2;
    }
    char err[512];
    sp_slide *slide = NULL;
    if (sp_slide_open(argv[1], &slide, err, sizeof err) != SP_OK) {
        fprintf(stderr, "cannot open: %s\n", err);
        return 1;
    }
    printf("format %s, %d levels\n", sp_slide_format(slide), sp_slide_level_count(slide));
    for (int32_t i = 0; i < sp_slide_level_count(slide); i++) {
        int64_t w, h;
        double ds;
        sp_slide_level_dimensions(slide, i, &w, &h);
        sp_slide_level_downsample(slide, i, &ds);
        printf("  level %d: %lld x %lld, downsample %.3f\n", i, (long long)w, (long long)h, ds);
    }
    const char *mpp = sp_slide_property_value(slide, SP_PROPERTY_MPP_X);
    printf("mpp-x %s\n", mpp ? mpp : "unknown");

    int64_t w0, h0;
    sp_slide_level_dimensions(slide, 0, &w0, &h0);
    enum { N = 512 };
    uint8_t *rgba = malloc(N * N * 4);
    sp_status st = rgba ? sp_slide_read_region(slide, SP_PIXEL_RGBA8, rgba, N * 4, 0,
                                               w0 / 2 - N / 2, h0 / 2 - N / 2, N, N)
                        : SP_E_NOMEM;
    if (st != SP_OK) {
        const char *msg = sp_slide_error(slide);
        fprintf(stderr, "read failed: %s\n", msg ? msg : sp_status_str(st));
        free(rgba);
        sp_slide_close(slide);
        return 1;
    }
    double sum[4] = {0};
    for (int i = 0; i < N * N; i++) {
        for (int c = 0; c < 4; c++) {
            sum[c] += rgba[i * 4 + c];
        }
    }
    printf("mean RGBA of the centre %dx%d: %.1f %.1f %.1f %.1f\n", N, N, sum[0] / (N * N),
           sum[1] / (N * N), sum[2] / (N * N), sum[3] / (N * N));
    free(rgba);
    sp_slide_close(slide);
    return 0;
}
