/* _augment_color.c — the photometric augmentation (colour jitter, blur, noise) for Python:
 * augment_photometric runs sp_augment_photometric_batch in place on a buffer of patches with the
 * GIL released, photometric_draw returns what a seed draws, so that tests can drive a reference
 * with the same numbers. Behind slidepipe/augment_color.py. */
#include "_core.h"

#include <string.h>

/* The parameters from the tuple (jitter_p, brightness, contrast, saturation, hue, blur_p,
 * blur_sigma_min, blur_sigma_max, blur_kernel_size, noise_p, noise_sigma_min, noise_sigma_max)
 * that augment_color.py builds; nonzero on success. */
int parse_photometric_params(PyObject *obj, sp_photometric_params *p) {
    memset(p, 0, sizeof(*p));
    p->struct_size = sizeof(*p);
    int kernel = 0;
    if (!PyArg_ParseTuple(obj, "ddddddddiddd", &p->jitter_p, &p->brightness, &p->contrast,
                          &p->saturation, &p->hue, &p->blur_p, &p->blur_sigma_min,
                          &p->blur_sigma_max, &kernel, &p->noise_p, &p->noise_sigma_min,
                          &p->noise_sigma_max)) {
        return 0;
    }
    p->blur_kernel_size = kernel;
    return 1;
}

static const char BAD_PARAMS[] =
    "bad photometric parameters (probabilities in [0, 1], brightness/contrast/saturation >= 0, "
    "hue in [0, 0.5], 0 < blur sigma min <= max <= 40, blur kernel 0 or odd <= 255, "
    "0 <= noise sigma min <= max <= 255)";

/* augment_photometric(buffer, count, width, height, seeds, params, threads) */
static PyObject *augment_photometric(PyObject *module, PyObject *args) {
    PyObject *out, *seeds_obj, *params_obj;
    long long count, width, height;
    int threads;
    if (!PyArg_ParseTuple(args, "OLLLOO!i", &out, &count, &width, &height, &seeds_obj,
                          &PyTuple_Type, &params_obj, &threads)) {
        return NULL;
    }
    sp_photometric_params p;
    if (!parse_photometric_params(params_obj, &p)) {
        return NULL;
    }
    Py_buffer view, seeds;
    if (width < 1 || height < 1 || width > (1 << 20) || height > (1 << 20)) {
        return PyErr_Format(PyExc_ValueError, "bad patch size %lld x %lld", width, height);
    }
    if (get_patches(out, seeds_obj, count, width * height, &view, &seeds) != 0) {
        return NULL;
    }
    PyThreadState *ts = PyEval_SaveThread();
    sp_status st =
        sp_augment_photometric_batch(view.buf, count, width, height, seeds.buf, &p, threads);
    PyEval_RestoreThread(ts);
    release_patches(&view, &seeds);
    if (st != SP_OK) {
        return raise_status(st, st == SP_E_INVALID_ARG ? BAD_PARAMS : "out of memory");
    }
    Py_RETURN_NONE;
}

/* photometric_draw(seed, params) -> dict of what the seed draws */
static PyObject *photometric_draw(PyObject *module, PyObject *args) {
    unsigned long long seed;
    PyObject *params_obj;
    if (!PyArg_ParseTuple(args, "KO!", &seed, &PyTuple_Type, &params_obj)) {
        return NULL;
    }
    sp_photometric_params p;
    if (!parse_photometric_params(params_obj, &p)) {
        return NULL;
    }
    sp_photometric_draws d = {.struct_size = sizeof(d)};
    sp_status st = sp_photometric_draw((uint64_t)seed, &p, &d);
    if (st != SP_OK) {
        return raise_status(st, BAD_PARAMS);
    }
    return Py_BuildValue(
        "{s:O,s:(iiii),s:d,s:d,s:d,s:d,s:O,s:d,s:i,s:O,s:d}", "jitter",
        d.jitter ? Py_True : Py_False, "order", d.order[0], d.order[1], d.order[2], d.order[3],
        "brightness", d.brightness, "contrast", d.contrast, "saturation", d.saturation, "hue",
        d.hue, "blur", d.blur ? Py_True : Py_False, "blur_sigma", d.blur_sigma, "blur_kernel",
        d.blur_kernel, "noise", d.noise ? Py_True : Py_False, "noise_sigma", d.noise_sigma);
}

PyMethodDef augment_color_methods[] = {
    {"augment_photometric", augment_photometric, METH_VARARGS,
     "augment_photometric(rgb, count, width, height, seeds, params, threads): in place"},
    {"photometric_draw", photometric_draw, METH_VARARGS,
     "photometric_draw(seed, params) -> dict: the order, factors and sigmas the seed draws"},
    {NULL, NULL, 0, NULL}};
