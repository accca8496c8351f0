/* _core.h — what the extension's C files share: the Slide object, raising a status as
 * SlidepipeError, and the module functions of _stores.c (convert, process, verify), _loader.c
 * (the training loader) and _annotations.c (annotation files into label maps). */
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

/* Reinhard statistics and normalization, stain augmentation and cached estimates (_stains.c),
 * behind slidepipe/stain_tools.py. */
extern PyMethodDef stain_methods[];

#endif
