/* _annotations.c — the module functions behind slidepipe.labels: loading an annotation file
 * (GeoJSON or ASAP XML) into a capsule that owns the library's sp_annotations, reading its
 * classes and counts, and painting a window's label map into a caller's buffer with the GIL
 * released. A loaded set is read-only in the library, so any number of threads may rasterise
 * it at once; the capsule is freed only when the last reference goes, and a call in flight holds
 * one through its arguments. Shapes and friendly signatures are slidepipe/labels.py's. */
#include "_core.h"

#include <string.h>

static const char CAPSULE[] = "slidepipe.annotations";

static void free_capsule(PyObject *capsule) {
    sp_annotations_free(PyCapsule_GetPointer(capsule, CAPSULE));
}

static sp_annotations *get(PyObject *capsule) {
    return PyCapsule_GetPointer(capsule, CAPSULE); /* NULL with TypeError/ValueError set */
}

/* annotations_load(path) -> capsule */
static PyObject *ann_load(PyObject *module, PyObject *args) {
    PyObject *path = NULL;
    if (!PyArg_ParseTuple(args, "O&", PyUnicode_FSConverter, &path)) {
        return NULL;
    }
    char err[1024];
    sp_annotations *ann = NULL;
    PyThreadState *ts = PyEval_SaveThread();
    sp_status st = sp_annotations_load(PyBytes_AS_STRING(path), &ann, err, sizeof err);
    PyEval_RestoreThread(ts);
    Py_DECREF(path);
    if (st != SP_OK) {
        return raise_status(st, err);
    }
    PyObject *capsule = PyCapsule_New(ann, CAPSULE, free_capsule);
    if (capsule == NULL) {
        sp_annotations_free(ann);
    }
    return capsule;
}

/* annotations_info(capsule) -> (classes, feature_classes, skipped, bounds or None) */
static PyObject *ann_info(PyObject *module, PyObject *capsule) {
    sp_annotations *ann = get(capsule);
    if (ann == NULL) {
        return NULL;
    }
    int64_t nc = sp_annotations_class_count(ann), nf = sp_annotations_feature_count(ann);
    PyObject *classes = PyList_New((Py_ssize_t)nc);
    PyObject *features = PyList_New((Py_ssize_t)nf);
    PyObject *bounds = NULL, *r = NULL;
    if (classes == NULL || features == NULL) {
        goto done;
    }
    for (int64_t k = 0; k < nc; k++) {
        const char *name = sp_annotations_class_name(ann, k + 1);
        PyObject *s = PyUnicode_DecodeUTF8(name, (Py_ssize_t)strlen(name), "replace");
        if (s == NULL) {
            goto done;
        }
        PyList_SET_ITEM(classes, (Py_ssize_t)k, s);
    }
    for (int64_t i = 0; i < nf; i++) {
        PyObject *c = PyLong_FromLongLong(sp_annotations_feature_class(ann, i));
        if (c == NULL) {
            goto done;
        }
        PyList_SET_ITEM(features, (Py_ssize_t)i, c);
    }
    double b[4];
    if (sp_annotations_bounds(ann, &b[0], &b[1], &b[2], &b[3]) == SP_OK) {
        bounds = Py_BuildValue("(dddd)", b[0], b[1], b[2], b[3]);
    } else {
        bounds = Py_NewRef(Py_None);
    }
    if (bounds != NULL) {
        r = Py_BuildValue("(OOLO)", classes, features, (long long)sp_annotations_skipped(ann),
                          bounds);
    }
done:
    Py_XDECREF(bounds);
    Py_XDECREF(features);
    Py_XDECREF(classes);
    return r;
}

/* annotations_rasterize(capsule, out, downsample, x, y, width, height): out is a writable,
 * C-contiguous buffer of width * height bytes, filled row by row. */
static PyObject *ann_rasterize(PyObject *module, PyObject *args) {
    PyObject *capsule, *out;
    double d, x, y;
    long long w, h;
    if (!PyArg_ParseTuple(args, "OOdddLL", &capsule, &out, &d, &x, &y, &w, &h)) {
        return NULL;
    }
    sp_annotations *ann = get(capsule);
    if (ann == NULL) {
        return NULL;
    }
    if (w < 0 || h < 0 || (w > 0 && h > PY_SSIZE_T_MAX / w)) {
        return PyErr_Format(PyExc_ValueError, "bad label map size %lld x %lld", w, h);
    }
    Py_buffer view;
    if (PyObject_GetBuffer(out, &view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) != 0) {
        return NULL;
    }
    if (view.len != (Py_ssize_t)(w * h)) {
        PyBuffer_Release(&view);
        return PyErr_Format(PyExc_ValueError, "the label buffer must hold %lld bytes, not %zd",
                            w * h, view.len);
    }
    PyThreadState *ts = PyEval_SaveThread();
    sp_status st = sp_annotations_rasterize(ann, d, x, y, w, h, view.buf, w);
    PyEval_RestoreThread(ts);
    PyBuffer_Release(&view);
    if (st != SP_OK) {
        return raise_status(st, st == SP_E_INVALID_ARG
                                    ? "bad window (downsample must be finite and positive, the "
                                      "origin finite)"
                                    : NULL);
    }
    Py_RETURN_NONE;
}

PyMethodDef annotation_methods[] = {
    {"annotations_load", ann_load, METH_VARARGS,
     "annotations_load(path) -> capsule: a GeoJSON or ASAP XML annotation file"},
    {"annotations_info", ann_info, METH_O,
     "annotations_info(capsule) -> (classes, feature_classes, skipped, bounds or None)"},
    {"annotations_rasterize", ann_rasterize, METH_VARARGS,
     "annotations_rasterize(capsule, out, downsample, x, y, width, height): the label map"},
    {NULL, NULL, 0, NULL}};
