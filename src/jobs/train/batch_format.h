/* batch_format.h — RGB8 pixels into a model's batch layout and element type (batch_format.c),
 * for the loader and whole-image reads. */
#ifndef SP_JOBS_TRAIN_BATCH_FORMAT_H
#define SP_JOBS_TRAIN_BATCH_FORMAT_H

#include <stdint.h>

#include "slidepipe.h"

/* A format made ready: every 8-bit value of each channel already mapped to its output value. */
typedef struct sp_batch_lut {
    sp_batch_format format;
    int bytes; /* per element */
    float f32[3][256];
    uint16_t f16[3][256];
} sp_batch_lut;

/* Check `format` and fill the tables; SP_E_INVALID_ARG as sp_batch_convert says. */
sp_status sp_batch_lut_init(sp_batch_lut *lut, const sp_batch_format *format);

/* Write rows [row0, row0 + rows) of a width x height image, given as RGB8 rows one after
 * another in `rgb`, into `image`, the whole image's place in the batch. */
void sp_batch_write_rows(const sp_batch_lut *lut, const uint8_t *rgb, int64_t width, int64_t height,
                         int64_t row0, int64_t rows, void *image);

#endif
