/* raw_tiles.c — a level's tiles as stored, for backends that decode them themselves (the GPU's
 * nvJPEG, direct copy and cuFile): the slide layer's door to the format's raw-tile operations, so
 * that such a backend never reads a container's internals. It checks the level and the kind the
 * call needs; the format checks the tile grid. */
#include "slide/icc.h"
#include "slide/slide.h"

bool sp_slide_raw_level(sp_slide *s, int32_t level, sp_raw_level *out) {
    /* While reads convert to sRGB, stored tiles are not the pixels a read gives: a backend
     * that decodes them itself takes the painter's path instead (which converts). */
    if (s == NULL || out == NULL || level < 0 || level >= s->n_levels || sp_slide_icc_active(s) ||
        s->ops->raw_level == NULL || !s->ops->raw_level(s, &s->levels[level], out)) {
        return false;
    }
    return out->kind != SP_RAW_NONE;
}

/* Whether `level`'s tiles are streams (JPEG, JPEG 2000) when `streams`, else uncompressed RGB,
 * with the read operation present; SP_E_INVALID_ARG otherwise. */
static sp_status check_kind(sp_slide *s, int32_t level, bool streams, sp_err *err) {
    sp_raw_level raw;
    bool has_op =
        s != NULL && (streams ? s->ops->read_raw_tile != NULL : s->ops->read_raw_rows != NULL);
    if (!has_op || !sp_slide_raw_level(s, level, &raw) ||
        (streams ? raw.kind != SP_RAW_JPEG && raw.kind != SP_RAW_JPEG2000
                 : raw.kind != SP_RAW_RGB8)) {
        return sp_err_set(err, SP_E_INVALID_ARG, "level %d's tiles are not stored as %s",
                          (int)level, streams ? "JPEG or JPEG 2000 streams" : "uncompressed RGB");
    }
    return SP_OK;
}

sp_status sp_slide_read_raw_tile(sp_slide *s, int32_t level, int64_t col, int64_t row,
                                 uint8_t **stream, size_t *len, sp_err *err) {
    *stream = NULL;
    *len = 0;
    sp_status st = check_kind(s, level, true, err);
    return st != SP_OK ? st : s->ops->read_raw_tile(s, &s->levels[level], col, row, stream, len, err);
}

sp_status sp_slide_read_raw_rows(sp_slide *s, int32_t level, int64_t col, int64_t row,
                                 int64_t y0, int64_t y1, uint8_t *dst, sp_err *err) {
    sp_status st = check_kind(s, level, false, err);
    return st != SP_OK ? st : s->ops->read_raw_rows(s, &s->levels[level], col, row, y0, y1, dst, err);
}

sp_status sp_slide_raw_rows_at(sp_slide *s, int32_t level, int64_t col, int64_t row, int64_t y0,
                               int64_t y1, int *fd, uint64_t *offset, sp_err *err) {
    *fd = -1;
    *offset = 0;
    sp_status st = check_kind(s, level, false, err);
    if (st == SP_OK && s->ops->raw_rows_at == NULL) {
        return sp_err_set(err, SP_E_UNSUPPORTED, "the format cannot say where its rows lie");
    }
    return st != SP_OK
               ? st
               : s->ops->raw_rows_at(s, &s->levels[level], col, row, y0, y1, fd, offset, err);
}
