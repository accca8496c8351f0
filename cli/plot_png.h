/* plot_png.h — line plots of histograms into a PNG, for `slidepipe spectrum --plot`: the
 * drawing (plot_png.c) and its bitmap font (plot_font.c). */
#ifndef SP_CLI_PLOT_PNG_H
#define SP_CLI_PLOT_PNG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PLOT_GLYPH_W 5
#define PLOT_GLYPH_H 7

/* Whether the glyph of `ch` has ink at (x, y), 0 <= x < 5, 0 <= y < 7. */
bool plot_glyph_pixel(char ch, int x, int y);

typedef struct plot_series {
    const char *label;
    const int64_t *counts; /* `bins` counts */
    int64_t total;         /* what the counts are a fraction of */
} plot_series;

/* Draw each series' counts / total against the bin centres from x_min to x_max as a line, with
 * axes, ticks, labels ("dB", "fraction of values") and a legend; write it as a PNG to `path`
 * (through a temporary file renamed into place). Prints the error and returns false on failure. */
bool plot_histograms(const char *path, const plot_series *series, int n_series, int bins,
                     double x_min, double x_max);

#endif
