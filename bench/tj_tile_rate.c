/* tj_tile_rate.c — the reference decode rate for a whole-level read: libjpeg-turbo's TurboJPEG
 * API decoding one JPEG tile of a TIFF over and over into a reused buffer, as `tjbench` does
 * (tjbench itself is not packaged in Debian 12's libturbojpeg0-dev). Reads the tile's bytes and
 * the JPEGTables from files the caller extracted (bench/bench_read.sh does it with tifffile),
 * prepends the tables so that TurboJPEG sees one self-contained stream, and prints MP/s on one
 * thread. Pixel format RGB, accurate integer IDCT, fancy upsampling: what slidepipe does.
 * usage: tj_tile_rate TILE.jpg [TABLES.jpg] [SECONDS] */
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

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: tj_tile_rate TILE.jpg [TABLES.jpg] [SECONDS]\n");
        return 2;
    }
    size_t tlen = 0, qlen = 0;
    unsigned char *tile = slurp(argv[1], &tlen);
    unsigned char *tables = argc > 2 && strcmp(argv[2], "-") != 0 ? slurp(argv[2], &qlen) : NULL;
    double seconds = argc > 3 ? atof(argv[3]) : 2.0;
    if (tile == NULL || tlen < 4) {
        fprintf(stderr, "cannot read %s\n", argv[1]);
        return 1;
    }
    /* tables stream: SOI tables EOI; tile: SOI ... EOI. Joined: SOI tables + tile after SOI. */
    size_t len = tlen;
    unsigned char *jpeg = tile;
    if (tables != NULL && qlen > 4) {
        len = (qlen - 2) + (tlen - 2);
        jpeg = malloc(len);
        memcpy(jpeg, tables, qlen - 2);
        memcpy(jpeg + qlen - 2, tile + 2, tlen - 2);
    }
    tjhandle h = tjInitDecompress();
    int w, ht, sub, cs;
    if (tjDecompressHeader3(h, jpeg, (unsigned long)len, &w, &ht, &sub, &cs) != 0) {
        fprintf(stderr, "header: %s\n", tjGetErrorStr2(h));
        return 1;
    }
    unsigned char *out = malloc((size_t)w * ht * 3);
    long n = 0;
    double t0 = now_s(), t = t0;
    while (t - t0 < seconds) {
        if (tjDecompress2(h, jpeg, (unsigned long)len, out, w, 0, ht, TJPF_RGB, 0) != 0) {
            fprintf(stderr, "decode: %s\n", tjGetErrorStr2(h));
            return 1;
        }
        n++;
        if (n % 16 == 0) {
            t = now_s();
        }
    }
    t = now_s();
    printf("{\"tile\": \"%dx%d\", \"subsampling\": %d, \"decodes\": %ld, \"mp_per_s\": %.1f}\n", w,
           ht, sub, n, (double)n * w * ht / (t - t0) / 1e6);
    tjDestroy(h);
    return 0;
}
