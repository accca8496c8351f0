/* tiff_jpeg_tiles.c — complete JPEG streams of a TIFF level's tiles (see tiff_jpeg_tiles.h).
 *
 * A TIFF JPEG tile is usually an abbreviated stream: SOI, the frame and scan headers and the
 * entropy-coded data, EOI, with the quantisation and Huffman tables kept once per directory in
 * the JPEGTables tag (itself SOI, tables, EOI). A decoder that sees one stream at a time needs
 * them together: SOI + the tables' body (between their SOI and EOI) + the tile after its SOI.
 * Tables in the tile itself, if any, come later and take precedence, as in libjpeg. */
#include "formats/tiff_jpeg_tiles.h"

#include <stdlib.h>
#include <string.h>

#include "formats/tiff_slide.h"

bool sp_tiff_jpeg_level_of(const sp_slide *s, int32_t level, sp_tiff_jpeg_level *out) {
    if (s == NULL || s->ops != &sp_tiff_slide_ops || level < 0 || level >= s->n_levels) {
        return false;
    }
    const sp_tiff_dir *d = s->levels[level].priv;
    if (d == NULL || !d->tiled || d->compression != SP_COMPRESSION_JPEG ||
        d->bits_per_sample != 8 || d->samples_per_pixel != 3 || d->planar_config != 1 ||
        (d->photometric != SP_PHOTOMETRIC_RGB && d->photometric != SP_PHOTOMETRIC_YCBCR) ||
        d->chunk_width == 0 || d->chunk_height == 0) {
        return false;
    }
    out->tiff = s->container;
    out->dir = d;
    out->ycbcr = d->photometric == SP_PHOTOMETRIC_YCBCR;
    return true;
}

sp_status sp_tiff_jpeg_tile_stream(const sp_tiff_jpeg_level *l, int64_t col, int64_t row,
                                   uint8_t **stream, size_t *len, sp_err *err) {
    *stream = NULL;
    *len = 0;
    const sp_tiff_dir *d = l->dir;
    if (col < 0 || row < 0 || (uint64_t)col >= d->chunks_across ||
        (uint64_t)row >= d->chunks_down) {
        return sp_err_set(err, SP_E_INVALID_ARG, "tile (%lld, %lld) outside the level",
                          (long long)col, (long long)row);
    }
    uint8_t *tile = NULL;
    uint64_t n = 0;
    sp_status st = sp_tiff_read_chunk(l->tiff, d, (uint64_t)row * d->chunks_across + (uint64_t)col,
                                      &tile, &n, err);
    if (st != SP_OK || tile == NULL) {
        return st;
    }
    if (n < 4 || tile[0] != 0xFF || tile[1] != 0xD8) {
        free(tile);
        return sp_err_set(err, SP_E_CORRUPT, "JPEG tile (%lld, %lld) does not start with SOI",
                          (long long)col, (long long)row);
    }
    const uint8_t *tables = d->jpeg_tables;
    uint64_t tn = d->jpeg_tables_len;
    if (tables == NULL || tn == 0) {
        *stream = tile;
        *len = (size_t)n;
        return SP_OK;
    }
    if (tn < 4 || tables[0] != 0xFF || tables[1] != 0xD8 || tables[tn - 2] != 0xFF ||
        tables[tn - 1] != 0xD9) {
        free(tile);
        return sp_err_set(err, SP_E_CORRUPT, "JPEGTables is not a tables-only JPEG stream");
    }
    /* SOI, tables body, tile after its SOI; both parts are bounded by the file's limits. */
    uint64_t body = tn - 4, total = 2 + body + (n - 2);
    uint8_t *out = NULL;
    st = sp_alloc(&l->tiff->limits, total, "JPEG stream", (void **)&out, err);
    if (st == SP_OK) {
        out[0] = 0xFF;
        out[1] = 0xD8;
        memcpy(out + 2, tables + 2, (size_t)body);
        memcpy(out + 2 + body, tile + 2, (size_t)(n - 2));
        *stream = out;
        *len = (size_t)total;
    }
    free(tile);
    return st;
}
