/* ome_xml.h — the part of OME-XML that slidepipe needs to read an OME-TIFF.
 *
 * An OME-TIFF keeps its metadata as OME-XML in the first ImageDescription: a list of Images,
 * each with one Pixels element giving the plane sizes (SizeX/Y/Z/C/T), the order in which planes
 * are stored (DimensionOrder), the sample type and the physical pixel size, and TiffData elements
 * mapping planes to TIFF pages. sp_ome_parse reads that text with a small, bounded, non-validating
 * XML tokenizer of our own (no DTDs, no external entities, no network: a DOCTYPE is refused, only
 * the five predefined entities and character references are expanded), keeps what is listed
 * below and ignores the rest. The XML is untrusted: depth, names, attribute counts and sizes,
 * element counts and the input size are bounded, and any malformation is SP_E_CORRUPT.
 */
#ifndef SP_FORMATS_OME_XML_H
#define SP_FORMATS_OME_XML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/limits.h"

/* Bounds on the XML itself (the input size is bounded by SP_LIMIT_MAX_METADATA). */
#define SP_OME_XML_MAX_DEPTH 256        /* nesting of elements */
#define SP_OME_XML_MAX_NAME 1024        /* bytes of an element or attribute name */
#define SP_OME_XML_MAX_ATTRS 512        /* attributes of one element */
#define SP_OME_XML_MAX_VALUE (1u << 20) /* decoded bytes of one element's attributes, or of text   \
                                         */
/* Bounds on what is kept. */
#define SP_OME_MAX_IMAGES 65536
#define SP_OME_MAX_CHANNELS 65536      /* per Image */
#define SP_OME_MAX_TIFFDATA (1u << 20) /* in the whole document */

/* One TiffData: PlaneCount planes, starting at plane (FirstZ, FirstC, FirstT) and going on in
 * DimensionOrder, are stored in consecutive IFDs (page indices of the main chain) from IFD. */
typedef struct sp_ome_tiffdata {
    uint64_t ifd, first_z, first_c, first_t, plane_count;
    bool has_ifd, has_plane_count;
    char *uuid;      /* the UUID child's text (the file holding the planes), or NULL */
    char *file_name; /* the UUID child's FileName attribute, or NULL */
} sp_ome_tiffdata;

typedef struct sp_ome_channel {
    char *name;                 /* or NULL */
    uint32_t samples_per_pixel; /* 0 when absent (meaning 1) */
    bool has_color;
    int32_t color; /* RGBA packed in a signed 32-bit integer, as OME stores it */
} sp_ome_channel;

typedef struct sp_ome_image {
    char *id, *name; /* or NULL */
    bool has_pixels; /* false: the Image had no Pixels element, and the fields below are 0 */
    uint32_t size_x, size_y, size_z, size_c;
    uint32_t size_time;                      /* SizeT ("size_t" would shadow the type) */
    char dimension_order[6];                 /* "XYZCT", ...; "XYZCT" when absent */
    char *type;                              /* "uint8", "int8", "uint16", ... or NULL */
    double physical_size_x, physical_size_y; /* microns; 0 when absent or not a length */
    bool interleaved;
    uint32_t n_channels;
    sp_ome_channel *channels;
    uint32_t n_tiffdata;
    sp_ome_tiffdata *tiffdata;
    char *objective_ref; /* ObjectiveSettings ID, or NULL */
    /* From the Instrument's Objective that ObjectiveSettings names; 0 when unknown. */
    double nominal_magnification;
} sp_ome_image;

typedef struct sp_ome {
    char *uuid;       /* the OME root's UUID attribute (this file's), or NULL */
    bool binary_only; /* a BinaryOnly element: the metadata lives in a companion file */
    uint32_t n_images;
    sp_ome_image *images;
} sp_ome;

/* Parse `len` bytes of OME-XML (UTF-8; need not be NUL-terminated). On success *out is a new
 * document (free it with sp_ome_free). Errors: SP_E_CORRUPT for malformed XML, a root that is not
 * OME, or invalid numbers in the attributes read; SP_E_UNSUPPORTED for a DOCTYPE or UTF-16;
 * SP_E_LIMIT when a bound above or SP_LIMIT_MAX_METADATA is exceeded; SP_E_NOMEM. */
sp_status sp_ome_parse(const char *xml, size_t len, const sp_limits *limits, sp_ome **out,
                       sp_err *err);

/* Free a document; NULL is accepted. */
void sp_ome_free(sp_ome *ome);

/* Convert a length in `unit` (an OME UnitsLength symbol; NULL means the default, µm) to microns.
 * False for units that are not lengths ("pixel", "reference frame") or unknown ones. */
bool sp_ome_length_to_microns(double value, const char *unit, double *microns);

/* The number of channel planes: SizeC, or the number of Channel elements when their
 * SamplesPerPixel add up to SizeC (an RGB channel holds 3 samples in one plane). */
uint32_t sp_ome_image_channel_planes(const sp_ome_image *image);

/* Planes stored for an image: channel planes x SizeZ x SizeT (checked at parse time not to
 * overflow). 0 for an Image without Pixels. */
uint64_t sp_ome_image_planes(const sp_ome_image *image);

/* Index of plane (z, c, t) in DimensionOrder (c counts channel planes); the caller keeps the
 * coordinates within the sizes. */
uint64_t sp_ome_plane_index(const sp_ome_image *image, uint64_t z, uint64_t c, uint64_t t);

/* The IFD (page index in the main chain) holding plane (z, c, t), following the OME-TIFF rules:
 * the first TiffData covering the plane gives IFD + its offset from (FirstZ, FirstC, FirstT);
 * PlaneCount defaults to 1 when IFD is given and to all remaining planes otherwise. Without a
 * covering TiffData (none at all, or only partial ones), planes are in consecutive IFDs from
 * `ifd_base` in DimensionOrder. *tiffdata is the covering TiffData or NULL. SP_E_INVALID_ARG
 * when (z, c, t) is outside the image; SP_E_CORRUPT on an IFD number that overflows. */
sp_status sp_ome_plane_ifd(const sp_ome_image *image, uint64_t z, uint64_t c, uint64_t t,
                           uint64_t ifd_base, uint64_t *ifd, const sp_ome_tiffdata **tiffdata,
                           sp_err *err);

/* Whether a TiffData's planes are in this file: its UUID equals the root's UUID, or when either
 * is missing, its FileName (if any) equals `file_name` (the file's base name). A TiffData with
 * no UUID child is local. */
bool sp_ome_tiffdata_is_local(const sp_ome *ome, const sp_ome_tiffdata *tiffdata,
                              const char *file_name);

/* SP_E_UNSUPPORTED ("multi-file OME-TIFF: ...") when the metadata is BinaryOnly or any TiffData
 * of `image` refers to another file; SP_OK otherwise. */
sp_status sp_ome_check_single_file(const sp_ome *ome, const sp_ome_image *image,
                                   const char *file_name, sp_err *err);

#endif
