/* A kernel launch prepared once and repeated: the generated wrappers' launcher.
 *
 * Triton's own launcher entry parses a format string of 13 fixed and one per kernel argument on
 * every call, and every argument travels through Python on every call. A wrapper called again
 * with tensors of the same metadata knows all but a few of them (strides, sizes, tile widths and
 * the grid are in its plan's key): a `Launch` packs those once, and a call passes only the stream
 * and the values that change from call to call (the tensors' addresses, scalar inputs).
 *
 * Launch(function, grid, block, shared, cooperative, pdl, types, values, varying)
 *   function     the CUfunction, as an int (CompiledKernel.function)
 *   grid         (x, y, z) program counts; block the threads per program (32 * num_warps);
 *   shared       dynamic shared memory in bytes; cooperative, pdl: the launch attributes
 *   types        one character per kernel parameter, in order: p a device pointer (an int, None
 *                for 0, or an object with data_ptr()), b/B int8/uint8, h/H int16/uint16,
 *                i/I int32/uint32, l/L int64/uint64, e float16, E bfloat16, f float32,
 *                d float64
 *   values       the parameters' values, packed now (len(types) of them)
 *   varying      the positions a call passes again, in the order it passes them
 * launch(stream, *values) packs values[j] into parameter varying[j] and launches on `stream`
 * (a CUstream as an int) in the CUDA context current on the calling thread, or the one current
 * when the Launch was made. Errors: TypeError/OverflowError for a value its type cannot hold,
 * RuntimeError for a failed launch (CUDA's message). The packing only needs libcuda.so.1 to
 * launch, so it can be built and tested where there is no GPU.
 *
 * A call packs into a copy of the prepared parameters, so calls from several threads do not
 * mix; cuLaunchKernelEx copies the parameters before it returns.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cuda.h"

typedef CUresult (*LaunchFn)(const CUlaunchConfig*, CUfunction, void**, void**);
typedef CUresult (*CtxGetFn)(CUcontext*);
typedef CUresult (*CtxSetFn)(CUcontext);
typedef CUresult (*ErrorStringFn)(CUresult, const char**);

static LaunchFn cu_launch_kernel_ex;
static CtxGetFn cu_ctx_get_current;
static CtxSetFn cu_ctx_set_current;
static ErrorStringFn cu_get_error_string;

/* libcuda.so.1's entry points, opened on first use: 1 when there, 0 when not (no driver). */
static int load_cuda(void) {
  static int state = -1;
  if (state >= 0) return state;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib) {
    cu_launch_kernel_ex = (LaunchFn)dlsym(lib, "cuLaunchKernelEx");
    cu_ctx_get_current = (CtxGetFn)dlsym(lib, "cuCtxGetCurrent");
    cu_ctx_set_current = (CtxSetFn)dlsym(lib, "cuCtxSetCurrent");
    cu_get_error_string = (ErrorStringFn)dlsym(lib, "cuGetErrorString");
  }
  state =
      lib && cu_launch_kernel_ex && cu_ctx_get_current && cu_ctx_set_current && cu_get_error_string;
  return state;
}

static int cuda_failed(CUresult code, const char* what) {
  const char* text = NULL;
  if (cu_get_error_string(code, &text) != CUDA_SUCCESS || !text) text = "unknown error";
  PyErr_Format(PyExc_RuntimeError, "%s failed: %s (CUDA error %d)", what, text, (int)code);
  return -1;
}

typedef struct {
  PyObject_HEAD vectorcallfunc vectorcall;
  CUfunction function;
  CUcontext context;
  unsigned grid[3], block, shared;
  int cooperative, pdl;
  Py_ssize_t count, nvarying;
  char* types;
  Py_ssize_t* varying;
  uint64_t* slots; /* one per parameter, the value in its low bytes (little-endian) */
} Launch;

static int store_int(PyObject* value, long long lo, unsigned long long hi, int is_signed,
                     uint64_t* slot) {
  if (!PyLong_Check(value)) {
    PyErr_Format(PyExc_TypeError, "an integer parameter got %.100s", Py_TYPE(value)->tp_name);
    return -1;
  }
  if (is_signed) {
    long long v = PyLong_AsLongLong(value);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (v < lo || (v > 0 && (unsigned long long)v > hi)) {
      PyErr_Format(PyExc_OverflowError, "%lld does not fit the parameter's type", v);
      return -1;
    }
    *slot = (uint64_t)v & (hi * 2 + 1); /* the type's width: the slot's other bytes stay 0 */
  } else {
    unsigned long long v = PyLong_AsUnsignedLongLong(value);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    if (v > hi) {
      PyErr_Format(PyExc_OverflowError, "%llu does not fit the parameter's type", v);
      return -1;
    }
    *slot = (uint64_t)v;
  }
  return 0;
}

static int store_pointer(PyObject* value, uint64_t* slot) {
  if (value == Py_None) {
    *slot = 0;
    return 0;
  }
  if (PyLong_Check(value)) {
    unsigned long long v = PyLong_AsUnsignedLongLong(value);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    *slot = v;
    return 0;
  }
  PyObject* address = PyObject_CallMethod(value, "data_ptr", NULL);
  if (!address) return -1;
  int result = -1;
  if (!PyLong_Check(address))
    PyErr_SetString(PyExc_TypeError, "data_ptr() of a pointer parameter must return an int");
  else
    result = store_pointer(address, slot);
  Py_DECREF(address);
  return result;
}

/* Packs `value` as parameter `i`'s type into `slots[i]`. */
static int store(const Launch* self, uint64_t* slots, Py_ssize_t i, PyObject* value) {
  uint64_t* slot = &slots[i];
  double d;
  float f;
  switch (self->types[i]) {
  case 'p':
    return store_pointer(value, slot);
  case 'b':
    return store_int(value, INT8_MIN, INT8_MAX, 1, slot);
  case 'B':
    return store_int(value, 0, UINT8_MAX, 0, slot);
  case 'h':
    return store_int(value, INT16_MIN, INT16_MAX, 1, slot);
  case 'H':
    return store_int(value, 0, UINT16_MAX, 0, slot);
  case 'i':
    return store_int(value, INT32_MIN, INT32_MAX, 1, slot);
  case 'I':
    return store_int(value, 0, UINT32_MAX, 0, slot);
  case 'l':
    return store_int(value, INT64_MIN, INT64_MAX, 1, slot);
  case 'L':
    return store_int(value, 0, UINT64_MAX, 0, slot);
  default:
    break;
  }
  d = PyFloat_AsDouble(value);
  if (d == -1.0 && PyErr_Occurred()) return -1;
  *slot = 0;
  switch (self->types[i]) {
  case 'e': { /* IEEE half, rounded to nearest even */
    char half[2];
#if PY_VERSION_HEX < 0x030B0000
    if (_PyFloat_Pack2(d, half, 1) < 0) return -1;
#else
    if (PyFloat_Pack2(d, half, 1) < 0) return -1;
#endif
    memcpy(slot, half, 2);
    return 0;
  }
  case 'E': { /* bfloat16: the float's top half, as Triton's launcher packs it */
    uint32_t bits;
    f = (float)d;
    memcpy(&bits, &f, 4);
    *slot = bits >> 16;
    return 0;
  }
  case 'f':
    f = (float)d;
    memcpy(slot, &f, 4);
    return 0;
  case 'd':
    memcpy(slot, &d, 8);
    return 0;
  default:
    break;
  }
  PyErr_Format(PyExc_ValueError, "unknown parameter type '%c'", (unsigned char)self->types[i]);
  return -1;
}

enum { kStackParams = 64 };

/* One call's parameters: a copy of the prepared ones with the call's values packed in, on the
 * stack unless there are many. A value's data_ptr() may run Python code, and with it another
 * thread's call of the same Launch, so a call never writes into the Launch itself. */
typedef struct {
  uint64_t stack_slots[kStackParams];
  void* stack_params[kStackParams];
  uint64_t* slots;
  void** params; /* params[i] == &slots[i], as cuLaunchKernelEx takes them */
} CallSlots;

static void call_slots_free(CallSlots* c) {
  if (c->slots != c->stack_slots) PyMem_Free(c->slots);
  if (c->params != c->stack_params) PyMem_Free(c->params);
}

/* Fills `c` with the prepared parameters and `values` at the varying positions; on failure
 * (an exception set) returns -1, and `c` must still be freed. */
static int call_slots_init(CallSlots* c, const Launch* self, PyObject* const* values) {
  c->slots = c->stack_slots;
  c->params = c->stack_params;
  if (self->count > kStackParams) {
    c->slots = PyMem_Malloc(self->count * sizeof(uint64_t));
    c->params = PyMem_Malloc(self->count * sizeof(void*));
    if (!c->slots || !c->params) {
      PyErr_NoMemory();
      return -1;
    }
  }
  memcpy(c->slots, self->slots, self->count * sizeof(uint64_t));
  for (Py_ssize_t i = 0; i < self->count; ++i)
    c->params[i] = &c->slots[i];
  for (Py_ssize_t j = 0; j < self->nvarying; ++j)
    if (store(self, c->slots, self->varying[j], values[j]) < 0) return -1;
  return 0;
}

static PyObject* launch(const Launch* self, unsigned long long stream, void** params);

static PyObject* Launch_call(PyObject* self_, PyObject* const* args, size_t nargsf,
                             PyObject* kwnames) {
  Launch* self = (Launch*)self_;
  Py_ssize_t n = PyVectorcall_NARGS(nargsf);
  if ((kwnames && PyTuple_GET_SIZE(kwnames)) || n != 1 + self->nvarying) {
    PyErr_Format(PyExc_TypeError, "a launch takes the stream and %zd values, positionally",
                 self->nvarying);
    return NULL;
  }
  unsigned long long stream = PyLong_AsUnsignedLongLong(args[0]);
  if (stream == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
  CallSlots c;
  PyObject* result = NULL;
  if (call_slots_init(&c, self, args + 1) == 0) result = launch(self, stream, c.params);
  call_slots_free(&c);
  return result;
}

/* Launches with `params` on `stream`. */
static PyObject* launch(const Launch* self, unsigned long long stream, void** params) {
  if (self->grid[0] == 0 || self->grid[1] == 0 || self->grid[2] == 0) Py_RETURN_NONE;
  if (!load_cuda()) {
    PyErr_SetString(PyExc_RuntimeError, "cannot launch: libcuda.so.1 is not loadable");
    return NULL;
  }
  CUcontext current = NULL;
  CUresult code = cu_ctx_get_current(&current);
  if (code != CUDA_SUCCESS) return cuda_failed(code, "cuCtxGetCurrent"), NULL;
  if (!current) {
    if (!self->context) {
      PyErr_SetString(PyExc_RuntimeError, "cannot launch: no CUDA context is current");
      return NULL;
    }
    code = cu_ctx_set_current(self->context);
    if (code != CUDA_SUCCESS) return cuda_failed(code, "cuCtxSetCurrent"), NULL;
  }
  CUlaunchAttribute attrs[2];
  CUlaunchConfig config;
  memset(&config, 0, sizeof config);
  config.gridDimX = self->grid[0];
  config.gridDimY = self->grid[1];
  config.gridDimZ = self->grid[2];
  config.blockDimX = self->block;
  config.blockDimY = config.blockDimZ = 1;
  config.sharedMemBytes = self->shared;
  config.hStream = (CUstream)(uintptr_t)stream;
  config.attrs = attrs;
  if (self->pdl) {
    attrs[config.numAttrs].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attrs[config.numAttrs++].value.programmaticStreamSerializationAllowed = 1;
  }
  if (self->cooperative) {
    attrs[config.numAttrs].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    attrs[config.numAttrs++].value.cooperative = 1;
  }
  /* A full launch queue blocks here: other threads run meanwhile. */
  PyThreadState* saved = PyEval_SaveThread();
  code = cu_launch_kernel_ex(&config, self->function, params, NULL);
  PyEval_RestoreThread(saved);
  if (code != CUDA_SUCCESS) return cuda_failed(code, "cuLaunchKernelEx"), NULL;
  Py_RETURN_NONE;
}

static void Launch_dealloc(Launch* self) {
  PyMem_Free(self->types);
  PyMem_Free(self->varying);
  PyMem_Free(self->slots);
  Py_TYPE(self)->tp_free((PyObject*)self);
}

static int unsigned_of(PyObject* value, unsigned* out, const char* what) {
  unsigned long v = PyLong_AsUnsignedLong(value);
  if (v == (unsigned long)-1 && PyErr_Occurred()) return -1;
  if (v > UINT32_MAX) {
    PyErr_Format(PyExc_OverflowError, "%s %lu is too large", what, v);
    return -1;
  }
  *out = (unsigned)v;
  return 0;
}

static PyObject* Launch_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  static char* names[] = {"function", "grid",  "block",  "shared",  "cooperative",
                          "pdl",      "types", "values", "varying", NULL};
  unsigned long long function;
  PyObject *grid, *block, *shared, *values, *varying;
  int cooperative, pdl;
  const char* types;
  Py_ssize_t count;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "KOOOpps#O!O!", names, &function, &grid, &block,
                                   &shared, &cooperative, &pdl, &types, &count, &PyTuple_Type,
                                   &values, &PyTuple_Type, &varying))
    return NULL;
  if (!PyTuple_Check(grid) || PyTuple_GET_SIZE(grid) != 3) {
    PyErr_SetString(PyExc_TypeError, "grid must be a tuple (x, y, z)");
    return NULL;
  }
  if (PyTuple_GET_SIZE(values) != count) {
    PyErr_Format(PyExc_ValueError, "%zd types but %zd values", count, PyTuple_GET_SIZE(values));
    return NULL;
  }
  Launch* self = (Launch*)type->tp_alloc(type, 0);
  if (!self) return NULL;
  self->vectorcall = Launch_call;
  self->function = (CUfunction)(uintptr_t)function;
  self->cooperative = cooperative;
  self->pdl = pdl;
  self->count = count;
  self->nvarying = PyTuple_GET_SIZE(varying);
  self->types = PyMem_Malloc(count + 1);
  self->varying = PyMem_Malloc(sizeof(Py_ssize_t) * (self->nvarying + 1));
  self->slots = PyMem_Calloc(count + 1, sizeof(uint64_t));
  if (!self->types || !self->varying || !self->slots) {
    Py_DECREF(self);
    return PyErr_NoMemory();
  }
  memcpy(self->types, types, count);
  self->types[count] = 0;
  for (int axis = 0; axis < 3; ++axis)
    if (unsigned_of(PyTuple_GET_ITEM(grid, axis), &self->grid[axis], "grid") < 0) goto fail;
  if (unsigned_of(block, &self->block, "block") < 0 ||
      unsigned_of(shared, &self->shared, "shared") < 0)
    goto fail;
  for (Py_ssize_t i = 0; i < count; ++i) {
    if (!types[i] || !strchr("pbBhHiIlLeEfd", types[i])) {
      PyErr_Format(PyExc_ValueError, "unknown parameter type '%c'", (unsigned char)types[i]);
      goto fail;
    }
    if (store(self, self->slots, i, PyTuple_GET_ITEM(values, i)) < 0) goto fail;
  }
  for (Py_ssize_t j = 0; j < self->nvarying; ++j) {
    Py_ssize_t at = PyLong_AsSsize_t(PyTuple_GET_ITEM(varying, j));
    if (at == -1 && PyErr_Occurred()) goto fail;
    if (at < 0 || at >= count) {
      PyErr_Format(PyExc_IndexError, "varying position %zd is not a parameter", at);
      goto fail;
    }
    self->varying[j] = at;
  }
  if (load_cuda() && cu_ctx_get_current(&self->context) != CUDA_SUCCESS) self->context = NULL;
  return (PyObject*)self;
fail:
  Py_DECREF(self);
  return NULL;
}

/* `count` slots as a tuple of ints. */
static PyObject* ints_of(const uint64_t* slots, Py_ssize_t count) {
  PyObject* out = PyTuple_New(count);
  if (!out) return NULL;
  for (Py_ssize_t i = 0; i < count; ++i) {
    PyObject* v = PyLong_FromUnsignedLongLong(slots[i]);
    if (!v) {
      Py_DECREF(out);
      return NULL;
    }
    PyTuple_SET_ITEM(out, i, v);
  }
  return out;
}

/* The prepared parameters, one int each (the slot's 64 bits): what a test compares. */
static PyObject* Launch_packed(Launch* self, PyObject* unused) {
  (void)unused;
  return ints_of(self->slots, self->count);
}

/* The parameters a call with these values would launch with, without launching: for tests. */
static PyObject* Launch_pack(PyObject* self_, PyObject* const* args, Py_ssize_t n) {
  Launch* self = (Launch*)self_;
  if (n != self->nvarying) {
    PyErr_Format(PyExc_TypeError, "pack takes %zd values", self->nvarying);
    return NULL;
  }
  CallSlots c;
  PyObject* out = NULL;
  if (call_slots_init(&c, self, args) == 0) out = ints_of(c.slots, self->count);
  call_slots_free(&c);
  return out;
}

static PyMethodDef Launch_methods[] = {
    {"packed", (PyCFunction)Launch_packed, METH_NOARGS, "The packed parameters, as ints."},
    {"pack", (PyCFunction)(void (*)(void))Launch_pack, METH_FASTCALL,
     "The parameters a launch with these values would pass, as ints, without launching."},
    {NULL, NULL, 0, NULL}};

static PyTypeObject LaunchType = {
    PyVarObject_HEAD_INIT(NULL, 0) /* the macro ends with a comma */
        .tp_name = "_dt_launch.Launch",
    .tp_basicsize = sizeof(Launch),
    .tp_dealloc = (destructor)Launch_dealloc,
    .tp_vectorcall_offset = offsetof(Launch, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A kernel launch prepared once: launch(stream, *varying values).",
    .tp_methods = Launch_methods,
    .tp_new = Launch_new,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_dt_launch",
    .m_doc = "Prepared kernel launches for generated wrappers.",
    .m_size = -1,
};

PyMODINIT_FUNC PyInit__dt_launch(void) {
  if (PyType_Ready(&LaunchType) < 0) return NULL;
  PyObject* m = PyModule_Create(&module);
  if (!m) return NULL;
  Py_INCREF(&LaunchType);
  if (PyModule_AddObject(m, "Launch", (PyObject*)&LaunchType) < 0) {
    Py_DECREF(&LaunchType);
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
