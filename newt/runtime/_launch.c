/* newt's compiled launcher: packs a kernel's run-time arguments and calls cuLaunchKernel directly.

   Built on first use by newt/runtime/clauncher.py with the system C compiler (no CUDA headers: the
   driver entry point is passed in as an address, from cuGetProcAddress through cuda.bindings), and
   optional: without a compiler the pure-Python launcher (driver.Launcher) does the same work.

   launcher(gx, gy, gz, stream, v0, ..., vN) takes the values the JIT's fast path passes: every
   non-constexpr argument (pointers and numbers, tuples of them), of which `select` picks the kernel's
   parameters: an index, or a path (i, k, ...) to element [k]... of tuple argument i.
   Each parameter is converted with Python's own packing rules (struct's) into an 8-byte slot on the
   stack, so nothing is allocated and no lock is taken.  Anything this code does not handle exactly
   (a value of another type, out of range, a grid dimension that is not a positive int within CUDA's
   limits) goes to `fallback`, the pure-Python launch, which launches or raises as it always does. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if PY_VERSION_HEX < 0x030B0000
#define PyFloat_Pack2 _PyFloat_Pack2
#define PyFloat_Pack4 _PyFloat_Pack4
#define PyFloat_Pack8 _PyFloat_Pack8
#endif
#ifndef Py_TPFLAGS_HAVE_VECTORCALL
#define Py_TPFLAGS_HAVE_VECTORCALL _Py_TPFLAGS_HAVE_VECTORCALL
#endif

typedef int (*launch_t)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *,
                        void **, void **);
typedef int (*coop_t)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *,
                      void **);

/* parameter codes (driver.py's struct codes) */
enum { P_BOOL, P_I8, P_U8, P_I16, P_U16, P_I32, P_U32, P_I64, P_U64, P_F32, P_F64, P_F16, P_BF16 };

#define MAX_PARAMS 512
#define MAX_DEPTH 8
#define SEL_WIDTH (MAX_DEPTH + 2)

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    void *entry; /* cuLaunchKernel, or cuLaunchCooperativeKernel when cooperative */
    int cooperative;
    void *func;
    unsigned block, shared;
    Py_ssize_t n_values, n_params;
    int32_t *select; /* per parameter: [depth, value index, k1, ..., k_depth] (SEL_WIDTH ints) */
    uint8_t *codes;
    PyObject *on_error; /* on_error(err, gx, gy, gz, stream, values): raises, or returns after recovering */
    PyObject *fallback; /* fallback(gx, gy, gz, stream, *values): the pure-Python launch */
    PyObject *hist;     /* hist(me) after each launch (driver.HISTORY.append), or None */
    PyObject *me;
} Launcher;

/* struct's rules: ints must be ints (bool included) in range; floats take ints too */
static int pack_int(PyObject *v, long long lo, unsigned long long hi, int is_unsigned, uint64_t *slot, int size) {
    if (!PyLong_Check(v)) return -1;
    if (is_unsigned) {
        unsigned long long u = PyLong_AsUnsignedLongLong(v);
        if (u == (unsigned long long)-1 && PyErr_Occurred()) return -1;
        if (u > hi) return -1;
        memcpy(slot, &u, (size_t)size); /* little-endian: the low bytes */
    } else {
        int overflow = 0;
        long long s = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow || (s == -1 && PyErr_Occurred())) return -1;
        if (s < lo || (s > 0 && (unsigned long long)s > hi)) return -1;
        memcpy(slot, &s, (size_t)size);
    }
    return 0;
}

static int pack_one(PyObject *v, uint8_t code, uint64_t *slot) {
    *slot = 0;
    switch (code) {
    case P_BOOL: {
        int t = PyObject_IsTrue(v);
        if (t < 0) return -1;
        *(unsigned char *)slot = (unsigned char)t;
        return 0;
    }
    case P_I8: return pack_int(v, -128, 127, 0, slot, 1);
    case P_U8: return pack_int(v, 0, 255, 1, slot, 1);
    case P_I16: return pack_int(v, -32768, 32767, 0, slot, 2);
    case P_U16: return pack_int(v, 0, 65535, 1, slot, 2);
    case P_I32: return pack_int(v, -2147483648LL, 2147483647ULL, 0, slot, 4);
    case P_U32: return pack_int(v, 0, 4294967295ULL, 1, slot, 4);
    case P_I64: return pack_int(v, INT64_MIN, INT64_MAX, 0, slot, 8);
    case P_U64: return pack_int(v, 0, UINT64_MAX, 1, slot, 8);
    case P_F32: case P_F64: case P_F16: case P_BF16: {
        if (!PyFloat_Check(v) && !PyLong_Check(v)) return -1;
        double d = PyFloat_AsDouble(v);
        if (d == -1.0 && PyErr_Occurred()) return -1;
        if (code == P_F64) return PyFloat_Pack8(d, (char *)slot, 1);
        if (code == P_F16) return PyFloat_Pack2(d, (char *)slot, 1);
        uint32_t u;
        if (PyFloat_Pack4(d, (char *)&u, 1) < 0) return -1;
        if (code == P_F32) {
            memcpy(slot, &u, 4);
            return 0;
        }
        /* bfloat16: round the float32 to nearest even (driver.bf16_bits) */
        uint16_t b;
        if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x7FFFFFu)) {
            b = 0x7FC0;
        } else {
            u += 0x7FFFu + ((u >> 16) & 1u);
            b = (uint16_t)(u >> 16);
        }
        memcpy(slot, &b, 2);
        return 0;
    }
    }
    return -1;
}

static PyObject *call_fallback(Launcher *self, PyObject *const *args, Py_ssize_t n) {
    PyErr_Clear();
    return PyObject_Vectorcall(self->fallback, args, (size_t)n, NULL);
}

static int grid_dim(PyObject *v, unsigned long long limit, unsigned *out) {
    if (!PyLong_CheckExact(v)) return -1;
    int overflow = 0;
    long long d = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || d < 1 || (unsigned long long)d > limit) return -1;
    *out = (unsigned)d;
    return 0;
}

static PyObject *launcher_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Launcher *self = (Launcher *)op;
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    if (kwnames != NULL && PyTuple_GET_SIZE(kwnames)) {
        PyErr_SetString(PyExc_TypeError, "the launcher takes positional arguments only");
        return NULL;
    }
    if (n != 4 + self->n_values) return call_fallback(self, args, n); /* its own TypeError */
    unsigned gx, gy, gz;
    if (grid_dim(args[0], 2147483647ULL, &gx) || grid_dim(args[1], 65535, &gy) || grid_dim(args[2], 65535, &gz))
        return call_fallback(self, args, n); /* zero (no launch), negative, too large, not an int */
    if (!PyLong_CheckExact(args[3])) return call_fallback(self, args, n);
    void *stream = PyLong_AsVoidPtr(args[3]);
    if (stream == NULL && PyErr_Occurred()) return call_fallback(self, args, n);
    uint64_t slots[MAX_PARAMS];
    void *ptrs[MAX_PARAMS];
    for (Py_ssize_t j = 0; j < self->n_params; j++) {
        const int32_t *sel = self->select + j * SEL_WIDTH;
        PyObject *v = args[4 + sel[1]];
        for (int32_t d = 0; d < sel[0]; d++) { /* an element of a tuple argument (the fast path passes tuples) */
            if (!PyTuple_CheckExact(v) || sel[2 + d] >= PyTuple_GET_SIZE(v)) return call_fallback(self, args, n);
            v = PyTuple_GET_ITEM(v, sel[2 + d]);
        }
        if (pack_one(v, self->codes[j], &slots[j]) < 0) return call_fallback(self, args, n);
        ptrs[j] = &slots[j];
    }
    int err;
    Py_BEGIN_ALLOW_THREADS
    if (self->cooperative)
        err = ((coop_t)self->entry)(self->func, gx, gy, gz, self->block, 1, 1, self->shared, stream, ptrs);
    else
        err = ((launch_t)self->entry)(self->func, gx, gy, gz, self->block, 1, 1, self->shared, stream, ptrs, NULL);
    Py_END_ALLOW_THREADS
    if (err) {
        PyObject *values = PyTuple_New(self->n_values);
        if (values == NULL) return NULL;
        for (Py_ssize_t i = 0; i < self->n_values; i++) {
            Py_INCREF(args[4 + i]);
            PyTuple_SET_ITEM(values, i, args[4 + i]);
        }
        PyObject *r = PyObject_CallFunction(self->on_error, "iOOOOO", err, args[0], args[1], args[2], args[3], values);
        Py_DECREF(values);
        return r;
    }
    if (self->hist != Py_None) {
        PyObject *r = PyObject_CallOneArg(self->hist, self->me);
        if (r == NULL) return NULL;
        Py_DECREF(r);
    }
    Py_RETURN_NONE;
}

static void *address(PyObject *v, const char *what) {
    void *p = PyLong_AsVoidPtr(v);
    if (p == NULL && !PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "%s is a null address", what);
    return p;
}

/* Launcher(entry, cooperative, func, block, shared, codes: bytes, select: tuple, n_values, on_error, fallback,
            hist, me) */
static PyObject *launcher_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    PyObject *entry, *func, *codes, *select, *on_error, *fallback, *hist, *me;
    int cooperative;
    unsigned block, shared;
    Py_ssize_t n_values;
    if (kw != NULL && PyDict_GET_SIZE(kw)) {
        PyErr_SetString(PyExc_TypeError, "Launcher() takes positional arguments only");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OpOIIO!O!nOOOO", &entry, &cooperative, &func, &block, &shared, &PyBytes_Type,
                          &codes, &PyTuple_Type, &select, &n_values, &on_error, &fallback, &hist, &me))
        return NULL;
    Py_ssize_t np = PyBytes_GET_SIZE(codes);
    if (np != PyTuple_GET_SIZE(select) || np > MAX_PARAMS) {
        PyErr_SetString(PyExc_ValueError, "Launcher: codes and select differ in length, or too many parameters");
        return NULL;
    }
    Launcher *self = (Launcher *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->vectorcall = launcher_vectorcall;
    self->entry = address(entry, "the driver entry point");
    self->func = self->entry ? address(func, "the CUfunction") : NULL;
    if (self->func == NULL) goto fail;
    self->cooperative = cooperative;
    self->block = block;
    self->shared = shared;
    self->n_values = n_values;
    self->n_params = np;
    self->select = PyMem_Malloc(sizeof(int32_t) * SEL_WIDTH * (size_t)(np ? np : 1));
    self->codes = PyMem_Malloc((size_t)(np ? np : 1));
    if (!self->select || !self->codes) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t j = 0; j < np; j++) {
        PyObject *item = PyTuple_GET_ITEM(select, j);
        int32_t *sel = self->select + j * SEL_WIDTH;
        Py_ssize_t len = 1;
        if (PyTuple_Check(item)) {
            len = PyTuple_GET_SIZE(item);
            if (len < 1 || len > MAX_DEPTH + 1) {
                PyErr_SetString(PyExc_ValueError, "Launcher: a parameter's path is empty or too deep");
                goto fail;
            }
        }
        sel[0] = (int32_t)(len - 1);
        for (Py_ssize_t d = 0; d < len; d++) {
            long s = PyLong_AsLong(PyTuple_Check(item) ? PyTuple_GET_ITEM(item, d) : item);
            if (s == -1 && PyErr_Occurred()) goto fail;
            if (s < 0 || (d == 0 && s >= n_values) || s > INT32_MAX) {
                PyErr_SetString(PyExc_ValueError, "Launcher: a parameter selects no value");
                goto fail;
            }
            sel[1 + d] = (int32_t)s;
        }
        uint8_t c = (uint8_t)PyBytes_AS_STRING(codes)[j];
        if (c > P_BF16) {
            PyErr_SetString(PyExc_ValueError, "Launcher: a parameter has an unknown code");
            goto fail;
        }
        self->codes[j] = c;
    }
    Py_INCREF(on_error);
    self->on_error = on_error;
    Py_INCREF(fallback);
    self->fallback = fallback;
    Py_INCREF(hist);
    self->hist = hist;
    Py_INCREF(me);
    self->me = me;
    return (PyObject *)self;
fail:
    Py_DECREF(self);
    return NULL;
}

static int launcher_traverse(Launcher *self, visitproc visit, void *arg) {
    Py_VISIT(self->on_error);
    Py_VISIT(self->fallback);
    Py_VISIT(self->hist);
    Py_VISIT(self->me);
    return 0;
}

static int launcher_clear(Launcher *self) {
    Py_CLEAR(self->on_error);
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->hist);
    Py_CLEAR(self->me);
    return 0;
}

static void launcher_dealloc(Launcher *self) {
    PyObject_GC_UnTrack(self);
    launcher_clear(self);
    PyMem_Free(self->select);
    PyMem_Free(self->codes);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject LauncherType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_newt_launch.Launcher",
    .tp_basicsize = sizeof(Launcher),
    .tp_dealloc = (destructor)launcher_dealloc,
    .tp_vectorcall_offset = offsetof(Launcher, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A kernel loaded on a device: launcher(gx, gy, gz, stream, *values) packs and launches it.",
    .tp_traverse = (traverseproc)launcher_traverse,
    .tp_clear = (inquiry)launcher_clear,
    .tp_new = launcher_new,
};

/* ---- a stand-in for cuLaunchKernel that calls back into Python, so tests without a GPU run this very code ---- */

static PyObject *fake_callback = NULL;

static int fake_call(int cooperative, void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                     unsigned bz, unsigned shm, void *stream, void **params, void **extra) {
    PyGILState_STATE st = PyGILState_Ensure();
    int res = 999; /* CUDA_ERROR_UNKNOWN when the callback fails */
    if (fake_callback != NULL) {
        PyObject *r = PyObject_CallFunction(fake_callback, "KIIIIIIIKKii", (unsigned long long)(uintptr_t)f, gx, gy,
                                            gz, bx, by, bz, shm, (unsigned long long)(uintptr_t)stream,
                                            (unsigned long long)(uintptr_t)params, extra != NULL, cooperative);
        if (r == NULL) {
            PyErr_WriteUnraisable(fake_callback);
        } else {
            long v = PyLong_AsLong(r);
            if (v == -1 && PyErr_Occurred()) PyErr_WriteUnraisable(fake_callback);
            else res = (int)v;
            Py_DECREF(r);
        }
    }
    PyGILState_Release(st);
    return res;
}

static int fake_launch(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                       unsigned shm, void *stream, void **params, void **extra) {
    return fake_call(0, f, gx, gy, gz, bx, by, bz, shm, stream, params, extra);
}

static int fake_coop_launch(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                            unsigned shm, void *stream, void **params) {
    return fake_call(1, f, gx, gy, gz, bx, by, bz, shm, stream, params, NULL);
}

/* fake_driver(callback) -> (address of the cuLaunchKernel stand-in, address of the cooperative one); each
   launch calls callback(func, gx, gy, gz, bx, by, bz, shared, stream, params_address, has_extra,
   cooperative) and returns its int result as the CUresult */
static PyObject *fake_driver(PyObject *m, PyObject *callback) {
    (void)m;
    Py_INCREF(callback);
    Py_XSETREF(fake_callback, callback);
    return Py_BuildValue("(NN)", PyLong_FromVoidPtr((void *)fake_launch), PyLong_FromVoidPtr((void *)fake_coop_launch));
}

static PyMethodDef methods[] = {
    {"fake_driver", fake_driver, METH_O,
     "fake_driver(callback) -> addresses of stand-ins for cuLaunchKernel / cuLaunchCooperativeKernel (tests)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_newt_launch", "newt's compiled kernel launcher", -1,
                                    methods};

PyMODINIT_FUNC PyInit__newt_launch(void) {
    if (PyType_Ready(&LauncherType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    Py_INCREF(&LauncherType);
    if (PyModule_AddObject(m, "Launcher", (PyObject *)&LauncherType) < 0) {
        Py_DECREF(&LauncherType);
        Py_DECREF(m);
        return NULL;
    }
    PyModule_AddIntConstant(m, "MAX_PARAMS", MAX_PARAMS);
    return m;
}
