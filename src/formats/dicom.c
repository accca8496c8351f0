/* dicom.c — DICOM whole-slide images (VL Whole Slide Microscopy Image Storage,
 * SOP class 1.2.840.10008.5.1.4.1.1.77.1.6): a slide is a series of instances, one file each,
 * sharing a SeriesInstanceUID. The path is one of those files (its folder is searched for the
 * others, as OpenSlide does) or the folder itself (the first WSI instance by file name picks the
 * series). ImageType value 3 sorts the instances: VOLUME instances are the pyramid levels (one
 * per TotalPixelMatrixColumns x Rows; a level split over a concatenation is joined), LABEL,
 * OVERVIEW and THUMBNAIL become the associated images "label", "macro" and "thumbnail".
 * Focal planes and optical paths (sp_options_set_plane) are frames of a TILED_FULL instance
 * (select_plane), instances where a level's instances differ in Z offset or optical path
 * (plane_instances), or frames placed one by one with their own (frame_plane).
 *
 * A level's tiles are its frames (Columns x Rows each). TILED_FULL instances store them in
 * row-major order, first focal plane and first optical path first, so frame = row * across +
 * col; other organisations place each frame through its PlanePositionSlideSequence, and tiles no
 * frame covers are missing (transparent). Frames decode as JPEG (libjpeg-turbo), JPEG 2000 and
 * HTJ2K (OpenJPEG) or native 8-bit samples; each instance keeps its own byte source, owned by
 * the slide.
 *
 * JPEG colour: the stream's own markers decide when it has them (an Adobe APP14 transform flag,
 * else a JFIF APP0, which implies YCbCr), as libjpeg itself decides; the DICOM
 * PhotometricInterpretation is used only for streams without either marker. OpenSlide 4 follows
 * the DICOM tag alone, which differs on files whose JFIF (YCbCr) frames are mislabelled RGB,
 * such as the wsi2dcm conversion of CMU-1-Small-Region (docs/testing.md, "DICOM").
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fill.h"
#include "base/strings.h"
#include "codecs/codec.h"
#include "dicom/dicom.h"
#include "formats/format.h"
#include "io/paths.h"

#define WSI_SOP_CLASS "1.2.840.10008.5.1.4.1.1.77.1.6"
#define MAX_DIRECTORY_ENTRIES 10000
#define UID_MAX 72

typedef enum codec_kind { CODEC_NATIVE, CODEC_JPEG, CODEC_J2K } codec_kind;

typedef enum pixel_kind {
    PIXEL_RGB,        /* three samples, R G B (or a stream that says how to get them) */
    PIXEL_YBR,        /* three samples, Y Cb Cr (JPEG YBR_FULL_422/YBR_FULL, JPEG 2000 YBR_FULL) */
    PIXEL_GREY,       /* MONOCHROME2 */
    PIXEL_GREY_INVERT /* MONOCHROME1: 0 is white */
} pixel_kind;

typedef struct instance {
    char *name;     /* the file's path, for messages */
    sp_source *src; /* owned unless borrowed from the probe */
    bool own_src;
    sp_dicom *dcm;
    char series[UID_MAX];
    char sop[UID_MAX];
    char flavor[24]; /* ImageType value 3 */
    int64_t width, height;
    /* Its plane, where a level's planes are separate instances: the focal plane's Z offset
     * (shared PlanePositionSlideSequence; 0 when absent) and the optical path's identifier. */
    double z;
    char path_id[UID_MAX];
} instance;

typedef struct tile_ref {
    uint64_t tile;   /* row * across + col */
    uint32_t member; /* index into image.members */
    uint64_t frame;
} tile_ref;

/* A level or an associated image. */
typedef struct image {
    int64_t width, height, tile_w, tile_h, across, down;
    codec_kind codec;
    pixel_kind pixels;
    int64_t samples, planar;
    instance **members; /* one, or a concatenation in InConcatenationNumber order */
    uint32_t n_members;
    bool direct;   /* single TILED_FULL instance: frame = frame_base + tile index */
    uint64_t frame_base; /* direct: the first frame of the plane shown (0: the first plane) */
    tile_ref *map; /* otherwise: sorted by tile, one entry per present tile */
    uint64_t n_map;
    /* Focal planes and optical paths of frames placed one by one (TILED_SPARSE with per-frame
     * Z offsets or optical path identifiers): their counts; {1, 1} otherwise. */
    int64_t frame_planes[2];
} image;

typedef struct dicom_slide {
    instance **instances;
    uint32_t n_instances, cap_instances;
    image **images;
    uint32_t n_images, cap_images;
} dicom_slide;

/* ---- instances ------------------------------------------------------------------------------ */

static void instance_free(instance *in) {
    if (in == NULL) {
        return;
    }
    sp_dicom_close(in->dcm);
    if (in->own_src) {
        sp_source_close(in->src);
    }
    free(in->name);
    free(in);
}

static bool is_wsi(const sp_dicom *d) {
    char sop[UID_MAX];
    return (sp_dicom_string(d, SP_DICOM_MEDIA_SOP_CLASS_UID, 0, sop, sizeof sop) ||
            sp_dicom_string(d, SP_DICOM_SOP_CLASS_UID, 0, sop, sizeof sop)) &&
           strcmp(sop, WSI_SOP_CLASS) == 0;
}

/* Parse the file `name` (over `src` when given, borrowed) as a WSI instance. SP_E_NOT_A_SLIDE
 * when it is not a DICOM WSI file. */
static sp_status instance_load(const char *name, sp_source *src, const sp_limits *limits,
                               instance **out, sp_err *err) {
    *out = NULL;
    instance *in = calloc(1, sizeof *in);
    if (in == NULL || (in->name = strdup(name)) == NULL) {
        free(in);
        return sp_err_set(err, SP_E_NOMEM, "out of memory opening %s", name);
    }
    sp_status st = SP_OK;
    if (src != NULL) {
        in->src = src;
    } else {
        st = sp_source_open_file(name, &in->src, err);
        in->own_src = st == SP_OK;
    }
    uint8_t head[SP_DICOM_MAGIC_OFFSET + 4];
    if (st == SP_OK && sp_source_size(in->src) >= sizeof head) {
        st = sp_source_read(in->src, 0, head, sizeof head, err);
    }
    if (st == SP_OK &&
        (sp_source_size(in->src) < sizeof head || !sp_dicom_magic(head, sizeof head))) {
        st = sp_err_set(err, SP_E_NOT_A_SLIDE, "%s: not a DICOM file", name);
    }
    if (st == SP_OK) {
        st = sp_dicom_open(in->src, limits, NULL, &in->dcm, err);
    }
    if (st == SP_OK && !is_wsi(in->dcm)) {
        st = sp_err_set(err, SP_E_NOT_A_SLIDE, "%s: not a DICOM whole-slide image", name);
    }
    if (st == SP_OK &&
        !sp_dicom_string(in->dcm, SP_DICOM_SERIES_INSTANCE_UID, 0, in->series, sizeof in->series)) {
        st = sp_err_set(err, SP_E_CORRUPT, "%s: no SeriesInstanceUID", name);
    }
    if (st != SP_OK) {
        instance_free(in);
        return st;
    }
    sp_dicom_string(in->dcm, SP_DICOM_SOP_INSTANCE_UID, 0, in->sop, sizeof in->sop);
    sp_dicom_string(in->dcm, SP_DICOM_IMAGE_TYPE, 2, in->flavor, sizeof in->flavor);
    if (!sp_dicom_int(in->dcm, SP_DICOM_TOTAL_PIXEL_MATRIX_COLUMNS, &in->width) ||
        !sp_dicom_int(in->dcm, SP_DICOM_TOTAL_PIXEL_MATRIX_ROWS, &in->height)) {
        in->width = in->height = -1;
    }
    if (!sp_dicom_double(in->dcm, SP_DICOM_SHARED_Z_OFFSET, 0, &in->z) || !isfinite(in->z)) {
        in->z = 0;
    }
    sp_dicom_string(in->dcm, SP_DICOM_OPTICAL_PATH_IDENTIFIER, 0, in->path_id, sizeof in->path_id);
    *out = in;
    return SP_OK;
}

static sp_status keep_instance(dicom_slide *ds, instance *in, sp_err *err) {
    if (ds->n_instances == ds->cap_instances) {
        uint32_t cap = ds->cap_instances ? ds->cap_instances * 2 : 16;
        instance **grown = realloc(ds->instances, cap * sizeof *grown);
        if (grown == NULL) {
            instance_free(in);
            return sp_err_set(err, SP_E_NOMEM, "out of memory reading a DICOM series");
        }
        ds->instances = grown;
        ds->cap_instances = cap;
    }
    ds->instances[ds->n_instances++] = in;
    return SP_OK;
}

/* ---- directories ----------------------------------------------------------------------------- */

/* The entries of `dir`, sorted, at most MAX_DIRECTORY_ENTRIES. */
static sp_status list_directory(const char *dir, char ***out, size_t *count, sp_err *err) {
    sp_status st = sp_path_list(dir, MAX_DIRECTORY_ENTRIES, out, count, err);
    if (st == SP_E_LIMIT) {
        sp_err_set(err, st, "%s: more than %d directory entries to search for DICOM instances",
                   dir, MAX_DIRECTORY_ENTRIES);
    }
    return st;
}

/* The folder part of a file path ("." for a bare name). */
static char *parent_dir(const char *path) {
    const char *slash = strrchr(path, '/');
    if (slash == NULL) {
        return strdup(".");
    }
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    char *d = malloc(n + 1);
    if (d != NULL) {
        memcpy(d, path, n);
        d[n] = '\0';
    }
    return d;
}

/* Cheap check for detection: DICM magic and a WSI SOP class in the File Meta group. */
static bool source_is_wsi(sp_source *src, const sp_limits *limits) {
    uint8_t head[SP_DICOM_MAGIC_OFFSET + 4];
    sp_err ignored = {0};
    if (sp_source_size(src) < sizeof head ||
        sp_source_read(src, 0, head, sizeof head, &ignored) != SP_OK ||
        !sp_dicom_magic(head, sizeof head)) {
        return false;
    }
    sp_dicom_options o;
    sp_dicom_options_default(&o);
    o.meta_only = true;
    sp_dicom *d = NULL;
    bool yes = sp_dicom_open(src, limits, &o, &d, &ignored) == SP_OK && is_wsi(d);
    sp_dicom_close(d);
    return yes;
}

static bool directory_has_wsi(const char *dir, const sp_limits *limits) {
    char **names;
    size_t n;
    sp_err ignored = {0};
    if (list_directory(dir, &names, &n, &ignored) != SP_OK) {
        return false;
    }
    bool found = false;
    for (size_t i = 0; !found && i < n; i++) {
        char *path = sp_path_join(dir, names[i]);
        sp_path_info info = sp_path_look(path);
        sp_source *src = NULL;
        if (path != NULL && info.is_file && info.size > SP_DICOM_MAGIC_OFFSET &&
            sp_source_open_file(path, &src, &ignored) == SP_OK) {
            found = source_is_wsi(src, limits);
            sp_source_close(src);
        }
        free(path);
    }
    sp_path_names_free(names, n);
    return found;
}

/* Add every WSI instance of `dir` in the series `series` (or, when series is empty, of the
 * series of the first WSI file by name, copied into `series`). `skip` is the start file, already
 * loaded. Files that are not DICOM WSI instances, or that do not parse, are ignored. */
static sp_status scan_directory(dicom_slide *ds, const char *dir, const sp_path_info *skip,
                                char series[UID_MAX], const sp_limits *limits, sp_err *err) {
    char **names;
    size_t n;
    sp_status st = list_directory(dir, &names, &n, err);
    for (size_t i = 0; st == SP_OK && i < n; i++) {
        char *path = sp_path_join(dir, names[i]);
        if (path == NULL) {
            st = sp_err_set(err, SP_E_NOMEM, "out of memory listing %s", dir);
            break;
        }
        sp_path_info info = sp_path_look(path);
        if (!info.is_file || info.size <= SP_DICOM_MAGIC_OFFSET + 4 ||
            (skip != NULL && info.id[0] == skip->id[0] && info.id[1] == skip->id[1])) {
            free(path);
            continue;
        }
        instance *in = NULL;
        sp_err why = {0};
        sp_status loaded = instance_load(path, NULL, limits, &in, &why);
        if (loaded == SP_E_NOMEM || loaded == SP_E_IO) {
            /* Not "this file is no instance of ours": the series would open without it. */
            st = sp_err_set(err, loaded, "%s", why.msg);
        } else if (loaded == SP_OK) {
            if (series[0] == '\0') {
                memcpy(series, in->series, UID_MAX);
            }
            if (strcmp(in->series, series) == 0) {
                st = keep_instance(ds, in, err);
            } else {
                instance_free(in);
            }
        }
        free(path);
    }
    sp_path_names_free(names, n);
    return st;
}

/* ---- images: geometry, codec, tile map ---------------------------------------------------------
 */

static void image_free(image *im) {
    if (im != NULL) {
        free(im->members);
        free(im->map);
        free(im);
    }
}

static const char *syntax_name(const char *uid) {
    static const struct {
        const char *uid, *name;
    } NAMES[] = {
        {"1.2.840.10008.1.2.4.57", "JPEG lossless"},
        {"1.2.840.10008.1.2.4.70", "JPEG lossless SV1"},
        {"1.2.840.10008.1.2.4.80", "JPEG-LS lossless"},
        {"1.2.840.10008.1.2.4.81", "JPEG-LS near-lossless"},
        {"1.2.840.10008.1.2.5", "RLE lossless"},
        {"1.2.840.10008.1.2.4.110", "JPEG XL lossless"},
        {"1.2.840.10008.1.2.4.111", "JPEG XL recompression"},
        {"1.2.840.10008.1.2.4.112", "JPEG XL"},
        {"1.2.840.10008.1.2.8.1", "deflated image frames"},
    };
    for (size_t i = 0; i < sizeof NAMES / sizeof NAMES[0]; i++) {
        if (strcmp(uid, NAMES[i].uid) == 0) {
            return NAMES[i].name;
        }
    }
    return "unknown";
}

/* The codec and pixel layout of an instance, or SP_E_UNSUPPORTED. */
static sp_status pixel_setup(const instance *in, image *im, sp_err *err) {
    const sp_dicom *d = in->dcm;
    const char *ts = d->transfer_syntax;
    static const char *const JPEG[] = {"1.2.840.10008.1.2.4.50", "1.2.840.10008.1.2.4.51"};
    static const char *const J2K[] = {"1.2.840.10008.1.2.4.90", "1.2.840.10008.1.2.4.91",
                                      "1.2.840.10008.1.2.4.201", "1.2.840.10008.1.2.4.202",
                                      "1.2.840.10008.1.2.4.203"};
    bool found = false;
    if (strcmp(ts, "1.2.840.10008.1.2") == 0 || strcmp(ts, "1.2.840.10008.1.2.1") == 0) {
        im->codec = CODEC_NATIVE;
        found = true;
    }
    for (size_t i = 0; !found && i < sizeof JPEG / sizeof JPEG[0]; i++) {
        if (strcmp(ts, JPEG[i]) == 0) {
            im->codec = CODEC_JPEG;
            found = true;
        }
    }
    for (size_t i = 0; !found && i < sizeof J2K / sizeof J2K[0]; i++) {
        if (strcmp(ts, J2K[i]) == 0) {
            im->codec = CODEC_J2K;
            found = true;
        }
    }
    if (!found) {
        return sp_err_set(err, SP_E_UNSUPPORTED, "%s: transfer syntax %s (%s) is not supported",
                          in->name, ts, syntax_name(ts));
    }
    if (d->has_pixel_data && d->encapsulated != (im->codec != CODEC_NATIVE)) {
        return sp_err_set(err, SP_E_CORRUPT, "%s: %s pixel data for transfer syntax %s", in->name,
                          d->encapsulated ? "encapsulated" : "native", ts);
    }
    int64_t bits = 8, sign = 0;
    sp_dicom_int(d, SP_DICOM_BITS_ALLOCATED, &bits);
    sp_dicom_int(d, SP_DICOM_PIXEL_REPRESENTATION, &sign);
    if (bits != 8 || sign != 0) {
        return sp_err_set(err, SP_E_UNSUPPORTED,
                          "%s: %lld-bit %s samples (only unsigned 8-bit samples are read)",
                          in->name, (long long)bits, sign ? "signed" : "unsigned");
    }
    char photometric[24] = "";
    sp_dicom_string(d, SP_DICOM_PHOTOMETRIC_INTERPRETATION, 0, photometric, sizeof photometric);
    bool colour = true;
    if (strcmp(photometric, "RGB") == 0) {
        im->pixels = PIXEL_RGB;
    } else if (strcmp(photometric, "MONOCHROME2") == 0 || strcmp(photometric, "MONOCHROME1") == 0) {
        im->pixels = photometric[10] == '2' ? PIXEL_GREY : PIXEL_GREY_INVERT;
        colour = false;
    } else if (im->codec == CODEC_JPEG &&
               (strcmp(photometric, "YBR_FULL_422") == 0 || strcmp(photometric, "YBR_FULL") == 0)) {
        im->pixels = PIXEL_YBR;
    } else if (im->codec == CODEC_J2K &&
               (strcmp(photometric, "YBR_ICT") == 0 || strcmp(photometric, "YBR_RCT") == 0)) {
        im->pixels = PIXEL_RGB; /* OpenJPEG undoes the component transform */
    } else if (im->codec == CODEC_J2K && strcmp(photometric, "YBR_FULL") == 0) {
        im->pixels = PIXEL_YBR;
    } else {
        return sp_err_set(err, SP_E_UNSUPPORTED,
                          "%s: PhotometricInterpretation '%s' is not supported with transfer "
                          "syntax %s",
                          in->name, photometric, ts);
    }
    im->samples = colour ? 3 : 1;
    int64_t samples = im->samples;
    if (sp_dicom_has(d, SP_DICOM_SAMPLES_PER_PIXEL) &&
        (!sp_dicom_int(d, SP_DICOM_SAMPLES_PER_PIXEL, &samples) || samples != im->samples)) {
        return sp_err_set(err, SP_E_UNSUPPORTED, "%s: %lld samples per pixel for %s", in->name,
                          (long long)samples, photometric);
    }
    im->planar = 0;
    sp_dicom_int(d, SP_DICOM_PLANAR_CONFIGURATION, &im->planar);
    if (im->codec == CODEC_NATIVE && colour && im->planar != 0 && im->planar != 1) {
        return sp_err_set(err, SP_E_CORRUPT, "%s: PlanarConfiguration %lld", in->name,
                          (long long)im->planar);
    }
    return SP_OK;
}

static bool is_tiled_full(const instance *in) {
    char org[32];
    return sp_dicom_string(in->dcm, SP_DICOM_DIMENSION_ORGANIZATION_TYPE, 0, org, sizeof org) &&
           strcmp(org, "TILED_FULL") == 0;
}

static int tile_ref_cmp(const void *a, const void *b) {
    const tile_ref *x = a, *y = b;
    if (x->tile != y->tile) {
        return x->tile < y->tile ? -1 : 1;
    }
    if (x->member != y->member) {
        return x->member < y->member ? -1 : 1;
    }
    return (x->frame > y->frame) - (x->frame < y->frame);
}

static size_t distinct(void *items, size_t n, size_t size, int (*cmp)(const void *, const void *));
static int compare_doubles(const void *a, const void *b);
static int compare_path_ids(const void *a, const void *b);

/* The Z offset and optical path of the frames placed one by one that `plane` (z, c) asks for
 * (plane (0, 0) when it is beyond them: the slide layer refuses it), counting the planes into
 * im->frame_planes: z from the lowest offset, c in identifier order. A frame without a Z offset
 * is at 0, one without an identifier on path "". */
static sp_status frame_plane(image *im, const int64_t plane[2], double *z, const char **path_id,
                             sp_err *err) {
    uint64_t total = 0;
    for (uint32_t k = 0; k < im->n_members; k++) {
        const sp_dicom *d = im->members[k]->dcm;
        total += is_tiled_full(im->members[k]) ? 0
                 : d->n_frames < d->n_positions ? d->n_frames
                                                : d->n_positions;
    }
    double *zs = malloc((total ? total : 1) * sizeof *zs);
    const char **ids = malloc((total ? total : 1) * sizeof *ids);
    if (zs == NULL || ids == NULL) {
        free(zs);
        free(ids);
        return sp_err_set(err, SP_E_NOMEM, "out of memory opening a DICOM level");
    }
    static const char none[] = "";
    size_t n = 0;
    for (uint32_t k = 0; k < im->n_members; k++) {
        const sp_dicom *d = im->members[k]->dcm;
        for (uint64_t i = 0; !is_tiled_full(im->members[k]) && i < d->n_frames &&
                             i < d->n_positions;
             i++, n++) {
            zs[n] = d->positions[i].z; /* 0 where absent */
            ids[n] = d->positions[i].path_id;
        }
    }
    im->frame_planes[0] = n ? (int64_t)distinct(zs, n, sizeof *zs, compare_doubles) : 1;
    im->frame_planes[1] = n ? (int64_t)distinct(ids, n, sizeof *ids, compare_path_ids) : 1;
    bool asked = plane[0] < im->frame_planes[0] && plane[1] < im->frame_planes[1];
    *z = n ? zs[asked ? plane[0] : 0] : 0;
    *path_id = n ? ids[asked ? plane[1] : 0] : none;
    free(zs);
    free(ids); /* the identifiers point into the members' positions, which stay */
    return SP_OK;
}

/* Map the frames of every member to tiles (sparse organisations and concatenations), only
 * those of focal plane and optical path `plane` where frames are placed one by one. */
static sp_status build_tile_map(image *im, const int64_t plane[2], const sp_limits *limits,
                                sp_err *err) {
    double want_z = 0;
    const char *want_path = NULL;
    sp_status planes = frame_plane(im, plane, &want_z, &want_path, err);
    if (planes != SP_OK) {
        return planes;
    }
    uint64_t total = 0;
    for (uint32_t k = 0; k < im->n_members; k++) {
        total += im->members[k]->dcm->n_frames; /* each bounded by the frame limit */
    }
    sp_status st = sp_calloc(limits, total ? total : 1, sizeof *im->map, "DICOM tile map",
                             (void **)&im->map, err);
    if (st != SP_OK) {
        return st;
    }
    uint64_t tiles = (uint64_t)im->across * (uint64_t)im->down, n = 0;
    for (uint32_t k = 0; st == SP_OK && k < im->n_members; k++) {
        const instance *in = im->members[k];
        const sp_dicom *d = in->dcm;
        if (is_tiled_full(in)) {
            int64_t offset = 0;
            sp_dicom_int(d, SP_DICOM_CONCATENATION_FRAME_OFFSET, &offset);
            for (uint64_t i = 0; offset >= 0 && i < d->n_frames; i++) {
                uint64_t t = (uint64_t)offset + i;
                if (t < tiles) {
                    im->map[n++] = (tile_ref){t, k, i};
                }
            }
            continue;
        }
        uint64_t placed = 0;
        for (uint64_t i = 0; i < d->n_frames && i < d->n_positions; i++) {
            int64_t c = d->positions[i].column, r = d->positions[i].row;
            if (c == SP_DICOM_NO_POSITION || r == SP_DICOM_NO_POSITION) {
                continue;
            }
            placed++;
            if (d->positions[i].z != want_z || strcmp(d->positions[i].path_id, want_path) != 0) {
                continue; /* another focal plane or optical path */
            }
            if (c < 1 || r < 1 || c > im->width || r > im->height) {
                continue; /* outside the image: not a tile of this level */
            }
            if ((c - 1) % im->tile_w != 0 || (r - 1) % im->tile_h != 0) {
                st = sp_err_set(err, SP_E_UNSUPPORTED,
                                "%s: frame %llu at (%lld, %lld) is not on the %lldx%lld tile grid",
                                in->name, (unsigned long long)i + 1, (long long)c, (long long)r,
                                (long long)im->tile_w, (long long)im->tile_h);
                break;
            }
            uint64_t t = (uint64_t)((r - 1) / im->tile_h) * (uint64_t)im->across +
                         (uint64_t)((c - 1) / im->tile_w);
            im->map[n++] = (tile_ref){t, k, i};
        }
        if (st == SP_OK && placed == 0) {
            if (d->n_frames == 1 && tiles == 1) {
                im->map[n++] = (tile_ref){0, k, 0};
            } else {
                st = sp_err_set(err, SP_E_CORRUPT,
                                "%s: a %s instance without frame positions "
                                "(PerFrameFunctionalGroupsSequence > PlanePositionSlideSequence)",
                                in->name, "TILED_SPARSE");
            }
        }
    }
    if (st != SP_OK) {
        return st;
    }
    qsort(im->map, n, sizeof *im->map, tile_ref_cmp);
    /* The first frame of a tile wins (frames of one plane placed twice). */
    uint64_t kept = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (kept == 0 || im->map[kept - 1].tile != im->map[i].tile) {
            im->map[kept++] = im->map[i];
        }
    }
    im->n_map = kept;
    return SP_OK;
}

static int member_cmp(const void *a, const void *b) {
    int64_t x = 0, y = 0;
    sp_dicom_int((*(instance *const *)a)->dcm, SP_DICOM_IN_CONCATENATION_NUMBER, &x);
    sp_dicom_int((*(instance *const *)b)->dcm, SP_DICOM_IN_CONCATENATION_NUMBER, &y);
    return (x > y) - (x < y);
}

/* Build an image from its instances (all of one level, or one associated image). */
static sp_status image_create(instance **members, uint32_t n, bool associated,
                              const int64_t plane[2], const sp_limits *limits, image **out,
                              sp_err *err) {
    *out = NULL;
    image *im = calloc(1, sizeof *im);
    if (im == NULL || (im->members = calloc(n, sizeof *im->members)) == NULL) {
        free(im);
        return sp_err_set(err, SP_E_NOMEM, "out of memory opening a DICOM level");
    }
    im->frame_planes[0] = im->frame_planes[1] = 1;
    memcpy(im->members, members, n * sizeof *members);
    im->n_members = n;
    if (n > 1) {
        qsort(im->members, n, sizeof *im->members, member_cmp);
    }
    const instance *first = im->members[0];
    const sp_dicom *d = first->dcm;
    sp_status st = SP_OK;
    /* Columns and Rows are US, the total matrix UL: anything larger is not from a valid file
     * (and would overflow the tile arithmetic). */
    if (!sp_dicom_int(d, SP_DICOM_COLUMNS, &im->tile_w) ||
        !sp_dicom_int(d, SP_DICOM_ROWS, &im->tile_h) || im->tile_w <= 0 || im->tile_h <= 0 ||
        im->tile_w > UINT16_MAX || im->tile_h > UINT16_MAX) {
        st = sp_err_set(err, SP_E_CORRUPT, "%s: no usable Columns and Rows", first->name);
    }
    im->width = first->width;
    im->height = first->height;
    if (st == SP_OK && im->width < 0 && associated) {
        im->width = im->tile_w; /* an associated image need not say its total size */
        im->height = im->tile_h;
    }
    if (st == SP_OK &&
        (im->width <= 0 || im->height <= 0 || im->width > UINT32_MAX || im->height > UINT32_MAX)) {
        st = sp_err_set(err, SP_E_CORRUPT, "%s: no usable TotalPixelMatrixColumns and Rows",
                        first->name);
    }
    if (st == SP_OK && im->tile_w * im->tile_h > limits->value[SP_LIMIT_MAX_TILE_PIXELS]) {
        st = sp_err_set(err, SP_E_LIMIT, "%s: %lldx%lld frames exceed the tile pixel limit",
                        first->name, (long long)im->tile_w, (long long)im->tile_h);
    }
    if (st == SP_OK) {
        im->across = (im->width + im->tile_w - 1) / im->tile_w;
        im->down = (im->height + im->tile_h - 1) / im->tile_h;
    }
    for (uint32_t k = 0; st == SP_OK && k < n; k++) {
        image probe = {0};
        instance *in = im->members[k];
        st = pixel_setup(in, k == 0 ? im : &probe, err);
        int64_t tw = 0, th = 0;
        if (st == SP_OK && k > 0 &&
            (probe.codec != im->codec || probe.pixels != im->pixels || probe.planar != im->planar ||
             !sp_dicom_int(in->dcm, SP_DICOM_COLUMNS, &tw) ||
             !sp_dicom_int(in->dcm, SP_DICOM_ROWS, &th) || tw != im->tile_w || th != im->tile_h)) {
            st = sp_err_set(err, SP_E_UNSUPPORTED,
                            "%s: concatenation members differ in frame size or encoding", in->name);
        }
        if (st == SP_OK) {
            st = sp_dicom_index_frames(in->dcm, err);
            if (st != SP_OK && err != NULL && strncmp(err->msg, in->name, strlen(in->name)) != 0) {
                char msg[SP_ERR_MSG_MAX * 2];
                snprintf(msg, sizeof msg, "%s: %s", in->name, err->msg);
                memcpy(err->msg, msg, sizeof err->msg - 1);
                err->msg[sizeof err->msg - 1] = '\0';
            }
        }
    }
    if (st == SP_OK) {
        im->direct = n == 1 && is_tiled_full(im->members[0]);
        if (!im->direct) {
            st = build_tile_map(im, plane, limits, err);
        }
    }
    if (st != SP_OK) {
        image_free(im);
        return st;
    }
    *out = im;
    return SP_OK;
}

static sp_status keep_image(dicom_slide *ds, image *im, sp_err *err) {
    if (ds->n_images == ds->cap_images) {
        uint32_t cap = ds->cap_images ? ds->cap_images * 2 : 16;
        image **grown = realloc(ds->images, cap * sizeof *grown);
        if (grown == NULL) {
            image_free(im);
            return sp_err_set(err, SP_E_NOMEM, "out of memory opening a DICOM slide");
        }
        ds->images = grown;
        ds->cap_images = cap;
    }
    ds->images[ds->n_images++] = im;
    return SP_OK;
}

/* ---- decoding ------------------------------------------------------------------------------- */

/* The colour space a JPEG stream declares through its own markers, or `fallback`. */
static sp_jpeg_space jpeg_stream_space(const uint8_t *p, size_t n, sp_jpeg_space fallback) {
    bool jfif = false;
    int adobe = -1;
    size_t i = 2;
    while (i + 4 <= n && p[i] == 0xFF) {
        uint8_t m = p[i + 1];
        if (m == 0xFF) {
            i++; /* fill byte */
            continue;
        }
        if (m == 0xD8 || m == 0x01 || (m >= 0xD0 && m <= 0xD7)) {
            i += 2;
            continue;
        }
        size_t len = (size_t)p[i + 2] << 8 | p[i + 3];
        if (m == 0xDA || (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC)) {
            break; /* colour markers precede the frame header */
        }
        if (m == 0xE0 && len >= 7 && i + 9 <= n && memcmp(p + i + 4, "JFIF", 5) == 0) {
            jfif = true;
        }
        if (m == 0xEE && len >= 14 && i + 16 <= n && memcmp(p + i + 4, "Adobe", 5) == 0) {
            adobe = p[i + 15];
        }
        i += 2 + len;
    }
    if (adobe == 0) {
        return SP_JPEG_SPACE_RGB;
    }
    if (adobe == 1 || (adobe < 0 && jfif)) {
        return SP_JPEG_SPACE_YCBCR;
    }
    return fallback;
}

static void invert_grey(uint8_t *rgba, uint64_t stride, int64_t w, int64_t h) {
    for (int64_t y = 0; y < h; y++) {
        uint8_t *o = rgba + (uint64_t)y * stride;
        for (int64_t x = 0; x < w; x++, o += 4) {
            o[0] = o[1] = o[2] = (uint8_t)(255 - o[0]);
        }
    }
}

static void native_to_rgba(const image *im, const uint8_t *src, uint8_t *rgba, uint64_t stride) {
    uint64_t plane = (uint64_t)im->tile_w * (uint64_t)im->tile_h;
    for (int64_t y = 0; y < im->tile_h; y++) {
        uint8_t *o = rgba + (uint64_t)y * stride;
        uint64_t row = (uint64_t)y * (uint64_t)im->tile_w;
        for (int64_t x = 0; x < im->tile_w; x++, o += 4) {
            uint64_t at = row + (uint64_t)x;
            if (im->samples == 1) {
                uint8_t v = src[at];
                o[0] = o[1] = o[2] = im->pixels == PIXEL_GREY_INVERT ? (uint8_t)(255 - v) : v;
            } else if (im->planar == 0) {
                o[0] = src[3 * at];
                o[1] = src[3 * at + 1];
                o[2] = src[3 * at + 2];
            } else {
                o[0] = src[at];
                o[1] = src[plane + at];
                o[2] = src[2 * plane + at];
            }
            o[3] = 255;
        }
    }
}

/* Decode frame `frame` of member `k` into a tile_w x tile_h RGBA area (already zeroed). */
static sp_status decode_frame(const image *im, uint32_t k, uint64_t frame, uint8_t *rgba,
                              uint64_t stride, sp_err *err) {
    const instance *in = im->members[k];
    uint8_t *data = NULL;
    size_t len = 0;
    sp_err local = {0};
    sp_status st = sp_dicom_read_frame(in->dcm, frame, &data, &len, &local);
    if (st == SP_OK) {
        uint64_t w = (uint64_t)im->tile_w, h = (uint64_t)im->tile_h;
        bool grey = im->pixels == PIXEL_GREY || im->pixels == PIXEL_GREY_INVERT;
        sp_jpeg_space declared = grey                      ? SP_JPEG_SPACE_GREY
                                 : im->pixels == PIXEL_YBR ? SP_JPEG_SPACE_YCBCR
                                                           : SP_JPEG_SPACE_RGB;
        switch (im->codec) {
        case CODEC_JPEG:
            st = sp_jpeg_decode_rgba(data, len, NULL, 0,
                                     grey ? declared : jpeg_stream_space(data, len, declared), w, h,
                                     rgba, stride, &local);
            break;
        case CODEC_J2K:
            st = sp_j2k_decode_rgba(data, len, grey ? SP_JPEG_SPACE_AUTO : declared, w, h, rgba,
                                    stride, &local);
            break;
        case CODEC_NATIVE:
            if (len < w * h * (uint64_t)im->samples) {
                st = sp_err_set(&local, SP_E_CORRUPT, "%zu bytes for %llux%llux%lld samples", len,
                                (unsigned long long)w, (unsigned long long)h,
                                (long long)im->samples);
            } else {
                native_to_rgba(im, data, rgba, stride);
            }
            break;
        }
        if (st == SP_OK && im->codec != CODEC_NATIVE && im->pixels == PIXEL_GREY_INVERT) {
            invert_grey(rgba, stride, im->tile_w, im->tile_h);
        }
    }
    free(data);
    if (st != SP_OK) {
        return sp_err_set(err, st, "%s: frame %llu: %s", in->name, (unsigned long long)frame + 1,
                          local.msg[0] ? local.msg : sp_status_str(st));
    }
    return SP_OK;
}

/* The member and frame holding tile (col, row), or false for a missing tile. */
static bool find_tile(const image *im, int64_t col, int64_t row, uint32_t *k, uint64_t *frame) {
    uint64_t t = (uint64_t)row * (uint64_t)im->across + (uint64_t)col;
    if (im->direct) {
        *k = 0;
        *frame = im->frame_base + t;
        return *frame < im->members[0]->dcm->n_frames;
    }
    uint64_t lo = 0, hi = im->n_map;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (im->map[mid].tile == t) {
            *k = im->map[mid].member;
            *frame = im->map[mid].frame;
            return true;
        }
        if (im->map[mid].tile < t) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return false;
}

static sp_status image_read_tile(const image *im, int64_t col, int64_t row, uint8_t *rgba,
                                 uint64_t stride, sp_err *err) {
    for (int64_t y = 0; y < im->tile_h; y++) {
        memset(rgba + (uint64_t)y * stride, 0, (size_t)im->tile_w * 4);
    }
    uint32_t k;
    uint64_t frame;
    if (col < 0 || row < 0 || col >= im->across || row >= im->down ||
        !find_tile(im, col, row, &k, &frame)) {
        return SP_OK; /* missing: transparent */
    }
    return decode_frame(im, k, frame, rgba, stride, err);
}

static sp_status dicom_read_tile(sp_slide *s, const sp_level *l, int64_t col, int64_t row,
                                 uint8_t *rgba, uint64_t stride, sp_err *err) {
    return image_read_tile(l->priv, col, row, rgba, stride, err);
}

/* Partial decoding (docs/reading.md): JPEG frames at 1/1 to 1/8, JPEG 2000 frames at 1/1;
 * inverted grey needs the whole-frame path. */
static unsigned dicom_area_scales(sp_slide *s, const sp_level *l) {
    const image *im = l->priv;
    if (im->pixels == PIXEL_GREY_INVERT) {
        return 0;
    }
    return im->codec == CODEC_JPEG ? 1u | 2u | 4u | 8u | SP_AREA_OPAQUE
           : im->codec == CODEC_J2K ? 1u
                                    : 0u;
}

static sp_status dicom_read_tile_area(sp_slide *s, const sp_level *l, int64_t col, int64_t row,
                                      unsigned scale, int64_t x, int64_t y, int64_t w, int64_t h,
                                      sp_pixel_format format, uint8_t *dst, int64_t stride,
                                      const uint8_t *empty, sp_err *err) {
    const image *im = l->priv;
    int bpp = sp_pixel_format_bytes(format);
    uint32_t k;
    uint64_t frame;
    if (col < 0 || row < 0 || col >= im->across || row >= im->down ||
        !find_tile(im, col, row, &k, &frame)) {
        sp_fill_pixels(dst, stride, w, h, bpp, empty); /* missing: transparent */
        return SP_OK;
    }
    const instance *in = im->members[k];
    uint8_t *data = NULL;
    size_t len = 0;
    sp_err local = {0};
    uint64_t vw = 0, vh = 0;
    sp_status st = sp_dicom_read_frame(in->dcm, frame, &data, &len, &local);
    if (st == SP_OK) {
        bool grey = im->pixels == PIXEL_GREY;
        sp_jpeg_space declared = grey                      ? SP_JPEG_SPACE_GREY
                                 : im->pixels == PIXEL_YBR ? SP_JPEG_SPACE_YCBCR
                                                           : SP_JPEG_SPACE_RGB;
        uint64_t tw = (uint64_t)im->tile_w, th = (uint64_t)im->tile_h;
        if (im->codec == CODEC_JPEG) {
            st = sp_jpeg_decode_area(data, len, NULL, 0,
                                     grey ? declared : jpeg_stream_space(data, len, declared),
                                     scale, (uint64_t)x, (uint64_t)y, (uint64_t)w, (uint64_t)h,
                                     (unsigned)bpp, dst, (size_t)stride, &vw, &vh, &local);
        } else {
            st = sp_j2k_decode_area(data, len, grey ? SP_JPEG_SPACE_AUTO : declared, tw, th,
                                    (uint64_t)x, (uint64_t)y, (uint64_t)w, (uint64_t)h,
                                    (unsigned)bpp, dst, (size_t)stride, &vw, &vh, &local);
        }
        /* a frame larger than the tile is cut at the tile, as in the whole-frame decode */
        vw = vw < (tw + scale - 1) / scale ? vw : (tw + scale - 1) / scale;
        vh = vh < (th + scale - 1) / scale ? vh : (th + scale - 1) / scale;
    }
    free(data);
    if (st != SP_OK) {
        return sp_err_set(err, st, "%s: frame %llu: %s", in->name, (unsigned long long)frame + 1,
                          local.msg[0] ? local.msg : sp_status_str(st));
    }
    sp_fill_uncovered(dst, stride, (uint64_t)x, (uint64_t)y, (uint64_t)w, (uint64_t)h, vw, vh,
                      bpp, empty);
    return SP_OK;
}

static sp_status dicom_read_associated(sp_slide *s, const sp_associated *a, uint8_t *rgba,
                                       uint64_t stride, sp_err *err) {
    const image *im = a->priv;
    uint64_t tile_stride = (uint64_t)im->tile_w * 4;
    uint8_t *tile = NULL;
    sp_status st = sp_alloc(&s->limits, tile_stride * (uint64_t)im->tile_h, "tile buffer",
                            (void **)&tile, err);
    for (int64_t row = 0; st == SP_OK && row < im->down; row++) {
        for (int64_t col = 0; st == SP_OK && col < im->across; col++) {
            st = image_read_tile(im, col, row, tile, tile_stride, err);
            int64_t x0 = col * im->tile_w, y0 = row * im->tile_h;
            int64_t w = im->width - x0 < im->tile_w ? im->width - x0 : im->tile_w;
            int64_t h = im->height - y0 < im->tile_h ? im->height - y0 : im->tile_h;
            for (int64_t y = 0; st == SP_OK && y < h; y++) {
                memcpy(rgba + (uint64_t)(y0 + y) * stride + (uint64_t)x0 * 4,
                       tile + (uint64_t)y * tile_stride, (size_t)w * 4);
            }
        }
    }
    free(tile);
    return st;
}

static void dicom_destroy(sp_slide *s) {
    dicom_slide *ds = s->priv;
    if (ds == NULL) {
        return;
    }
    for (uint32_t i = 0; i < ds->n_images; i++) {
        image_free(ds->images[i]);
    }
    for (uint32_t i = 0; i < ds->n_instances; i++) {
        instance_free(ds->instances[i]);
    }
    free(ds->images);
    free(ds->instances);
    free(ds);
    s->priv = NULL;
}

/* Pass the announced tiles' frame bytes to each member file's source, so that a remote file
 * sends for them at once. */
static void dicom_prefetch(sp_slide *s, const sp_level *l, const sp_tile_pos *tiles, size_t n) {
    (void)s;
    const image *im = l->priv;
    sp_byte_range ranges[2 * SP_PREFETCH_TILES];
    size_t count = 0;
    sp_source *src = NULL;
    for (size_t i = 0; i < n; i++) {
        uint32_t k;
        uint64_t frame;
        if (!find_tile(im, tiles[i].col, tiles[i].row, &k, &frame)) {
            continue;
        }
        const instance *in = im->members[k];
        if (src != in->src || count == sizeof ranges / sizeof ranges[0]) {
            if (src != NULL) {
                sp_source_prefetch(src, ranges, count);
            }
            src = in->src;
            count = 0;
        }
        count += sp_dicom_frame_ranges(in->dcm, frame, ranges + count,
                                       sizeof ranges / sizeof ranges[0] - count);
    }
    if (src != NULL) {
        sp_source_prefetch(src, ranges, count);
    }
}

static const sp_slide_ops dicom_ops = {
    .read_tile = dicom_read_tile,
    .read_associated = dicom_read_associated,
    .destroy = dicom_destroy,
    .area_scales = dicom_area_scales,
    .read_tile_area = dicom_read_tile_area,
    .prefetch = dicom_prefetch,
};

/* ---- properties -------------------------------------------------------------------------------
 */

static sp_status add_string(sp_slide *s, const sp_dicom *d, sp_dicom_attr a, const char *key,
                            sp_err *err) {
    if (!sp_dicom_has(d, a)) {
        return SP_OK;
    }
    char *v = sp_dicom_string_dup(d, a);
    if (v == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory reading DICOM properties");
    }
    sp_status st = sp_props_set(&s->props, key, v, err);
    free(v);
    return st;
}

static sp_status add_number(sp_slide *s, const char *key, double v, sp_err *err) {
    char buf[64];
    sp_format_double(v, buf, sizeof buf);
    return sp_props_set(&s->props, key, buf, err);
}

static sp_status add_properties(sp_slide *s, const image *level0, sp_err *err) {
    static const struct {
        sp_dicom_attr attr;
        const char *key;
    } STRINGS[] = {
        {SP_DICOM_MANUFACTURER, "dicom.Manufacturer"},
        {SP_DICOM_MANUFACTURER_MODEL_NAME, "dicom.ManufacturerModelName"},
        {SP_DICOM_SERIES_DESCRIPTION, "dicom.SeriesDescription"},
        {SP_DICOM_STUDY_INSTANCE_UID, "dicom.StudyInstanceUID"},
        {SP_DICOM_SERIES_INSTANCE_UID, "dicom.SeriesInstanceUID"},
        {SP_DICOM_SOP_INSTANCE_UID, "dicom.SOPInstanceUID"},
        {SP_DICOM_IMAGE_TYPE, "dicom.ImageType"},
        {SP_DICOM_CONTAINER_IDENTIFIER, "dicom.ContainerIdentifier"},
        {SP_DICOM_BARCODE_VALUE, "dicom.BarcodeValue"},
        {SP_DICOM_TRANSFER_SYNTAX_UID, "dicom.TransferSyntaxUID"},
        {SP_DICOM_PHOTOMETRIC_INTERPRETATION, "dicom.PhotometricInterpretation"},
        {SP_DICOM_DIMENSION_ORGANIZATION_TYPE, "dicom.DimensionOrganizationType"},
        {SP_DICOM_PIXEL_SPACING, "dicom.PixelSpacing"},
        {SP_DICOM_OBJECTIVE_LENS_POWER, "dicom.ObjectiveLensPower"},
        {SP_DICOM_TOTAL_PIXEL_MATRIX_FOCAL_PLANES, "dicom.TotalPixelMatrixFocalPlanes"},
        {SP_DICOM_NUMBER_OF_OPTICAL_PATHS, "dicom.NumberOfOpticalPaths"},
    };
    const sp_dicom *d = level0->members[0]->dcm;
    sp_status st = SP_OK;
    for (size_t i = 0; st == SP_OK && i < sizeof STRINGS / sizeof STRINGS[0]; i++) {
        const char *key = STRINGS[i].key;
        int64_t v;
        bool binary = STRINGS[i].attr == SP_DICOM_TOTAL_PIXEL_MATRIX_FOCAL_PLANES ||
                      STRINGS[i].attr == SP_DICOM_NUMBER_OF_OPTICAL_PATHS;
        if (!binary) {
            st = add_string(s, d, STRINGS[i].attr, key, err);
        } else if (sp_dicom_int(d, STRINGS[i].attr, &v)) {
            st = add_number(s, key, (double)v, err);
        }
    }
    /* PixelSpacing is row spacing (y) then column spacing (x), in millimetres. */
    double row_mm, col_mm, power;
    if (st == SP_OK && sp_dicom_double(d, SP_DICOM_PIXEL_SPACING, 0, &row_mm) &&
        sp_dicom_double(d, SP_DICOM_PIXEL_SPACING, 1, &col_mm) && row_mm > 0 && col_mm > 0 &&
        row_mm < 1e9 && col_mm < 1e9) {
        st = add_number(s, SP_PROPERTY_MPP_X, col_mm * 1000.0, err);
        if (st == SP_OK) {
            st = add_number(s, SP_PROPERTY_MPP_Y, row_mm * 1000.0, err);
        }
    }
    if (st == SP_OK && sp_dicom_double(d, SP_DICOM_OBJECTIVE_LENS_POWER, 0, &power) && power > 0 &&
        power < 1e9) {
        st = add_number(s, SP_PROPERTY_OBJECTIVE_POWER, power, err);
    }
    const sp_dicom_value *icc = &d->attrs[SP_DICOM_ICC_PROFILE];
    if (st == SP_OK && icc->present && icc->len > 0) {
        st = sp_slide_set_icc_profile(s, icc->data, icc->len, err);
    }
    int64_t planes = 1, paths = 1;
    sp_dicom_int(d, SP_DICOM_TOTAL_PIXEL_MATRIX_FOCAL_PLANES, &planes);
    sp_dicom_int(d, SP_DICOM_NUMBER_OF_OPTICAL_PATHS, &paths);
    if (st == SP_OK && (planes > 1 || paths > 1)) {
        char note[160];
        snprintf(note, sizeof note, "focal plane %lld of %lld and optical path %lld of %lld",
                 (long long)s->plane[0], (long long)planes, (long long)s->plane[1],
                 (long long)paths);
        st = sp_props_set(&s->props, "dicom.slidepipe.plane", note, err);
    }
    return st;
}

/* ---- detect and open ------------------------------------------------------------------------- */

static bool has_tiff_suffix(const char *path) {
    size_t n = strlen(path);
    return (n >= 4 && strcmp(path + n - 4, ".tif") == 0) ||
           (n >= 5 && strcmp(path + n - 5, ".tiff") == 0);
}

static bool dicom_detect(const sp_probe *p) {
    if (p->is_directory) {
        return directory_has_wsi(p->path, p->limits);
    }
    if (p->src == NULL || !sp_dicom_magic(p->head, p->head_len)) {
        return false;
    }
    /* A dual-personality DICOM-TIFF named .tif/.tiff is left to the TIFF formats (OpenSlide's
     * rule). */
    if (p->tiff != NULL && has_tiff_suffix(p->path)) {
        return false;
    }
    return source_is_wsi(p->src, p->limits);
}

static const char *associated_name(const char *flavor) {
    if (strcmp(flavor, "LABEL") == 0) {
        return "label";
    }
    if (strcmp(flavor, "OVERVIEW") == 0) {
        return "macro";
    }
    if (strcmp(flavor, "THUMBNAIL") == 0) {
        return "thumbnail";
    }
    return NULL;
}

static const char *compression_name(codec_kind c) {
    return c == CODEC_JPEG ? "jpeg" : c == CODEC_J2K ? "jpeg2000" : "none";
}

/* Planes of a level stored as one TILED_FULL instance: its frames are ordered by tile, then
 * focal plane, then optical path (PS3.3 C.7.6.17.3), so plane (z, c) starts at frame
 * (c * focal planes + z) * tiles. The slide's plane counts are the fewest any level has (a level
 * of another organisation has one of each: its frames are placed by position, first plane
 * first); the requested plane (s->plane) is shown where every level has it, and the slide layer
 * refuses it otherwise. Time points do not exist in WSI instances. */
static sp_status select_plane(sp_slide *s, image *im, const int64_t instance_planes[2],
                              sp_err *err) {
    int64_t focal = 1, paths = 1;
    if (instance_planes[0] * instance_planes[1] > 1) {
        focal = instance_planes[0]; /* chosen with the instances or frames (plane_instances,
                                     * frame_plane) */
        paths = instance_planes[1];
    } else if (im->direct) {
        const sp_dicom *d = im->members[0]->dcm;
        sp_dicom_int(d, SP_DICOM_TOTAL_PIXEL_MATRIX_FOCAL_PLANES, &focal);
        sp_dicom_int(d, SP_DICOM_NUMBER_OF_OPTICAL_PATHS, &paths);
        focal = focal >= 1 && focal <= (1 << 20) ? focal : 1;
        paths = paths >= 1 && paths <= (1 << 20) ? paths : 1;
    }
    bool first = s->n_levels == 0;
    s->plane_count[0] = first || focal < s->plane_count[0] ? focal : s->plane_count[0];
    s->plane_count[1] = first || paths < s->plane_count[1] ? paths : s->plane_count[1];
    if (!im->direct || instance_planes[0] * instance_planes[1] > 1 || s->plane[0] >= focal ||
        s->plane[1] >= paths || (s->plane[0] == 0 && s->plane[1] == 0)) {
        return SP_OK;
    }
    uint64_t tiles = (uint64_t)im->across * (uint64_t)im->down;
    uint64_t index = (uint64_t)s->plane[1] * (uint64_t)focal + (uint64_t)s->plane[0];
    const instance *in = im->members[0];
    if (tiles != 0 && index > (in->dcm->n_frames - 1) / tiles) {
        return sp_err_set(err, SP_E_CORRUPT,
                          "%s: focal plane %lld of optical path %lld would start at frame %llu, "
                          "but the instance has %llu frames",
                          in->name, (long long)s->plane[0], (long long)s->plane[1],
                          (unsigned long long)(index * tiles + 1),
                          (unsigned long long)in->dcm->n_frames);
    }
    im->frame_base = index * tiles;
    return SP_OK;
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int compare_path_ids(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The distinct values of n sorted items, kept in place; returns how many. */
static size_t distinct(void *items, size_t n, size_t size, int (*cmp)(const void *, const void *)) {
    qsort(items, n, size, cmp);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        char *item = (char *)items + i * size;
        if (kept == 0 || cmp((char *)items + (kept - 1) * size, item) != 0) {
            memmove((char *)items + kept++ * size, item, size);
        }
    }
    return kept;
}

/* Where a level's focal planes or optical paths are separate instances (same size, different
 * Z offset or optical path identifier): count them (planes[0] the distinct Z offsets, from the
 * lowest; planes[1] the distinct identifiers, in string order) and keep in same[0..*n) only the
 * instances of the plane asked for (plane (0, 0) when it is beyond these counts: the slide layer
 * refuses it). */
static sp_status plane_instances(const sp_slide *s, instance **same, uint32_t *n, int64_t planes[2],
                                 sp_err *err) {
    double *zs = malloc(*n * sizeof *zs);
    const char **ids = malloc(*n * sizeof *ids);
    if (zs == NULL || ids == NULL) {
        free(zs);
        free(ids);
        return sp_err_set(err, SP_E_NOMEM, "out of memory opening a DICOM level");
    }
    for (uint32_t i = 0; i < *n; i++) {
        zs[i] = same[i]->z;
        ids[i] = same[i]->path_id;
    }
    planes[0] = (int64_t)distinct(zs, *n, sizeof *zs, compare_doubles);
    planes[1] = (int64_t)distinct(ids, *n, sizeof *ids, compare_path_ids);
    bool asked = s->plane[0] < planes[0] && s->plane[1] < planes[1];
    double z = zs[asked ? s->plane[0] : 0];
    const char *id = ids[asked ? s->plane[1] : 0];
    uint32_t kept = 0;
    for (uint32_t i = 0; i < *n; i++) {
        if (same[i]->z == z && strcmp(same[i]->path_id, id) == 0) {
            same[kept++] = same[i];
        }
    }
    *n = kept;
    free(zs);
    free(ids);
    return SP_OK;
}

/* Group the VOLUME instances by level size and add the levels. */
static sp_status add_levels(sp_slide *s, dicom_slide *ds, image **level0, sp_err *err) {
    uint32_t n = ds->n_instances;
    bool *used = calloc(n ? n : 1, sizeof *used);
    instance **group = calloc(n ? n : 1, sizeof *group);
    sp_status st = SP_OK;
    if (used == NULL || group == NULL) {
        st = sp_err_set(err, SP_E_NOMEM, "out of memory opening a DICOM slide");
    }
    *level0 = NULL;
    for (uint32_t i = 0; st == SP_OK && i < n; i++) {
        instance *a = ds->instances[i];
        if (used[i] || strcmp(a->flavor, "VOLUME") != 0) {
            continue;
        }
        /* Every instance of this size (a copied file once), then those of the plane shown. */
        uint32_t g = 0;
        group[g++] = a;
        used[i] = true;
        for (uint32_t j = i + 1; j < n; j++) {
            instance *b = ds->instances[j];
            if (used[j] || strcmp(b->flavor, "VOLUME") != 0 || b->width != a->width ||
                b->height != a->height) {
                continue;
            }
            used[j] = true;
            bool copy = false;
            for (uint32_t k = 0; k < g && b->sop[0] != '\0'; k++) {
                copy = copy || strcmp(group[k]->sop, b->sop) == 0;
            }
            if (!copy) {
                group[g++] = b;
            }
        }
        int64_t instance_planes[2] = {1, 1};
        st = plane_instances(s, group, &g, instance_planes, err);
        a = group[0];
        char concat_a[UID_MAX] = "";
        sp_dicom_string(a->dcm, SP_DICOM_CONCATENATION_UID, 0, concat_a, sizeof concat_a);
        for (uint32_t j = 1; st == SP_OK && j < g; j++) {
            instance *b = group[j];
            char concat_b[UID_MAX] = "";
            sp_dicom_string(b->dcm, SP_DICOM_CONCATENATION_UID, 0, concat_b, sizeof concat_b);
            if (concat_a[0] == '\0' || strcmp(concat_a, concat_b) != 0) {
                st = sp_err_set(err, SP_E_UNSUPPORTED,
                                "%s and %s both hold the %lldx%lld level's focal plane at Z %g and "
                                "optical path \"%s\" and are not parts of one concatenation",
                                a->name, b->name, (long long)a->width, (long long)a->height, a->z,
                                a->path_id);
            }
        }
        image *im = NULL;
        if (st == SP_OK) {
            st = image_create(group, g, false, s->plane, &s->limits, &im, err);
        }
        if (st == SP_OK) {
            st = keep_image(ds, im, err);
        }
        if (st == SP_OK && im->frame_planes[0] * im->frame_planes[1] > 1) {
            if (instance_planes[0] * instance_planes[1] > 1) {
                st = sp_err_set(err, SP_E_UNSUPPORTED,
                                "%s: a level with planes both in separate instances and frame by "
                                "frame",
                                a->name);
            }
            instance_planes[0] = im->frame_planes[0]; /* chosen in build_tile_map */
            instance_planes[1] = im->frame_planes[1];
        }
        if (st == SP_OK) {
            st = select_plane(s, im, instance_planes, err);
        }
        if (st == SP_OK) {
            sp_level l = {.width = im->width,
                          .height = im->height,
                          .tile_width = im->tile_w,
                          .tile_height = im->tile_h,
                          .compression = compression_name(im->codec),
                          .priv = im};
            st = sp_slide_add_level(s, &l, err);
            if (*level0 == NULL || im->width > (*level0)->width) {
                *level0 = im;
            }
        }
    }
    free(used);
    free(group);
    return st;
}

/* Associated images: the first instance of each flavour; one that cannot be read is skipped. */
static sp_status add_associated_images(sp_slide *s, dicom_slide *ds, sp_err *err) {
    sp_status st = SP_OK;
    for (uint32_t i = 0; st == SP_OK && i < ds->n_instances; i++) {
        instance *in = ds->instances[i];
        const char *name = associated_name(in->flavor);
        int64_t w, h;
        if (name == NULL || sp_slide_associated_dimensions(s, name, &w, &h) == SP_OK) {
            continue;
        }
        image *im = NULL;
        sp_err ignored = {0};
        static const int64_t first_plane[2] = {0, 0};
        if (image_create(&in, 1, true, first_plane, &s->limits, &im, &ignored) != SP_OK) {
            continue;
        }
        st = keep_image(ds, im, err);
        if (st == SP_OK) {
            st = sp_slide_add_associated(s, name, im->width, im->height, im, err);
        }
    }
    return st;
}

static sp_status dicom_open(sp_slide *s, sp_probe *p, sp_err *err) {
    dicom_slide *ds = calloc(1, sizeof *ds);
    if (ds == NULL) {
        return sp_err_set(err, SP_E_NOMEM, "out of memory opening %s", p->path);
    }
    s->priv = ds;
    s->ops = &dicom_ops; /* so that a failed open frees through destroy */
    char series[UID_MAX] = "";
    char *dir = NULL;
    sp_path_info start_info = {0};
    sp_status st = SP_OK;
    if (p->is_directory) {
        dir = strdup(p->path);
        if (dir == NULL) {
            st = sp_err_set(err, SP_E_NOMEM, "out of memory opening %s", p->path);
        }
    } else {
        instance *start = NULL;
        st = instance_load(p->path, p->src, &s->limits, &start, err);
        if (st == SP_OK) {
            memcpy(series, start->series, UID_MAX);
            st = keep_instance(ds, start, err);
        }
        /* The other instances live beside the file; a source that is not a file on disk (a
         * memory buffer under a made-up name) is read alone. */
        start_info = sp_path_look(p->path);
        if (st == SP_OK && start_info.is_file && (dir = parent_dir(p->path)) == NULL) {
            st = sp_err_set(err, SP_E_NOMEM, "out of memory opening %s", p->path);
        }
    }
    if (st == SP_OK && dir != NULL) {
        st = scan_directory(ds, dir, start_info.is_file ? &start_info : NULL, series, &s->limits,
                            err);
    }
    free(dir);
    if (st == SP_OK && ds->n_instances == 0) {
        st = sp_err_set(err, SP_E_NOT_A_SLIDE, "%s: no DICOM whole-slide image instance", p->path);
    }
    image *level0 = NULL;
    if (st == SP_OK) {
        st = add_levels(s, ds, &level0, err);
    }
    if (st == SP_OK && level0 == NULL) {
        st = sp_err_set(err, SP_E_CORRUPT, "%s: series %s has no VOLUME instance (pyramid level)",
                        p->path, series);
    }
    if (st == SP_OK) {
        st = add_associated_images(s, ds, err);
    }
    if (st == SP_OK) {
        st = add_properties(s, level0, err);
    }
    s->prefetch = st == SP_OK && s->src != NULL && sp_source_can_prefetch(s->src);
    return st;
}

const sp_format sp_format_dicom = {"dicom", dicom_detect, dicom_open};
