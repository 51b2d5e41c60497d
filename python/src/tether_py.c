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
