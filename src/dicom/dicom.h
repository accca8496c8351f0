/* dicom.h — a bounded reader for DICOM Part 10 files (PS3.10 file format, PS3.5 encoding), enough
 * to serve whole-slide images: the File Meta group, the data set in explicit or implicit VR
 * little endian, nested sequences of defined or undefined length, a small table of the
 * attributes slide formats need (some inside functional-group sequences), and the frames of
 * the Pixel Data element.
 *
 * Parsing stops at the top-level Pixel Data element: its bytes are never loaded. Native pixel
 * data is indexed by arithmetic (Rows x Columns x SamplesPerPixel x BitsAllocated / 8 per
 * frame); encapsulated pixel data by walking its fragment items once and mapping frames to
 * fragments through the Basic Offset Table, the Extended Offset Table, or (with neither) one
 * fragment per frame. Every length read from the file is checked against the enclosing item or
 * sequence, the file size and the limits; nesting depth, element count, frame count and
 * fragment count are bounded (sp_dicom_options), so a hostile file gives SP_E_CORRUPT or
 * SP_E_LIMIT, never a crash or an unbounded allocation. Big-endian and deflated transfer
 * syntaxes are refused with SP_E_UNSUPPORTED.
 *
 * A parsed file is immutable: reading frames from several threads at once is safe.
 */
#ifndef SP_DICOM_DICOM_H
#define SP_DICOM_DICOM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/limits.h"
#include "io/source.h"

/* "DICM" follows a 128-byte preamble. */
#define SP_DICOM_MAGIC_OFFSET 128

/* The attributes kept while parsing; everything else is skipped. Paths into sequences take
 * the first item of each sequence. */
typedef enum sp_dicom_attr {
    SP_DICOM_MEDIA_SOP_CLASS_UID = 0,         /* (0002,0002) */
    SP_DICOM_MEDIA_SOP_INSTANCE_UID,          /* (0002,0003) */
    SP_DICOM_TRANSFER_SYNTAX_UID,             /* (0002,0010) */
    SP_DICOM_IMAGE_TYPE,                      /* (0008,0008) */
    SP_DICOM_SOP_CLASS_UID,                   /* (0008,0016) */
    SP_DICOM_SOP_INSTANCE_UID,                /* (0008,0018) */
    SP_DICOM_MANUFACTURER,                    /* (0008,0070) */
    SP_DICOM_SERIES_DESCRIPTION,              /* (0008,103E) */
    SP_DICOM_MANUFACTURER_MODEL_NAME,         /* (0008,1090) */
    SP_DICOM_STUDY_INSTANCE_UID,              /* (0020,000D) */
    SP_DICOM_SERIES_INSTANCE_UID,             /* (0020,000E) */
    SP_DICOM_INSTANCE_NUMBER,                 /* (0020,0013) */
    SP_DICOM_CONCATENATION_UID,               /* (0020,9161) */
    SP_DICOM_IN_CONCATENATION_NUMBER,         /* (0020,9162) */
    SP_DICOM_CONCATENATION_FRAME_OFFSET,      /* (0020,9228) */
    SP_DICOM_DIMENSION_ORGANIZATION_TYPE,     /* (0020,9311) */
    SP_DICOM_SAMPLES_PER_PIXEL,               /* (0028,0002) */
    SP_DICOM_PHOTOMETRIC_INTERPRETATION,      /* (0028,0004) */
    SP_DICOM_PLANAR_CONFIGURATION,            /* (0028,0006) */
    SP_DICOM_NUMBER_OF_FRAMES,                /* (0028,0008) */
    SP_DICOM_ROWS,                            /* (0028,0010) */
    SP_DICOM_COLUMNS,                         /* (0028,0011) */
    SP_DICOM_BITS_ALLOCATED,                  /* (0028,0100) */
    SP_DICOM_BITS_STORED,                     /* (0028,0101) */
    SP_DICOM_PIXEL_REPRESENTATION,            /* (0028,0103) */
    SP_DICOM_CONTAINER_IDENTIFIER,            /* (0040,0512) */
    SP_DICOM_TOTAL_PIXEL_MATRIX_COLUMNS,      /* (0048,0006) */
    SP_DICOM_TOTAL_PIXEL_MATRIX_ROWS,         /* (0048,0007) */
    SP_DICOM_OBJECTIVE_LENS_POWER,            /* (0048,0105)[0] > (0048,0112) */
    SP_DICOM_NUMBER_OF_OPTICAL_PATHS,         /* (0048,0302) */
    SP_DICOM_TOTAL_PIXEL_MATRIX_FOCAL_PLANES, /* (0048,0303) */
    SP_DICOM_BARCODE_VALUE,                   /* (2200,0005) */
    SP_DICOM_PIXEL_SPACING,                   /* (5200,9229)[0] > (0028,9110)[0] > (0028,0030) */
    SP_DICOM_EXTENDED_OFFSET_TABLE,           /* (7FE0,0001) */
    SP_DICOM_EXTENDED_OFFSET_TABLE_LENGTHS,   /* (7FE0,0002) */
    SP_DICOM_ICC_PROFILE,                     /* (0048,0105)[0] > (0028,2000) */
    SP_DICOM_OPTICAL_PATH_IDENTIFIER,         /* (0048,0105)[0] > (0048,0106) */
    SP_DICOM_SHARED_Z_OFFSET,                 /* (5200,9229)[0] > (0048,021A)[0] > (0040,074A) */
    SP_DICOM_ATTR_COUNT_
} sp_dicom_attr;

/* Bounds on what one file may make the parser do. */
typedef struct sp_dicom_options {
    uint32_t max_depth;    /* nested sequences; default 16 */
    uint64_t max_elements; /* data elements, items and delimiters in the file; default 2^24 */
    uint64_t max_frames;   /* frames, per-frame items and pixel-data fragments; default 2^24 */
    bool meta_only;        /* stop after the File Meta group (detection) */
} sp_dicom_options;

void sp_dicom_options_default(sp_dicom_options *options);

typedef struct sp_dicom_value {
    bool present;
    char vr[2]; /* as written (explicit VR), else the dictionary VR */
    uint32_t len;
    uint8_t *data; /* len bytes, owned */
} sp_dicom_value;

/* One fragment (item value) of encapsulated pixel data, or a native frame's bytes. */
typedef struct sp_dicom_fragment {
    uint64_t offset, length;
} sp_dicom_fragment;

/* A frame: fragments [first_fragment, first_fragment + n_fragments) concatenated. */
typedef struct sp_dicom_frame {
    uint64_t first_fragment;
    uint64_t length;
    uint32_t n_fragments;
} sp_dicom_frame;

/* A frame's place, from its item of PerFrameFunctionalGroupsSequence: the
 * PlanePositionSlideSequence position (1-based pixels; INT64_MIN where absent) and Z offset
 * (has_z), and the OpticalPathIdentificationSequence's identifier ("" where absent). */
typedef struct sp_dicom_position {
    int64_t column, row;
    double z;
    bool has_z;
    char path_id[17]; /* SH: at most 16 characters */
} sp_dicom_position;

#define SP_DICOM_NO_POSITION INT64_MIN

typedef struct sp_dicom {
    sp_source *src; /* borrowed: it must outlive the sp_dicom */
    sp_limits limits;
    sp_dicom_options options;
    char transfer_syntax[72];
    bool implicit_vr;
    sp_dicom_value attrs[SP_DICOM_ATTR_COUNT_];
    uint64_t n_elements;

    /* Per-frame functional groups: one position per item of (5200,9230). */
    uint64_t n_positions;
    sp_dicom_position *positions;

    /* The top-level Pixel Data element. */
    bool has_pixel_data;
    bool encapsulated;     /* undefined length: items holding fragments */
    uint64_t pixel_offset; /* first byte of the value (the Basic Offset Table item) */
    uint64_t pixel_length; /* native only */

    /* Filled by sp_dicom_index_frames. */
    uint64_t n_frames;
    sp_dicom_frame *frames;
    uint64_t n_fragments;
    sp_dicom_fragment *fragments;
} sp_dicom;

/* True when `head` (the file's first bytes) has "DICM" at offset 128. */
bool sp_dicom_magic(const uint8_t *head, size_t len);

/* Parse a Part 10 file up to its top-level Pixel Data element (or, with options->meta_only, only
 * its File Meta group, whatever the transfer syntax). `limits` bounds value sizes
 * (SP_LIMIT_MAX_METADATA) and allocations; `options` may be NULL for the defaults.
 * SP_E_NOT_A_SLIDE when there is no "DICM" magic, SP_E_UNSUPPORTED for big-endian or deflated
 * transfer syntaxes, SP_E_CORRUPT for malformed structure or truncation, SP_E_LIMIT when a
 * bound is exceeded. */
sp_status sp_dicom_open(sp_source *src, const sp_limits *limits, const sp_dicom_options *options,
                        sp_dicom **out, sp_err *err);

/* Build the frame table: NumberOfFrames (default 1) frames, from native geometry or from the
 * fragment items and offset tables. Reads the fragment item headers, not their values. */
sp_status sp_dicom_index_frames(sp_dicom *dicom, sp_err *err);

/* The byte ranges in the file of frame `index`'s fragments, at most `cap` of them, for sending
 * for them ahead of sp_dicom_read_frame; returns how many (0 for a frame that does not exist). */
size_t sp_dicom_frame_ranges(const sp_dicom *dicom, uint64_t index, sp_byte_range *ranges,
                             size_t cap);

/* Read frame `index` (0-based) whole into a new buffer (*data, freed by the caller). */
sp_status sp_dicom_read_frame(const sp_dicom *dicom, uint64_t index, uint8_t **data, size_t *len,
                              sp_err *err);

/* Free; NULL is accepted. Does not close the source. */
void sp_dicom_close(sp_dicom *dicom);

/* Value access. Strings are trimmed of surrounding spaces and NULs; `index` picks one value of a
 * multi-valued ('\'-separated) string. False when absent, malformed or too long for `buf`. */
bool sp_dicom_has(const sp_dicom *dicom, sp_dicom_attr attr);
bool sp_dicom_string(const sp_dicom *dicom, sp_dicom_attr attr, uint32_t index, char *buf,
                     size_t len);
/* The whole value (all '\'-separated values), trimmed, as a new printable string; NULL when
 * absent or out of memory. Control bytes and invalid UTF-8 become '?'. */
char *sp_dicom_string_dup(const sp_dicom *dicom, sp_dicom_attr attr);
/* The first value of an integer attribute (US, UL, SS, SL, UV, SV binary, or IS text). */
bool sp_dicom_int(const sp_dicom *dicom, sp_dicom_attr attr, int64_t *out);
/* Value `index` of a decimal attribute (DS text, or FL/FD binary). */
bool sp_dicom_double(const sp_dicom *dicom, sp_dicom_attr attr, uint32_t index, double *out);

#endif
