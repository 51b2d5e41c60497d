/*
 * tether_py.c - C helpers of the Python extension (see tether_py.h).
 *
 * The DLPack structures below are written from the DLPack specification
 * (https://dmlc.github.io/dlpack/latest/c_api.html); only their layout matters.
 */
#define _GNU_SOURCE /* dladdr */
#define PY_SSIZE_T_CLEAN
#ifndef Py_LIMITED_API /* python/CMakeLists.txt defines it (USE_SABI 3.10) for the abi3 wheel */
#define Py_LIMITED_API 0x030A0000
#endif
#include <Python.h>

#include <dlfcn.h>
#include <stdlib.h>

#include "tether/tether.h"
#include "tether_internal.h" /* capi/src: the quick paths, exported for this extension only */
#include "tether_py.h"

static _Thread_local tether_status_t t_last_status = TETHER_OK;

static tether_status_t remember(tether_status_t status) {
  t_last_status = status;
  return status;
}

tether_status_t _tether_py_last_status(void) { return t_last_status; }

tether_buffer_t* _tether_py_buffer_create(tether_resource_t* resource, int device, size_t size,
                                          tether_stream_t stream) {
  tether_buffer_t* out = NULL;
  if (remember(tether_buffer_create(resource, device, size, stream, &out)) != TETHER_OK) return NULL;
  return out;
}

uintptr_t _tether_py_buffer_ptr(tether_buffer_t* buffer) {
  void* p = NULL;
  if (tether_buffer_get_ptr(buffer, &p) != TETHER_OK) return 0;
  return (uintptr_t)p;
}

uintptr_t _tether_py_allocate(tether_resource_t* resource, size_t size, size_t alignment,
                              tether_stream_t stream) {
  void* p = NULL;
  if (remember(tether_resource_allocate(resource, size, alignment, stream, &p)) != TETHER_OK) return 0;
  return (uintptr_t)p;
}

tether_status_t _tether_py_deallocate(tether_resource_t* resource, uintptr_t ptr, size_t size,
                                      size_t alignment, tether_stream_t stream) {
  return tether_resource_deallocate(resource, (void*)ptr, size, alignment, stream);
}

/* ---- the calls that keep the GIL (tether_py.h, python/ffibuild.py) --------
   cffi's wrapper calls these with the GIL held. The quick path runs with it
   (it never waits: tether_internal.h); anything else runs exactly as the
   functions above do, with the GIL released around it, as cffi would have. */

tether_buffer_t* _tether_py_gil_buffer_create(tether_resource_t* resource, int device, size_t size,
                                              tether_stream_t stream) {
  void* out = NULL;
  tether_buffer_t* b;
  PyThreadState* saved;
  const int q = tether_internal_buffer_create_quick(resource, size, stream, &out);
  if (q == TETHER_QUICK_DONE) return (tether_buffer_t*)out;
  saved = PyEval_SaveThread();
  if (q == TETHER_QUICK_FINISH) tether_internal_buffer_discard(out);
  b = _tether_py_buffer_create(resource, device, size, stream);
  PyEval_RestoreThread(saved);
  return b;
}

tether_status_t _tether_py_gil_buffer_release(tether_buffer_t* buffer) {
  tether_status_t s = TETHER_OK;
  PyThreadState* saved;
  const int q = tether_internal_buffer_release_quick(buffer);
  if (q == TETHER_QUICK_DONE) return TETHER_OK;
  saved = PyEval_SaveThread();
  if (q == TETHER_QUICK_FINISH) tether_internal_buffer_release_finish(buffer);
  else s = tether_buffer_release(buffer);
  PyEval_RestoreThread(saved);
  return s;
}

uintptr_t _tether_py_gil_allocate(tether_resource_t* resource, size_t size, size_t alignment,
                                  tether_stream_t stream) {
  void* p = NULL;
  uintptr_t u;
  PyThreadState* saved;
  if (size != 0 && tether_internal_allocate_quick(resource, size, alignment, stream, &p) == TETHER_QUICK_DONE) {
    t_last_status = TETHER_OK;
    return (uintptr_t)p;
  }
  saved = PyEval_SaveThread();
  u = _tether_py_allocate(resource, size, alignment, stream);
  PyEval_RestoreThread(saved);
  return u;
}

tether_status_t _tether_py_gil_deallocate(tether_resource_t* resource, uintptr_t ptr, size_t size,
                                          size_t alignment, tether_stream_t stream) {
  tether_status_t s;
  PyThreadState* saved;
  if (tether_internal_deallocate_quick(resource, (void*)ptr, size, alignment, stream) == TETHER_QUICK_DONE)
    return TETHER_OK;
  saved = PyEval_SaveThread();
  s = tether_resource_deallocate(resource, (void*)ptr, size, alignment, stream);
  PyEval_RestoreThread(saved);
  return s;
}

/* ---- DLPack ------------------------------------------------------------- */

typedef struct { uint32_t major, minor; } dl_version;
typedef struct { int32_t device_type; int32_t device_id; } dl_device;
typedef struct { uint8_t code, bits; uint16_t lanes; } dl_dtype;
typedef struct {
  void* data;
  dl_device device;
  int32_t ndim;
  dl_dtype dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
} dl_tensor;

typedef struct dl_managed {
  dl_tensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(struct dl_managed*);
} dl_managed;

typedef struct dl_managed_versioned {
  dl_version version;
  void* manager_ctx;
  void (*deleter)(struct dl_managed_versioned*);
  uint64_t flags;
  dl_tensor dl_tensor;
} dl_managed_versioned;

enum { kDLUInt = 1 };

/* One allocation per export: the managed tensor first (the deleter frees it
   through that pointer), then the 1-D shape and strides it points to. */
typedef struct { dl_managed m; int64_t shape[1], strides[1]; } legacy_block;
typedef struct { dl_managed_versioned m; int64_t shape[1], strides[1]; } versioned_block;

static const char kName[] = "dltensor";
static const char kNameVersioned[] = "dltensor_versioned";

/* Deleters may run on any thread, with or without the GIL: they touch no Python object. */
static void legacy_deleter(dl_managed* self) {
  tether_buffer_unpin((tether_buffer_t*)self->manager_ctx);
  free(self);
}

static void versioned_deleter(dl_managed_versioned* self) {
  tether_buffer_unpin((tether_buffer_t*)self->manager_ctx);
  free(self);
}

static void fill(dl_tensor* t, const tether_buffer_info_t* info, int64_t* shape, int64_t* strides,
                 int32_t device_type, int32_t device_id) {
  shape[0] = (int64_t)info->size;
  strides[0] = 1;
  t->data = info->ptr;
  t->device.device_type = device_type;
  t->device.device_id = device_id;
  t->ndim = 1;
  t->dtype.code = kDLUInt;
  t->dtype.bits = 8;
  t->dtype.lanes = 1;
  t->shape = shape;
  t->strides = strides;
  t->byte_offset = 0;
}

void* _tether_py_dlpack_new(tether_buffer_t* buffer, int versioned, int32_t device_type,
                            int32_t device_id, uint64_t flags) {
  /* The tensor's own pin (a reference and a pin, tether_buffer_pin) keeps the
     memory alive and in place whatever happens to the Python Buffer object
     (closed, collected) and whoever tries tether_buffer_resize, until the
     consumer calls the deleter. Taken first, so the info read below cannot
     be changed by a resize in between. */
  if (remember(tether_buffer_pin(buffer)) != TETHER_OK) return NULL;
  tether_buffer_info_t info = TETHER_BUFFER_INFO_INIT;
  if (remember(tether_buffer_get_info(buffer, &info)) != TETHER_OK) {
    tether_buffer_unpin(buffer);
    return NULL;
  }
  if ((uint64_t)info.size > (uint64_t)INT64_MAX) {
    tether_buffer_unpin(buffer);
    remember(TETHER_ERROR_INVALID_ARGUMENT);
    return NULL;
  }
  void* block = versioned ? malloc(sizeof(versioned_block)) : malloc(sizeof(legacy_block));
  if (block == NULL) {
    tether_buffer_unpin(buffer);
    remember(TETHER_ERROR_OUT_OF_MEMORY);
    return NULL;
  }
  if (versioned) {
    versioned_block* b = (versioned_block*)block;
    b->m.version.major = 1;
    b->m.version.minor = 0;
    b->m.manager_ctx = buffer;
    b->m.deleter = versioned_deleter;
    b->m.flags = flags;
    fill(&b->m.dl_tensor, &info, b->shape, b->strides, device_type, device_id);
  } else {
    legacy_block* b = (legacy_block*)block;
    b->m.manager_ctx = buffer;
    b->m.deleter = legacy_deleter;
    fill(&b->m.dl_tensor, &info, b->shape, b->strides, device_type, device_id);
  }
  return block;
}

void _tether_py_dlpack_discard(void* tensor, int versioned) {
  if (tensor == NULL) return;
  if (versioned) {
    dl_managed_versioned* t = (dl_managed_versioned*)tensor;
    t->deleter(t);
  } else {
    dl_managed* t = (dl_managed*)tensor;
    t->deleter(t);
  }
}

/* Runs when the capsule object dies (with the GIL held). A consumer that took
   the tensor renamed the capsule, so a still-valid name means nobody did. */
static void capsule_destructor(PyObject* capsule) {
  if (PyCapsule_IsValid(capsule, kName)) {
    dl_managed* t = (dl_managed*)PyCapsule_GetPointer(capsule, kName);
    if (t != NULL && t->deleter != NULL) t->deleter(t);
  } else if (PyCapsule_IsValid(capsule, kNameVersioned)) {
    dl_managed_versioned* t = (dl_managed_versioned*)PyCapsule_GetPointer(capsule, kNameVersioned);
    if (t != NULL && t->deleter != NULL) t->deleter(t);
  }
}

uintptr_t _tether_py_dlpack_capsule_destructor(void) { return (uintptr_t)&capsule_destructor; }

const char* _tether_py_dlpack_capsule_name(int versioned) { return versioned ? kNameVersioned : kName; }

/* ---- memory views ------------------------------------------------------- */

void _tether_py_release_view(tether_buffer_t* buffer, void* data) {
  (void)data;
  tether_buffer_unpin(buffer);
}

/* ---- where libtether lives -------------------------------------------------- */

const char* _tether_py_library_path(void) {
  Dl_info info;
  if (dladdr((void*)&tether_abi_version, &info) == 0 || info.dli_fname == NULL) return "";
  return info.dli_fname;
}

/* ---- callbacks into Python ------------------------------------------------ */

#include <stdatomic.h>

#include "tether_py_callbacks.h"

#include <time.h>

/* Shutdown. Python-created and foreign threads alike may be inside a
   callback, or waiting for the GIL to enter one, when the interpreter exits;
   once finalization has begun, a thread that asks for the GIL is made to
   exit (pthread_exit), which would unwind through libtether's noexcept
   frames and abort the process. So every entry counts itself in g_in_flight
   before it looks at g_python_gone, and the atexit handler - still before
   finalization - raises g_python_gone and then waits, with the GIL released
   (cffi releases it around the call), until no thread is inside: they finish
   their callback; later arrivals see the flag and stay out of Python. */
static atomic_int g_python_gone = 0;
static atomic_long g_in_flight = 0;
static _Thread_local tether_status_t t_callback_status = TETHER_ERROR_INTERNAL;

/* Enter: 1 if Python may be called (then leave() afterwards), 0 if not. */
static int enter(void) {
  atomic_fetch_add(&g_in_flight, 1);
  if (atomic_load(&g_python_gone) || !Py_IsInitialized()) {
    atomic_fetch_sub(&g_in_flight, 1);
    return 0;
  }
  return 1;
}

static void leave(void) { atomic_fetch_sub(&g_in_flight, 1); }

void _tether_py_callbacks_shutdown(void) {
  /* Give callbacks under way up to 5 s to finish (a callback that never
     returns must not hang the exit forever). */
  struct timespec ms = {0, 1000000};
  int i;
  atomic_store(&g_python_gone, 1);
  for (i = 0; i < 5000 && atomic_load(&g_in_flight) > 0; ++i) nanosleep(&ms, NULL);
}

void _tether_py_callback_failed(tether_status_t status, const char* message) {
  t_callback_status = status;
  tether_callback_set_error(status, message);
}

/* The status of a Python function that may have raised (0x7FFF: see t_callback_status). */
static tether_status_t python_status(tether_status_t s) {
  if ((unsigned)s == 0x7FFFu) {
    s = t_callback_status;
    t_callback_status = TETHER_ERROR_INTERNAL;
  }
  return s;
}

static tether_status_t shutting_down(void) {
  return tether_callback_set_error(TETHER_ERROR_SHUTTING_DOWN, "the Python interpreter is shutting down");
}

tether_status_t _tether_py_cb_allocate(void* context, size_t size, size_t alignment, tether_stream_t stream,
                                       void** out) {
  tether_status_t s;
  if (!enter()) return shutting_down();
  s = python_status(_tether_py_on_allocate(context, size, alignment, stream, out));
  leave();
  return s;
}

tether_status_t _tether_py_cb_deallocate(void* context, void* ptr, size_t size, size_t alignment,
                                         tether_stream_t stream) {
  tether_status_t s;
  if (!enter()) return shutting_down();
  s = python_status(_tether_py_on_deallocate(context, ptr, size, alignment, stream));
  leave();
  return s;
}

void _tether_py_cb_destroy(void* context) {
  if (!enter()) return;
  _tether_py_on_destroy(context);
  leave();
}

void _tether_py_cb_log(const char* line, size_t length, void* user) {
  if (!enter()) return;
  _tether_py_on_log(line, length, user);
  leave();
}

int _tether_py_cb_failure(size_t size, void* user) {
  int retry;
  if (!enter()) return 0;
  retry = _tether_py_on_failure(size, user);
  leave();
  return retry;
}

/* ---- CuPy's C-level allocator hook (tether.cupy) ---------------------------
 *
 * CuPy (>= 14.1) calls, through cupy.cuda.memory.CFunctionAllocator,
 *   void* malloc(void* param, size_t size, int device)   typedef'd `except +`,
 *         called from `cdef intptr_t _call_malloc(...) except *`
 *   void  free(void* param, void* ptr, int device)       typedef'd `noexcept`
 * (cupy/cuda/memory.pyx). A failing malloc sets a Python exception and
 * returns NULL. Per that source CuPy checks PyErr_Occurred() after the call;
 * the cupy-cuda13x 14.2.0 wheel (seen on the GPU machine) does not, and CPython
 * raises SystemError("... returned a result with an exception set") from ours
 * when CFunctionAllocatorMemory(...) returns; tether.cupy's allocator function
 * re-raises ours. Either way CuPy keeps ptr 0 (its __dealloc__ frees only a
 * non-zero ptr). No C++ exception ever leaves these functions. Older CuPy
 * (<= 14.0.1) is not used with this path: tether.cupy keeps its Python hook
 * there (see _c_level_support in tether/cupy.py).
 *
 * Each allocation is recorded in one process-wide open-addressing map,
 * ptr -> (resource, size, stream): free gives the memory back to the resource
 * it came from, on the stream it was ordered on, whatever resource or stream is
 * current by then. Why not one tether_buffer_t per allocation (the Python
 * hook's choice)? Counted with callgrind over a pool on a host resource
 * (valgrind --tool=callgrind, 20000 allocate+free of 256-704 B, libtether -O2):
 *   tether_buffer_create + get_ptr + tether_buffer_release     2007 instr.
 *   the same with resource NULL (current resource)             2329
 *   resource_retain + allocate + deallocate + resource_release  933
 *   current_resource_get (+1) + allocate + deallocate + release 1157
 *   allocate + deallocate alone                                 712
 *   one uncontended pthread mutex lock + unlock                  64
 * so the map holds the raw allocation: for a fixed resource, a reference on
 * the hook (an atomic count; the hook holds the resource) instead of
 * retain/release of the resource per allocation (saves ~220); for
 * resource=None, the +1 that tether_current_resource_get() hands out.
 *
 * Threads: CuPy calls from any Python thread, and under free-threaded Python
 * the GIL is no lock, so the map is guarded by its own mutex, which is never
 * held while calling tether or Python. The GIL (or the thread's attached
 * state) is kept for the quick paths of tether_internal.h - a pool's own
 * arena, the current-resource slot, a reference that is not the last - which
 * never wait, so nothing they could wait for can be waiting for the GIL; with
 * them a cached allocate+free makes no GIL hand-off. Whatever they refuse (a
 * pool's growth or retry, any other kind of resource, a release that may
 * destroy a resource) runs with the GIL released: it may wait for the device,
 * whose stream work may wait for the GIL (a Python host function), or call
 * back into Python (a CallbackResource, a log sink). Except once Python is
 * shutting down (enter() fails): then the GIL is kept, since a thread that
 * asks for it back during finalization is made to exit, which would unwind
 * through CuPy's `except +` frames. */

#include <pthread.h>
#include <string.h>

typedef intptr_t (*cupy_stream_of_device_fn)(int);
typedef intptr_t (*cupy_current_stream_fn)(void);

typedef struct cupy_hook {
  atomic_long refs;             /* 1 for the Python owner + 1 per live allocation of `resource` */
  tether_resource_t* resource;  /* +1; NULL: the current resource of the device at each malloc */
  int device_only;              /* >= 0: CuPy's device must be this one; -1: any */
  void* get_stream;             /* CuPy's stream getter, or NULL (stream 0) */
  int getter_takes_device;      /* 1: intptr_t (int device), 0: intptr_t (void) */
} cupy_hook;

enum { kEntryFree = 0, kEntryAlloc = 1, kEntryHook = 2 };

typedef struct {
  uintptr_t key;                /* the pointer (kEntryAlloc) or the hook's address (kEntryHook) */
  int kind;
  size_t size;
  tether_stream_t stream;
  tether_resource_t* resource;  /* where the memory frees into */
  cupy_hook* hook;              /* non-NULL: a hook reference keeps `resource`; NULL: +1 on it */
} cupy_entry;

static pthread_mutex_t g_cupy_lock = PTHREAD_MUTEX_INITIALIZER;
static cupy_entry* g_cupy_table = NULL; /* capacity a power of two, load <= 3/4 */
static size_t g_cupy_cap = 0, g_cupy_used = 0, g_cupy_live = 0;
static atomic_ullong g_cupy_ignored_frees = 0, g_cupy_failed_frees = 0;

static size_t cupy_slot(uintptr_t key, size_t cap) {
  return (size_t)(((uint64_t)key * UINT64_C(0x9E3779B97F4A7C15)) >> 17) & (cap - 1);
}

/* The slot holding key, or the empty slot where it would go. Lock held, cap > 0. */
static size_t cupy_find(uintptr_t key) {
  size_t i = cupy_slot(key, g_cupy_cap);
  while (g_cupy_table[i].kind != kEntryFree && g_cupy_table[i].key != key) i = (i + 1) & (g_cupy_cap - 1);
  return i;
}

/* Make room for one more entry. Lock held. 0 when out of memory. */
static int cupy_reserve(void) {
  size_t cap, i;
  cupy_entry* t;
  if ((g_cupy_used + 1) * 4 <= g_cupy_cap * 3) return 1;
  cap = g_cupy_cap ? g_cupy_cap * 2 : 256;
  t = (cupy_entry*)calloc(cap, sizeof(cupy_entry));
  if (t == NULL) return 0;
  for (i = 0; i < g_cupy_cap; ++i) {
    if (g_cupy_table[i].kind != kEntryFree) {
      size_t j = cupy_slot(g_cupy_table[i].key, cap);
      while (t[j].kind != kEntryFree) j = (j + 1) & (cap - 1);
      t[j] = g_cupy_table[i];
    }
  }
  free(g_cupy_table);
  g_cupy_table = t;
  g_cupy_cap = cap;
  return 1;
}

/* Remove the entry at slot i (linear probing: shift the following run back). Lock held. */
static void cupy_erase(size_t i) {
  size_t mask = g_cupy_cap - 1, j = i;
  for (;;) {
    size_t home;
    j = (j + 1) & mask;
    if (g_cupy_table[j].kind == kEntryFree) break;
    home = cupy_slot(g_cupy_table[j].key, g_cupy_cap);
    /* Move j back to i unless its home lies cyclically in (i, j]. */
    if ((j > i && (home <= i || home > j)) || (j < i && (home <= i && home > j))) {
      g_cupy_table[i] = g_cupy_table[j];
      i = j;
    }
  }
  memset(&g_cupy_table[i], 0, sizeof(cupy_entry));
  --g_cupy_used;
}

/* Drop a reference to the hook unless it is the last (whose release may
   destroy the resource): 1 if dropped. Never waits. */
static int cupy_hook_unref_quick(cupy_hook* hook) {
  long n = atomic_load(&hook->refs);
  while (n > 1)
    if (atomic_compare_exchange_weak(&hook->refs, &n, n - 1)) return 1;
  return 0;
}

static void cupy_hook_unref(cupy_hook* hook) {
  if (atomic_fetch_sub(&hook->refs, 1) == 1) {
    tether_resource_release(hook->resource);
    free(hook);
  }
}

void* _tether_py_cupy_hook_new(tether_resource_t* resource, int device_only, void* get_stream,
                               int getter_takes_device) {
  cupy_hook* hook;
  size_t i;
  if (device_only < -1 || (getter_takes_device != 0 && getter_takes_device != 1)) {
    remember(TETHER_ERROR_INVALID_ARGUMENT);
    return NULL;
  }
  if (resource != NULL && remember(tether_resource_retain(resource)) != TETHER_OK) return NULL;
  hook = (cupy_hook*)malloc(sizeof(cupy_hook));
  if (hook == NULL) {
    tether_resource_release(resource);
    remember(TETHER_ERROR_OUT_OF_MEMORY);
    return NULL;
  }
  atomic_init(&hook->refs, 1);
  hook->resource = resource;
  hook->device_only = device_only;
  hook->get_stream = get_stream;
  hook->getter_takes_device = getter_takes_device;
  pthread_mutex_lock(&g_cupy_lock);
  if (!cupy_reserve()) {
    pthread_mutex_unlock(&g_cupy_lock);
    tether_resource_release(resource);
    free(hook);
    remember(TETHER_ERROR_OUT_OF_MEMORY);
    return NULL;
  }
  i = cupy_find((uintptr_t)hook);
  g_cupy_table[i].key = (uintptr_t)hook;
  g_cupy_table[i].kind = kEntryHook;
  g_cupy_table[i].hook = hook;
  ++g_cupy_used;
  pthread_mutex_unlock(&g_cupy_lock);
  return hook;
}

/* The live hook `param`, or NULL (NULL, forged or deleted). With unlist, it
   leaves the map and the map's reference passes to the caller; without, the
   caller gets a new reference. */
static cupy_hook* cupy_hook_take(void* param, int unlist) {
  cupy_hook* hook = NULL;
  pthread_mutex_lock(&g_cupy_lock);
  if (param != NULL && g_cupy_cap) {
    size_t i = cupy_find((uintptr_t)param);
    if (g_cupy_table[i].kind == kEntryHook) {
      hook = g_cupy_table[i].hook;
      if (unlist) cupy_erase(i);
      else atomic_fetch_add(&hook->refs, 1);
    }
  }
  pthread_mutex_unlock(&g_cupy_lock);
  return hook;
}

void _tether_py_cupy_hook_delete(void* hook) {
  cupy_hook* found = cupy_hook_take(hook, 1);
  if (found) cupy_hook_unref(found); /* allocations still out keep it until their free */
}

/* Set the tether exception for `status` (tether._errors.error_for: the class of
   the status, the thread's last message). Always leaves an exception set. */
static void cupy_raise(tether_status_t status) {
  PyObject* mod = PyImport_ImportModule("tether._errors");
  PyObject* exc = mod ? PyObject_CallMethod(mod, "error_for", "i", (int)status) : NULL;
  Py_XDECREF(mod);
  if (exc != NULL) {
    PyErr_SetObject((PyObject*)Py_TYPE(exc), exc);
    Py_DECREF(exc);
  } else if (!PyErr_Occurred()) {
    PyErr_SetString(PyExc_RuntimeError, "tether.cupy: allocation failed");
  }
}

/* Release the GIL for a call that may wait, unless Python is exiting (then
   it is kept: see enter()). 1 if released: restore it with cupy_retake(). */
static int cupy_let_go(PyThreadState** saved) {
  if (!enter()) return 0;
  *saved = PyEval_SaveThread();
  return 1;
}

static void cupy_retake(PyThreadState* saved) {
  PyEval_RestoreThread(saved);
  leave();
}

void* _tether_py_cupy_malloc(void* param, size_t size, int device) {
  PyGILState_STATE gil;
  PyThreadState* saved = NULL;
  cupy_hook* hook;
  tether_resource_t* resource = NULL;
  tether_stream_t stream = 0;
  tether_status_t status = TETHER_OK;
  void* ptr = NULL;
  int stored = 0, released = 0;

  if (size == 0) return NULL; /* CuPy never asks (a 0-byte array has ptr 0); nothing to record */
  gil = PyGILState_Ensure(); /* CuPy holds it already: then this only counts */
  hook = cupy_hook_take(param, 0);
  if (hook == NULL) {
    PyErr_Format(PyExc_ValueError, "tether.cupy: param %p is not a live tether CuPy allocator", param);
    goto out;
  }
  if (hook->device_only >= 0 && device != hook->device_only) {
    PyErr_Format(PyExc_ValueError,
                 "the tether resource holds memory of device %d, but CuPy's current device is %d; "
                 "make one allocator per device", hook->device_only, device);
    cupy_hook_unref(hook);
    goto out;
  }
  if (hook->get_stream != NULL) {
    intptr_t s = hook->getter_takes_device ? ((cupy_stream_of_device_fn)hook->get_stream)(device)
                                           : ((cupy_current_stream_fn)hook->get_stream)();
    if (s == -1 && PyErr_Occurred()) { /* CuPy >= 14.1 declares it `except? -1` */
      cupy_hook_unref(hook);
      goto out;
    }
    stream = (tether_stream_t)s;
  }

  /* The quick paths first, with the GIL (they never wait: tether_internal.h);
     everything else without it - a pool's growth, an exhausted pool's retry,
     a cudaMalloc may wait for the device, whose stream work may wait for the
     GIL (a Python host function), or call back into Python. resource=None:
     +1 on the current resource (the map's entry keeps it). */
  resource = hook->resource;
  if (resource == NULL && tether_internal_current_resource_get_quick(device, &resource) != TETHER_QUICK_DONE)
    resource = NULL;
  if (resource == NULL || tether_internal_allocate_quick(resource, size, 0, stream, &ptr) != TETHER_QUICK_DONE) {
    ptr = NULL;
    released = cupy_let_go(&saved);
    if (resource == NULL) status = tether_current_resource_get(device, &resource);
    if (status == TETHER_OK) status = tether_resource_allocate(resource, size, 0, stream, &ptr);
  }
  if (status == TETHER_OK) {
    pthread_mutex_lock(&g_cupy_lock);
    if (cupy_reserve()) {
      size_t i = cupy_find((uintptr_t)ptr);
      cupy_entry* e = &g_cupy_table[i];
      e->key = (uintptr_t)ptr;
      e->kind = kEntryAlloc;
      e->size = size;
      e->stream = stream;
      e->resource = resource;
      e->hook = hook->resource != NULL ? hook : NULL; /* the hook reference moves into the entry */
      ++g_cupy_used;
      ++g_cupy_live;
      stored = 1;
    }
    pthread_mutex_unlock(&g_cupy_lock);
    /* (no memory for the map: rare) give it back */
    if (!stored && tether_internal_deallocate_quick(resource, ptr, size, 0, stream) != TETHER_QUICK_DONE) {
      if (!released) released = cupy_let_go(&saved);
      tether_resource_deallocate(resource, ptr, size, 0, stream);
    }
  }
  if (!stored) {
    /* Drop what the entry would have kept; a last reference may destroy the resource. */
    if (hook->resource == NULL) {
      if (resource != NULL && tether_internal_resource_release_quick(resource) != TETHER_QUICK_DONE) {
        if (!released) released = cupy_let_go(&saved);
        tether_resource_release(resource);
      }
    } else if (!cupy_hook_unref_quick(hook)) {
      if (!released) released = cupy_let_go(&saved);
      cupy_hook_unref(hook);
    }
  }
  if (hook->resource == NULL) cupy_hook_unref(hook); /* never its last with the resource (none to release) */
  if (released) cupy_retake(saved);
  if (status != TETHER_OK) cupy_raise(status); /* the thread's tether message is still this failure's */
  else if (!stored) PyErr_NoMemory();
out:
  PyGILState_Release(gil);
  return stored ? ptr : NULL;
}

void _tether_py_cupy_free(void* param, void* ptr, int device) {
  cupy_entry e;
  int found = 0, released;
  PyGILState_STATE gil;
  PyThreadState* saved = NULL;
  (void)param; /* the pointer's own record says where it goes, even if its allocator is gone */
  (void)device;
  if (ptr != NULL) {
    pthread_mutex_lock(&g_cupy_lock);
    if (g_cupy_cap) {
      size_t i = cupy_find((uintptr_t)ptr);
      if (g_cupy_table[i].kind == kEntryAlloc) {
        e = g_cupy_table[i];
        cupy_erase(i);
        --g_cupy_live;
        found = 1;
      }
    }
    pthread_mutex_unlock(&g_cupy_lock);
  }
  if (!found) {
    atomic_fetch_add(&g_cupy_ignored_frees, 1);
    return;
  }
  /* The quick paths (tether_internal.h) never wait, GIL or not: the memory,
     then the reference the entry holds (hook or resource) unless it is the
     last, whose release may destroy the resource. */
  if (tether_internal_deallocate_quick(e.resource, ptr, e.size, 0, e.stream) == TETHER_QUICK_DONE) {
    if (e.hook != NULL ? cupy_hook_unref_quick(e.hook)
                       : tether_internal_resource_release_quick(e.resource) == TETHER_QUICK_DONE)
      return;
    ptr = NULL; /* the memory is back already */
  }
  /* The rest may wait: without the GIL, as in malloc. CuPy frees from a
     Python thread (a destructor); Ensure also serves one that holds no GIL. */
  released = enter();
  if (released) {
    gil = PyGILState_Ensure();
    saved = PyEval_SaveThread();
  }
  if (ptr != NULL && tether_resource_deallocate(e.resource, ptr, e.size, 0, e.stream) != TETHER_OK)
    atomic_fetch_add(&g_cupy_failed_frees, 1);
  if (e.hook != NULL) cupy_hook_unref(e.hook);
  else tether_resource_release(e.resource);
  if (released) {
    PyEval_RestoreThread(saved);
    PyGILState_Release(gil);
    leave();
  }
}

int _tether_py_cupy_lookup(void* ptr, size_t* size, tether_stream_t* stream, tether_resource_t** resource) {
  int found = 0;
  if (size == NULL || stream == NULL || resource == NULL) return 0;
  pthread_mutex_lock(&g_cupy_lock);
  if (ptr != NULL && g_cupy_cap) {
    size_t i = cupy_find((uintptr_t)ptr);
    if (g_cupy_table[i].kind == kEntryAlloc) {
      *size = g_cupy_table[i].size;
      *stream = g_cupy_table[i].stream;
      *resource = g_cupy_table[i].resource;
      found = tether_resource_retain(*resource) == TETHER_OK;
    }
  }
  pthread_mutex_unlock(&g_cupy_lock);
  return found;
}

void _tether_py_cupy_counters(uint64_t* live, uint64_t* ignored_frees, uint64_t* failed_frees) {
  pthread_mutex_lock(&g_cupy_lock);
  if (live) *live = g_cupy_live;
  pthread_mutex_unlock(&g_cupy_lock);
  if (ignored_frees) *ignored_frees = atomic_load(&g_cupy_ignored_frees);
  if (failed_frees) *failed_frees = atomic_load(&g_cupy_failed_frees);
}
