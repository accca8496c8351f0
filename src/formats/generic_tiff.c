/* generic_tiff.c — the generic TIFF format: the first directory is level 0, and every later
 * directory marked reduced-resolution (NewSubfileType bit 0) is a lower level, sorted by size.
 * This is the layout libvips, bfconvert, GDAL and most converters write, and OpenSlide's rule
 * for tiled files. Unlike OpenSlide, strip-organised directories are read too (their strips
 * act as full-width tiles), so single-level scans and mixed strip/tile pyramids open. */
#include "formats/tiff_slide.h"

static bool generic_detect(const sp_probe *p) { return p->tiff != NULL; }

static sp_status generic_open(sp_slide *s, sp_probe *p, sp_err *err) {
    sp_tiff_slide_adopt(s, p);
    const sp_tiff *t = s->container;
    if (t->dirs[0].width == 0 || t->dirs[0].height == 0) {
        return sp_err_set(err, SP_E_CORRUPT, "the first TIFF image is empty (%llux%llu pixels)",
                          (unsigned long long)t->dirs[0].width,
                          (unsigned long long)t->dirs[0].height);
    }
    sp_status st = SP_OK;
    for (uint32_t i = 0; st == SP_OK && i < t->n_dirs; i++) {
        const sp_tiff_dir *d = &t->dirs[i];
        if (i > 0 && (!(d->subfile_type & 1) || d->width == 0 || d->height == 0)) {
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
