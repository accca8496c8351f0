/* tj_tile_rate.c — the reference decode rate for a whole-level read: libjpeg-turbo's TurboJPEG
 * API decoding JPEG tiles of a TIFF over and over into a reused buffer, as `tjbench` does with
 * one image (tjbench itself is not packaged in Debian 12's libturbojpeg0-dev). Reads the tiles'
 * bytes and the JPEGTables from files the caller extracted (bench/bench_read.sh does it with
 * tifffile), prepends the tables so that TurboJPEG sees self-contained streams, decodes the
 * tiles round-robin for SECONDS and prints MP/s on one thread. With one tile this is tjbench's
 * single-tile figure; with a sample of a level's tiles it is the level's pure decode rate.
 * Pixel format RGB, accurate integer IDCT, fancy upsampling: what slidepipe does.
 * usage: tj_tile_rate TABLES.jpg|- SECONDS TILE.jpg... */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <turbojpeg.h>

static unsigned char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = n > 0 ? malloc((size_t)n) : NULL;
    if (b != NULL && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *len = b ? (size_t)n : 0;
    return b;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The tables stream is SOI tables EOI and a tile SOI ... EOI: joined, SOI tables + tile. */
static unsigned char *join(const unsigned char *tables, size_t qlen, unsigned char *tile,
                           size_t tlen, size_t *len) {
    if (tables == NULL || qlen <= 4) {
        *len = tlen;
        return tile;
    }
    *len = (qlen - 2) + (tlen - 2);
    unsigned char *jpeg = malloc(*len);
    memcpy(jpeg, tables, qlen - 2);
    memcpy(jpeg + qlen - 2, tile + 2, tlen - 2);
    free(tile);
    return jpeg;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: tj_tile_rate TABLES.jpg|- SECONDS TILE.jpg...\n");
        return 2;
    }
    size_t qlen = 0;
    unsigned char *tables = strcmp(argv[1], "-") != 0 ? slurp(argv[1], &qlen) : NULL;
    double seconds = atof(argv[2]);
    int n_tiles = argc - 3;
    unsigned char **jpeg = calloc((size_t)n_tiles, sizeof *jpeg);
    size_t *len = calloc((size_t)n_tiles, sizeof *len);
    tjhandle h = tjInitDecompress();
    int w = 0, ht = 0, sub = 0, cs = 0;
    for (int i = 0; i < n_tiles; i++) {
        size_t tlen = 0;
        unsigned char *tile = slurp(argv[3 + i], &tlen);
        if (tile == NULL || tlen < 4) {
            fprintf(stderr, "cannot read %s\n", argv[3 + i]);
            return 1;
        }
        jpeg[i] = join(tables, qlen, tile, tlen, &len[i]);
        int tw, th;
        if (tjDecompressHeader3(h, jpeg[i], (unsigned long)len[i], &tw, &th, &sub, &cs) != 0) {
            fprintf(stderr, "header: %s\n", tjGetErrorStr2(h));
            return 1;
        }
        w = tw > w ? tw : w;
        ht = th > ht ? th : ht;
    }
    unsigned char *out = malloc((size_t)w * ht * 3);
    long n = 0;
    double pixels = 0, t0 = now_s(), t = t0;
    while (t - t0 < seconds) {
        int i = (int)(n % n_tiles);
        int tw, th;
        tjDecompressHeader3(h, jpeg[i], (unsigned long)len[i], &tw, &th, &sub, &cs);
        if (tjDecompress2(h, jpeg[i], (unsigned long)len[i], out, tw, 0, th, TJPF_RGB, 0) != 0) {
            fprintf(stderr, "decode: %s\n", tjGetErrorStr2(h));
            return 1;
        }
        pixels += (double)tw * th;
        n++;
        if (n % 16 == 0) {
            t = now_s();
        }
    }
    t = now_s();
    printf("{\"tiles\": %d, \"tile\": \"%dx%d\", \"subsampling\": %d, \"decodes\": %ld, "
           "\"mp_per_s\": %.1f}\n",
           n_tiles, w, ht, sub, n, pixels / (t - t0) / 1e6);
    tjDestroy(h);
    return 0;
}
