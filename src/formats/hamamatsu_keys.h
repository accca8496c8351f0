/* hamamatsu_keys.h — what Hamamatsu's VMS and VMU key files say, for the two readers
 * (hamamatsu_vms.c: JPEG images; hamamatsu_vmu.c: uncompressed NGR images).
 *
 * Both are INI-style text (ini_file.h) with one group, [Virtual Microscope Specimen] or
 * [Uncompressed Virtual Microscope Specimen], naming the files beside it: the image files
 * (ImageFile, ImageFile(x,y) or ImageFile(z,x,y) for a grid of images and focal layers), the
 * map (MapFile, a small view of the whole slide, read as a level) and the macro photo
 * (MacroImage). Every key of the group becomes a hamamatsu.KEY property, as in OpenSlide.
 */
#ifndef SP_FORMATS_HAMAMATSU_KEYS_H
#define SP_FORMATS_HAMAMATSU_KEYS_H

#include <stdbool.h>

#include "formats/format.h"
#include "formats/ini_file.h"

/* The most bytes of a key file (OpenSlide's limit too) and the most images in its grid (each
 * JPEG stays open with its header of up to 64 KiB; scanners write a few). */
#define SP_HAMAMATSU_KEYS_MAX (64u << 10)
#define SP_HAMAMATSU_MAX_IMAGES 1024

typedef struct sp_hamamatsu_keys {
    sp_ini ini;
    const char *group;
    const char *file;    /* the key file's name (no folder), for messages */
    char *dir;           /* the key file's folder */
    int cols, rows;      /* the grid of images (1 x 1 for VMU) */
    const char **images; /* cols * rows layer-0 image names row by row, then the map's */
    const char *macro;   /* MacroImage, or NULL */
    sp_source *macro_src;
} sp_hamamatsu_keys;

/* Whether the file's first [section] is the VMS (vmu false) or VMU group. */
bool sp_hamamatsu_keys_detect(const sp_probe *p, bool vmu);

/* Read the key file of `p` (its group as detected) and the names it gives. */
sp_status sp_hamamatsu_keys_read(const sp_probe *p, bool vmu, sp_hamamatsu_keys *out, sp_err *err);
void sp_hamamatsu_keys_free(sp_hamamatsu_keys *keys);

/* The integer value of `key` as GKeyFile reads it, or `absent` when missing or not one. */
long sp_hamamatsu_keys_int(const sp_hamamatsu_keys *keys, const char *key, long absent);

/* Open file `name` of the slide's folder; a name that leaves the folder (absolute, "..") is
 * SP_E_CORRUPT naming the key file and the name. */
sp_status sp_hamamatsu_open_file(const sp_hamamatsu_keys *keys, const char *name, sp_source **out,
                                 sp_err *err);

/* hamamatsu.KEY for every key; the objective power from SourceLens and the MPP from
 * PhysicalWidth/PhysicalHeight (nanometres over level 0's width x height). */
sp_status sp_hamamatsu_add_properties(sp_slide *s, const sp_hamamatsu_keys *keys, int64_t width0,
                                      int64_t height0, sp_err *err);

/* The "macro" associated image (MacroImage, a JPEG file), when the key file names one. */
sp_status sp_hamamatsu_add_macro(sp_slide *s, sp_hamamatsu_keys *keys, sp_err *err);
sp_status sp_hamamatsu_read_macro(sp_slide *s, const sp_hamamatsu_keys *keys,
                                  const sp_associated *a, uint8_t *rgba, uint64_t stride,
                                  sp_err *err);

#endif
