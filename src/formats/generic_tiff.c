/* generic_tiff.c — the generic pyramidal TIFF format: a tiled first directory, plus every later
 * tiled directory marked reduced-resolution (NewSubfileType bit 0), sorted by size. This is
 * the layout libvips, bfconvert, GDAL and most converters write, and OpenSlide's rule. */
#include "formats/tiff_slide.h"

static bool generic_detect(const sp_probe *p) {
    return p->tiff != NULL && p->tiff->dirs[0].tiled;
}

static sp_status generic_open(sp_slide *s, sp_probe *p, sp_err *err) {
    sp_tiff_slide_adopt(s, p);
    const sp_tiff *t = s->container;
    sp_status st = SP_OK;
    for (uint32_t i = 0; st == SP_OK && i < t->n_dirs; i++) {
        const sp_tiff_dir *d = &t->dirs[i];
        if (!d->tiled || (i > 0 && !(d->subfile_type & 1))) {
            continue;
        }
        st = sp_tiff_slide_add_level(s, d, err);
    }
    if (st == SP_OK) {
        st = sp_tiff_slide_add_properties(s, &t->dirs[0], true, err);
    }
    return st;
}

const sp_format sp_format_generic_tiff = {"generic-tiff", generic_detect, generic_open};
