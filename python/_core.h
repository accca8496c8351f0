/* _core.h — what the extension's C files share: the Slide object, raising a status as
 * SlidepipeError, and the module functions of _stores.c (convert, process, verify), _loader.c
 * (the training loader), _annotations.c (annotation files into label maps) and _qc.c (tile QC
 * scores). */
#ifndef SP_PYTHON_CORE_H
#define SP_PYTHON_CORE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "slidepipe.h"

typedef struct {
    PyObject ob_base;
    sp_slide *slide;
    Py_ssize_t readers; /* reads in flight with the GIL released */
} core_slide;

extern PyTypeObject core_slide_type;

/* Raise SlidepipeError(message) with .code (the sp_status) and .status (its name); NULL. */
PyObject *raise_status(sp_status st, const char *message);

/* 0, or -1 with ValueError when the slide is closed. */
int check_open(const core_slide *s);

/* Borrow obj's memory as a writable, C-contiguous buffer of at least `need` bytes; 0, or -1
 * with an exception set. */
int get_out_buffer(PyObject *obj, Py_buffer *view, int64_t need);

/* Geometry parameters from Geometry._tuple() (0, or -1 with an exception set) and photometric
 * ones from Photometric.as_tuple() (nonzero on success); _augment_geometry.c, _augment_color.c. */
int parse_geometry_params(PyObject *t, sp_geometry_params *p);

/* Reinhard statistics from ReinhardStats._tuple(); nonzero on success (_stains.c). */
int parse_reinhard(PyObject *obj, sp_reinhard_stats *r);
int parse_photometric_params(PyObject *obj, sp_photometric_params *p);

/* Borrow a batch of `count` RGB8 patches of `pixels` pixels each (writable, C-contiguous; at
 * most 2^40 pixels in all) and its `count` uint64 seeds; 0, or -1 with ValueError and nothing
 * held. Release both with release_patches. */
int get_patches(PyObject *patches, PyObject *seeds, long long count, long long pixels,
                Py_buffer *view, Py_buffer *seeds_view);
void release_patches(Py_buffer *view, Py_buffer *seeds_view);

/* Stains from the tuple ((h0, h1, h2), (e0, e1, e2), max_h, max_e); nonzero on success. */
int parse_stains(PyObject *obj, sp_stains *s);

/* The loader, its batches and whole-image reads (_loader.c): types and module functions added
 * to the module; 0, or -1 with an exception set. */
int add_loader_types(PyObject *m);
extern PyMethodDef loader_methods[];

/* convert, process and verify (_stores.c), and the option ids and values they take, as module
 * constants (CONVERT_CHUNK, ..., and CODECS, the codec names; 0 or -1 with an exception set). */
extern PyMethodDef store_methods[];
int add_store_constants(PyObject *m);

/* annotations_load, annotations_info and annotations_rasterize (_annotations.c), behind
 * slidepipe/labels.py. */
extern PyMethodDef annotation_methods[];

/* augment_photometric and photometric_draw (_augment_color.c), behind
 * slidepipe/augment_color.py. */
extern PyMethodDef augment_color_methods[];

/* tile_qc (_qc.c), behind slidepipe/qc.py. */
extern PyMethodDef qc_methods[];
/* augment_geometry, geometry_draw and geometry_elastic_noise (_augment_geometry.c), behind
 * slidepipe/augment_geometry.py. */
extern PyMethodDef geometry_methods[];

/* Reinhard statistics and normalization, stain augmentation and cached estimates (_stains.c),
 * behind slidepipe/stain_tools.py. */
extern PyMethodDef stain_methods[];

#endif
