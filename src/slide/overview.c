/* overview.c — sp_overview_read: one read of a whole slide at low resolution, the same image for
 * the tissue mask and the stain estimate, so that a mask and the stains of one slide describe the
 * same pixels and the tests can recompute both from one PNG (`slidepipe tissue --image`).
 */
#include "slide/overview.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

sp_status sp_overview_read(sp_slide *slide, int64_t max_side, const char *what, sp_overview *out,
                           sp_err *err) {
    memset(out, 0, sizeof *out);
    int64_t side = max_side == 0 ? SP_OVERVIEW_DEFAULT_SIDE : max_side;
    if (side < 1 || side > SP_OVERVIEW_MAX_SIDE) {
        return sp_err_set(err, SP_E_INVALID_ARG, "%s: max_side %lld is not in 1..%d (0 means %d)",
                          what, (long long)max_side, SP_OVERVIEW_MAX_SIDE,
                          SP_OVERVIEW_DEFAULT_SIDE);
    }
    int64_t w0, h0;
    sp_status st = sp_slide_level_dimensions(slide, 0, &w0, &h0);
    if (st != SP_OK || w0 < 1 || h0 < 1) {
        return sp_err_set(err, st != SP_OK ? st : SP_E_INVALID_ARG,
                          "%s: the slide has no level 0 pixels", what);
    }
    double d = (double)(w0 > h0 ? w0 : h0) / (double)side;
    d = d > 1 ? d : 1;
    /* d = longer / side, so the longer side divides back to side give or take one rounding. */
    double cw = ceil((double)w0 / d), ch = ceil((double)h0 / d);
    int64_t w = cw < 1 ? 1 : cw > (double)side ? side : (int64_t)cw;
    int64_t h = ch < 1 ? 1 : ch > (double)side ? side : (int64_t)ch;
    uint8_t *rgb = malloc((size_t)w * (size_t)h * 3);
    if (rgb == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "%s: out of memory for a %lldx%lld image", what,
                          (long long)w, (long long)h);
    }
    st = sp_slide_read_region_scaled(slide, SP_PIXEL_RGB8, rgb, w * 3, d, 0, 0, w, h);
    if (st != SP_OK) {
        const char *msg = sp_slide_error(slide);
        free(rgb);
        return sp_err_set(err, st, "%s", msg != NULL && *msg ? msg : sp_status_str(st));
    }
    *out = (sp_overview){.width = w, .height = h, .downsample = d, .rgb = rgb};
    return SP_OK;
}
