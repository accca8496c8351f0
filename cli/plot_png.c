/* plot_png.c — draws histograms as lines on a white canvas with axes, ticks, labels and a legend,
 * and writes the picture as PNG (through cli_write_image): enough for a person to compare a
 * corpus's spectrum with a few slides' at a glance, with no plotting library. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "plot_png.h"

enum { W = 960, H = 600, LEFT = 120, RIGHT = W - 24, TOP = 56, BOTTOM = H - 76, SCALE = 2 };
enum { ADVANCE = (PLOT_GLYPH_W + 1) * SCALE };

typedef struct canvas {
    uint8_t *px; /* W x H RGBA */
} canvas;

static void put(canvas *c, int x, int y, const uint8_t rgb[3]) {
    if (x >= 0 && x < W && y >= 0 && y < H) {
        uint8_t *p = c->px + ((size_t)y * W + (size_t)x) * 4;
        p[0] = rgb[0];
        p[1] = rgb[1];
        p[2] = rgb[2];
        p[3] = 255;
    }
}

static void rect(canvas *c, int x0, int y0, int x1, int y1, const uint8_t rgb[3]) {
    for (int y = y0; y <= y1; y++) {
        for (int x = x0; x <= x1; x++) {
            put(c, x, y, rgb);
        }
    }
}

/* A line `thick` pixels wide (a square pen moved along Bresenham's path). */
static void line(canvas *c, int x0, int y0, int x1, int y1, int thick, const uint8_t rgb[3]) {
    int dx = abs(x1 - x0), dy = -abs(y1 - y0);
    int sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1, e = dx + dy;
    for (;;) {
        rect(c, x0 - thick / 2, y0 - thick / 2, x0 + (thick - 1) / 2, y0 + (thick - 1) / 2, rgb);
        if (x0 == x1 && y0 == y1) {
            break;
        }
        int e2 = 2 * e;
        if (e2 >= dy) {
            e += dy;
            x0 += sx;
        }
        if (e2 <= dx) {
            e += dx;
            y0 += sy;
        }
    }
}

/* Text with its top-left at (x, y); `vertical` turns it to read bottom to top from (x, y). */
static void text(canvas *c, int x, int y, const char *s, bool vertical, const uint8_t rgb[3]) {
    for (int i = 0; s[i] != '\0'; i++) {
        for (int gy = 0; gy < PLOT_GLYPH_H; gy++) {
            for (int gx = 0; gx < PLOT_GLYPH_W; gx++) {
                if (!plot_glyph_pixel(s[i], gx, gy)) {
                    continue;
                }
                int ox = i * ADVANCE + gx * SCALE, oy = gy * SCALE;
                int px = vertical ? x + oy : x + ox, py = vertical ? y - ox : y + oy;
                if (vertical) {
                    rect(c, px, py - SCALE + 1, px + SCALE - 1, py, rgb);
                } else {
                    rect(c, px, py, px + SCALE - 1, py + SCALE - 1, rgb);
                }
            }
        }
    }
}

static int text_width(const char *s) { return (int)strlen(s) * ADVANCE - SCALE; }

/* A "nice" tick step (1, 2 or 5 times a power of ten) giving at most about five ticks. */
static double nice_step(double max) {
    double raw = max / 5, mag = pow(10, floor(log10(raw)));
    static const double m[] = {1, 2, 5, 10};
    for (int i = 0; i < 4; i++) {
        if (m[i] * mag >= raw) {
            return m[i] * mag;
        }
    }
    return 10 * mag;
}

bool plot_histograms(const char *path, const plot_series *series, int n_series, int bins,
                     double x_min, double x_max) {
    static const uint8_t black[3] = {0, 0, 0}, grid[3] = {225, 225, 225}, grey[3] = {90, 90, 90};
    static const uint8_t palette[][3] = {{0, 0, 0},     {214, 39, 40},  {31, 119, 180},
                                         {44, 160, 44}, {255, 127, 14}, {148, 103, 189}};
    canvas c = {calloc((size_t)W * H, 4)};
    if (c.px == NULL) {
        cli_fail("out of memory for the plot");
        return false;
    }
    memset(c.px, 255, (size_t)W * H * 4);
    double y_max = 0;
    for (int s = 0; s < n_series; s++) {
        for (int i = 0; series[s].total > 0 && i < bins; i++) {
            double f = (double)series[s].counts[i] / (double)series[s].total;
            y_max = f > y_max ? f : y_max;
        }
    }
    double step = nice_step(y_max > 0 ? y_max : 1e-3);
    y_max = step * ceil((y_max > 0 ? y_max : 1e-3) / step);
    int decimals = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
    /* Grid, ticks and tick labels. */
    char label[64];
    for (double v = 0; v <= y_max * (1 + 1e-9); v += step) {
        int y = BOTTOM - (int)lround(v / y_max * (BOTTOM - TOP));
        line(&c, LEFT, y, RIGHT, y, 1, grid);
        line(&c, LEFT - 6, y, LEFT, y, 1, black);
        snprintf(label, sizeof label, "%.*f", decimals, v);
        text(&c, LEFT - 10 - text_width(label), y - PLOT_GLYPH_H * SCALE / 2, label, false, black);
    }
    double x_step = (x_max - x_min) >= 100 ? 20 : 10;
    for (double v = ceil(x_min / x_step) * x_step; v <= x_max + 1e-9; v += x_step) {
        int x = LEFT + (int)lround((v - x_min) / (x_max - x_min) * (RIGHT - LEFT));
        line(&c, x, TOP, x, BOTTOM, 1, grid);
        line(&c, x, BOTTOM, x, BOTTOM + 6, 1, black);
        snprintf(label, sizeof label, "%g", v);
        text(&c, x - text_width(label) / 2, BOTTOM + 12, label, false, black);
    }
    line(&c, LEFT, TOP, LEFT, BOTTOM, 1, black);
    line(&c, LEFT, BOTTOM, RIGHT, BOTTOM, 1, black);
    text(&c, (LEFT + RIGHT - text_width("dB")) / 2, H - 34, "dB", false, black);
    const char *ylabel = "fraction of values";
    text(&c, 12, (TOP + BOTTOM + text_width(ylabel)) / 2, ylabel, true, black);
    const char *title = "log-magnitude spectrum: histogram of 20 log10(abs(F) + 1e-6)";
    text(&c, (W - text_width(title)) / 2, 18, title, false, black);
    /* The series, the corpus last so that it stays on top. */
    double bw = (x_max - x_min) / bins;
    for (int s = n_series - 1; s >= 0; s--) {
        if (series[s].total <= 0) {
            continue;
        }
        const uint8_t *col = palette[s % 6];
        int px = 0, py = 0;
        for (int i = 0; i < bins; i++) {
            double f = (double)series[s].counts[i] / (double)series[s].total;
            int x = LEFT + (int)lround(((i + 0.5) * bw) / (x_max - x_min) * (RIGHT - LEFT));
            int y = BOTTOM - (int)lround(f / y_max * (BOTTOM - TOP));
            if (i > 0) {
                line(&c, px, py, x, y, s == 0 ? 3 : 2, col);
            }
            px = x;
            py = y;
        }
    }
    /* The legend, top right inside the plot. */
    int lx = RIGHT - 12 - 30 - 8 - 28 * ADVANCE, ly = TOP + 12;
    rect(&c, lx - 8, ly - 8, RIGHT - 8, ly + n_series * 22, (const uint8_t[3]){255, 255, 255});
    for (int s = 0; s < n_series; s++) {
        int y = ly + s * 22;
        line(&c, lx, y + 7, lx + 30, y + 7, s == 0 ? 3 : 2, palette[s % 6]);
        char name[29];
        snprintf(name, sizeof name, "%s", series[s].label);
        text(&c, lx + 38, y, name, false, s == 0 ? black : grey);
    }
    bool ok = cli_write_image(path, c.px, W, H, (int64_t)W * 4, false);
    free(c.px);
    return ok;
}
