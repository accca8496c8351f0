/* tiff_slide.h — what every TIFF-based format shares: a level is one TIFF directory, an
 * associated image is one directory decoded whole, and the baseline TIFF tags become "tiff.*"
 * properties with the resolution giving the microns per pixel. */
#ifndef SP_FORMATS_TIFF_SLIDE_H
#define SP_FORMATS_TIFF_SLIDE_H

#include "formats/format.h"

/* The ops for a slide whose levels and associated images are TIFF directories of the sp_tiff in
 * slide->container. */
extern const sp_slide_ops sp_tiff_slide_ops;

/* The TIFF ops' read_associated (an associated image stored as a TIFF directory), for vendor
 * formats with ops of their own. */
sp_status sp_tiff_slide_read_associated(sp_slide *slide, const sp_associated *image,
                                        uint8_t *rgba, uint64_t stride, sp_err *err);

/* Take over the probe's parsed TIFF and install sp_tiff_slide_ops. */
void sp_tiff_slide_adopt(sp_slide *slide, sp_probe *probe);

/* Add directory `dir` as a level (it must be decodable). */
sp_status sp_tiff_slide_add_level(sp_slide *slide, const sp_tiff_dir *dir, sp_err *err);

/* Keep directory `dir`'s embedded ICC profile (tag 34675) as the slide's, unless it has one
 * already. sp_tiff_slide_add_level does this for each level; a format that adds its levels
 * itself calls it with its levels' directories. */
void sp_tiff_slide_take_icc(sp_slide *slide, const sp_tiff_dir *dir);

/* Add directory `dir` as associated image `name`; a directory that cannot be decoded is skipped
 * (the slide still opens, as in OpenSlide). */
sp_status sp_tiff_slide_add_associated(sp_slide *slide, const char *name, const sp_tiff_dir *dir,
                                       sp_err *err);

/* Aperio's layout, which Huron's shares: every tiled directory a level in file order, the second
 * directory (stripped) the "thumbnail", stripped directories of NewSubfileType 1 and 9 the
 * "label" and "macro". */
sp_status sp_tiff_slide_add_aperio_layout(sp_slide *slide, sp_err *err);

/* The area_scales of a level whose tiles are directory d's (sp_tiff_area_scales, opaque for
 * JPEG), for formats whose levels keep more than the directory. */
unsigned sp_tiff_slide_dir_area_scales(const sp_slide *slide, const sp_tiff_dir *dir);

/* Store tiff.ImageDescription, tiff.Software, ... of `dir`; with `mpp_from_resolution`, also
 * slidepipe.mpp-x/y from its resolution tags (inch or centimetre units) when present. Vendor
 * formats whose resolution tags are unreliable pass false and set the MPP themselves. */
sp_status sp_tiff_slide_add_properties(sp_slide *slide, const sp_tiff_dir *dir,
                                       bool mpp_from_resolution, sp_err *err);

#endif
