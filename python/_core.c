/* _core.c — the CPython extension under the `slidepipe` package: a thin layer over the public API
 * (include/slidepipe.h) and nothing else. It reads pixels into any writable, C-contiguous buffer
 * the caller passes (a numpy array, a bytearray), so the package above it hands out numpy arrays
 * without a copy, and it lets go of the GIL while the library reads, so that Python threads (a
 * PyTorch DataLoader's, say) read in parallel. Shapes, dtypes and friendly signatures are the
 * package's business (slidepipe/__init__.py); this file checks sizes and turns statuses into
 * exceptions.
 *
 * A slide must not be closed while another thread reads it (the library's rule): each Slide
 * counts the reads in flight, under the GIL, and close() refuses while any is. A batch holds a
 * reference to every slide it reads, so none is freed under it either. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

#include "_core.h"

static PyObject *core_error; /* slidepipe.SlidepipeError */

/* Decode bytes that may come from a file: what is not UTF-8 becomes U+FFFD. */
static PyObject *text(const char *s) {
    return PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "replace");
}

PyObject *raise_status(sp_status st, const char *message) {
    PyObject *msg = text(message != NULL && message[0] != '\0' ? message : sp_status_str(st));
    PyObject *exc = msg != NULL ? PyObject_CallOneArg(core_error, msg) : NULL;
    PyObject *code = PyLong_FromLong(st);
    PyObject *name = PyUnicode_FromString(sp_status_str(st));
    if (exc != NULL && code != NULL && name != NULL &&
        PyObject_SetAttrString(exc, "code", code) == 0 &&
        PyObject_SetAttrString(exc, "status", name) == 0) {
        PyErr_SetObject(core_error, exc);
    }
    Py_XDECREF(name);
    Py_XDECREF(code);
    Py_XDECREF(exc);
    Py_XDECREF(msg);
    return NULL;
}

/* Raise for a failed call on `s`: the slide's sticky message when it has one. */
static PyObject *raise_slide(const core_slide *s, sp_status st) {
    const char *msg = st != SP_E_INVALID_ARG ? sp_slide_error(s->slide) : NULL;
    return raise_status(st, msg);
}

int check_open(const core_slide *s) {
    if (s->slide == NULL) {
        PyErr_SetString(PyExc_ValueError, "the slide is closed");
        return -1;
    }
    return 0;
}

/* Borrow `obj`'s memory as a writable, C-contiguous buffer of at least `need` bytes. */
int get_out_buffer(PyObject *obj, Py_buffer *view, int64_t need) {
    if (PyObject_GetBuffer(obj, view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) != 0) {
        return -1;
    }
    if (need < 0 || view->len < need) {
        PyErr_Format(PyExc_ValueError, "the output buffer holds %zd bytes; the read needs %lld",
                     view->len, (long long)need);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

int get_patches(PyObject *patches, PyObject *seeds, long long count, long long pixels,
                Py_buffer *view, Py_buffer *seeds_view) {
    if (count < 0 || (count > 0 && (pixels < 1 || pixels > (1LL << 40) / count))) {
        PyErr_Format(PyExc_ValueError, "bad patch count or size (%lld of %lld pixels)", count,
                     pixels);
        return -1;
    }
    if (get_out_buffer(patches, view, count * pixels * 3) != 0) {
        return -1;
    }
    if (PyObject_GetBuffer(seeds, seeds_view, PyBUF_C_CONTIGUOUS) != 0) {
        PyBuffer_Release(view);
        return -1;
    }
    if (seeds_view->len != count * (Py_ssize_t)sizeof(uint64_t)) {
        release_patches(view, seeds_view);
        PyErr_SetString(PyExc_ValueError, "one uint64 seed per patch");
        return -1;
    }
    return 0;
}

void release_patches(Py_buffer *view, Py_buffer *seeds_view) {
    PyBuffer_Release(seeds_view);
    PyBuffer_Release(view);
}

/* Bytes of a width x height read in the format, or -1 (with ValueError) when out of range. */
static int64_t region_bytes(int64_t width, int64_t height, int rgb) {
    int64_t bpp = rgb ? 3 : 4;
    if (width <= 0 || height <= 0 || width > INT64_MAX / bpp / height) {
        PyErr_Format(PyExc_ValueError, "bad region size %lld x %lld", (long long)width,
                     (long long)height);
        return -1;
    }
    return width * height * bpp;
}

/* ---- Slide ------------------------------------------------------------------------------- */

/* Close a slide with the GIL released: a remote slide's close waits for the requests it sent
 * ahead, and the server answering them may be Python code in this process (a test's, a proxy's)
 * that needs the GIL to answer. */
static void close_released(sp_slide *slide) {
    if (slide != NULL) {
        Py_BEGIN_ALLOW_THREADS sp_slide_close(slide);
        Py_END_ALLOW_THREADS
    }
}

static int slide_init(core_slide *self, PyObject *args, PyObject *kwds) {
    static char *names[] = {"path", "apply_icc", "plane", NULL};
    PyObject *path_obj = NULL;
    int apply_icc = 0;
    long long plane[3] = {0, 0, 0};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O&|p(LLL)", names, PyUnicode_FSConverter,
                                     &path_obj, &apply_icc, &plane[0], &plane[1], &plane[2])) {
        return -1;
    }
    if (self->slide != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "the slide is already open");
        Py_DECREF(path_obj);
        return -1;
    }
    char err[1024] = "";
    sp_slide *slide = NULL;
    sp_status st;
    PyThreadState *ts = PyEval_SaveThread();
    sp_options *options = NULL;
    st = sp_options_create(&options);
    if (st == SP_OK) {
        st = sp_options_set_plane(options, plane[0], plane[1], plane[2]);
        if (st != SP_OK) {
            snprintf(err, sizeof err, "plane (%lld, %lld, %lld): indices are from 0", plane[0],
                     plane[1], plane[2]);
        }
    }
    if (st == SP_OK) {
        st = sp_slide_open_with(PyBytes_AS_STRING(path_obj), options, &slide, err, sizeof err);
    }
    sp_options_destroy(options);
    if (st == SP_OK && apply_icc) {
        /* A slide without a profile is read as stored; a broken profile fails the open. */
        st = sp_slide_set_icc_transform(slide, 1, err, sizeof err);
        if (st == SP_E_NOT_FOUND) {
            st = SP_OK;
        } else if (st != SP_OK) {
            sp_slide_close(slide);
            slide = NULL;
        }
    }
    PyEval_RestoreThread(ts);
    Py_DECREF(path_obj);
    if (st != SP_OK) {
        raise_status(st, err);
        return -1;
    }
    if (self->slide != NULL) { /* another thread's __init__ won while the GIL was released */
        close_released(slide);
        PyErr_SetString(PyExc_RuntimeError, "the slide is already open");
        return -1;
    }
    self->slide = slide;
    return 0;
}

static PyObject *slide_close(core_slide *self, PyObject *unused) {
    if (self->readers > 0) {
        PyErr_SetString(PyExc_RuntimeError, "the slide is being read by another thread");
        return NULL;
    }
    sp_slide *slide = self->slide;
    self->slide = NULL; /* detached first: no other thread sees it while it closes */
    close_released(slide);
    Py_RETURN_NONE;
}

static void slide_dealloc(core_slide *self) {
    close_released(self->slide); /* no reader can hold a reference it no longer has */
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *slide_format(core_slide *self, PyObject *unused) {
    return check_open(self) ? NULL : text(sp_slide_format(self->slide));
}

/* One tuple per level: (width, height, downsample, tile_width, tile_height, compression). */
static PyObject *slide_levels(core_slide *self, PyObject *unused) {
    if (check_open(self)) {
        return NULL;
    }
    int32_t n = sp_slide_level_count(self->slide);
    PyObject *list = PyList_New(n);
    for (int32_t i = 0; list != NULL && i < n; i++) {
        int64_t w = 0, h = 0, tw = 0, th = 0;
        double ds = 0;
        sp_slide_level_dimensions(self->slide, i, &w, &h);
        sp_slide_level_downsample(self->slide, i, &ds);
        sp_slide_level_tile_size(self->slide, i, &tw, &th);
        const char *comp = sp_slide_level_compression(self->slide, i);
        PyObject *t = Py_BuildValue("(LLdLLs)", (long long)w, (long long)h, ds, (long long)tw,
                                    (long long)th, comp != NULL ? comp : "");
        if (t == NULL) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, i, t);
    }
    return list;
}

/* {name: value(slide, name)} over a slide's n named entries (properties, associated images). */
static PyObject *named_dict(const sp_slide *slide, int32_t n,
                            const char *(*name_at)(const sp_slide *, int32_t),
                            PyObject *(*value)(const sp_slide *, const char *)) {
    PyObject *dict = PyDict_New();
    for (int32_t i = 0; dict != NULL && i < n; i++) {
        const char *name = name_at(slide, i);
        PyObject *k = text(name);
        PyObject *v = value(slide, name);
        if (k == NULL || v == NULL || PyDict_SetItem(dict, k, v) != 0) {
            Py_CLEAR(dict);
        }
        Py_XDECREF(k);
        Py_XDECREF(v);
    }
    return dict;
}

static PyObject *property_value(const sp_slide *slide, const char *name) {
    return text(sp_slide_property_value(slide, name));
}

static PyObject *associated_size(const sp_slide *slide, const char *name) {
    int64_t w = 0, h = 0;
    sp_slide_associated_dimensions(slide, name, &w, &h);
    return Py_BuildValue("(LL)", (long long)w, (long long)h);
}

static PyObject *slide_properties(core_slide *self, PyObject *unused) {
    if (check_open(self)) {
        return NULL;
    }
    return named_dict(self->slide, sp_slide_property_count(self->slide), sp_slide_property_name,
                      property_value);
}

/* {name: (width, height)} of the associated images. */
static PyObject *slide_associated(core_slide *self, PyObject *unused) {
    if (check_open(self)) {
        return NULL;
    }
    return named_dict(self->slide, sp_slide_associated_count(self->slide), sp_slide_associated_name,
                      associated_size);
}

static PyObject *slide_best_level(core_slide *self, PyObject *arg) {
    double ds = PyFloat_AsDouble(arg);
    if ((ds == -1.0 && PyErr_Occurred()) || check_open(self)) {
        return NULL;
    }
    return PyLong_FromLong(sp_slide_best_level_for_downsample(self->slide, ds));
}

/* read_associated(name, out, rgb): the whole image into `out`. */
static PyObject *slide_read_associated(core_slide *self, PyObject *args) {
    const char *name;
    PyObject *out;
    int rgb;
    if (!PyArg_ParseTuple(args, "sOp", &name, &out, &rgb) || check_open(self)) {
        return NULL;
    }
    int64_t w = 0, h = 0;
    sp_status st = sp_slide_associated_dimensions(self->slide, name, &w, &h);
    if (st != SP_OK) {
        return raise_status(st, "no such associated image");
    }
    int64_t need = region_bytes(w, h, rgb);
    Py_buffer view;
    if (need < 0 || get_out_buffer(out, &view, need) != 0) {
        return NULL;
    }
    sp_pixel_format fmt = rgb ? SP_PIXEL_RGB8 : SP_PIXEL_RGBA8;
    self->readers++;
    PyThreadState *ts = PyEval_SaveThread();
    st = sp_slide_read_associated(self->slide, name, fmt, view.buf, w * (rgb ? 3 : 4));
    PyEval_RestoreThread(ts);
    self->readers--;
    PyBuffer_Release(&view);
    return st == SP_OK ? Py_BuildValue("(LL)", (long long)w, (long long)h) : raise_slide(self, st);
}

/* read_region(out, level, x, y, width, height, rgb) and, with a float first argument after
 * `out`, read_region_scaled(out, downsample, x, y, width, height, rgb). */
static PyObject *read_into(core_slide *self, PyObject *args, int scaled) {
    PyObject *out;
    int level = 0;
    double ds = 1.0;
    long long x, y, w, h;
    int rgb;
    int ok = scaled ? PyArg_ParseTuple(args, "OdLLLLp", &out, &ds, &x, &y, &w, &h, &rgb)
                    : PyArg_ParseTuple(args, "OiLLLLp", &out, &level, &x, &y, &w, &h, &rgb);
    if (!ok || check_open(self)) {
        return NULL;
    }
    int64_t need = region_bytes(w, h, rgb);
    Py_buffer view;
    if (need < 0 || get_out_buffer(out, &view, need) != 0) {
        return NULL;
    }
    sp_pixel_format fmt = rgb ? SP_PIXEL_RGB8 : SP_PIXEL_RGBA8;
    int64_t stride = w * (rgb ? 3 : 4);
    sp_status st;
    self->readers++;
    PyThreadState *ts = PyEval_SaveThread();
    st = scaled ? sp_slide_read_region_scaled(self->slide, fmt, view.buf, stride, ds, x, y, w, h)
                : sp_slide_read_region(self->slide, fmt, view.buf, stride, level, x, y, w, h);
    PyEval_RestoreThread(ts);
    self->readers--;
    PyBuffer_Release(&view);
    if (st != SP_OK) {
        return raise_slide(self, st);
    }
    Py_RETURN_NONE;
}

static PyObject *slide_read_region(core_slide *self, PyObject *args) {
    return read_into(self, args, 0);
}

static PyObject *slide_read_region_scaled(core_slide *self, PyObject *args) {
    return read_into(self, args, 1);
}

static PyObject *slide_planes(core_slide *self, PyObject *unused) {
    if (check_open(self)) {
        return NULL;
    }
    const sp_slide *s = self->slide;
    return Py_BuildValue("((LLL)(LLL))", (long long)sp_slide_plane_count(s, SP_PLANE_Z),
                         (long long)sp_slide_plane_count(s, SP_PLANE_C),
                         (long long)sp_slide_plane_count(s, SP_PLANE_T),
                         (long long)sp_slide_plane(s, SP_PLANE_Z),
                         (long long)sp_slide_plane(s, SP_PLANE_C),
                         (long long)sp_slide_plane(s, SP_PLANE_T));
}

static PyObject *slide_icc_profile(core_slide *self, PyObject *unused) {
    if (check_open(self)) {
        return NULL;
    }
    const uint8_t *data;
    size_t len;
    if (sp_slide_icc_profile(self->slide, &data, &len) != SP_OK) {
        Py_RETURN_NONE;
    }
    return PyBytes_FromStringAndSize((const char *)data, (Py_ssize_t)len);
}

static PyObject *slide_error(core_slide *self, PyObject *unused) {
    const char *msg = self->slide != NULL ? sp_slide_error(self->slide) : NULL;
    if (msg == NULL) {
        Py_RETURN_NONE;
    }
    return text(msg);
}

/* tissue_mask(max_side) -> (bytes, width, height, downsample, threshold, tissue_fraction) */
static PyObject *slide_tissue_mask(core_slide *self, PyObject *args) {
    long long max_side;
    if (!PyArg_ParseTuple(args, "L", &max_side) || check_open(self)) {
        return NULL;
    }
    sp_tissue_mask m;
    char err[1024] = "";
    self->readers++;
    PyThreadState *ts = PyEval_SaveThread();
    sp_status st = sp_tissue_mask_compute(self->slide, max_side, &m, err, sizeof err);
    PyEval_RestoreThread(ts);
    self->readers--;
    if (st != SP_OK) {
        return raise_status(st, err);
    }
    PyObject *r = Py_BuildValue("(y#LLdid)", (const char *)m.pixels,
                                (Py_ssize_t)(m.width * m.height), (long long)m.width,
                                (long long)m.height, m.downsample, m.threshold, m.tissue_fraction);
    sp_tissue_mask_free(&m);
    return r;
}

static PyObject *stains_tuple(const sp_stains *s) {
    return Py_BuildValue("((ddd)(ddd)dd)", s->h[0], s->h[1], s->h[2], s->e[0], s->e[1], s->e[2],
                         s->max_h, s->max_e);
}

/* stains(max_side) -> ((h), (e), max_h, max_e) */
static PyObject *slide_stains(core_slide *self, PyObject *args) {
    long long max_side;
    if (!PyArg_ParseTuple(args, "L", &max_side) || check_open(self)) {
        return NULL;
    }
    sp_stains s;
    char err[1024] = "";
    self->readers++;
    PyThreadState *ts = PyEval_SaveThread();
    sp_status st = sp_stains_estimate(self->slide, max_side, &s, err, sizeof err);
    PyEval_RestoreThread(ts);
    self->readers--;
    return st == SP_OK ? stains_tuple(&s) : raise_status(st, err);
}

/* pixel_hash(threads) -> str: the slide's pixel hash (sp_pixel_hash), read without the GIL. */
static PyObject *slide_pixel_hash(core_slide *self, PyObject *args) {
    int threads;
    if (!PyArg_ParseTuple(args, "i", &threads) || check_open(self)) {
        return NULL;
    }
    char hex[65] = "", err[1024] = "";
    self->readers++;
    PyThreadState *ts = PyEval_SaveThread();
    sp_status st = sp_pixel_hash(self->slide, threads, hex, NULL, NULL, err, sizeof err);
    PyEval_RestoreThread(ts);
    self->readers--;
    return st == SP_OK ? PyUnicode_FromString(hex) : raise_status(st, err);
}

static PyMethodDef slide_methods[] = {
    {"close", (PyCFunction)slide_close, METH_NOARGS, "Close the slide (idempotent)."},
    {"format", (PyCFunction)slide_format, METH_NOARGS, "The format that opened the slide."},
    {"levels", (PyCFunction)slide_levels, METH_NOARGS,
     "[(width, height, downsample, tile_width, tile_height, compression)] per level."},
    {"properties", (PyCFunction)slide_properties, METH_NOARGS, "{name: value} of the slide."},
    {"associated", (PyCFunction)slide_associated, METH_NOARGS,
     "{name: (width, height)} of the associated images."},
    {"best_level_for_downsample", (PyCFunction)slide_best_level, METH_O,
     "The level to read for a wanted downsample."},
    {"read_associated", (PyCFunction)slide_read_associated, METH_VARARGS,
     "read_associated(name, out, rgb) -> (width, height)"},
    {"read_region", (PyCFunction)slide_read_region, METH_VARARGS,
     "read_region(out, level, x, y, width, height, rgb)"},
    {"read_region_scaled", (PyCFunction)slide_read_region_scaled, METH_VARARGS,
     "read_region_scaled(out, downsample, x, y, width, height, rgb)"},
    {"error", (PyCFunction)slide_error, METH_NOARGS, "The slide's sticky error, or None."},
    {"planes", (PyCFunction)slide_planes, METH_NOARGS,
     "((z, c, t) plane counts, (z, c, t) plane shown)"},
    {"icc_profile", (PyCFunction)slide_icc_profile, METH_NOARGS,
     "The embedded ICC profile as bytes, or None."},
    {"tissue_mask", (PyCFunction)slide_tissue_mask, METH_VARARGS,
     "tissue_mask(max_side) -> (bytes, width, height, downsample, threshold, fraction)"},
    {"stains", (PyCFunction)slide_stains, METH_VARARGS,
     "stains(max_side) -> ((h), (e), max_h, max_e)"},
    {"pixel_hash", (PyCFunction)slide_pixel_hash, METH_VARARGS,
     "pixel_hash(threads) -> the pixel hash, 64 hex digits"},
    {NULL, NULL, 0, NULL}};

/* (clang-format would join the head macro, which ends in a comma, to the next line.) */
// clang-format off
PyTypeObject core_slide_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "slidepipe._core.Slide",
    .tp_basicsize = sizeof(core_slide),
    .tp_dealloc = (destructor)slide_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An open slide (slidepipe.Slide wraps it).",
    .tp_methods = slide_methods,
    .tp_init = (initproc)slide_init,
    .tp_new = PyType_GenericNew,
};
// clang-format on

/* ---- Batches ----------------------------------------------------------------------------- */

/* Fill reqs[i] from the tuple (slide, level, x, y); a new reference to the slide goes to
 * held[i] and its reader count goes up. */
static int parse_request(PyObject *item, sp_region_request *req, core_slide **held) {
    PyObject *slide_obj;
    int level;
    long long x, y;
    if (!PyTuple_Check(item) ||
        !PyArg_ParseTuple(item, "O!iLL", &core_slide_type, &slide_obj, &level, &x, &y)) {
        if (!PyErr_Occurred() || PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyErr_SetString(PyExc_TypeError, "each request is a tuple (slide, level, x, y)");
        }
        return -1;
    }
    core_slide *s = (core_slide *)slide_obj;
    if (check_open(s)) {
        return -1;
    }
    Py_INCREF(s);
    s->readers++;
    *held = s;
    req->slide = s->slide;
    req->level = level;
    req->x = x;
    req->y = y;
    return 0;
}

/* read_regions(requests, out, width, height, rgb, threads) -> [status, ...]: every request a
 * (slide, level, x, y) tuple, region i written at i * width * height * bpp in `out`. */
static PyObject *core_read_regions(PyObject *module, PyObject *args) {
    PyObject *seq_obj, *out;
    long long w, h;
    int rgb, threads;
    if (!PyArg_ParseTuple(args, "OOLLpi", &seq_obj, &out, &w, &h, &rgb, &threads)) {
        return NULL;
    }
    int64_t one = region_bytes(w, h, rgb);
    if (one < 0) {
        return NULL;
    }
    PyObject *seq = PySequence_Fast(seq_obj, "requests must be a sequence");
    if (seq == NULL) {
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > 0 && one > INT64_MAX / n) {
        Py_DECREF(seq);
        return PyErr_Format(PyExc_ValueError, "the batch is too large");
    }
    Py_buffer view;
    if (get_out_buffer(out, &view, one * n) != 0) {
        Py_DECREF(seq);
        return NULL;
    }
    size_t count = n > 0 ? (size_t)n : 1;
    sp_region_request *reqs = PyMem_Calloc(count, sizeof *reqs);
    sp_status *statuses = PyMem_Calloc(count, sizeof *statuses);
    core_slide **held = PyMem_Calloc(count, sizeof *held);
    PyObject *result = NULL;
    Py_ssize_t parsed = 0;
    if (reqs == NULL || statuses == NULL || held == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (; parsed < n; parsed++) {
        sp_region_request *r = &reqs[parsed];
        if (parse_request(PySequence_Fast_GET_ITEM(seq, parsed), r, &held[parsed]) != 0) {
            goto done;
        }
        r->width = w;
        r->height = h;
        r->format = rgb ? SP_PIXEL_RGB8 : SP_PIXEL_RGBA8;
        r->dst = (uint8_t *)view.buf + one * parsed;
        r->stride = w * (rgb ? 3 : 4);
    }
    PyThreadState *ts = PyEval_SaveThread();
    sp_read_regions(reqs, (size_t)n, threads, statuses);
    PyEval_RestoreThread(ts);
    result = PyList_New(n);
    for (Py_ssize_t i = 0; result != NULL && i < n; i++) {
        PyObject *code = PyLong_FromLong(statuses[i]);
        if (code == NULL) {
            Py_CLEAR(result);
            break;
        }
        PyList_SET_ITEM(result, i, code);
    }
done:
    for (Py_ssize_t i = 0; held != NULL && i < parsed; i++) {
        held[i]->readers--;
        Py_DECREF(held[i]);
    }
    PyMem_Free(held);
    PyMem_Free(statuses);
    PyMem_Free(reqs);
    PyBuffer_Release(&view);
    Py_DECREF(seq);
    return result;
}

/* ---- Training ---------------------------------------------------------------------------- */

/* tissue_tiles(slide, mask, width, height, downsample, level, size, stride, min_tissue) -> bytes
 * of sp_tile records (int64 x, int64 y, float64 tissue). */
static PyObject *core_tissue_tiles(PyObject *module, PyObject *args) {
    PyObject *slide_obj, *mask_obj;
    long long w, h, size, stride;
    double ds, min_tissue;
    int level;
    if (!PyArg_ParseTuple(args, "O!OLLdiLLd", &core_slide_type, &slide_obj, &mask_obj, &w, &h, &ds,
                          &level, &size, &stride, &min_tissue)) {
        return NULL;
    }
    core_slide *s = (core_slide *)slide_obj;
    Py_buffer view;
    if (check_open(s) || PyObject_GetBuffer(mask_obj, &view, PyBUF_C_CONTIGUOUS) != 0) {
        return NULL;
    }
    if (w <= 0 || h <= 0 || view.len != w * h) {
        PyBuffer_Release(&view);
        return PyErr_Format(PyExc_ValueError, "the mask must hold width x height bytes");
    }
    sp_tissue_mask m = {.width = w, .height = h, .downsample = ds, .pixels = view.buf};
    sp_tile *tiles = NULL;
    size_t count = 0;
    PyThreadState *ts = PyEval_SaveThread();
    sp_status st = sp_tissue_tiles(s->slide, &m, level, size, stride, min_tissue, &tiles, &count);
    PyEval_RestoreThread(ts);
    PyBuffer_Release(&view);
    if (st != SP_OK) {
        return raise_status(st, "bad tile grid (level, size, stride or min_tissue out of range)");
    }
    PyObject *r =
        PyBytes_FromStringAndSize((const char *)tiles, (Py_ssize_t)(count * sizeof *tiles));
    sp_tiles_free(tiles);
    return r;
}

int parse_stains(PyObject *obj, sp_stains *s) {
    return PyArg_ParseTuple(obj, "(ddd)(ddd)dd", &s->h[0], &s->h[1], &s->h[2], &s->e[0], &s->e[1],
                            &s->e[2], &s->max_h, &s->max_e);
}

static PyObject *core_stains_reference(PyObject *module, PyObject *unused) {
    sp_stains s;
    sp_stains_reference(&s);
    return stains_tuple(&s);
}

/* stains_normalize(buffer, source, target): RGB8 pixels in place. */
static PyObject *core_stains_normalize(PyObject *module, PyObject *args) {
    PyObject *out, *src_obj, *dst_obj;
    sp_stains src, dst;
    if (!PyArg_ParseTuple(args, "OOO", &out, &src_obj, &dst_obj) || !parse_stains(src_obj, &src) ||
        !parse_stains(dst_obj, &dst)) {
        return NULL;
    }
    Py_buffer view;
    if (get_out_buffer(out, &view, 0) != 0) {
        return NULL;
    }
    if (view.len % 3 != 0) {
        PyBuffer_Release(&view);
        return PyErr_Format(PyExc_ValueError, "RGB pixels take 3 bytes each");
    }
    PyThreadState *ts = PyEval_SaveThread();
    sp_status st = sp_stains_normalize(&src, &dst, view.buf, (int64_t)(view.len / 3));
    PyEval_RestoreThread(ts);
    PyBuffer_Release(&view);
    if (st != SP_OK) {
        return raise_status(st, "bad stains (a concentration is not positive and finite)");
    }
    Py_RETURN_NONE;
}

/* augment_patches(buffer, count, size, seeds, dihedral, hed_sigma, threads) */
static PyObject *core_augment_patches(PyObject *module, PyObject *args) {
    PyObject *out, *seeds_obj;
    long long count, size;
    int dihedral, threads;
    double sigma;
    if (!PyArg_ParseTuple(args, "OLLOpdi", &out, &count, &size, &seeds_obj, &dihedral, &sigma,
                          &threads)) {
        return NULL;
    }
    Py_buffer view, seeds;
    if (size < 1 || size > (1 << 20)) {
        return PyErr_Format(PyExc_ValueError, "bad patch size %lld", (long long)size);
    }
    if (get_patches(out, seeds_obj, count, size * size, &view, &seeds) != 0) {
        return NULL;
    }
    PyThreadState *ts = PyEval_SaveThread();
    sp_status st = sp_augment_patches(view.buf, count, size, seeds.buf, dihedral, sigma, threads);
    PyEval_RestoreThread(ts);
    release_patches(&view, &seeds);
    if (st != SP_OK) {
        return raise_status(st, "hed_sigma must lie in [0, 1]");
    }
    Py_RETURN_NONE;
}

/* ---- The cache and the rest -------------------------------------------------------------- */

static PyObject *core_cache_set_capacity(PyObject *module, PyObject *arg) {
    long long bytes = PyLong_AsLongLong(arg);
    if (bytes == -1 && PyErr_Occurred()) {
        return NULL;
    }
    sp_status st = sp_cache_set_capacity(bytes);
    if (st != SP_OK) {
        return raise_status(st, "the cache capacity must be 0 or more bytes");
    }
    Py_RETURN_NONE;
}

static PyObject *core_cache_stats(PyObject *module, PyObject *unused) {
    sp_cache_stats s = {.struct_size = sizeof s};
    sp_status st = sp_cache_get_stats(&s);
    if (st != SP_OK) {
        return raise_status(st, NULL);
    }
    return Py_BuildValue("{sLsLsLsLsLsLsL}", "capacity_bytes", (long long)s.capacity_bytes,
                         "used_bytes", (long long)s.used_bytes, "entries", (long long)s.entries,
                         "hits", (long long)s.hits, "misses", (long long)s.misses, "insertions",
                         (long long)s.insertions, "evictions", (long long)s.evictions);
}

static PyObject *core_status_str(PyObject *module, PyObject *arg) {
    long code = PyLong_AsLong(arg);
    if (code == -1 && PyErr_Occurred()) {
        return NULL;
    }
    return PyUnicode_FromString(sp_status_str((sp_status)code));
}

static PyObject *core_cuda_device_count(PyObject *module, PyObject *unused) {
    char why[256] = "";
    int n = sp_cuda_device_count(why, sizeof why);
    return Py_BuildValue("(is)", n, why);
}

static PyObject *core_cuda_nvjpeg_found(PyObject *module, PyObject *unused) {
    char detail[512] = "";
    int found = sp_cuda_library_found(SP_CUDA_LIB_NVJPEG, detail, sizeof detail);
    return Py_BuildValue("(Os)", found ? Py_True : Py_False, detail);
}

static PyObject *core_cuda_device_numa_node(PyObject *module, PyObject *arg) {
    long device = PyLong_AsLong(arg);
    if (device == -1 && PyErr_Occurred()) {
        return NULL;
    }
    return PyLong_FromLong(sp_cuda_device_numa_node((int)device));
}

static PyMethodDef core_methods[] = {
    {"cuda_device_numa_node", core_cuda_device_numa_node, METH_O,
     "The NUMA node of a CUDA device, or -1 when unknown."},
    {"cuda_device_count", core_cuda_device_count, METH_NOARGS,
     "(CUDA devices usable, why none when 0)"},
    {"cuda_nvjpeg_found", core_cuda_nvjpeg_found, METH_NOARGS,
     "(whether nvJPEG was found, where or why not)"},
    {"read_regions", core_read_regions, METH_VARARGS,
     "read_regions(requests, out, width, height, rgb, threads) -> [status, ...]"},
    {"cache_set_capacity", core_cache_set_capacity, METH_O, "Set the tile cache's bytes."},
    {"cache_stats", core_cache_stats, METH_NOARGS, "The tile cache's figures, as a dict."},
    {"status_str", core_status_str, METH_O, "The name of a status code."},
    {"tissue_tiles", core_tissue_tiles, METH_VARARGS,
     "tissue_tiles(slide, mask, width, height, downsample, level, size, stride, min_tissue)"},
    {"stains_reference", core_stains_reference, METH_NOARGS, "The reference H&E stains."},
    {"stains_normalize", core_stains_normalize, METH_VARARGS,
     "stains_normalize(rgb, source, target): in place"},
    {"augment_patches", core_augment_patches, METH_VARARGS,
     "augment_patches(rgb, count, size, seeds, dihedral, hed_sigma, threads): in place"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef core_module = {PyModuleDef_HEAD_INIT, .m_name = "slidepipe._core",
                                         .m_doc = "The C layer of the slidepipe package.",
                                         .m_size = -1, .m_methods = core_methods};

PyMODINIT_FUNC PyInit__core(void) {
    if (PyType_Ready(&core_slide_type) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&core_module);
    if (m == NULL) {
        return NULL;
    }
    core_error = PyErr_NewExceptionWithDoc(
        "slidepipe.SlidepipeError",
        "A slidepipe call failed: .code is the library's status code, .status its name.", NULL,
        NULL);
    Py_XINCREF(&core_slide_type);
    if (core_error == NULL || PyModule_AddFunctions(m, store_methods) != 0 ||
        PyModule_AddFunctions(m, annotation_methods) != 0 ||
        PyModule_AddFunctions(m, augment_color_methods) != 0 ||
        PyModule_AddFunctions(m, qc_methods) != 0 ||
        PyModule_AddFunctions(m, geometry_methods) != 0 ||
        PyModule_AddFunctions(m, stain_methods) != 0 || add_store_constants(m) != 0 ||
        PyModule_AddFunctions(m, loader_methods) != 0 || add_loader_types(m) != 0 ||
        PyModule_AddObject(m, "Error", core_error) != 0 ||
        PyModule_AddObject(m, "Slide", (PyObject *)&core_slide_type) != 0 ||
        PyModule_AddStringConstant(m, "version", sp_version()) != 0) {
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(core_error); /* PyModule_AddObject stole one; the module global keeps one */
    return m;
}
