/* _stores.c — the module functions that write and check OME-Zarr stores: convert (a slide to a
 * pyramid), process (an op over a level) and verify (re-hash a store against its manifest), each a
 * call of the public API with the GIL released. Options arrive as (option id, value) pairs that
 * the package maps from keyword arguments (slidepipe/stores.py); a progress callable, when given,
 * is called with (done, total) with the GIL taken back for the call. A Python exception raised by
 * it is kept and raised once the job returns (the job itself runs to its end). */
#include "_core.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct progress_ctx {
    PyObject *callable;                 /* NULL: no progress */
    bool raised;                        /* the callable raised: the exception is kept below */
    PyObject *type, *value, *traceback; /* as PyErr_Fetch gave them */
} progress_ctx;

static void call_progress(void *user, int64_t done, int64_t total) {
    progress_ctx *p = user;
    PyGILState_STATE g = PyGILState_Ensure();
    if (!p->raised) {
        PyObject *r = PyObject_CallFunction(p->callable, "LL", (long long)done, (long long)total);
        if (r == NULL) {
            p->raised = true;
            PyErr_Fetch(&p->type, &p->value, &p->traceback);
        }
        Py_XDECREF(r);
    }
    PyGILState_Release(g);
}

/* Re-raise what the progress callable raised; -1 when it did. */
static int progress_raised(progress_ctx *p) {
    if (!p->raised) {
        return 0;
    }
    PyErr_Restore(p->type, p->value, p->traceback); /* takes the references */
    return -1;
}

/* Apply [(option, value), ...] through `set`; -1 with ValueError naming a refused pair. */
static int apply_options(PyObject *pairs, void *options,
                         sp_status (*set)(void *options, int option, int64_t value)) {
    PyObject *seq = PySequence_Fast(pairs, "options must be a sequence of (option, value)");
    if (seq == NULL) {
        return -1;
    }
    int rc = 0;
    for (Py_ssize_t i = 0; rc == 0 && i < PySequence_Fast_GET_SIZE(seq); i++) {
        int option;
        long long value;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "iL", &option, &value)) {
            rc = -1;
        } else if (set(options, option, value) != SP_OK) {
            PyErr_Format(PyExc_ValueError, "option %d: value %lld out of range", option, value);
            rc = -1;
        }
    }
    Py_DECREF(seq);
    return rc;
}

/* What convert and process differ in: their options object and the call that writes. */
typedef struct store_job {
    void *options;
    sp_status (*set)(void *options, int option, int64_t value);
    sp_status (*write)(const struct store_job *job, sp_slide *slide, const char *out,
                       progress_ctx *p, char *hash, char *err, size_t err_len);
    const char *op; /* process only */
} store_job;

static sp_status set_convert(void *o, int option, int64_t value) {
    return sp_convert_options_set(o, (sp_convert_option)option, value);
}

static sp_status set_process(void *o, int option, int64_t value) {
    return sp_process_options_set(o, (sp_process_option)option, value);
}

static sp_status write_convert(const store_job *job, sp_slide *slide, const char *out,
                               progress_ctx *p, char *hash, char *err, size_t err_len) {
    return sp_convert_to_zarr(slide, out, job->options, p->callable ? call_progress : NULL, p, hash,
                              err, err_len);
}

static sp_status write_process(const store_job *job, sp_slide *slide, const char *out,
                               progress_ctx *p, char *hash, char *err, size_t err_len) {
    return sp_process_to_zarr(slide, job->op, out, job->options, p->callable ? call_progress : NULL,
                              p, hash, err, err_len);
}

/* Apply the options and run the job on an open slide with the GIL released; the dataset hash.
 * Takes `out_obj` (bytes). */
static PyObject *run_store_job(PyObject *slide_obj, PyObject *out_obj, PyObject *pairs,
                               PyObject *callable, const store_job *job) {
    core_slide *s = (core_slide *)slide_obj;
    if (check_open(s) != 0 || apply_options(pairs, job->options, job->set) != 0) {
        Py_DECREF(out_obj);
        return NULL;
    }
    progress_ctx p = {.callable = callable != Py_None ? callable : NULL};
    char hash[65] = "", err[1024] = "";
    s->readers++;
    PyThreadState *ts = PyEval_SaveThread();
    sp_status st = job->write(job, s->slide, PyBytes_AS_STRING(out_obj), &p, hash, err, sizeof err);
    PyEval_RestoreThread(ts);
    s->readers--;
    Py_DECREF(out_obj);
    if (progress_raised(&p) != 0) {
        return NULL;
    }
    return st == SP_OK ? PyUnicode_FromString(hash) : raise_status(st, err);
}

/* convert(slide, out, options, progress) -> dataset hash */
static PyObject *core_convert(PyObject *module, PyObject *args) {
    PyObject *slide_obj, *pairs, *callable, *out_obj;
    if (!PyArg_ParseTuple(args, "O!O&OO", &core_slide_type, &slide_obj, PyUnicode_FSConverter,
                          &out_obj, &pairs, &callable)) {
        return NULL;
    }
    sp_convert_options *options = NULL;
    if (sp_convert_options_create(&options) != SP_OK) {
        Py_DECREF(out_obj);
        return PyErr_NoMemory();
    }
    store_job job = {options, set_convert, write_convert, NULL};
    PyObject *r = run_store_job(slide_obj, out_obj, pairs, callable, &job);
    sp_convert_options_destroy(options);
    return r;
}

/* process(slide, out, op, options, progress) -> dataset hash */
static PyObject *core_process(PyObject *module, PyObject *args) {
    PyObject *slide_obj, *pairs, *callable, *out_obj;
    const char *op;
    if (!PyArg_ParseTuple(args, "O!O&sOO", &core_slide_type, &slide_obj, PyUnicode_FSConverter,
                          &out_obj, &op, &pairs, &callable)) {
        return NULL;
    }
    sp_process_options *options = NULL;
    if (sp_process_options_create(&options) != SP_OK) {
        Py_DECREF(out_obj);
        return PyErr_NoMemory();
    }
    store_job job = {options, set_process, write_process, op};
    PyObject *r = run_store_job(slide_obj, out_obj, pairs, callable, &job);
    sp_process_options_destroy(options);
    return r;
}

/* The problems sp_zarr_verify reports, gathered without the GIL. */
typedef struct problem_list {
    char **lines; /* "problem\tpath" */
    size_t n, cap;
    bool failed;
} problem_list;

static void collect_problem(void *user, const char *path, const char *problem) {
    problem_list *l = user;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        char **grown = realloc(l->lines, cap * sizeof *grown);
        if (grown == NULL) {
            l->failed = true;
            return;
        }
        l->lines = grown;
        l->cap = cap;
    }
    size_t a = strlen(problem), b = strlen(path);
    char *line = malloc(a + b + 2);
    if (line == NULL) {
        l->failed = true;
        return;
    }
    memcpy(line, problem, a);
    line[a] = '\t';
    memcpy(line + a + 1, path, b + 1);
    l->lines[l->n++] = line;
}

/* verify(store) -> (dataset hash, [(path, problem), ...]) */
static PyObject *core_verify(PyObject *module, PyObject *args) {
    PyObject *path_obj;
    if (!PyArg_ParseTuple(args, "O&", PyUnicode_FSConverter, &path_obj)) {
        return NULL;
    }
    problem_list l = {0};
    int64_t count = 0;
    char hash[65] = "", err[1024] = "";
    PyThreadState *ts = PyEval_SaveThread();
    sp_status st = sp_zarr_verify(PyBytes_AS_STRING(path_obj), collect_problem, &l, &count, hash,
                                  NULL, err, sizeof err);
    PyEval_RestoreThread(ts);
    Py_DECREF(path_obj);
    PyObject *list = st == SP_OK && !l.failed ? PyList_New(0) : NULL;
    for (size_t i = 0; list != NULL && i < l.n; i++) {
        char *tab = strchr(l.lines[i], '\t');
        *tab = '\0';
        PyObject *item = Py_BuildValue("(ss)", tab + 1, l.lines[i]);
        if (item == NULL || PyList_Append(list, item) != 0) {
            Py_CLEAR(list);
        }
        Py_XDECREF(item);
    }
    for (size_t i = 0; i < l.n; i++) {
        free(l.lines[i]);
    }
    free(l.lines);
    if (st != SP_OK) {
        return raise_status(st, err);
    }
    if (list == NULL) {
        return PyErr_Occurred() ? NULL : PyErr_NoMemory();
    }
    PyObject *r = Py_BuildValue("(sN)", hash, list);
    return r;
}

int add_store_constants(PyObject *m) {
    static const struct {
        const char *name;
        long value;
    } k[] = {
        {"CONVERT_FORMAT", SP_CONVERT_FORMAT},
        {"CONVERT_CHUNK", SP_CONVERT_CHUNK},
        {"CONVERT_CODEC", SP_CONVERT_CODEC},
        {"CONVERT_LEVEL", SP_CONVERT_LEVEL},
        {"CONVERT_SHARD", SP_CONVERT_SHARD},
        {"CONVERT_LEVELS", SP_CONVERT_LEVELS},
        {"CONVERT_LAYOUT", SP_CONVERT_LAYOUT},
        {"CONVERT_THREADS", SP_CONVERT_THREADS},
        {"CONVERT_RESUME", SP_CONVERT_RESUME},
        {"PROCESS_LEVEL", SP_PROCESS_LEVEL},
        {"PROCESS_CHUNK", SP_PROCESS_CHUNK},
        {"PROCESS_CODEC", SP_PROCESS_CODEC},
        {"PROCESS_CODEC_LEVEL", SP_PROCESS_CODEC_LEVEL},
        {"PROCESS_FORMAT", SP_PROCESS_FORMAT},
        {"PROCESS_THREADS", SP_PROCESS_THREADS},
        {"PROCESS_IN_FLIGHT", SP_PROCESS_IN_FLIGHT},
        {"PROCESS_MODE", SP_PROCESS_MODE},
        {"PROCESS_DEVICE", SP_PROCESS_DEVICE},
        {"PROCESS_DTYPE", SP_PROCESS_DTYPE},
        {"OME_ZARR_04", SP_ZARR_OME_04},
        {"OME_ZARR_05", SP_ZARR_OME_05},
        {"LAYOUT_CYX", SP_ZARR_LAYOUT_CYX},
        {"LAYOUT_YXC", SP_ZARR_LAYOUT_YXC},
        {"MODE_TILED", SP_PROCESS_TILED},
        {"MODE_GLOBAL", SP_PROCESS_GLOBAL},
        {"DEVICE_CPU", SP_DEVICE_CPU},
        {"DEVICE_CUDA", SP_DEVICE_CUDA},
        {"DTYPE_OP", SP_PROCESS_DTYPE_OP},
        {"DTYPE_UINT8", SP_PROCESS_DTYPE_UINT8},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        if (PyModule_AddIntConstant(m, k[i].name, k[i].value) != 0) {
            return -1;
        }
    }
    /* CODECS: {name: value}, from the library's one list of codecs. */
    PyObject *codecs = PyDict_New();
    const char *name;
    for (int c = 0; codecs != NULL && (name = sp_zarr_codec_name((sp_zarr_codec)c)) != NULL; c++) {
        PyObject *v = PyLong_FromLong(c);
        if (v == NULL || PyDict_SetItemString(codecs, name, v) != 0) {
            Py_XDECREF(v);
            Py_CLEAR(codecs);
            break;
        }
        Py_DECREF(v);
    }
    if (codecs == NULL || PyModule_AddObject(m, "CODECS", codecs) != 0) {
        Py_XDECREF(codecs);
        return -1;
    }
    return 0;
}

PyMethodDef store_methods[] = {
    {"convert", core_convert, METH_VARARGS,
     "convert(slide, out, [(option, value)], progress) -> dataset hash"},
    {"process", core_process, METH_VARARGS,
     "process(slide, out, op, [(option, value)], progress) -> dataset hash"},
    {"verify", core_verify, METH_VARARGS, "verify(store) -> (dataset hash, [(path, problem)])"},
    {NULL, NULL, 0, NULL}};
