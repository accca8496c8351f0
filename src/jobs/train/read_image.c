/* read_image.c — sp_slide_read_image: a whole slide, or any region of it, at a chosen
 * downsample, straight into one tensor in a model's layout and element type.
 *
 * Whole-image models read inputs of 10,000 pixels a side and more. The scaled reader streams
 * its output rows (sp_slide_read_scaled_rows), and each row is converted into its place in the
 * tensor as it comes, so no full-size RGB8 copy of the image is ever held: host memory besides
 * the tensor is the scaled reader's band of source rows and one output row.
 */
#include <string.h>

#include "jobs/train/batch_format.h"
#include "slide/slide.h"

typedef struct image_sink {
    const sp_batch_lut *lut;
    int64_t width, height;
    void *dst;
} image_sink;

static void take_row(void *user, int64_t j, const uint8_t *row) {
    const image_sink *k = user;
    sp_batch_write_rows(k->lut, row, k->width, k->height, j, 1, k->dst);
}

sp_status sp_slide_read_image(sp_slide *slide, double downsample, int64_t x, int64_t y,
                              int64_t width, int64_t height, const sp_batch_format *format,
                              void *dst) {
    sp_batch_lut lut;
    if (slide == NULL || dst == NULL || width < 1 || height < 1 || width > (1 << 24) ||
        height > (1 << 24) || sp_batch_lut_init(&lut, format) != SP_OK) {
        return SP_E_INVALID_ARG;
    }
    image_sink k = {&lut, width, height, dst};
    sp_status st = sp_slide_read_scaled_rows(slide, SP_PIXEL_RGB8, downsample, x, y, width, height,
                                             take_row, &k);
    if (st != SP_OK) {
        memset(dst, 0, (size_t)(width * height * 3 * lut.bytes));
    }
    return st;
}
