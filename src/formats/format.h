/* format.h — the slide-format registry: each format is one file exporting {name, detect, open}.
 *
 * The core opens the byte source, parses the container when it recognises one (TIFF now; DICOM,
 * Zarr later), then offers the probe to each format in registry order; the first whose detect()
 * accepts it opens the slide. A new format touches its own file and one line of registry.c.
 */
#ifndef SP_FORMATS_FORMAT_H
#define SP_FORMATS_FORMAT_H

#include <stdbool.h>

#include "formats/slide_struct.h"
#include "io/store_prefetch.h"
#include "tiff/tiff.h"

/* What formats see when detecting: the path, and for a file its source, its first bytes and
 * (for a TIFF) its parsed structure. A directory path has no source: formats that read series of
 * files (DICOM) open what they need themselves through src/io. */
#define SP_PROBE_HEAD 512

typedef struct sp_probe {
    const char *path;
    bool is_directory;
    sp_source *src;                 /* the opened file, or NULL for a directory */
    uint8_t head[SP_PROBE_HEAD];    /* the file's first bytes (zero-padded) */
    size_t head_len;
    sp_tiff *tiff;                  /* parsed TIFF structure, or NULL when the file is not a TIFF */
    const sp_limits *limits;
    /* A remote directory's (a URL prefix): files fetched while detecting, kept for opening, which
     * may take it over (setting the pointer to NULL); NULL for anything else. */
    sp_store_prefetch *kept;
} sp_probe;

typedef struct sp_format {
    const char *name;
    bool (*detect)(const sp_probe *probe);
    /* Fill the slide's levels, associated images, properties and ops. On success the format may
     * take ownership of probe->tiff by moving it into slide->container (and setting the probe's
     * pointer to NULL through the non-const probe the core passes). */
    sp_status (*open)(sp_slide *slide, sp_probe *probe, sp_err *err);
} sp_format;

/* The registry, NULL-terminated, most specific format first. */
extern const sp_format *const sp_formats[];

#endif
