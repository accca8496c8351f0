/* zeiss_czi_dir.h — the segments of a Zeiss CZI file (ZISRAW): the file header, the subblock
 * directory, a subblock's data, the XML metadata and the attachments, read and checked against
 * the file's size; zeiss_czi.c builds the slide from them.
 *
 * A CZI file is a chain of segments, each a 32-byte header (an ASCII id of 16 bytes, then the
 * allocated and the used size of its data as little-endian int64) and its data. The ZISRAWFILE
 * header at offset 0 gives the positions of the ZISRAWDIRECTORY (one DirectoryEntryDV per
 * subblock: pixel type, compression, file position and a list of dimension entries, each a
 * start, a logical size and a stored size), the ZISRAWMETADATA (UTF-8 XML) and the ZISRAWATTDIR
 * (named attachments: label and preview images). Every number here comes from the file and is
 * untrusted: positions and sizes are checked against the file before anything is read or
 * allocated.
 */
#ifndef SP_FORMATS_ZEISS_CZI_DIR_H
#define SP_FORMATS_ZEISS_CZI_DIR_H

#include <stdbool.h>
#include <stdint.h>

#include "base/limits.h"
#include "io/source.h"

/* Pixel types and compressions of the specification (those the reader names in messages). */
enum {
    SP_CZI_PIXEL_GRAY8 = 0,
    SP_CZI_PIXEL_GRAY16 = 1,
    SP_CZI_PIXEL_BGR24 = 3,
    SP_CZI_PIXEL_BGR48 = 4,
    SP_CZI_PIXEL_BGRA32 = 9,
};
enum {
    SP_CZI_RAW = 0,
    SP_CZI_JPEG = 1,
    SP_CZI_LZW = 2,
    SP_CZI_JPEGXR = 4,
    SP_CZI_ZSTD0 = 5,
    SP_CZI_ZSTD1 = 6,
};

/* Dimensions a subblock may carry besides X and Y, in the order of sp_czi_entry.start. */
enum { SP_CZI_Z, SP_CZI_C, SP_CZI_T, SP_CZI_S, SP_CZI_M, SP_CZI_DIMS };

typedef struct sp_czi_entry {
    int32_t pixel_type, compression;
    uint64_t position;     /* of the ZISRAWSUBBLOCK segment */
    int64_t x, y;          /* start, in level-0 pixels (may be negative) */
    int64_t width, height; /* logical size, level-0 pixels */
    int64_t stored_width, stored_height;
    int64_t start[SP_CZI_DIMS]; /* 0 for a dimension the entry does not carry */
} sp_czi_entry;

typedef struct sp_czi_attachment {
    char name[81];     /* e.g. "Label", "SlidePreview" */
    char type[9];      /* the content file type: "JPG", "CZI", ... */
    uint64_t position; /* of the ZISRAWATTACH segment */
} sp_czi_attachment;

typedef struct sp_czi_file {
    uint64_t size;
    uint64_t metadata_position, attachments_position; /* 0: none */
    sp_czi_entry *entries;
    size_t n_entries;
    sp_czi_attachment *attachments;
    size_t n_attachments;
} sp_czi_file;

/* Whether the first bytes are a ZISRAWFILE segment header. */
bool sp_czi_magic(const uint8_t *head, size_t len);

/* Read the file header, the subblock directory and the attachment directory (when there is
 * one) of `src` into *out (free with sp_czi_file_free, also after a failure). SP_E_CORRUPT with
 * a message when a segment is missing, cut or malformed; SP_E_LIMIT when the directory is larger
 * than the allocation limit. */
sp_status sp_czi_read_file(sp_source *src, const sp_limits *limits, sp_czi_file *out, sp_err *err);

void sp_czi_file_free(sp_czi_file *file);

/* The pixel data of the subblock `entry` names (malloc'd, *len bytes): the data part of its
 * ZISRAWSUBBLOCK segment, still compressed. */
sp_status sp_czi_read_subblock(sp_source *src, const sp_limits *limits, const sp_czi_entry *entry,
                               uint8_t **data, size_t *len, sp_err *err);

/* The metadata XML (malloc'd, NUL-terminated, *len bytes without the NUL), at most the metadata
 * limit; *xml NULL and SP_OK when the file has no metadata segment. */
sp_status sp_czi_read_metadata(sp_source *src, const sp_limits *limits, const sp_czi_file *file,
                               char **xml, size_t *len, sp_err *err);

/* Where an attachment's data lie in the file (checked to lie inside it). */
sp_status sp_czi_attachment_data(sp_source *src, const sp_czi_attachment *a, uint64_t *offset,
                                 uint64_t *len, sp_err *err);

#endif
