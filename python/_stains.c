/* _stains.c — the module functions behind slidepipe/stain_tools.py: Reinhard statistics and
 * normalization, stain augmentation in a slide's Macenko stain space, and the cached per-slide
 * estimates (docs/stains.md). Public C API only; pixel work runs with the GIL released. */
#include "_core.h"

static PyObject *reinhard_tuple(const sp_reinhard_stats *r) {
    return Py_BuildValue("((ddd)(ddd)L)", r->mean[0], r->mean[1], r->mean[2], r->std[0], r->std[1],
                         r->std[2], (long long)r->pixels);
}

int parse_reinhard(PyObject *obj, sp_reinhard_stats *r) {
    long long pixels = 0;
    int ok = PyArg_ParseTuple(obj, "(ddd)(ddd)|L", &r->mean[0], &r->mean[1], &r->mean[2],
                              &r->std[0], &r->std[1], &r->std[2], &pixels);
    r->pixels = pixels;
    return ok;
}

/* An RGB8 buffer, writable and C-contiguous, of whole pixels; 0 or -1 with an exception. */
static int rgb_buffer(PyObject *obj, Py_buffer *view) {
    if (get_out_buffer(obj, view, 0) != 0) {
        return -1;
    }
    if (view->len % 3 != 0) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_ValueError, "RGB pixels take 3 bytes each");
        return -1;
    }
    return 0;
}

static PyObject *core_reinhard_reference(PyObject *module, PyObject *unused) {
    sp_reinhard_stats r;
    sp_reinhard_reference(&r);
    return reinhard_tuple(&r);
}

/* reinhard_stats(rgb, tissue_only) -> ((mean), (std), pixels) */
static PyObject *core_reinhard_stats(PyObject *module, PyObject *args) {
    PyObject *obj;
    int tissue_only;
    if (!PyArg_ParseTuple(args, "Op", &obj, &tissue_only)) {
        return NULL;
    }
    Py_buffer view;
    if (rgb_buffer(obj, &view) != 0) {
        return NULL;
    }
    sp_reinhard_stats r;
    PyThreadState *ts = PyEval_SaveThread();
    sp_status st = sp_reinhard_stats_compute(view.buf, (int64_t)(view.len / 3), tissue_only, &r);
    PyEval_RestoreThread(ts);
    PyBuffer_Release(&view);
    return st == SP_OK ? reinhard_tuple(&r) : raise_status(st, "no pixel to compute statistics of");
}

/* reinhard_normalize(rgb, source, target): in place */
static PyObject *core_reinhard_normalize(PyObject *module, PyObject *args) {
    PyObject *obj, *src_obj, *dst_obj;
    sp_reinhard_stats src = {0}, dst = {0};
    if (!PyArg_ParseTuple(args, "OOO", &obj, &src_obj, &dst_obj) ||
        !parse_reinhard(src_obj, &src) || !parse_reinhard(dst_obj, &dst)) {
        return NULL;
    }
    Py_buffer view;
    if (rgb_buffer(obj, &view) != 0) {
        return NULL;
    }
    PyThreadState *ts = PyEval_SaveThread();
    sp_status st = sp_reinhard_normalize(&src, &dst, view.buf, (int64_t)(view.len / 3));
    PyEval_RestoreThread(ts);
    PyBuffer_Release(&view);
    if (st != SP_OK) {
        return raise_status(st, "invalid Reinhard statistics (docs/stains.md gives the ranges)");
    }
    Py_RETURN_NONE;
}

/* stains_augment_patches(rgb, count, patch_pixels, stains, seeds, sigma, threads): in place */
static PyObject *core_stains_augment_patches(PyObject *module, PyObject *args) {
    PyObject *obj, *stains_obj, *seeds_obj;
    long long count, patch_pixels;
    double sigma;
    int threads;
    sp_stains s = {0};
    if (!PyArg_ParseTuple(args, "OLLOOdi", &obj, &count, &patch_pixels, &stains_obj, &seeds_obj,
                          &sigma, &threads) ||
        !parse_stains(stains_obj, &s)) {
        return NULL;
    }
    Py_buffer view, seeds;
    if (get_patches(obj, seeds_obj, count, patch_pixels, &view, &seeds) != 0) {
        return NULL;
    }
    PyThreadState *ts = PyEval_SaveThread();
    sp_status st =
        sp_stains_augment_patches(&s, view.buf, count, patch_pixels, seeds.buf, sigma, threads);
    PyEval_RestoreThread(ts);
    release_patches(&view, &seeds);
    if (st != SP_OK) {
        return raise_status(st, "bad stains or sigma outside [0, 1]");
    }
    Py_RETURN_NONE;
}

/* stains_estimate(slide, max_side, cache, want_stains) -> (stains or None, reinhard,
 * from_cache); with cache false the plain estimates (the slide is read once per estimate). */
static PyObject *core_stains_estimate(PyObject *module, PyObject *args) {
    PyObject *obj;
    long long max_side;
    int cache, want_stains;
    if (!PyArg_ParseTuple(args, "O!Lpp", &core_slide_type, &obj, &max_side, &cache, &want_stains)) {
        return NULL;
    }
    core_slide *self = (core_slide *)obj;
    if (check_open(self)) {
        return NULL;
    }
    sp_stains s;
    sp_reinhard_stats r;
    int hit = 0;
    char err[1024] = "";
    self->readers++;
    PyThreadState *ts = PyEval_SaveThread();
    sp_status st;
    if (cache) {
        st = sp_stains_estimate_cached(self->slide, max_side, want_stains ? &s : NULL, &r, &hit,
                                       err, sizeof err);
    } else {
        st = want_stains ? sp_stains_estimate(self->slide, max_side, &s, err, sizeof err) : SP_OK;
        if (st == SP_OK) {
            st = sp_reinhard_estimate(self->slide, max_side, &r, err, sizeof err);
        }
    }
    PyEval_RestoreThread(ts);
    self->readers--;
    if (st != SP_OK) {
        return raise_status(st, err);
    }
    if (!want_stains) {
        return Py_BuildValue("ONO", Py_None, reinhard_tuple(&r), hit ? Py_True : Py_False);
    }
    return Py_BuildValue("((ddd)(ddd)dd)NO", s.h[0], s.h[1], s.h[2], s.e[0], s.e[1], s.e[2],
                         s.max_h, s.max_e, reinhard_tuple(&r), hit ? Py_True : Py_False);
}

PyMethodDef stain_methods[] = {
    {"reinhard_reference", core_reinhard_reference, METH_NOARGS,
     "The reference Reinhard statistics."},
    {"reinhard_stats", core_reinhard_stats, METH_VARARGS,
     "reinhard_stats(rgb, tissue_only) -> ((mean), (std), pixels)"},
    {"reinhard_normalize", core_reinhard_normalize, METH_VARARGS,
     "reinhard_normalize(rgb, source, target): in place"},
    {"stains_augment_patches", core_stains_augment_patches, METH_VARARGS,
     "stains_augment_patches(rgb, count, patch_pixels, stains, seeds, sigma, threads): in place"},
    {"stains_estimate", core_stains_estimate, METH_VARARGS,
     "stains_estimate(slide, max_side, cache, want_stains) -> (stains, reinhard, from_cache)"},
    {NULL, NULL, 0, NULL}};
