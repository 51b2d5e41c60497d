/*
 * tether_py.h - C helpers compiled into the Python extension tether._tether.
 *
 * They are not part of the tether ABI (libtether exports only tether_*); they
 * exist where pure cffi would be slow or cannot express something: a buffer
 * constructor without an out-parameter (the hot path of tether.Buffer), DLPack
 * capsules, and the path of the loaded libtether. This file is both a C header
 * and a cffi cdef, so it holds declarations only (no #include, no macros).
 */

/* tether_buffer_create() returning the handle: +1, or NULL on failure, with
   the status in _tether_py_last_status() and the message in
   tether_last_error_message(). */
tether_buffer_t* _tether_py_buffer_create(tether_resource_t* resource, int device, size_t size,
                                          tether_stream_t stream);

/* tether_buffer_get_ptr() returning the address as an integer: 0 for a 0-byte
   buffer or a dead handle (the hooks read it right after creating the buffer,
   where the handle cannot be dead). Saves the out-parameter cdata per call. */
uintptr_t _tether_py_buffer_ptr(tether_buffer_t* buffer);

/* tether_resource_allocate() returning the address: 0 for size 0 or on
   failure; the status (TETHER_OK on success) in _tether_py_last_status(). */
uintptr_t _tether_py_allocate(tether_resource_t* resource, size_t size, size_t alignment,
                              tether_stream_t stream);

/* tether_resource_deallocate() of an address given as an integer. */
tether_status_t _tether_py_deallocate(tether_resource_t* resource, uintptr_t ptr, size_t size,
                                      size_t alignment, tether_stream_t stream);

/* ---- the calls that keep the GIL (python/ffibuild.py) -----------------------
   cffi releases the GIL around every call it makes, except around these
   _tether_py_gil_* functions (ffibuild.py's preamble). Each first tries
   libtether's quick path with the GIL held (capi/src/tether_internal.h: it
   never waits for anything that could wait for the GIL) and, where that
   refuses, releases the GIL itself and makes the public call, with the same
   results and errors as the function it replaces: */

/* _tether_py_buffer_create (tether.Buffer) */
tether_buffer_t* _tether_py_gil_buffer_create(tether_resource_t* resource, int device, size_t size,
                                              tether_stream_t stream);
/* tether_buffer_release (Buffer.close, __del__) */
tether_status_t _tether_py_gil_buffer_release(tether_buffer_t* buffer);
/* _tether_py_allocate (Resource.allocate) */
uintptr_t _tether_py_gil_allocate(tether_resource_t* resource, size_t size, size_t alignment,
                                  tether_stream_t stream);
/* _tether_py_deallocate (Resource.deallocate) */
tether_status_t _tether_py_gil_deallocate(tether_resource_t* resource, uintptr_t ptr, size_t size,
                                          size_t alignment, tether_stream_t stream);

/* The status of this thread's last failed _tether_py_* call. */
tether_status_t _tether_py_last_status(void);

/* A DLManagedTensor (versioned = 0) or DLManagedTensorVersioned (versioned = 1)
   describing the buffer's bytes as a 1-D uint8 tensor on (device_type,
   device_id). It holds its own pin of the buffer (tether_buffer_pin: a
   reference, and resize refused meanwhile), given back by its deleter
   (tether_buffer_unpin). NULL on failure (see _tether_py_last_status()). */
void* _tether_py_dlpack_new(tether_buffer_t* buffer, int versioned, int32_t device_type,
                            int32_t device_id, uint64_t flags);

/* Run the deleter of a tensor from _tether_py_dlpack_new() that no capsule took. */
void _tether_py_dlpack_discard(void* tensor, int versioned);

/* Address of the PyCapsule destructor for DLPack capsules: it runs the tensor's
   deleter unless a consumer renamed the capsule ("used_dltensor"), which means
   the consumer now owns the tensor. */
uintptr_t _tether_py_dlpack_capsule_destructor(void);

/* "dltensor" or "dltensor_versioned", in static storage (capsule names must outlive the capsule). */
const char* _tether_py_dlpack_capsule_name(int versioned);

/* A destructor for ffi.gc: gives back the pin (tether_buffer_pin) that a memory view holds. */
void _tether_py_release_view(tether_buffer_t* buffer, void* data);

/* The file libtether was loaded from (dladdr of a tether symbol); "" if unknown. */
const char* _tether_py_library_path(void);

/* ---- callbacks into Python (see tether_py_callbacks.h) ----------------------
   The function pointers Python hands to the C ABI. Each checks that the
   interpreter is not shutting down, then calls the Python function of the
   same name in tether_py_callbacks.h (_tether_py_on_*). After
   _tether_py_callbacks_shutdown() they never enter Python: allocate and
   deallocate return TETHER_ERROR_SHUTTING_DOWN, log lines are dropped, a
   failure callback declines to retry, destroy forgets nothing (the registry
   dies with the interpreter). */
tether_status_t _tether_py_cb_allocate(void* context, size_t size, size_t alignment, tether_stream_t stream,
                                       void** out);
tether_status_t _tether_py_cb_deallocate(void* context, void* ptr, size_t size, size_t alignment,
                                         tether_stream_t stream);
void _tether_py_cb_destroy(void* context);
void _tether_py_cb_log(const char* line, size_t length, void* user);
int _tether_py_cb_failure(size_t size, void* user);

/* Called by Python code of a callback that raised: record `message` as the
   callback's reason (tether_callback_set_error) and `status` as the status the
   trampoline returns when the Python function reports the sentinel 0x7FFF. */
void _tether_py_callback_failed(tether_status_t status, const char* message);

/* From an atexit handler (with the GIL released): Python is going away. Stops
   the trampolines from entering Python and waits (up to 5 s) for callbacks
   already under way on other threads to finish, so no thread asks for the GIL
   once finalization has begun. */
void _tether_py_callbacks_shutdown(void);

/* ---- CuPy's C-level allocator hook (tether.cupy; see tether_py.c) ----------
   A hook is the `param` of a cupy.cuda.memory.CFunctionAllocator whose malloc
   and free are the two functions below. Each allocation is recorded in one
   process-wide map, pointer -> (resource, size, stream), so free gives it back
   to the resource it came from, on the stream it was ordered on. */

/* A hook allocating from `resource` (retained; NULL: the current resource of
   CuPy's device at each malloc). device_only >= 0 makes malloc refuse any other
   device (ValueError), -1 allows all. get_stream: CuPy's stream getter from its
   Cython C API, `intptr_t (int device)` if getter_takes_device is 1 or
   `intptr_t (void)` if 0; NULL orders everything on stream 0. Returns the hook
   (the `param`), or NULL with the status in _tether_py_last_status()
   (INVALID_ARGUMENT, INVALID_HANDLE, OUT_OF_MEMORY). */
void* _tether_py_cupy_hook_new(tether_resource_t* resource, int device_only, void* get_stream,
                               int getter_takes_device);

/* The hook's owner is gone: later mallocs through it raise ValueError; the
   allocations still out keep what they need and free normally. Unknown or NULL:
   a no-op. */
void _tether_py_cupy_hook_delete(void* hook);

/* CuPy's malloc: `size` bytes on CuPy's current stream of `device`. Must be
   called with the GIL held (CuPy does; cffi's lib.* releases it, so take the
   function's address instead). On failure it returns NULL with a Python
   exception set: the tether error (tether._errors.error_for; out of memory is a
   MemoryError), ValueError for a device the resource does not serve or an
   unknown param, or what CuPy's stream getter raised. Size 0: NULL, no
   exception, nothing recorded. */
void* _tether_py_cupy_malloc(void* param, size_t size, int device);

/* CuPy's free: gives `ptr` back to its resource on its stream (param and device
   are not needed: the pointer's record says). NULL or a pointer the map does
   not hold: a no-op, counted. Any thread, with or without the GIL. */
void _tether_py_cupy_free(void* param, void* ptr, int device);

/* The record of a live allocation: 1 and size, stream and resource (+1, for the
   caller to release), or 0 if `ptr` is not one (or an out pointer is NULL). */
int _tether_py_cupy_lookup(void* ptr, size_t* size, tether_stream_t* stream, tether_resource_t** resource);

/* Live allocations, frees ignored (NULL or unknown pointers), and frees the
   resource refused (the memory is then lost, not reused). Each out may be NULL. */
void _tether_py_cupy_counters(uint64_t* live, uint64_t* ignored_frees, uint64_t* failed_frees);
