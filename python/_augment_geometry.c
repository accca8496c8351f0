/* _augment_geometry.c — the module functions behind slidepipe/augment_geometry.py: augment a
 * batch of RGB8 patches in place (sp_augment_geometry_batch, the GIL released), the numbers a
 * seed draws (sp_geometry_draw) and its elastic noise (sp_geometry_elastic_noise), so tests can
 * drive a reference with the very same numbers. The parameters arrive as one flat tuple in the
 * order geometry_params_fields lists, built by the package's Geometry class. */
#include "_core.h"

#include <string.h>

/* rotation, scale, scale_x, scale_y, shear_x, shear_y, translate_x, translate_y (lo, hi each),
 * crop, crop_scale (lo, hi), crop_ratio (lo, hi), elastic, elastic_alpha (x, y), elastic_sigma,
 * elastic_kernel, border, fill (r, g, b) */
int parse_geometry_params(PyObject *t, sp_geometry_params *p) {
    sp_geometry_params_default(p);
    unsigned char f0, f1, f2;
    if (!PyArg_ParseTuple(
            t, "ddddddddddddddddiddddidddiibbb;geometry parameters", &p->rotation[0],
            &p->rotation[1], &p->scale[0], &p->scale[1], &p->scale_x[0], &p->scale_x[1],
            &p->scale_y[0], &p->scale_y[1], &p->shear_x[0], &p->shear_x[1], &p->shear_y[0],
            &p->shear_y[1], &p->translate_x[0], &p->translate_x[1], &p->translate_y[0],
            &p->translate_y[1], &p->crop, &p->crop_scale[0], &p->crop_scale[1], &p->crop_ratio[0],
            &p->crop_ratio[1], &p->elastic, &p->elastic_alpha[0], &p->elastic_alpha[1],
            &p->elastic_sigma, &p->elastic_kernel, &p->border, &f0, &f1, &f2)) {
        return -1;
    }
    p->fill[0] = f0, p->fill[1] = f1, p->fill[2] = f2;
    return 0;
}

/* augment_geometry(patches, count, width, height, seeds, params, threads) */
static PyObject *augment_geometry(PyObject *self, PyObject *args) {
    PyObject *out, *seeds_obj, *params;
    long long count, width, height;
    int threads;
    if (!PyArg_ParseTuple(args, "OLLLOO!i", &out, &count, &width, &height, &seeds_obj,
                          &PyTuple_Type, &params, &threads)) {
        return NULL;
    }
    sp_geometry_params p;
    if (parse_geometry_params(params, &p) != 0) {
        return NULL;
    }
    Py_buffer view, seeds;
    if (width < 1 || height < 1 || width > (1LL << 20) || height > (1LL << 20)) {
        return PyErr_Format(PyExc_ValueError, "bad patch size %lld x %lld", width, height);
    }
    if (get_patches(out, seeds_obj, count, width * height, &view, &seeds) != 0) {
        return NULL;
    }
    sp_status st;
    Py_BEGIN_ALLOW_THREADS st =
        sp_augment_geometry_batch(view.buf, count, width, height, seeds.buf, &p, threads);
    Py_END_ALLOW_THREADS release_patches(&view, &seeds);
    if (st != SP_OK) {
        return raise_status(st, st == SP_E_INVALID_ARG ? "invalid geometry parameters"
                                                       : "geometric augmentation failed");
    }
    Py_RETURN_NONE;
}

/* geometry_draw(width, height, seed, params) -> dict */
static PyObject *geometry_draw(PyObject *self, PyObject *args) {
    long long width, height;
    unsigned long long seed;
    PyObject *params;
    if (!PyArg_ParseTuple(args, "LLKO!", &width, &height, &seed, &PyTuple_Type, &params)) {
        return NULL;
    }
    sp_geometry_params p;
    if (parse_geometry_params(params, &p) != 0) {
        return NULL;
    }
    sp_geometry_drawn d = {.struct_size = sizeof d};
    sp_status st = sp_geometry_draw(width, height, seed, &p, &d);
    if (st != SP_OK) {
        return raise_status(st, "invalid geometry parameters");
    }
    return Py_BuildValue("{s:d,s:d,s:d,s:d,s:d,s:d,s:d,s:d,s:((d,d,d),(d,d,d)),s:(L,L,L,L)}",
                         "rotation", d.rotation, "scale", d.scale, "scale_x", d.scale_x, "scale_y",
                         d.scale_y, "shear_x", d.shear_x, "shear_y", d.shear_y, "translate_x",
                         d.translate_x, "translate_y", d.translate_y, "matrix", d.matrix[0],
                         d.matrix[1], d.matrix[2], d.matrix[3], d.matrix[4], d.matrix[5], "crop",
                         (long long)d.crop_top, (long long)d.crop_left, (long long)d.crop_height,
                         (long long)d.crop_width);
}

/* geometry_elastic_noise(width, height, seed, params, out): out holds 2 * h * w doubles */
static PyObject *geometry_elastic_noise(PyObject *self, PyObject *args) {
    long long width, height;
    unsigned long long seed;
    PyObject *params, *out;
    if (!PyArg_ParseTuple(args, "LLKO!O", &width, &height, &seed, &PyTuple_Type, &params, &out)) {
        return NULL;
    }
    sp_geometry_params p;
    if (parse_geometry_params(params, &p) != 0) {
        return NULL;
    }
    if (width < 1 || height < 1 || width > (1LL << 14) || height > (1LL << 14)) {
        return raise_status(SP_E_INVALID_ARG, "bad patch size");
    }
    Py_buffer view;
    if (get_out_buffer(out, &view, 2 * width * height * (int64_t)sizeof(double)) != 0) {
        return NULL;
    }
    sp_status st = sp_geometry_elastic_noise(width, height, seed, &p, view.buf);
    PyBuffer_Release(&view);
    if (st != SP_OK) {
        return raise_status(st, "invalid geometry parameters");
    }
    Py_RETURN_NONE;
}

PyMethodDef geometry_methods[] = {
    {"augment_geometry", augment_geometry, METH_VARARGS,
     "augment_geometry(patches, count, width, height, seeds, params, threads): in place."},
    {"geometry_draw", geometry_draw, METH_VARARGS,
     "geometry_draw(width, height, seed, params) -> the numbers the seed draws."},
    {"geometry_elastic_noise", geometry_elastic_noise, METH_VARARGS,
     "geometry_elastic_noise(width, height, seed, params, out): the elastic noise planes."},
    {NULL, NULL, 0, NULL}};
