/* _core.h — what the extension's C files share: the Slide object, raising a status as
 * SlidepipeError, and the module functions of _stores.c (convert, process, verify) and of
 * _annotations.c (annotation files into label maps). */
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

/* convert, process and verify (_stores.c), and the option ids and values they take, as module
 * constants (CONVERT_CHUNK, ..., and CODECS, the codec names; 0 or -1 with an exception set). */
extern PyMethodDef store_methods[];
int add_store_constants(PyObject *m);

/* annotations_load, annotations_info and annotations_rasterize (_annotations.c), behind
 * slidepipe/labels.py. */
extern PyMethodDef annotation_methods[];

#endif
