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
#include <structmember.h>
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

/* parameter codes (driver.py's struct codes); P_BLOB + k: k*8 bytes passed by value (struct "<k*8>s", e.g. a
   128-byte CUtensorMap as a __grid_constant__ parameter), given as a bytes-like object of exactly that size */
enum { P_BOOL, P_I8, P_U8, P_I16, P_U16, P_I32, P_U32, P_I64, P_U64, P_F32, P_F64, P_F16, P_BF16, P_BLOB = 128 };

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
    /* TMA tensor maps: parameters n_params - n_tmaps .. n_params - 1, each encoded at the launch by
       tmap_maker[k](*inputs) (tensormap.TensorMapMaker: cached by its inputs) into 128 bytes; tmap_in holds, per
       map, TMAP_IN entries: -1 ends the list, >= 0 a parameter whose value (by its select path) is an input,
       <= -2 the constant tmap_const[k][-2 - entry] */
    Py_ssize_t n_tmaps;
    PyObject *tmap_maker;  /* tuple of callables */
    PyObject *tmap_const;  /* tuple (per map) of tuples of int constants */
    int32_t *tmap_in;
} Launcher;

#define MAX_TMAPS 16
#define TMAP_IN 11 /* base, up to 5 sizes and 5 strides */

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

/* the value of parameter j among the launch's values (borrowed), following its select path; NULL where a path
   does not fit the values (no exception set) */
static PyObject *select_value(Launcher *self, PyObject *const *args, Py_ssize_t j) {
    const int32_t *sel = self->select + j * SEL_WIDTH;
    PyObject *v = args[4 + sel[1]];
    for (int32_t d = 0; d < sel[0]; d++) { /* an element of a tuple argument (the fast path passes tuples) */
        if (!PyTuple_CheckExact(v) || sel[2 + d] >= PyTuple_GET_SIZE(v)) return NULL;
        v = PyTuple_GET_ITEM(v, sel[2 + d]);
    }
    return v;
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
    Py_ssize_t n_plain = self->n_params - self->n_tmaps;
    for (Py_ssize_t j = 0; j < n_plain; j++) {
        PyObject *v = select_value(self, args, j);
        if (v == NULL) return call_fallback(self, args, n);
        uint8_t code = self->codes[j];
        if (code >= P_BLOB) {
            /* by value: the driver copies the bytes at the launch, so they are read in place (an immutable
               bytes object, kept alive by the caller for the call); anything else takes the Python path */
            if (!PyBytes_CheckExact(v) || PyBytes_GET_SIZE(v) != (Py_ssize_t)(code - P_BLOB) * 8)
                return call_fallback(self, args, n);
            ptrs[j] = PyBytes_AS_STRING(v);
            continue;
        }
        if (pack_one(v, code, &slots[j]) < 0) return call_fallback(self, args, n);
        ptrs[j] = &slots[j];
    }
    _Alignas(64) unsigned char tmaps[MAX_TMAPS][128];
    for (Py_ssize_t k = 0; k < self->n_tmaps; k++) {
        /* the tensor map from this launch's values: the maker returns its cached bytes for values seen before; a
           value it refuses (TensorMapError) or anything unusual: the Python launch, which raises or launches */
        PyObject *in[TMAP_IN];
        Py_ssize_t m = 0;
        const int32_t *e = self->tmap_in + k * TMAP_IN;
        for (; m < TMAP_IN && e[m] != -1; m++) {
            in[m] = e[m] >= 0 ? select_value(self, args, e[m])
                              : PyTuple_GET_ITEM(PyTuple_GET_ITEM(self->tmap_const, k), -2 - e[m]);
            if (in[m] == NULL) return call_fallback(self, args, n);
        }
        PyObject *b = PyObject_Vectorcall(PyTuple_GET_ITEM(self->tmap_maker, k), in, (size_t)m, NULL);
        if (b == NULL) return call_fallback(self, args, n);
        if (!PyBytes_CheckExact(b) || PyBytes_GET_SIZE(b) != 128) {
            Py_DECREF(b);
            return call_fallback(self, args, n);
        }
        memcpy(tmaps[k], PyBytes_AS_STRING(b), 128); /* (64-byte aligned, as the Python launch's buffer has it) */
        Py_DECREF(b);
        ptrs[n_plain + k] = tmaps[k];
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

static int launcher_tmaps(Launcher *self, PyObject *tm, Py_ssize_t n_plain) {
    Py_ssize_t ntm = PyTuple_GET_SIZE(tm);
    self->tmap_in = PyMem_Malloc(sizeof(int32_t) * TMAP_IN * (size_t)ntm);
    self->tmap_maker = PyTuple_New(ntm);
    self->tmap_const = PyTuple_New(ntm);
    if (!self->tmap_in || !self->tmap_maker || !self->tmap_const) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        return -1;
    }
    self->n_tmaps = ntm;
    for (Py_ssize_t k = 0; k < ntm; k++) {
        PyObject *spec = PyTuple_GET_ITEM(tm, k), *maker, *ins;
        if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) != 2 || !PyCallable_Check(maker = PyTuple_GET_ITEM(spec, 0))
            || !PyTuple_Check(ins = PyTuple_GET_ITEM(spec, 1)) || PyTuple_GET_SIZE(ins) > TMAP_IN) {
            PyErr_SetString(PyExc_ValueError, "Launcher: a tensor map is (maker, inputs) with at most 11 inputs");
            return -1;
        }
        Py_INCREF(maker);
        PyTuple_SET_ITEM(self->tmap_maker, k, maker);
        PyObject *consts = PyList_New(0);
        if (consts == NULL) return -1;
        int32_t *e = self->tmap_in + k * TMAP_IN;
        Py_ssize_t m = 0;
        for (; m < PyTuple_GET_SIZE(ins); m++) {
            PyObject *it = PyTuple_GET_ITEM(ins, m);
            if (PyTuple_Check(it) && PyTuple_GET_SIZE(it) == 1) {
                e[m] = -2 - (int32_t)PyList_GET_SIZE(consts);
                if (PyList_Append(consts, PyTuple_GET_ITEM(it, 0)) < 0) {
                    Py_DECREF(consts);
                    return -1;
                }
                continue;
            }
            long x = PyLong_Check(it) ? PyLong_AsLong(it) : -1;
            if (x < 0 || x >= n_plain) {
                Py_DECREF(consts);
                if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "Launcher: a tensor map input selects no parameter");
                return -1;
            }
            e[m] = (int32_t)x;
        }
        if (m < TMAP_IN) e[m] = -1;
        PyObject *ct = PyList_AsTuple(consts);
        Py_DECREF(consts);
        if (ct == NULL) return -1;
        PyTuple_SET_ITEM(self->tmap_const, k, ct);
    }
    return 0;
}

/* Launcher(entry, cooperative, func, block, shared, codes: bytes, select: tuple, n_values, on_error, fallback,
            hist, me[, tmaps]): tmaps, a tuple of (maker, inputs) per tensor map, inputs a tuple whose items are a
            parameter index (an int: that parameter's value) or a 1-tuple (constant,); codes then ends with one
            128-byte blob code per map, which select does not cover */
static PyObject *launcher_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    PyObject *entry, *func, *codes, *select, *on_error, *fallback, *hist, *me, *tm = NULL;
    int cooperative;
    unsigned block, shared;
    Py_ssize_t n_values;
    if (kw != NULL && PyDict_GET_SIZE(kw)) {
        PyErr_SetString(PyExc_TypeError, "Launcher() takes positional arguments only");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OpOIIO!O!nOOOO|O!", &entry, &cooperative, &func, &block, &shared, &PyBytes_Type,
                          &codes, &PyTuple_Type, &select, &n_values, &on_error, &fallback, &hist, &me, &PyTuple_Type,
                          &tm))
        return NULL;
    Py_ssize_t np = PyBytes_GET_SIZE(codes), ntm = tm == NULL ? 0 : PyTuple_GET_SIZE(tm);
    if (np != PyTuple_GET_SIZE(select) + ntm || np > MAX_PARAMS || ntm > MAX_TMAPS) {
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
    for (Py_ssize_t j = 0; j < np - ntm; j++) {
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
        if (c > P_BF16 && c <= P_BLOB) {
            PyErr_SetString(PyExc_ValueError, "Launcher: a parameter has an unknown code");
            goto fail;
        }
        self->codes[j] = c;
    }
    if (ntm && launcher_tmaps(self, tm, np - ntm) < 0) goto fail;
    for (Py_ssize_t j = np - ntm; j < np; j++) {
        if ((uint8_t)PyBytes_AS_STRING(codes)[j] != P_BLOB + 16) {
            PyErr_SetString(PyExc_ValueError, "Launcher: a tensor map's parameter is not a 128-byte blob");
            goto fail;
        }
        self->codes[j] = P_BLOB + 16;
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
    Py_VISIT(self->tmap_maker);
    Py_VISIT(self->tmap_const);
    Py_VISIT(self->on_error);
    Py_VISIT(self->fallback);
    Py_VISIT(self->hist);
    Py_VISIT(self->me);
    return 0;
}

static int launcher_clear(Launcher *self) {
    Py_CLEAR(self->tmap_maker);
    Py_CLEAR(self->tmap_const);
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
    PyMem_Free(self->tmap_in);
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

/* ---- the JIT's dispatcher: kernel[grid](...) from the call to the launch, for a cached specialization ----

   Dispatcher(...) (built by jit.c_fast_path) stands in front of the kernel's generated Python fast path
   (jit.build_fast_path), which stays the reference: it binds the call's arguments to the kernel's parameters
   (positional, keywords, defaults), computes the very specialization key the Python path computes (the same
   tuple: see key_entries in specialize.py), looks it up in the kernel's cache dict and launches the cached
   Launcher -- the compiled one called directly -- with the grid and the current stream.  Whatever it does not
   handle exactly (a miss, warmup, an argument that is not a torch.Tensor, int, bool, float or None, an unknown
   keyword, an unhashable key, a replaced kernel code) goes to the Python fast path, untouched: that path then
   compiles, launches or raises as it always does.  Nothing is computed twice on a hit, and apart from the
   key tuple (and the data_ptr() ints torch returns) nothing is allocated per launch. */

#define D_MAX 128 /* parameters; kernels with more use the Python fast path */

static PyObject *S_data_ptr, *S_dtype, *S_is_cuda, *S_launch, *S_kernel, *S_c1, *S_i32, *S_u32, *S_i64, *S_u64,
    *S_i1, *S_fp32, *S_cx, *S_num_warps, *S_num_stages, *S_num_ctas, *S_stream, *S_warmup, *S_coop,
    *S_best_config, *S_pre_hook, *S_base, *S_shape, *S_strides, *S_block_shape, *S_padding, *S_zero, *S_desc,
    *S_element_size, *S_sub0, *I_one, *I_three, *I_four;

enum { O_NW, O_NS, O_NC };

/* torch.Tensor's dtype and is_cuda getters, called directly while the type is unchanged (its version tag):
   on an exact torch.Tensor these data descriptors are what attribute access finds */
typedef struct {
    PyObject *get[2];
    unsigned int version;
} tgetters_t;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *py_fast;  /* the generated Python fast path: misses and everything unusual */
    PyObject *cache;    /* the kernel's dict: key -> driver.Launcher */
    PyObject *names;    /* tuple of the parameter names */
    Py_ssize_t n_params, n_nc, n_cx;
    uint8_t kinds[D_MAX]; /* bit 0: constexpr, bit 1: do_not_specialize */
    PyObject *defaults;   /* tuple, one per parameter; `missing` for a required one */
    PyObject *missing;
    PyObject *opt_default[3];  /* num_warps, num_stages, num_ctas defaults (None: 4 / 3) */
    int opt_param[3];          /* index of a parameter of that name (it is the option too), or -1 */
    PyTypeObject *tensor_type;
    PyTypeObject *desc_type; /* newt's TensorDescriptor class (NULL: descriptors take the Python path) */
    PyObject *dev_fn, *stream_fn, *stream_handle, *not_cuda, *grid_tail, *kname;
    PyObject *fn, *code; /* a preset's function and the code it was built for (None: not checked here) */
    PyObject *spare_key; /* the last call's key tuple, emptied, for the next (NULL while one is in use) */
    tgetters_t tget;
    PyObject *meta_tmpl; /* {parameter: None, ..., num_warps: None, num_stages: None}: copied for a grid's meta */
    unsigned long long hits, forwarded;
} Dispatcher;

typedef struct {
    PyObject *vals[D_MAX]; /* borrowed: every parameter's value */
    PyObject *pv[D_MAX];   /* owned: the non-constexpr values to pass (a tensor's data_ptr()) */
    Py_ssize_t npv;
    PyObject *opt[3];      /* borrowed */
    PyObject *stream, *coop;
    PyObject *dev, *key;   /* owned */
} call_t;

/* Reusing the key tuple: a lookup key only (the cache dict keeps the Python path's own tuple), recycled when
   nothing else holds it.  Tuples cache no hash before Python 3.14, so their items may be replaced. */
#if PY_VERSION_HEX < 0x030E0000
#define REUSE_KEY 1
#else
#define REUSE_KEY 0
#endif

static void call_clear(call_t *c, Dispatcher *self) {
    for (Py_ssize_t i = 0; i < c->npv; i++) Py_DECREF(c->pv[i]);
    c->npv = 0;
    Py_CLEAR(c->dev);
    if (REUSE_KEY && c->key != NULL && Py_REFCNT(c->key) == 1 && self->spare_key == NULL) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(c->key); i++) Py_CLEAR(PyTuple_GET_ITEM(c->key, i));
        self->spare_key = c->key;
        c->key = NULL;
    }
    Py_CLEAR(c->key);
}

/* v.dtype / v.is_cuda for an exact torch.Tensor v: the getters cached in *g while the type has not changed
   since (a new version tag: look the descriptors up again), else plain attribute access */
enum { T_DTYPE, T_IS_CUDA };

static PyObject *tensor_attr(PyTypeObject *t, tgetters_t *g, PyObject *v, int which) {
    PyObject *name = which == T_DTYPE ? S_dtype : S_is_cuda;
    if (t->tp_getattro != PyObject_GenericGetAttr) return PyObject_GetAttr(v, name);
    if (g->get[0] == NULL || t->tp_version_tag == 0 || g->version != t->tp_version_tag) {
        Py_CLEAR(g->get[0]);
        Py_CLEAR(g->get[1]);
        PyObject *d = PyObject_GetAttr((PyObject *)t, S_dtype), *c = d ? PyObject_GetAttr((PyObject *)t, S_is_cuda) : NULL;
        if (c != NULL && PyObject_TypeCheck(d, &PyGetSetDescr_Type) && PyObject_TypeCheck(c, &PyGetSetDescr_Type)) {
            g->get[0] = d;
            g->get[1] = c;
            g->version = t->tp_version_tag;
        } else {
            Py_XDECREF(d);
            Py_XDECREF(c);
            PyErr_Clear();
        }
    }
    PyObject *getter = g->get[which];
    if (getter != NULL && t->tp_version_tag != 0 && g->version == t->tp_version_tag)
        return Py_TYPE(getter)->tp_descr_get(getter, v, (PyObject *)t);
    return PyObject_GetAttr(v, name);
}

static int name_eq(PyObject *a, PyObject *b) {
    return a == b || (PyUnicode_Check(a) && PyUnicode_Compare(a, b) == 0);
}

/* An exact torch.Tensor argument as the Python path keys it: ``*pp`` its data_ptr() (a new reference, set whenever
   the call returned one), ``*pa`` its dtype (new), ``*aligned`` whether the pointer is a multiple of 16; before
   that the Python path's check that it is on the GPU, not_cuda(inc, v) -- not_cuda(inc, v, sub) for element
   ``sub`` of the argument (a descriptor's base: "[0]") --, which raises, or returns where a test lets CPU tensors
   by.  1: data_ptr() is not an int (the Python path's case); -1: an exception. */
static int tensor_key(Dispatcher *self, PyObject *v, Py_ssize_t inc, PyObject *sub, PyObject **pp, PyObject **pa,
                      int *aligned) {
    PyObject *p = PyObject_CallMethodNoArgs(v, S_data_ptr);
    if (p == NULL) return -1;
    *pp = p;
    if (!PyLong_CheckExact(p)) return 1;
    PyObject *a = tensor_attr(self->tensor_type, &self->tget, v, T_DTYPE);
    if (a == NULL) return -1;
    *aligned = !(PyLong_AsUnsignedLongLongMask(p) & 15);
    if (PyErr_Occurred()) {
        Py_DECREF(a);
        return -1;
    }
    PyObject *cu = tensor_attr(self->tensor_type, &self->tget, v, T_IS_CUDA);
    int on = cu == NULL ? -1 : PyObject_IsTrue(cu);
    Py_XDECREF(cu);
    if (on < 0) {
        Py_DECREF(a);
        return -1;
    }
    if (!on) {
        PyObject *ix = PyLong_FromSsize_t(inc), *r = NULL;
        if (ix != NULL) {
            PyObject *ca[3] = {ix, v, sub};
            r = PyObject_Vectorcall(self->not_cuda, ca, sub == NULL ? 2 : 3, NULL);
            Py_DECREF(ix);
        }
        if (r == NULL) {
            Py_DECREF(a);
            return -1;
        }
        Py_DECREF(r);
    }
    *pa = a;
    return 0;
}

/* key entries (a, b) of an int argument, as specialize.key_entries makes them (new references); 1: not handled
   here (beyond 64 bits: the Python path's TypeError), -1: an exception */
static int int_entry(PyObject *v, int dns, PyObject **pa, PyObject **pb) {
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (x == -1 && PyErr_Occurred()) return -1;
    PyObject *kind, *b;
    int div;
    if (overflow < 0) return 1; /* below -2**63: the Python path's TypeError */
    if (overflow > 0) {
        unsigned long long u = PyLong_AsUnsignedLongLong(v);
        if (u == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            return 1; /* 2**64 or more */
        }
        kind = S_u64;
        div = (u & 15) == 0;
    } else {
        div = (x & 15) == 0;
        if (!dns && x == 1) kind = S_c1;
        else if (x >= -2147483648LL && x <= 2147483647LL) kind = S_i32;
        else if (x >= 2147483648LL && x <= 4294967295LL) kind = S_u32;
        else kind = S_i64;
    }
    b = kind == S_c1 ? Py_None : ((!dns && div) ? Py_True : Py_False);
    Py_INCREF(kind);
    Py_INCREF(b);
    *pa = kind;
    *pb = b;
    return 0;
}

/* a list of 1 to 5 exact ints (a TensorDescriptor's shape, strides or block_shape), else NULL (borrowed) */
static PyObject *int_list(PyObject *o, Py_ssize_t rank) {
    if (!PyList_CheckExact(o) || (rank >= 0 && PyList_GET_SIZE(o) != rank) || PyList_GET_SIZE(o) < 1 ||
        PyList_GET_SIZE(o) > 5)
        return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(o); i++)
        if (!PyLong_CheckExact(PyList_GET_ITEM(o, i))) return NULL;
    return o;
}

/* newt's own TensorDescriptor (exactly that class) on an exact torch.Tensor: the key entry a (b is None) and the
   value to pass, the tuple (data_ptr, *shape, *strides), as specialize._desc_entries makes them; 1 for anything
   else (a block the launch's check refuses, a tensor not on the GPU, lists of other things, ...): the Python
   path, which keys, or raises, as it always does. */
static int desc_entry(Dispatcher *self, PyObject *v, int dns, Py_ssize_t inc, PyObject **pa, PyObject **pp) {
    PyObject *base = NULL, *shape = NULL, *strides = NULL, *block = NULL, *pad = NULL, *es = NULL, *bt = NULL;
    PyObject *p = NULL, *dt = NULL, *out = NULL, *a = NULL;
    int st = 1;
    if ((base = PyObject_GetAttr(v, S_base)) == NULL || (shape = PyObject_GetAttr(v, S_shape)) == NULL ||
        (strides = PyObject_GetAttr(v, S_strides)) == NULL || (block = PyObject_GetAttr(v, S_block_shape)) == NULL ||
        (pad = PyObject_GetAttr(v, S_padding)) == NULL) {
        PyErr_Clear();
        goto done;
    }
    if (Py_TYPE(base) != self->tensor_type || !int_list(shape, -1)) goto done;
    Py_ssize_t rank = PyList_GET_SIZE(shape);
    if (!int_list(strides, rank) || !int_list(block, rank)) goto done;
    if (pad == Py_None || (PyUnicode_CheckExact(pad) && PyUnicode_GET_LENGTH(pad) == 0)) {
        Py_DECREF(pad);
        pad = S_zero;
        Py_INCREF(pad);
    } else if (!PyUnicode_CheckExact(pad)) {
        goto done;
    }
    long long last = 0;
    for (Py_ssize_t i = 0; i < rank; i++) { /* descriptor_parts' check_block: powers of two */
        int overflow = 0;
        long long d = PyLong_AsLongLongAndOverflow(PyList_GET_ITEM(block, i), &overflow);
        if (overflow || d <= 0 || (d & (d - 1))) goto done;
        last = d;
    }
    {
        PyObject *esz = PyObject_CallMethodNoArgs(base, S_element_size);
        if (esz == NULL) {
            PyErr_Clear();
            goto done;
        }
        long e = PyLong_CheckExact(esz) ? PyLong_AsLong(esz) : -1;
        Py_DECREF(esz);
        if (e <= 0 || last * e < 16) { /* ... and at least 16 bytes in the last dimension */
            PyErr_Clear();
            goto done;
        }
    }
    int aligned = 0;
    int r0 = tensor_key(self, base, inc, S_sub0, &p, &dt, &aligned);
    if (r0) {
        st = r0;
        goto done;
    }
    if ((es = PyTuple_New(1 + 2 * rank)) == NULL || (out = PyTuple_New(1 + 2 * rank)) == NULL ||
        (bt = PyList_AsTuple(block)) == NULL) {
        st = -1;
        goto done;
    }
    {
        PyObject *e0 = PyTuple_Pack(2, dt, (!dns && aligned) ? Py_True : Py_False);
        if (e0 == NULL) {
            st = -1;
            goto done;
        }
        PyTuple_SET_ITEM(es, 0, e0);
        Py_INCREF(p);
        PyTuple_SET_ITEM(out, 0, p);
    }
    for (Py_ssize_t i = 0; i < 2 * rank; i++) {
        PyObject *x = PyList_GET_ITEM(i < rank ? shape : strides, i < rank ? i : i - rank), *ka, *kb;
        int r = int_entry(x, dns, &ka, &kb);
        if (r) {
            st = r;
            goto done;
        }
        PyObject *e = PyTuple_Pack(2, ka, kb);
        Py_DECREF(ka);
        Py_DECREF(kb);
        if (e == NULL) {
            st = -1;
            goto done;
        }
        PyTuple_SET_ITEM(es, 1 + i, e);
        Py_INCREF(x);
        PyTuple_SET_ITEM(out, 1 + i, x);
    }
    if ((a = PyTuple_Pack(4, S_desc, es, bt, pad)) == NULL) {
        st = -1;
        goto done;
    }
    *pa = a;
    *pp = out;
    out = NULL;
    st = 0;
done:
    Py_XDECREF(base);
    Py_XDECREF(shape);
    Py_XDECREF(strides);
    Py_XDECREF(block);
    Py_XDECREF(pad);
    Py_XDECREF(es);
    Py_XDECREF(bt);
    Py_XDECREF(p);
    Py_XDECREF(dt);
    Py_XDECREF(out);
    return st;
}

/* 0: computed (c->key set); 1: not handled here (forward the call); -1: an exception (raised as the Python
   path raises it: by data_ptr(), dtype, the not-on-the-GPU check, the device getter) */
static int dispatch_compute(Dispatcher *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, call_t *c) {
    Py_ssize_t np = self->n_params, npos = nargs - 1;
    if (npos < 0 || npos > np) return 1;
    if (self->fn != Py_None && (!PyFunction_Check(self->fn) || PyFunction_GET_CODE(self->fn) != self->code))
        return 1; /* the kernel's code was replaced: the Python path regenerates */
    for (Py_ssize_t i = 0; i < npos; i++) c->vals[i] = args[1 + i];
    for (Py_ssize_t i = npos; i < np; i++) c->vals[i] = NULL;
    for (int o = 0; o < 3; o++) c->opt[o] = self->opt_default[o];
    c->stream = Py_None;
    c->coop = Py_False;
    if (kwnames != NULL) {
        Py_ssize_t nkw = PyTuple_GET_SIZE(kwnames);
        for (Py_ssize_t k = 0; k < nkw; k++) {
            PyObject *kw = PyTuple_GET_ITEM(kwnames, k), *v = args[nargs + k];
            Py_ssize_t i;
            for (i = 0; i < np; i++) /* interned names: identity first */
                if (PyTuple_GET_ITEM(self->names, i) == kw) break;
            if (i == np)
                for (i = 0; i < np; i++)
                    if (name_eq(PyTuple_GET_ITEM(self->names, i), kw)) break;
            if (i < np) {
                if (c->vals[i] != NULL) return 1; /* given twice: the Python path's TypeError */
                c->vals[i] = v;
                continue;
            }
            if (name_eq(kw, S_num_warps) && self->opt_param[O_NW] < 0) c->opt[O_NW] = v;
            else if (name_eq(kw, S_num_stages) && self->opt_param[O_NS] < 0) c->opt[O_NS] = v;
            else if (name_eq(kw, S_num_ctas) && self->opt_param[O_NC] < 0) c->opt[O_NC] = v;
            else if (name_eq(kw, S_stream)) c->stream = v;
            else if (name_eq(kw, S_coop)) c->coop = v;
            else if (name_eq(kw, S_warmup)) {
                if (v != Py_False) return 1;
            } else
                return 1; /* unknown: the Python path's message */
        }
    }
    for (Py_ssize_t i = npos; i < np; i++) {
        if (c->vals[i] == NULL) {
            PyObject *d = PyTuple_GET_ITEM(self->defaults, i);
            if (d == self->missing) return 1; /* missing: the Python path's TypeError */
            c->vals[i] = d;
        }
    }
    for (int o = 0; o < 3; o++)
        if (self->opt_param[o] >= 0) c->opt[o] = c->vals[self->opt_param[o]];
    if (self->opt_param[O_NW] < 0 && c->opt[O_NW] == Py_None) c->opt[O_NW] = I_four;
    if (self->opt_param[O_NS] < 0 && c->opt[O_NS] == Py_None) c->opt[O_NS] = I_three;

    PyObject *key = self->spare_key; /* its items are NULL */
    if (key != NULL) self->spare_key = NULL;
    else if ((key = PyTuple_New(2 * self->n_nc + 2 * self->n_cx + 5)) == NULL) return -1;
    c->key = key;
    Py_ssize_t j = 0, inc = 0;
    for (Py_ssize_t i = 0; i < np; i++) {
        if (self->kinds[i] & 1) continue;
        PyObject *v = c->vals[i], *a, *b, *p;
        int dns = self->kinds[i] & 2;
        PyTypeObject *t = Py_TYPE(v);
        if (t == self->tensor_type) {
            int aligned = 0;
            p = NULL;
            int st = tensor_key(self, v, inc, NULL, &p, &a, &aligned);
            if (p != NULL) c->pv[c->npv++] = p;
            if (st) return st;
            b = (!dns && aligned) ? Py_True : Py_False;
            Py_INCREF(b);
        } else if (t == &PyLong_Type) {
            int st = int_entry(v, dns, &a, &b);
            if (st) return st;
            Py_INCREF(v);
            c->pv[c->npv++] = v;
        } else if (self->desc_type != NULL && t == self->desc_type) {
            int st = desc_entry(self, v, dns, inc, &a, &p);
            if (st) return st;
            c->pv[c->npv++] = p;
            b = Py_None;
            Py_INCREF(b);
        } else if (t == &PyBool_Type || t == &PyFloat_Type || v == Py_None) {
            a = t == &PyBool_Type ? S_i1 : (t == &PyFloat_Type ? S_fp32 : S_cx);
            b = v == Py_None ? Py_None : Py_False;
            Py_INCREF(a);
            Py_INCREF(b);
            Py_INCREF(v);
            c->pv[c->npv++] = v;
        } else {
            return 1; /* tuples, other descriptors, dtypes, wrappers, tensor subclasses ...: the Python path */
        }
        PyTuple_SET_ITEM(key, j, a);
        PyTuple_SET_ITEM(key, j + 1, b);
        j += 2;
        inc++;
    }
    for (Py_ssize_t i = 0; i < np; i++) {
        if (!(self->kinds[i] & 1)) continue;
        PyObject *v = c->vals[i];
        Py_INCREF(v);
        PyTuple_SET_ITEM(key, j, v);
        Py_INCREF((PyObject *)Py_TYPE(v));
        PyTuple_SET_ITEM(key, j + 1, (PyObject *)Py_TYPE(v));
        j += 2;
    }
    c->dev = PyObject_CallNoArgs(self->dev_fn);
    if (c->dev == NULL) return -1;
    PyObject *tail[5] = {c->opt[O_NW], c->opt[O_NS], c->opt[O_NC], c->coop, c->dev};
    for (int k = 0; k < 5; k++) {
        Py_INCREF(tail[k]);
        PyTuple_SET_ITEM(key, j + k, tail[k]);
    }
    return 0;
}

static PyObject *dispatch_meta(Dispatcher *self, call_t *c) {
    if (self->meta_tmpl == NULL) { /* the keys in the Python path's order, so a copy is a clone of its table */
        PyObject *t = PyDict_New();
        if (t == NULL) return NULL;
        for (Py_ssize_t i = 0; i < self->n_params; i++)
            if (PyDict_SetItem(t, PyTuple_GET_ITEM(self->names, i), Py_None) < 0) goto tfail;
        if (PyDict_SetItem(t, S_num_warps, Py_None) < 0 || PyDict_SetItem(t, S_num_stages, Py_None) < 0) goto tfail;
        self->meta_tmpl = t;
        goto made;
    tfail:
        Py_DECREF(t);
        return NULL;
    }
made:;
    PyObject *meta = PyDict_Copy(self->meta_tmpl);
    if (meta == NULL) return NULL;
    for (Py_ssize_t i = 0; i < self->n_params; i++)
        if (PyDict_SetItem(meta, PyTuple_GET_ITEM(self->names, i), c->vals[i]) < 0) goto fail;
    if (PyDict_SetItem(meta, S_num_warps, c->opt[O_NW]) < 0 || PyDict_SetItem(meta, S_num_stages, c->opt[O_NS]) < 0)
        goto fail;
    return meta;
fail:
    Py_DECREF(meta);
    return NULL;
}

static int good_grid(PyObject *g) {
    return PyTuple_CheckExact(g) && PyTuple_GET_SIZE(g) > 0 && PyTuple_GET_SIZE(g) < 4;
}

static PyObject *dispatcher_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Dispatcher *self = (Dispatcher *)op;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    call_t c;
    c.npv = 0;
    c.dev = c.key = NULL;
    int st = dispatch_compute(self, args, nargs, kwnames, &c);
    PyObject *ln = NULL;
    if (st == 0) {
        ln = PyDict_GetItemWithError(self->cache, c.key);
        if (ln == NULL) {
            if (PyErr_Occurred()) {
                if (!PyErr_ExceptionMatches(PyExc_TypeError)) { /* unhashable: the Python path compiles uncached */
                    call_clear(&c, self);
                    return NULL;
                }
                PyErr_Clear();
            }
            st = 1; /* a miss */
        }
    }
    if (st != 0) {
        call_clear(&c, self);
        if (st < 0) return NULL;
        self->forwarded++;
        return PyObject_Vectorcall(self->py_fast, args, nargsf, kwnames);
    }
    self->hits++;
    Py_INCREF(ln);
    PyObject *grid = args[0], *g = NULL, *s = NULL, *launch = NULL, *r = NULL;
    if (good_grid(grid)) {
        Py_INCREF(grid);
        g = grid;
    } else {
        PyObject *meta = dispatch_meta(self, &c);
        if (meta == NULL) goto done;
        PyObject *res = NULL;
        if (PyCallable_Check(grid)) {
            res = PyObject_CallOneArg(grid, meta);
            if (res != NULL && good_grid(res)) {
                g = res;
                res = NULL;
            }
        } else {
            Py_INCREF(grid);
            res = grid;
        }
        Py_DECREF(meta);
        if (res != NULL) { /* the rest of grid.normalize_grid: ints, lists, errors */
            PyObject *ta[2] = {res, self->kname};
            g = PyObject_Vectorcall(self->grid_tail, ta, 2, NULL);
            Py_DECREF(res);
        }
        if (g == NULL) goto done;
        if (!good_grid(g)) {
            PyErr_Format(PyExc_TypeError, "%U: the grid must be a tuple of 1 to 3 ints", self->kname);
            goto done;
        }
    }
    if (c.stream == Py_None) {
        s = PyObject_CallOneArg(self->stream_fn, c.dev);
    } else if (PyLong_CheckExact(c.stream)) {
        Py_INCREF(c.stream);
        s = c.stream;
    } else {
        s = PyObject_CallOneArg(self->stream_handle, c.stream);
    }
    if (s == NULL) goto done;
    launch = PyObject_GetAttr(ln, S_launch);
    if (launch == NULL) goto done;
    {
        PyObject *stack[4 + D_MAX];
        Py_ssize_t gn = PyTuple_GET_SIZE(g);
        stack[0] = PyTuple_GET_ITEM(g, 0);
        stack[1] = gn > 1 ? PyTuple_GET_ITEM(g, 1) : I_one;
        stack[2] = gn > 2 ? PyTuple_GET_ITEM(g, 2) : I_one;
        stack[3] = s;
        for (Py_ssize_t i = 0; i < c.npv; i++) stack[4 + i] = c.pv[i];
        PyObject *lr = Py_TYPE(launch) == &LauncherType ? launcher_vectorcall(launch, stack, 4 + c.npv, NULL)
                                                        : PyObject_Vectorcall(launch, stack, 4 + c.npv, NULL);
        if (lr == NULL) goto done;
        Py_DECREF(lr);
    }
    r = PyObject_GetAttr(ln, S_kernel);
done:
    Py_XDECREF(launch);
    Py_XDECREF(s);
    Py_XDECREF(g);
    Py_DECREF(ln);
    call_clear(&c, self);
    return r;
}

/* dispatcher.key(grid, *args, **kwargs): the specialization key this dispatcher computes for the call (the
   Python fast path's key, which a test compares), or None where it would hand the call to the Python path */
static PyObject *dispatcher_key(PyObject *op, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    Dispatcher *self = (Dispatcher *)op;
    call_t c;
    c.npv = 0;
    c.dev = c.key = NULL;
    int st = dispatch_compute((Dispatcher *)op, args, nargs, kwnames, &c);
    PyObject *r = NULL;
    if (st == 0) {
        r = c.key;
        c.key = NULL;
    } else if (st == 1) {
        r = Py_None;
        Py_INCREF(r);
    }
    call_clear(&c, self);
    return r;
}

static PyObject *dispatcher_stats(PyObject *op, PyObject *unused) {
    (void)unused;
    Dispatcher *self = (Dispatcher *)op;
    return Py_BuildValue("{sKsK}", "hits", self->hits, "forwarded", self->forwarded);
}

#define D_OBJS(X) X(py_fast) X(cache) X(names) X(defaults) X(missing) X(opt_default[0]) X(opt_default[1]) \
    X(opt_default[2]) X(dev_fn) X(stream_fn) X(stream_handle) X(not_cuda) X(grid_tail) X(kname) X(fn) X(code) X(spare_key) \
    X(tget.get[0]) X(tget.get[1]) X(meta_tmpl)

/* Dispatcher(py_fast, cache, names, kinds, defaults, missing, opt_defaults, opt_params, tensor_type, dev_fn,
              stream_fn, stream_handle, not_cuda, grid_tail, name, fn, code[, desc_type]) */
static PyObject *dispatcher_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    PyObject *py_fast, *cache, *names, *kinds, *defaults, *missing, *od, *op, *tt, *dev_fn, *stream_fn, *sh, *nc,
        *gt, *kname, *fn, *code, *dt = Py_None;
    if (kw != NULL && PyDict_GET_SIZE(kw)) {
        PyErr_SetString(PyExc_TypeError, "Dispatcher() takes positional arguments only");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OO!O!O!O!OO!O!O!OOOOOUOO|O", &py_fast, &PyDict_Type, &cache, &PyTuple_Type, &names,
                          &PyBytes_Type, &kinds, &PyTuple_Type, &defaults, &missing, &PyTuple_Type, &od,
                          &PyTuple_Type, &op, &PyType_Type, &tt, &dev_fn, &stream_fn, &sh, &nc, &gt, &kname, &fn,
                          &code, &dt))
        return NULL;
    Py_ssize_t np = PyTuple_GET_SIZE(names);
    if (np > D_MAX || PyBytes_GET_SIZE(kinds) != np || PyTuple_GET_SIZE(defaults) != np ||
        PyTuple_GET_SIZE(od) != 3 || PyTuple_GET_SIZE(op) != 3) {
        PyErr_SetString(PyExc_ValueError, "Dispatcher: inconsistent parameter tables (or too many parameters)");
        return NULL;
    }
    Dispatcher *self = (Dispatcher *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->vectorcall = dispatcher_vectorcall;
    self->n_params = np;
    for (Py_ssize_t i = 0; i < np; i++) {
        PyObject *nm = PyTuple_GET_ITEM(names, i);
        if (!PyUnicode_CheckExact(nm)) {
            PyErr_SetString(PyExc_TypeError, "Dispatcher: parameter names must be str");
            Py_DECREF(self);
            return NULL;
        }
        self->kinds[i] = (uint8_t)PyBytes_AS_STRING(kinds)[i];
        if (self->kinds[i] & 1) self->n_cx++;
        else self->n_nc++;
    }
    for (int o = 0; o < 3; o++) {
        long ix = PyLong_AsLong(PyTuple_GET_ITEM(op, o));
        if ((ix == -1 && PyErr_Occurred()) || ix < -1 || ix >= np) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "Dispatcher: a bad option parameter index");
            Py_DECREF(self);
            return NULL;
        }
        self->opt_param[o] = (int)ix;
        self->opt_default[o] = PyTuple_GET_ITEM(od, o);
        Py_INCREF(self->opt_default[o]);
    }
    self->tensor_type = (PyTypeObject *)tt;
    Py_INCREF(tt);
    if (PyType_Check(dt)) {
        self->desc_type = (PyTypeObject *)dt;
        Py_INCREF(dt);
    }
#define D_SET(f, v) Py_INCREF(v); self->f = v;
    D_SET(py_fast, py_fast) D_SET(cache, cache) D_SET(names, names) D_SET(defaults, defaults) D_SET(missing, missing)
    D_SET(dev_fn, dev_fn) D_SET(stream_fn, stream_fn) D_SET(stream_handle, sh) D_SET(not_cuda, nc)
    D_SET(grid_tail, gt) D_SET(kname, kname) D_SET(fn, fn) D_SET(code, code)
#undef D_SET
    return (PyObject *)self;
}

static int dispatcher_traverse(Dispatcher *self, visitproc visit, void *arg) {
#define D_VISIT(f) Py_VISIT(self->f);
    D_OBJS(D_VISIT)
#undef D_VISIT
    Py_VISIT(self->tensor_type);
    Py_VISIT(self->desc_type);
    return 0;
}

static int dispatcher_clear(Dispatcher *self) {
#define D_CLEAR(f) Py_CLEAR(self->f);
    D_OBJS(D_CLEAR)
#undef D_CLEAR
    Py_CLEAR(self->tensor_type);
    Py_CLEAR(self->desc_type);
    return 0;
}

static void dispatcher_dealloc(Dispatcher *self) {
    PyObject_GC_UnTrack(self);
    dispatcher_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *dispatcher_get_py_fast(Dispatcher *self, void *unused) {
    (void)unused;
    if (self->py_fast == NULL) Py_RETURN_NONE;
    Py_INCREF(self->py_fast);
    return self->py_fast;
}

static PyMethodDef dispatcher_methods[] = {
    {"key", (PyCFunction)(void (*)(void))dispatcher_key, METH_FASTCALL | METH_KEYWORDS,
     "key(grid, *args, **kwargs): the specialization key of the call, or None where the Python path takes it"},
    {"stats", dispatcher_stats, METH_NOARGS, "{'hits': launched here, 'forwarded': handed to the Python path}"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef dispatcher_getset[] = {
    {"py_fast", (getter)dispatcher_get_py_fast, NULL, "the generated Python fast path behind this dispatcher", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject DispatcherType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_newt_launch.Dispatcher",
    .tp_basicsize = sizeof(Dispatcher),
    .tp_dealloc = (destructor)dispatcher_dealloc,
    .tp_vectorcall_offset = offsetof(Dispatcher, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A kernel's launch fast path in C: dispatcher(grid, *args, **kwargs).",
    .tp_traverse = (traverseproc)dispatcher_traverse,
    .tp_clear = (inquiry)dispatcher_clear,
    .tp_new = dispatcher_new,
    .tp_methods = dispatcher_methods,
    .tp_getset = dispatcher_getset,
};

/* ---- the autotuner's dispatcher: the tuning key, its config, the config's dispatcher ----

   TuneDispatcher(autotuner, py_launch, launch_kw, types, key_pos, tensor_type) mirrors Autotuner._launch's
   hot path for calls whose arguments have the types of the first tuned call (autotuner._key_function):
   the tuning key (the key arguments' values, then the dtype of every tensor argument) is looked up in
   autotuner._launch_kw; on a hit with no pre_hook, best_config is set and the config's preset dispatcher
   is called directly.  Keywords, other types, a miss, a pre_hook: py_launch (Autotuner._launch). */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *tuner, *py_launch, *launch_kw, *types, *key_pos;
    PyTypeObject *tensor_type;
    tgetters_t tget;
    Py_ssize_t n_args, n_key, n_tensors;
    Py_ssize_t pos[D_MAX];
    unsigned long long hits, forwarded;
} TuneDispatcher;

static PyObject *tune_key(TuneDispatcher *self, PyObject *const *args, Py_ssize_t nargs, int *forward) {
    *forward = 1;
    if (nargs - 1 != self->n_args) return NULL;
    for (Py_ssize_t j = 0; j < self->n_args; j++)
        if ((PyObject *)Py_TYPE(args[1 + j]) != PyTuple_GET_ITEM(self->types, j)) return NULL;
    *forward = 0;
    PyObject *key = PyTuple_New(self->n_key + self->n_tensors);
    if (key == NULL) return NULL;
    for (Py_ssize_t k = 0; k < self->n_key; k++) {
        PyObject *v = args[1 + self->pos[k]];
        Py_INCREF(v);
        PyTuple_SET_ITEM(key, k, v);
    }
    Py_ssize_t t = self->n_key;
    for (Py_ssize_t j = 0; j < self->n_args; j++) {
        if (Py_TYPE(args[1 + j]) != self->tensor_type) continue;
        PyObject *dt = tensor_attr(self->tensor_type, &self->tget, args[1 + j], T_DTYPE);
        if (dt == NULL) {
            Py_DECREF(key);
            return NULL;
        }
        PyTuple_SET_ITEM(key, t++, dt);
    }
    return key;
}

static PyObject *tune_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    TuneDispatcher *self = (TuneDispatcher *)op;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs < 1 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames))) goto forward;
    int fwd;
    PyObject *key = tune_key(self, args, nargs, &fwd);
    if (key == NULL) {
        if (fwd) goto forward;
        return NULL;
    }
    PyObject *hit = PyDict_GetItemWithError(self->launch_kw, key);
    Py_DECREF(key);
    if (hit == NULL) {
        if (PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_TypeError)) return NULL;
            PyErr_Clear();
        }
        goto forward;
    }
    if (!PyTuple_CheckExact(hit) || PyTuple_GET_SIZE(hit) != 3 || PyTuple_GET_ITEM(hit, 2) == Py_None) goto forward;
    PyObject *config = PyTuple_GET_ITEM(hit, 0), *fast = PyTuple_GET_ITEM(hit, 2);
    Py_INCREF(config);
    Py_INCREF(fast);
    PyObject *hook = PyObject_GetAttr(config, S_pre_hook);
    if (hook == NULL || hook != Py_None) {
        Py_XDECREF(hook);
        Py_DECREF(config);
        Py_DECREF(fast);
        if (PyErr_Occurred()) return NULL;
        goto forward; /* the hook gets its arguments by name: the Python path */
    }
    Py_DECREF(hook);
    int e = PyObject_SetAttr(self->tuner, S_best_config, config);
    Py_DECREF(config);
    if (e < 0) {
        Py_DECREF(fast);
        return NULL;
    }
    self->hits++;
    PyObject *r = Py_TYPE(fast) == &DispatcherType ? dispatcher_vectorcall(fast, args, nargs, NULL)
                                                   : PyObject_Vectorcall(fast, args, nargs, NULL);
    Py_DECREF(fast);
    return r;
forward:
    self->forwarded++;
    return PyObject_Vectorcall(self->py_launch, args, nargsf, kwnames);
}

static PyObject *tune_key_method(PyObject *op, PyObject *const *args, Py_ssize_t nargs) {
    int fwd;
    PyObject *key = tune_key((TuneDispatcher *)op, args, nargs, &fwd);
    if (key == NULL && fwd) Py_RETURN_NONE;
    return key;
}

static PyObject *tune_stats(PyObject *op, PyObject *unused) {
    (void)unused;
    TuneDispatcher *self = (TuneDispatcher *)op;
    return Py_BuildValue("{sKsK}", "hits", self->hits, "forwarded", self->forwarded);
}

static PyObject *tune_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    PyObject *tuner, *py_launch, *launch_kw, *types, *key_pos, *tt;
    if (kw != NULL && PyDict_GET_SIZE(kw)) {
        PyErr_SetString(PyExc_TypeError, "TuneDispatcher() takes positional arguments only");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OOO!O!O!O!", &tuner, &py_launch, &PyDict_Type, &launch_kw, &PyTuple_Type, &types,
                          &PyTuple_Type, &key_pos, &PyType_Type, &tt))
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(types), nk = PyTuple_GET_SIZE(key_pos);
    if (n > D_MAX || nk > D_MAX) {
        PyErr_SetString(PyExc_ValueError, "TuneDispatcher: too many arguments");
        return NULL;
    }
    TuneDispatcher *self = (TuneDispatcher *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->vectorcall = tune_vectorcall;
    self->n_args = n;
    self->n_key = nk;
    for (Py_ssize_t k = 0; k < nk; k++) {
        Py_ssize_t p = PyLong_AsSsize_t(PyTuple_GET_ITEM(key_pos, k));
        if (p < 0 || p >= n) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "TuneDispatcher: a key position out of range");
            Py_DECREF(self);
            return NULL;
        }
        self->pos[k] = p;
    }
    for (Py_ssize_t j = 0; j < n; j++) {
        if (!PyType_Check(PyTuple_GET_ITEM(types, j))) {
            PyErr_SetString(PyExc_TypeError, "TuneDispatcher: types must be types");
            Py_DECREF(self);
            return NULL;
        }
        if (PyTuple_GET_ITEM(types, j) == tt) self->n_tensors++;
    }
    Py_INCREF(tuner);
    self->tuner = tuner;
    Py_INCREF(py_launch);
    self->py_launch = py_launch;
    Py_INCREF(launch_kw);
    self->launch_kw = launch_kw;
    Py_INCREF(types);
    self->types = types;
    Py_INCREF(key_pos);
    self->key_pos = key_pos;
    Py_INCREF(tt);
    self->tensor_type = (PyTypeObject *)tt;
    return (PyObject *)self;
}

static int tune_traverse(TuneDispatcher *self, visitproc visit, void *arg) {
    Py_VISIT(self->tuner);
    Py_VISIT(self->py_launch);
    Py_VISIT(self->launch_kw);
    Py_VISIT(self->types);
    Py_VISIT(self->key_pos);
    Py_VISIT(self->tensor_type);
    Py_VISIT(self->tget.get[0]);
    Py_VISIT(self->tget.get[1]);
    return 0;
}

static int tune_clear(TuneDispatcher *self) {
    Py_CLEAR(self->tuner);
    Py_CLEAR(self->py_launch);
    Py_CLEAR(self->launch_kw);
    Py_CLEAR(self->types);
    Py_CLEAR(self->key_pos);
    Py_CLEAR(self->tensor_type);
    Py_CLEAR(self->tget.get[0]);
    Py_CLEAR(self->tget.get[1]);
    return 0;
}

static void tune_dealloc(TuneDispatcher *self) {
    PyObject_GC_UnTrack(self);
    tune_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef tune_methods[] = {
    {"key", (PyCFunction)(void (*)(void))tune_key_method, METH_FASTCALL,
     "key(grid, *args): the tuning key of the call, or None where the Python path takes it"},
    {"stats", tune_stats, METH_NOARGS, "{'hits': launched here, 'forwarded': handed to Autotuner._launch}"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject TuneDispatcherType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_newt_launch.TuneDispatcher",
    .tp_basicsize = sizeof(TuneDispatcher),
    .tp_dealloc = (destructor)tune_dealloc,
    .tp_vectorcall_offset = offsetof(TuneDispatcher, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "An autotuned kernel's launch fast path in C: tuner(grid, *args).",
    .tp_traverse = (traverseproc)tune_traverse,
    .tp_clear = (inquiry)tune_clear,
    .tp_new = tune_new,
    .tp_methods = tune_methods,
};

/* ---- kernel[grid]: GridGetItem is a kernel class's __getitem__ in C, Bound the launch function it returns ----

   GridGetItem(fast_attr, slow, check_code), set as a class's __getitem__ (jit.install_c_getitem):
   kernel[grid] returns Bound(getattr(kernel, fast_attr), grid) -- functools.partial's job, without a keyword
   dictionary -- when that attribute is set (the installed launch function) and, with check_code, the
   kernel's fn.__code__ is still kernel._code; otherwise kernel.<slow>(grid), the Python __getitem__. */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *fn, *grid;
} Bound;

static PyObject *bound_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Bound *self = (Bound *)op;
    Py_ssize_t n = PyVectorcall_NARGS(nargsf), nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, total = n + nkw;
    PyObject *small[4 + D_MAX], **stack = small, *r;
    if (total + 1 > 4 + D_MAX) {
        stack = PyMem_Malloc(sizeof(PyObject *) * (size_t)(total + 1));
        if (stack == NULL) return PyErr_NoMemory();
    }
    stack[0] = self->grid;
    memcpy(stack + 1, args, sizeof(PyObject *) * (size_t)total);
    vectorcallfunc f = Py_TYPE(self->fn) == &DispatcherType ? dispatcher_vectorcall
                       : Py_TYPE(self->fn) == &TuneDispatcherType ? tune_vectorcall : NULL;
    if (f != NULL) r = f(self->fn, stack, (size_t)(n + 1), kwnames);
    else r = PyObject_Vectorcall(self->fn, stack, (size_t)(n + 1), kwnames);
    if (stack != small) PyMem_Free(stack);
    return r;
}

static int bound_traverse(Bound *self, visitproc visit, void *arg) {
    Py_VISIT(self->fn);
    Py_VISIT(self->grid);
    return 0;
}

static int bound_clear(Bound *self) {
    Py_CLEAR(self->fn);
    Py_CLEAR(self->grid);
    return 0;
}

/* a few freed Bound objects kept for reuse: kernel[grid] allocates none in the steady state, so a launch
   adds nothing to the garbage collector's allocation count */
#define BOUND_FREE_MAX 16
static PyTypeObject BoundType;
static Bound *bound_free[BOUND_FREE_MAX];
static int bound_nfree = 0;

static void bound_dealloc(Bound *self) {
    PyObject_GC_UnTrack(self);
    bound_clear(self);
    if (bound_nfree < BOUND_FREE_MAX) {
        bound_free[bound_nfree++] = self;
        return;
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static Bound *bound_alloc(void) {
    if (bound_nfree > 0) {
        Bound *b = bound_free[--bound_nfree];
        (void)PyObject_Init((PyObject *)b, &BoundType);
        return b;
    }
    return PyObject_GC_New(Bound, &BoundType);
}

static PyObject *bound_repr(Bound *self) {
    return PyUnicode_FromFormat("<newt launch of %R with grid %R>", self->fn, self->grid);
}

static PyMemberDef bound_members[] = {
    {"func", T_OBJECT, offsetof(Bound, fn), READONLY, "the launch function"},
    {"grid", T_OBJECT, offsetof(Bound, grid), READONLY, "the grid given to kernel[grid]"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject BoundType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_newt_launch.Bound",
    .tp_basicsize = sizeof(Bound),
    .tp_dealloc = (destructor)bound_dealloc,
    .tp_vectorcall_offset = offsetof(Bound, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_repr = (reprfunc)bound_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "kernel[grid]: launch(*args, **kwargs) calls func(grid, *args, **kwargs).",
    .tp_traverse = (traverseproc)bound_traverse,
    .tp_clear = (inquiry)bound_clear,
    .tp_members = bound_members,
};

static PyObject *S_fn, *S_code, *S_dunder_code;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *fast_attr, *slow;
    int check_code;
} GridGetItem;

static PyObject *getitem_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    GridGetItem *self = (GridGetItem *)op;
    if (PyVectorcall_NARGS(nargsf) != 2 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames))) {
        PyErr_SetString(PyExc_TypeError, "__getitem__ takes the kernel and the grid");
        return NULL;
    }
    PyObject *kernel = args[0], *grid = args[1], *fast = NULL;
    if (self->check_code) {
        PyObject *fn = PyObject_GetAttr(kernel, S_fn), *code = NULL, *want = NULL;
        if (fn != NULL) code = PyObject_GetAttr(fn, S_dunder_code);
        if (code != NULL) want = PyObject_GetAttr(kernel, S_code);
        int same = want != NULL && code == want;
        Py_XDECREF(fn);
        Py_XDECREF(code);
        Py_XDECREF(want);
        if (PyErr_Occurred()) return NULL;
        if (!same) goto slow;
    }
    fast = PyObject_GetAttr(kernel, self->fast_attr);
    if (fast == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return NULL;
        PyErr_Clear(); /* not installed yet */
    }
    if (fast == NULL || fast == Py_None) goto slow;
    Bound *b = bound_alloc();
    if (b == NULL) {
        Py_DECREF(fast);
        return NULL;
    }
    b->vectorcall = bound_vectorcall;
    b->fn = fast;
    Py_INCREF(grid);
    b->grid = grid;
    PyObject_GC_Track(b);
    return (PyObject *)b;
slow:
    Py_XDECREF(fast);
    return PyObject_CallMethodOneArg(kernel, self->slow, grid);
}

static PyObject *getitem_descr_get(PyObject *self, PyObject *obj, PyObject *type) {
    if (obj == NULL || obj == Py_None) {
        Py_INCREF(self);
        return self;
    }
    return PyMethod_New(self, obj);
}

static PyObject *getitem_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    PyObject *fast_attr, *slow;
    int check_code;
    if (kw != NULL && PyDict_GET_SIZE(kw)) {
        PyErr_SetString(PyExc_TypeError, "GridGetItem() takes positional arguments only");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "UUp", &fast_attr, &slow, &check_code)) return NULL;
    GridGetItem *self = (GridGetItem *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->vectorcall = getitem_vectorcall;
    Py_INCREF(fast_attr);
    PyUnicode_InternInPlace(&fast_attr);
    self->fast_attr = fast_attr;
    Py_INCREF(slow);
    PyUnicode_InternInPlace(&slow);
    self->slow = slow;
    self->check_code = check_code;
    return (PyObject *)self;
}

static void getitem_dealloc(GridGetItem *self) {
    Py_XDECREF(self->fast_attr);
    Py_XDECREF(self->slow);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject GridGetItemType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_newt_launch.GridGetItem",
    .tp_basicsize = sizeof(GridGetItem),
    .tp_dealloc = (destructor)getitem_dealloc,
    .tp_vectorcall_offset = offsetof(GridGetItem, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_descr_get = getitem_descr_get,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_doc = "GridGetItem(fast_attr, slow, check_code): a kernel class's __getitem__ in C.",
    .tp_new = getitem_new,
};

static int init_strings(void) {
#define S(var, text) if ((var = PyUnicode_InternFromString(text)) == NULL) return -1;
    S(S_data_ptr, "data_ptr") S(S_dtype, "dtype") S(S_is_cuda, "is_cuda") S(S_launch, "launch") S(S_kernel, "kernel")
    S(S_c1, "c1") S(S_i32, "i32") S(S_u32, "u32") S(S_i64, "i64") S(S_u64, "u64") S(S_i1, "i1") S(S_fp32, "fp32")
    S(S_cx, "cx") S(S_num_warps, "num_warps") S(S_num_stages, "num_stages") S(S_num_ctas, "num_ctas")
    S(S_stream, "stream") S(S_warmup, "warmup") S(S_coop, "launch_cooperative_grid") S(S_best_config, "best_config")
    S(S_pre_hook, "pre_hook") S(S_base, "base") S(S_shape, "shape") S(S_strides, "strides")
    S(S_block_shape, "block_shape") S(S_padding, "padding") S(S_zero, "zero") S(S_desc, "desc")
    S(S_element_size, "element_size") S(S_sub0, "[0]") S(S_fn, "fn") S(S_code, "_code") S(S_dunder_code, "__code__")
#undef S
    if ((I_one = PyLong_FromLong(1)) == NULL || (I_three = PyLong_FromLong(3)) == NULL ||
        (I_four = PyLong_FromLong(4)) == NULL)
        return -1;
    return 0;
}

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

/* stand-ins that do nothing and succeed: the host path's cost without a driver (launch_overhead.py --cpu) */
static int null_launch(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                       unsigned shm, void *stream, void **params, void **extra) {
    return 0;
}

static int null_coop_launch(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                            unsigned shm, void *stream, void **params) {
    return 0;
}

/* fake_driver(callback) -> (address of the cuLaunchKernel stand-in, address of the cooperative one); each
   launch calls callback(func, gx, gy, gz, bx, by, bz, shared, stream, params_address, has_extra,
   cooperative) and returns its int result as the CUresult.  fake_driver(None): stand-ins that return 0 and
   do nothing else (no callback into Python). */
static PyObject *fake_driver(PyObject *m, PyObject *callback) {
    (void)m;
    if (callback == Py_None)
        return Py_BuildValue("(NN)", PyLong_FromVoidPtr((void *)null_launch), PyLong_FromVoidPtr((void *)null_coop_launch));
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

static int add_type(PyObject *m, const char *name, PyTypeObject *t) {
    Py_INCREF(t);
    if (PyModule_AddObject(m, name, (PyObject *)t) < 0) {
        Py_DECREF(t);
        return -1;
    }
    return 0;
}

PyMODINIT_FUNC PyInit__newt_launch(void) {
    if (PyType_Ready(&LauncherType) < 0 || PyType_Ready(&DispatcherType) < 0 || PyType_Ready(&TuneDispatcherType) < 0 ||
        PyType_Ready(&BoundType) < 0 || PyType_Ready(&GridGetItemType) < 0 || init_strings() < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (add_type(m, "Launcher", &LauncherType) < 0 || add_type(m, "Dispatcher", &DispatcherType) < 0 ||
        add_type(m, "TuneDispatcher", &TuneDispatcherType) < 0 || add_type(m, "Bound", &BoundType) < 0 ||
        add_type(m, "GridGetItem", &GridGetItemType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    PyModule_AddIntConstant(m, "MAX_PARAMS", MAX_PARAMS);
    return m;
}
