/* _qc.c — tile_qc: the tile QC scores of the C API (sp_tile_qc_compute) for
 * slidepipe/qc.py, which builds the tile records and the structured result array; the scores
 * are computed with the GIL released, straight into the caller's array. */
#include "_core.h"

/* tile_qc(slide, tiles, out, level, size, threads): tiles a C-contiguous buffer of sp_tile
 * records (int64 x, int64 y, float64 tissue), out a writable C-contiguous buffer of as many
 * sp_tile_qc records (seven float64). */
static PyObject *core_tile_qc(PyObject *module, PyObject *args) {
    (void)module;
    PyObject *slide_obj, *tiles_obj, *out_obj;
    int level, threads;
    long long size;
    if (!PyArg_ParseTuple(args, "O!OOiLi", &core_slide_type, &slide_obj, &tiles_obj, &out_obj,
                          &level, &size, &threads)) {
        return NULL;
    }
    core_slide *s = (core_slide *)slide_obj;
    Py_buffer tv, ov;
    if (check_open(s) || PyObject_GetBuffer(tiles_obj, &tv, PyBUF_C_CONTIGUOUS) != 0) {
        return NULL;
    }
    if (tv.len % (Py_ssize_t)sizeof(sp_tile) != 0) {
        PyBuffer_Release(&tv);
        return PyErr_Format(PyExc_ValueError, "tiles must be whole sp_tile records");
    }
    size_t n = (size_t)tv.len / sizeof(sp_tile);
    if (get_out_buffer(out_obj, &ov, (int64_t)(n * sizeof(sp_tile_qc))) != 0) {
        PyBuffer_Release(&tv);
        return NULL;
    }
    char err[512];
    s->readers++;
    PyThreadState *ts = PyEval_SaveThread();
    sp_status st =
        sp_tile_qc_compute(s->slide, level, size, tv.buf, n, threads, ov.buf, err, sizeof err);
    PyEval_RestoreThread(ts);
    s->readers--;
    PyBuffer_Release(&tv);
    PyBuffer_Release(&ov);
    if (st != SP_OK) {
        return raise_status(st, err);
    }
    Py_RETURN_NONE;
}

PyMethodDef qc_methods[] = {
    {"tile_qc", core_tile_qc, METH_VARARGS, "tile_qc(slide, tiles, out, level, size, threads)"},
    {NULL, NULL, 0, NULL}};
