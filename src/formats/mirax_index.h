/* mirax_index.h — the two descriptions a 3DHISTECH MIRAX slide keeps beside its `.mrxs` file:
 * `Slidedat.ini` (read through libinih into every key and the layout facts OpenSlide uses) and
 * `Index.dat` (pointer-linked pages naming, for each zoom level's stored image and each
 * non-hierarchical record, its data file, offset and length). Both readers take untrusted
 * bytes and check every count, pointer and length; they know nothing of pixels, so the fuzz
 * target (fuzz/fuzz_mirax.c) drives them straight from memory. mirax.c turns their output into
 * levels and tiles.
 */
#ifndef SP_FORMATS_MIRAX_INDEX_H
#define SP_FORMATS_MIRAX_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/limits.h"
#include "formats/ini_file.h"
#include "io/source.h"

/* The most bytes of Slidedat.ini read (OpenSlide's limit too). */
#define SP_MIRAX_SLIDEDAT_MAX (1u << 20)
/* The most data files, zoom levels and stored images (in one dimension) a slide may declare. */
#define SP_MIRAX_MAX_FILES 4096
#define SP_MIRAX_MAX_LEVELS 32
#define SP_MIRAX_MAX_IMAGES_PER_SIDE (1 << 20)

/* Every key of Slidedat.ini, in file order (a repeated key keeps its last value, as GKeyFile),
 * read by the shared key-file reader (ini_file.h). */
typedef sp_ini_entry sp_mirax_entry;
typedef sp_ini sp_mirax_ini;

/* Parse `text` (NUL-terminated; a UTF-8 byte order mark is skipped) through libinih. Lines
 * longer than libinih's line buffer are cut there (docs/formats.md). Free with
 * sp_mirax_ini_free. */
static inline sp_status sp_mirax_ini_parse(const char *text, sp_mirax_ini *out, sp_err *err) {
    return sp_ini_parse(text, "Slidedat.ini", out, err);
}
static inline void sp_mirax_ini_free(sp_mirax_ini *ini) {
    sp_ini_free(ini);
}
/* The value of [section] key, or NULL. */
static inline const char *sp_mirax_ini_get(const sp_mirax_ini *ini, const char *section,
                                           const char *key) {
    return sp_ini_get(ini, section, key);
}

typedef enum sp_mirax_image_format {
    SP_MIRAX_JPEG = 1,
    SP_MIRAX_PNG,
    SP_MIRAX_BMP,
} sp_mirax_image_format;

/* One zoom level's section. */
typedef struct sp_mirax_zoom {
    int concat_exponent;
    double overlap_x, overlap_y, mpp_x, mpp_y;
    uint32_t fill_bgr;
    sp_mirax_image_format format;
    int image_w, image_h;
} sp_mirax_zoom;

/* What the slide's layout is, from Slidedat.ini (OpenSlide's reading of it). Record numbers
 * count non-hierarchical records in Slidedat order; -1 when absent. */
typedef struct sp_mirax_layout {
    char *slide_id, *index_file;
    int images_x, images_y, divisions, objective;
    int n_zoom;
    sp_mirax_zoom zoom[SP_MIRAX_MAX_LEVELS];
    int n_files;
    char **files; /* data file names, relative to the slide folder */
    int position_record;
    bool positions_compressed; /* StitchingIntensityLayer (zlib) rather than VIMSLIDE_POSITION_BUFFER */
    int macro_record, label_record, thumbnail_record;
} sp_mirax_layout;

sp_status sp_mirax_layout_read(const sp_mirax_ini *ini, sp_mirax_layout *out, sp_err *err);
void sp_mirax_layout_free(sp_mirax_layout *layout);

/* Where a stored image (or a non-hierarchical record) lies. */
typedef struct sp_mirax_record {
    int32_t image_index; /* y * images_x + x (hierarchical records) */
    int32_t fileno;
    uint32_t offset, length;
} sp_mirax_record;

typedef struct sp_mirax_index {
    sp_mirax_record *records[SP_MIRAX_MAX_LEVELS];
    size_t n_records[SP_MIRAX_MAX_LEVELS];
    sp_mirax_record position, macro, label, thumbnail; /* length 0 when absent */
    bool has_position, has_macro, has_label, has_thumbnail;
} sp_mirax_index;

/* Read Index.dat from `src` for `layout`: its version and slide identifier must match, the
 * records must name existing data files, image indices must fall inside the image grid on a
 * multiple of the level's concatenation. `name` is used in messages. */
sp_status sp_mirax_index_read(sp_source *src, const char *name, const sp_mirax_layout *layout,
                              const sp_limits *limits, sp_mirax_index *out, sp_err *err);
void sp_mirax_index_free(sp_mirax_index *index);

#endif
