/* tiff_raw_tiles.c — a TIFF level's tiles as stored (see tiff_raw_tiles.h).
 *
 * A TIFF JPEG tile is usually an abbreviated stream: SOI, the frame and scan headers and the
 * entropy-coded data, EOI, with the quantisation and Huffman tables kept once per directory in
 * the JPEGTables tag (itself SOI, tables, EOI). A decoder that sees one stream at a time needs
 * them together: SOI + the tables' body (between their SOI and EOI) + the tile after its SOI.
 * Tables in the tile itself, if any, come later and take precedence, as in libjpeg.
 * A JPEG 2000 tile is complete as stored. An uncompressed tile's stored rows are its pixel rows:
 * they are read as they are. */
#include "formats/tiff_raw_tiles.h"

#include <stdlib.h>
#include <string.h>

#include "formats/tiff_slide.h"

bool sp_tiff_raw_level(sp_slide *s, const sp_level *l, sp_raw_level *out) {
    const sp_tiff_dir *d = l->priv;
    if (d == NULL || !d->tiled || d->bits_per_sample != 8 || d->samples_per_pixel != 3 ||
        d->planar_config != 1 || d->chunk_width == 0 || d->chunk_height == 0) {
        return false;
    }
    (void)s;
    *out = (sp_raw_level){.tile_width = (int64_t)d->chunk_width,
                          .tile_height = (int64_t)d->chunk_height};
    if (d->compression == SP_COMPRESSION_JPEG &&
        (d->photometric == SP_PHOTOMETRIC_RGB || d->photometric == SP_PHOTOMETRIC_YCBCR)) {
        out->kind = SP_RAW_JPEG;
        out->ycbcr = d->photometric == SP_PHOTOMETRIC_YCBCR;
        return true;
    }
    /* Colour as the CPU decoder takes it (tiff_decode.c): Aperio's codes name it, otherwise
     * Photometric does. */
    bool aperio = d->compression == SP_COMPRESSION_APERIO_J2K_YCBCR ||
                  d->compression == SP_COMPRESSION_APERIO_J2K_RGB;
    if (aperio ||
        (d->compression == SP_COMPRESSION_J2K &&
         (d->photometric == SP_PHOTOMETRIC_RGB || d->photometric == SP_PHOTOMETRIC_YCBCR))) {
        out->kind = SP_RAW_JPEG2000;
        out->ycbcr = aperio ? d->compression == SP_COMPRESSION_APERIO_J2K_YCBCR
                            : d->photometric == SP_PHOTOMETRIC_YCBCR;
        return true;
    }
    if (d->compression == SP_COMPRESSION_NONE && d->photometric == SP_PHOTOMETRIC_RGB &&
        d->predictor == 1 && d->sample_format == 1 && d->extra_samples == 0) {
        out->kind = SP_RAW_RGB8;
        return true;
    }
    return false;
}

sp_status sp_tiff_read_raw_tile(sp_slide *s, const sp_level *l, int64_t col, int64_t row,
                                uint8_t **stream, size_t *len, sp_err *err) {
    *stream = NULL;
    *len = 0;
    const sp_tiff_dir *d = l->priv;
    const sp_tiff *tiff = s->container;
    if (col < 0 || row < 0 || (uint64_t)col >= d->chunks_across ||
        (uint64_t)row >= d->chunks_down) {
        return sp_err_set(err, SP_E_INVALID_ARG, "tile (%lld, %lld) outside the level",
                          (long long)col, (long long)row);
    }
    uint8_t *tile = NULL;
    uint64_t n = 0;
    sp_status st = sp_tiff_read_chunk(tiff, d, (uint64_t)row * d->chunks_across + (uint64_t)col,
                                      &tile, &n, err);
    if (st != SP_OK || tile == NULL) {
        return st;
    }
    if (d->compression != SP_COMPRESSION_JPEG) {
        *stream = tile; /* JPEG 2000: a codestream or JP2 file, complete as stored */
        *len = (size_t)n;
        return SP_OK;
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
    st = sp_alloc(&tiff->limits, total, "JPEG stream", (void **)&out, err);
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

/* Where rows [y0, y1) of uncompressed tile (col, row) start in the file: *offset, after checking
 * the tile is in the grid, present and whole. */
static sp_status rows_place(const sp_tiff_dir *d, int64_t col, int64_t row, int64_t y0, int64_t y1,
                            uint64_t *offset, sp_err *err) {
    if (col < 0 || row < 0 || (uint64_t)col >= d->chunks_across ||
        (uint64_t)row >= d->chunks_down || y0 < 0 || y1 <= y0 ||
        (uint64_t)y1 > d->chunk_height) {
        return sp_err_set(err, SP_E_INVALID_ARG, "rows %lld..%lld of tile (%lld, %lld) outside the level",
                          (long long)y0, (long long)y1, (long long)col, (long long)row);
    }
    uint64_t index = (uint64_t)row * d->chunks_across + (uint64_t)col;
    uint64_t start = d->chunk_offsets[index], stored = d->chunk_byte_counts[index];
    uint64_t row_bytes = d->chunk_width * 3;
    if (start == 0 || stored == 0) {
        return sp_err_set(err, SP_E_NOT_FOUND, "tile (%lld, %lld) is missing", (long long)col,
                          (long long)row);
    }
    if (stored < row_bytes * d->chunk_height) {
        return sp_err_set(err, SP_E_NOT_FOUND, "tile (%lld, %lld) is short", (long long)col,
                          (long long)row);
    }
    *offset = start + row_bytes * (uint64_t)y0;
    return SP_OK;
}

sp_status sp_tiff_read_raw_rows(sp_slide *s, const sp_level *l, int64_t col, int64_t row,
                                int64_t y0, int64_t y1, uint8_t *dst, sp_err *err) {
    const sp_tiff_dir *d = l->priv;
    const sp_tiff *tiff = s->container;
    uint64_t offset = 0;
    sp_status st = rows_place(d, col, row, y0, y1, &offset, err);
    return st != SP_OK ? st
                       : sp_source_read(tiff->src, offset, dst,
                                        (size_t)(d->chunk_width * 3 * (uint64_t)(y1 - y0)), err);
}

sp_status sp_tiff_raw_rows_at(sp_slide *s, const sp_level *l, int64_t col, int64_t row, int64_t y0,
                              int64_t y1, int *fd, uint64_t *offset, sp_err *err) {
    const sp_tiff *tiff = s->container;
    *fd = sp_source_local_fd(tiff->src);
    if (*fd < 0) {
        return sp_err_set(err, SP_E_UNSUPPORTED, "%s is not a local file",
                          sp_source_name(tiff->src));
    }
    /* The whole span must lie in the file: a reader of the file gets no "truncated" check. */
    sp_status st = rows_place(l->priv, col, row, y0, y1, offset, err);
    uint64_t len = ((const sp_tiff_dir *)l->priv)->chunk_width * 3 * (uint64_t)(y1 - y0);
    if (st == SP_OK &&
        (*offset > sp_source_size(tiff->src) || len > sp_source_size(tiff->src) - *offset)) {
        st = sp_err_set(err, SP_E_CORRUPT, "tile (%lld, %lld) runs past the end of %s",
                        (long long)col, (long long)row, sp_source_name(tiff->src));
    }
    return st;
}
