/* _loader.c — the training loader in Python: Loader (sp_loader: batches made ahead on the
 * library's threads), Batch (one handed-over batch, exported through DLPack so that numpy and
 * PyTorch take it without a copy), and the synchronous patches_read and read_image.
 *
 * A Batch owns its sp_batch; every DLPack capsule it gives out holds a reference to it, so the
 * memory lives until the last array or tensor over it is gone, whichever thread drops it. The
 * GIL is released whenever the library works or a batch is waited for. A Loader keeps its slides
 * referenced and counted as being read (core_slide.readers), so none is closed under it. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdlib.h>
#include <string.h>

#include "_core.h"
#include "dlpack_abi.h"

/* ---- configuration shared by Loader and patches_read --------------------------------------- */

/* The config tuple the package builds (slidepipe/loader.py, _config): (size, batch_size, dtype,
 * layout, mean, std, dihedral, hed_sigma, Macenko stains per slide or None, their target or
 * None, prefetch, threads, pinned, NUMA node or -1, CUDA device or -1, geometry tuple or None,
 * photometric tuple or None, normalizer (sp_normalizer), Reinhard statistics per slide or None,
 * their target or None, stain_sigma). */
typedef struct config {
    sp_loader_config c;
    sp_stains *stains, target;
    sp_reinhard_stats *reinhard, reinhard_target;
    sp_geometry_params geometry;
    sp_photometric_params photometric;
} config;

/* n items of `seq` (one per slide) parsed by `parse` into a new array of `size`-byte items
 * (PyMem_Free it); NULL with an exception set on failure. */
static void *parse_each(PyObject *seq, size_t n, size_t size, int (*parse)(PyObject *, void *),
                        const char *what) {
    if (!PySequence_Check(seq) || PySequence_Size(seq) != (Py_ssize_t)n) {
        PyErr_Format(PyExc_ValueError, "%s: one per slide", what);
        return NULL;
    }
    char *out = PyMem_Calloc(n ? n : 1, size);
    if (out == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        PyObject *item = PySequence_GetItem(seq, (Py_ssize_t)i);
        int ok = item != NULL && parse(item, out + i * size);
        Py_XDECREF(item);
        if (!ok) {
            PyMem_Free(out);
            return NULL;
        }
    }
    return out;
}

static int parse_stains_item(PyObject *obj, void *out) {
    return parse_stains(obj, out);
}

static int parse_reinhard_item(PyObject *obj, void *out) {
    return parse_reinhard(obj, out);
}

static int parse_config(PyObject *tuple, size_t n_slides, config *out) {
    PyObject *stains_obj, *target_obj, *geometry_obj, *photometric_obj, *reinhard_obj,
        *reinhard_target_obj;
    sp_loader_config *c = &out->c;
    memset(out, 0, sizeof *out);
    c->struct_size = sizeof *c;
    int dtype, layout, numa, cuda, normalize;
    if (!PyArg_ParseTuple(tuple, "LLii(fff)(fff)pdOOiipiiOOiOOd", &c->size, &c->batch_size, &dtype,
                          &layout, &c->format.mean[0], &c->format.mean[1], &c->format.mean[2],
                          &c->format.std[0], &c->format.std[1], &c->format.std[2], &c->dihedral,
                          &c->hed_sigma, &stains_obj, &target_obj, &c->prefetch, &c->threads,
                          &c->pinned, &numa, &cuda, &geometry_obj, &photometric_obj, &normalize,
                          &reinhard_obj, &reinhard_target_obj, &c->stain_sigma)) {
        return -1;
    }
    c->format.dtype = (sp_batch_dtype)dtype;
    c->format.layout = (sp_batch_layout)layout;
    c->normalize = (sp_normalizer)normalize;
    c->numa_place = numa >= 0;
    c->numa_node = numa;
    c->cuda = cuda >= 0;
    c->cuda_device = cuda;
    if ((geometry_obj != Py_None && parse_geometry_params(geometry_obj, &out->geometry) != 0) ||
        (photometric_obj != Py_None &&
         !parse_photometric_params(photometric_obj, &out->photometric)) ||
        (target_obj != Py_None && !parse_stains(target_obj, &out->target)) ||
        (reinhard_target_obj != Py_None &&
         !parse_reinhard(reinhard_target_obj, &out->reinhard_target))) {
        return -1;
    }
    c->geometry = geometry_obj != Py_None ? &out->geometry : NULL;
    c->photometric = photometric_obj != Py_None ? &out->photometric : NULL;
    c->target = out->target;
    c->reinhard_target = reinhard_target_obj != Py_None ? &out->reinhard_target : NULL;
    if (stains_obj != Py_None) {
        out->stains =
            parse_each(stains_obj, n_slides, sizeof(sp_stains), parse_stains_item, "stains");
        if (out->stains == NULL) {
            return -1;
        }
        c->source_stains = out->stains;
    }
    if (reinhard_obj != Py_None) {
        out->reinhard = parse_each(reinhard_obj, n_slides, sizeof(sp_reinhard_stats),
                                   parse_reinhard_item, "reinhard");
        if (out->reinhard == NULL) {
            return -1;
        }
        c->source_reinhard = out->reinhard;
    }
    return 0;
}

/* The slides of a sequence of core Slides into a new array (PyMem_Free it); NULL on error. */
static sp_slide **slide_array(PyObject *seq, Py_ssize_t *n) {
    *n = PySequence_Size(seq);
    if (*n < 0) {
        return NULL;
    }
    sp_slide **slides = PyMem_Calloc(*n ? (size_t)*n : 1, sizeof *slides);
    for (Py_ssize_t i = 0; slides != NULL && i < *n; i++) {
        PyObject *item = PySequence_GetItem(seq, i);
        if (item == NULL || !PyObject_TypeCheck(item, &core_slide_type) ||
            check_open((core_slide *)item) != 0) {
            if (item != NULL && !PyErr_Occurred()) {
                PyErr_Format(PyExc_TypeError, "slide %zd is not a slidepipe._core.Slide", i);
            }
            Py_XDECREF(item);
            PyMem_Free(slides);
            return NULL;
        }
        slides[i] = ((core_slide *)item)->slide;
        Py_DECREF(item);
    }
    return slides;
}

/* The requests buffer as sp_patch_request records; -1 with ValueError when it is not. */
static int request_view(PyObject *obj, Py_buffer *view, size_t *n) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS) != 0) {
        return -1;
    }
    if (view->len % (Py_ssize_t)sizeof(sp_patch_request) != 0) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_ValueError, "requests: not a whole number of patch requests");
        return -1;
    }
    *n = (size_t)view->len / sizeof(sp_patch_request);
    return 0;
}

/* What Loader and patches_read both take: the slides, the config tuple and the requests. */
typedef struct inputs {
    sp_slide **slides;
    Py_ssize_t n_slides;
    config cfg;
    Py_buffer reqs;
    size_t n_reqs;
    int have_reqs;
} inputs;

static void release_inputs(inputs *in) {
    if (in->have_reqs) {
        PyBuffer_Release(&in->reqs);
        in->have_reqs = 0;
    }
    PyMem_Free(in->slides);
    PyMem_Free(in->cfg.stains);
    PyMem_Free(in->cfg.reinhard);
    in->slides = NULL;
    in->cfg.stains = NULL;
    in->cfg.reinhard = NULL;
}

/* Parse (slides, requests, config) into `in`; 0, or -1 with an exception set and nothing held. */
static int get_inputs(PyObject *slides, PyObject *reqs, PyObject *config_obj, inputs *in) {
    memset(in, 0, sizeof *in);
    in->slides = slide_array(slides, &in->n_slides);
    if (in->slides == NULL || parse_config(config_obj, (size_t)in->n_slides, &in->cfg) != 0 ||
        request_view(reqs, &in->reqs, &in->n_reqs) != 0) {
        release_inputs(in);
        return -1;
    }
    in->have_reqs = 1;
    return 0;
}

/* ---- Batch ---------------------------------------------------------------------------------- */

typedef struct {
    PyObject ob_base;
    sp_batch *batch;
    int ndim;
    int64_t shape[5];
    uint8_t dtype_code, dtype_bits; /* DLPack's */
} core_batch;

static PyTypeObject core_batch_type;

static void batch_dealloc(core_batch *self) {
    sp_batch_free(self->batch);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* A Batch over `b` (taken over) with the shape of its patches: (n, group, ...) when group > 1. */
static PyObject *batch_new(sp_batch *b, int64_t size, const sp_batch_format *format,
                           int64_t group) {
    core_batch *self = PyObject_New(core_batch, &core_batch_type);
    if (self == NULL) {
        sp_batch_free(b);
        return NULL;
    }
    self->batch = b;
    int at = 0;
    self->shape[at++] = group > 1 ? b->count / group : b->count;
    if (group > 1) {
        self->shape[at++] = group;
    }
    int64_t hwc[3] = {size, size, 3}, chw[3] = {3, size, size};
    memcpy(self->shape + at, format->layout == SP_BATCH_NCHW ? chw : hwc, sizeof hwc);
    self->ndim = at + 3;
    self->dtype_code = format->dtype == SP_BATCH_UINT8 ? SP_DL_UINT : SP_DL_FLOAT;
    self->dtype_bits = (uint8_t)(8 * sp_batch_dtype_bytes(format->dtype));
    return (PyObject *)self;
}

/* What a DLPack capsule carries: the tensor (one of the two ABIs), its shape, and the Batch that
 * owns the memory. */
typedef struct exported {
    sp_dl_managed_tensor managed;
    sp_dl_managed_tensor_versioned versioned;
    int64_t shape[5];
    PyObject *owner;
} exported;

static void exported_free(exported *e) {
    PyGILState_STATE g = PyGILState_Ensure(); /* consumers may free tensors on any thread */
    Py_DECREF(e->owner);
    PyGILState_Release(g);
    PyMem_RawFree(e);
}

static void delete_managed(sp_dl_managed_tensor *m) {
    exported_free(m->manager_ctx);
}

static void delete_versioned(sp_dl_managed_tensor_versioned *m) {
    exported_free(m->manager_ctx);
}

static void capsule_destructor(PyObject *capsule) {
    /* A capsule nobody consumed still owns its tensor; a consumed one was renamed. */
    if (PyCapsule_IsValid(capsule, "dltensor")) {
        sp_dl_managed_tensor *m = PyCapsule_GetPointer(capsule, "dltensor");
        m->deleter(m);
    } else if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
        sp_dl_managed_tensor_versioned *m = PyCapsule_GetPointer(capsule, "dltensor_versioned");
        m->deleter(m);
    }
}

/* Whether the consumer takes DLPack 1.x: max_version a tuple (major, minor), major >= 1. */
static int wants_versioned(PyObject *max_version) {
    if (max_version == Py_None || !PyTuple_Check(max_version) ||
        PyTuple_GET_SIZE(max_version) < 1) {
        return 0;
    }
    long major = PyLong_AsLong(PyTuple_GET_ITEM(max_version, 0));
    PyErr_Clear();
    return major >= 1;
}

static PyObject *batch_dlpack(core_batch *self, PyObject *args, PyObject *kwds) {
    static char *names[] = {"stream", "max_version", "dl_device", "copy", NULL};
    PyObject *stream = Py_None, *max_version = Py_None, *dl_device = Py_None, *copy = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|$OOOO", names, &stream, &max_version, &dl_device,
                                     &copy)) {
        return NULL;
    }
    if (copy == Py_True) {
        PyErr_SetString(PyExc_BufferError, "a Batch exports its own memory; copy=True is not "
                                           "offered");
        return NULL;
    }
    exported *e = PyMem_RawCalloc(1, sizeof *e);
    if (e == NULL) {
        return PyErr_NoMemory();
    }
    memcpy(e->shape, self->shape, sizeof e->shape);
    sp_dl_tensor t = {0};
    t.data = self->batch->data;
    /* Pinned memory is host memory (torch sees is_pinned()); a device batch is CUDA memory,
     * complete before it was handed over, so no stream needs to wait for it. */
    t.device.device_type = self->batch->device >= 0 ? SP_DL_CUDA : SP_DL_CPU;
    t.device.device_id = self->batch->device >= 0 ? self->batch->device : 0;
    t.ndim = self->ndim;
    t.dtype.code = self->dtype_code;
    t.dtype.bits = self->dtype_bits;
    t.dtype.lanes = 1;
    t.shape = e->shape;
    t.strides = NULL; /* compact, row-major */
    e->owner = (PyObject *)self;
    Py_INCREF(self);
    PyObject *capsule;
    if (wants_versioned(max_version)) {
        e->versioned = (sp_dl_managed_tensor_versioned){
            .version = {1, 0}, .manager_ctx = e, .deleter = delete_versioned, .dl_tensor = t};
        capsule = PyCapsule_New(&e->versioned, "dltensor_versioned", capsule_destructor);
    } else {
        e->managed =
            (sp_dl_managed_tensor){.dl_tensor = t, .manager_ctx = e, .deleter = delete_managed};
        capsule = PyCapsule_New(&e->managed, "dltensor", capsule_destructor);
    }
    if (capsule == NULL) {
        exported_free(e);
    }
    return capsule;
}

static PyObject *batch_dlpack_device(core_batch *self, PyObject *unused) {
    int device = self->batch->device;
    return Py_BuildValue("(ii)", device >= 0 ? SP_DL_CUDA : SP_DL_CPU, device >= 0 ? device : 0);
}

/* A list of statuses as ints. */
static PyObject *status_list(const sp_status *statuses, int64_t n) {
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (int64_t i = 0; list != NULL && i < n; i++) {
        PyObject *v = PyLong_FromLong(statuses[i]);
        if (v == NULL) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, v);
    }
    return list;
}

static PyObject *batch_statuses(core_batch *self, void *unused) {
    return status_list(self->batch->statuses, self->batch->count);
}

static PyObject *batch_info(core_batch *self, void *unused) {
    PyObject *shape = PyTuple_New(self->ndim);
    for (int i = 0; shape != NULL && i < self->ndim; i++) {
        PyTuple_SET_ITEM(shape, i, PyLong_FromLongLong(self->shape[i]));
    }
    if (shape == NULL) {
        return NULL;
    }
    return Py_BuildValue(
        "{sNsLsLsnsOsKsi}", "shape", shape, "first", (long long)self->batch->first, "count",
        (long long)self->batch->count, "nbytes", (Py_ssize_t)self->batch->bytes, "pinned",
        self->batch->pinned ? Py_True : Py_False, "address",
        (unsigned long long)(uintptr_t)self->batch->data, "device", self->batch->device);
}

static PyMethodDef batch_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))batch_dlpack, METH_VARARGS | METH_KEYWORDS,
     "A DLPack capsule over the batch's memory (no copy)."},
    {"__dlpack_device__", (PyCFunction)batch_dlpack_device, METH_NOARGS,
     "(device type, device id): (1, 0) for host memory, (2, n) for CUDA device n."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef batch_getset[] = {
    {"statuses", (getter)batch_statuses, NULL, "Each patch's status code (0: read).", NULL},
    {"info", (getter)batch_info, NULL, "shape, first, count, nbytes, pinned, address, device.",
     NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject core_batch_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "slidepipe._core.Batch",
    .tp_basicsize = sizeof(core_batch),
    .tp_dealloc = (destructor)batch_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One batch of patches made by a Loader, exported through DLPack.",
    .tp_methods = batch_methods,
    .tp_getset = batch_getset,
};

/* ---- Loader --------------------------------------------------------------------------------- */

typedef struct {
    PyObject ob_base;
    sp_loader *loader;
    PyObject *slides; /* a tuple of core Slides, each counted as read while the loader lives */
    int64_t size;     /* what a batch's shape and dtype come from */
    sp_batch_format format;
    int64_t group;
    int busy; /* a thread is waiting in next() with the GIL released */
} core_loader;

static void loader_release(core_loader *self) {
    if (self->loader != NULL) {
        sp_loader *l = self->loader;
        self->loader = NULL;
        Py_BEGIN_ALLOW_THREADS sp_loader_destroy(l);
        Py_END_ALLOW_THREADS
    }
    if (self->slides != NULL) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(self->slides); i++) {
            ((core_slide *)PyTuple_GET_ITEM(self->slides, i))->readers--;
        }
        Py_CLEAR(self->slides);
    }
}

static void loader_dealloc(core_loader *self) {
    loader_release(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Loader(slides, requests, config, group) */
static int loader_init(core_loader *self, PyObject *args, PyObject *kwds) {
    PyObject *slides_obj, *reqs_obj, *config_obj;
    long long group;
    if (self->loader != NULL || self->slides != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "the loader is already set up");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "OOOL", &slides_obj, &reqs_obj, &config_obj, &group)) {
        return -1;
    }
    PyObject *slides = PySequence_Tuple(slides_obj);
    if (slides == NULL) {
        return -1;
    }
    inputs in;
    if (get_inputs(slides, reqs_obj, config_obj, &in) != 0) {
        Py_DECREF(slides);
        return -1;
    }
    int rc = -1;
    if (group < 1 || in.cfg.c.batch_size % group != 0) {
        PyErr_SetString(PyExc_ValueError, "group must divide the batch size");
        goto done;
    }
    char err[512] = "";
    sp_loader *l = NULL;
    sp_status st;
    Py_BEGIN_ALLOW_THREADS st = sp_loader_create(in.slides, (size_t)in.n_slides, in.reqs.buf,
                                                 in.n_reqs, &in.cfg.c, &l, err, sizeof err);
    Py_END_ALLOW_THREADS if (st != SP_OK) {
        raise_status(st, err);
        goto done;
    }
    self->loader = l; /* it has its own copies of everything the config points at */
    self->size = in.cfg.c.size;
    self->format = in.cfg.c.format;
    self->group = group;
    self->slides = slides;
    slides = NULL;
    for (Py_ssize_t i = 0; i < in.n_slides; i++) {
        ((core_slide *)PyTuple_GET_ITEM(self->slides, i))->readers++;
    }
    rc = 0;
done:
    Py_XDECREF(slides);
    release_inputs(&in);
    return rc;
}

static PyObject *loader_next(core_loader *self, PyObject *unused) {
    if (self->loader == NULL) {
        PyErr_SetString(PyExc_ValueError, "the loader is closed");
        return NULL;
    }
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "another thread is taking a batch from this loader");
        return NULL;
    }
    sp_batch *b = NULL;
    sp_status st;
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS st = sp_loader_next(self->loader, &b);
    Py_END_ALLOW_THREADS self->busy = 0;
    if (st != SP_OK) {
        const char *why = sp_loader_error(self->loader);
        return raise_status(st, why[0] != '\0' ? why : "the loader could not allocate a batch");
    }
    if (b == NULL) {
        Py_RETURN_NONE;
    }
    return batch_new(b, self->size, &self->format, self->group);
}

static PyObject *loader_stats(core_loader *self, PyObject *unused) {
    sp_loader_stats s = {.struct_size = sizeof s};
    if (self->loader == NULL || sp_loader_get_stats(self->loader, &s) != SP_OK) {
        PyErr_SetString(PyExc_ValueError, "the loader is closed");
        return NULL;
    }
    return Py_BuildValue(
        "{sLsLsLsLsLsdsOsisL}", "batches_made", (long long)s.batches_made, "batches_taken",
        (long long)s.batches_taken, "bytes_held", (long long)s.bytes_held, "bytes_held_peak",
        (long long)s.bytes_held_peak, "patches_failed", (long long)s.patches_failed, "wait_seconds",
        s.wait_seconds, "pinned", s.pinned ? Py_True : Py_False, "numa_node", s.numa_node,
        "patches_read_on_device", (long long)s.patches_read_on_device);
}

static PyObject *loader_close(core_loader *self, PyObject *unused) {
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "another thread is taking a batch from this loader");
        return NULL;
    }
    loader_release(self);
    Py_RETURN_NONE;
}

static PyMethodDef loader_methods_table[] = {
    {"next", (PyCFunction)loader_next, METH_NOARGS,
     "The next Batch (waiting for it with the GIL released), or None after the last."},
    {"stats", (PyCFunction)loader_stats, METH_NOARGS, "What the loader holds and has done."},
    {"close", (PyCFunction)loader_close, METH_NOARGS, "Stop and free the loader."},
    {NULL, NULL, 0, NULL}};

static PyTypeObject core_loader_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "slidepipe._core.Loader",
    .tp_basicsize = sizeof(core_loader),
    .tp_dealloc = (destructor)loader_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Loader(slides, requests, config, group): batches made ahead (sp_loader).",
    .tp_methods = loader_methods_table,
    .tp_init = (initproc)loader_init,
    .tp_new = PyType_GenericNew,
};

/* ---- synchronous calls ---------------------------------------------------------------------- */

/* patches_read(slides, requests, config, out) -> [status, ...] */
static PyObject *core_patches_read(PyObject *module, PyObject *args) {
    PyObject *slides_obj, *reqs_obj, *config_obj, *out_obj;
    if (!PyArg_ParseTuple(args, "OOOO", &slides_obj, &reqs_obj, &config_obj, &out_obj)) {
        return NULL;
    }
    inputs in;
    if (get_inputs(slides_obj, reqs_obj, config_obj, &in) != 0) {
        return NULL;
    }
    const sp_loader_config *c = &in.cfg.c;
    int64_t patch = c->size * c->size * 3 * sp_batch_dtype_bytes(c->format.dtype);
    sp_status *statuses = PyMem_Calloc(in.n_reqs ? in.n_reqs : 1, sizeof *statuses);
    Py_buffer out;
    PyObject *result = NULL;
    if (statuses == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (get_out_buffer(out_obj, &out, patch * (int64_t)in.n_reqs) != 0) {
        goto done;
    }
    char err[512] = "";
    sp_status st;
    Py_BEGIN_ALLOW_THREADS st = sp_patches_read(in.slides, (size_t)in.n_slides, in.reqs.buf,
                                                in.n_reqs, c, out.buf, statuses, err, sizeof err);
    Py_END_ALLOW_THREADS PyBuffer_Release(&out);
    if (st != SP_OK && err[0] != '\0') {
        raise_status(st, err);
        goto done;
    }
    result = status_list(statuses, (int64_t)in.n_reqs);
done:
    PyMem_Free(statuses);
    release_inputs(&in);
    return result;
}

/* read_image(slide, downsample, x, y, width, height, dtype, layout, mean, std, out) */
static PyObject *core_read_image(PyObject *module, PyObject *args) {
    PyObject *slide_obj, *out_obj;
    double downsample;
    long long x, y, w, h;
    int dtype, layout;
    sp_batch_format f;
    if (!PyArg_ParseTuple(args, "O!dLLLLii(fff)(fff)O", &core_slide_type, &slide_obj, &downsample,
                          &x, &y, &w, &h, &dtype, &layout, &f.mean[0], &f.mean[1], &f.mean[2],
                          &f.std[0], &f.std[1], &f.std[2], &out_obj)) {
        return NULL;
    }
    core_slide *s = (core_slide *)slide_obj;
    if (check_open(s) != 0) {
        return NULL;
    }
    f.dtype = (sp_batch_dtype)dtype;
    f.layout = (sp_batch_layout)layout;
    int bytes = sp_batch_dtype_bytes(f.dtype);
    if (w < 1 || h < 1 || bytes == 0 || w > INT64_MAX / 3 / bytes / h) {
        return PyErr_Format(PyExc_ValueError, "bad image size %lld x %lld", w, h);
    }
    Py_buffer out;
    if (get_out_buffer(out_obj, &out, w * h * 3 * bytes) != 0) {
        return NULL;
    }
    sp_status st;
    s->readers++;
    Py_BEGIN_ALLOW_THREADS st = sp_slide_read_image(s->slide, downsample, x, y, w, h, &f, out.buf);
    Py_END_ALLOW_THREADS s->readers--;
    PyBuffer_Release(&out);
    if (st != SP_OK) {
        return raise_status(st, st == SP_E_INVALID_ARG ? NULL : sp_slide_error(s->slide));
    }
    Py_RETURN_NONE;
}

PyMethodDef loader_methods[] = {
    {"patches_read", core_patches_read, METH_VARARGS,
     "patches_read(slides, requests, config, out) -> [status, ...]"},
    {"read_image", core_read_image, METH_VARARGS,
     "read_image(slide, downsample, x, y, width, height, dtype, layout, mean, std, out)"},
    {NULL, NULL, 0, NULL}};

int add_loader_types(PyObject *m) {
    if (PyType_Ready(&core_batch_type) < 0 || PyType_Ready(&core_loader_type) < 0) {
        return -1;
    }
    Py_INCREF(&core_batch_type);
    Py_INCREF(&core_loader_type);
    if (PyModule_AddObject(m, "Batch", (PyObject *)&core_batch_type) != 0 ||
        PyModule_AddObject(m, "Loader", (PyObject *)&core_loader_type) != 0) {
        return -1;
    }
    return PyModule_AddIntConstant(m, "PATCH_REQUEST_BYTES", (long)sizeof(sp_patch_request));
}
