/*
 * tether_py_callbacks.h - the Python functions that C calls back into.
 *
 * Each is defined in Python (python/tether/_callbacks.py, @ffi.def_extern)
 * and compiled by cffi as a C function of the extension: ffibuild.py wraps
 * this file in `extern "Python+C" { ... }` for the cdef, and tether_py.c
 * includes it for the prototypes, so the two never drift apart. They take the
 * GIL themselves (cffi does), so any thread may call them - but only through
 * the _tether_py_cb_* trampolines of tether_py.h, which refuse to enter
 * Python once the interpreter is shutting down.
 *
 * Declarations only (no #include, no macros): this file is also a cdef.
 */

/* tether_callback_vtable_t.allocate of a tether.CallbackResource. Returns a sentinel
   (0x7FFF) when the Python code raised (the status is then _tether_py_callback_failed's). */
tether_status_t _tether_py_on_allocate(void* context, size_t size, size_t alignment, tether_stream_t stream,
                                       void** out);
/* tether_callback_vtable_t.deallocate; the sentinel as above. */
tether_status_t _tether_py_on_deallocate(void* context, void* ptr, size_t size, size_t alignment,
                                         tether_stream_t stream);
/* Forget the callables registered under `context` (destroy of every callback type). */
void _tether_py_on_destroy(void* context);
/* tether_log_callback_t of a tether.LoggingAdaptor. */
void _tether_py_on_log(const char* line, size_t length, void* user);
/* tether_failure_callback_t of a tether.FailureCallbackAdaptor. */
int _tether_py_on_failure(size_t size, void* user);
