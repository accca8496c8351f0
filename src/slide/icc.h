/* icc.h — the slide layer's internal side of ICC colour management (icc.c): whether a slide's
 * reads convert to sRGB, converting a read's output in place, and freeing what a slide holds.
 * The public calls (sp_slide_icc_profile, sp_slide_set_icc_transform) are in slidepipe.h. */
#ifndef SP_SLIDE_ICC_H
#define SP_SLIDE_ICC_H

#include <stdbool.h>

#include "formats/slide_struct.h"

/* Whether reads of `s` convert to sRGB now (a backend that decodes by itself must then not). */
bool sp_slide_icc_active(const sp_slide *s);

/* Convert w x h pixels of `fmt` at dst (rows of `stride` bytes) from the slide's profile to
 * sRGB in place, when conversion is on; nothing otherwise. Thread-safe. */
void sp_slide_icc_apply(const sp_slide *s, sp_pixel_format fmt, void *dst, int64_t stride,
                        int64_t w, int64_t h);

/* Free the slide's profile and transform (sp_slide_close). */
void sp_slide_icc_free(sp_slide *s);

#endif
