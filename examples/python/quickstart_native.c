/*
 * quickstart_native.c - the C half of examples/python/quickstart.py.
 *
 * Compiled at run time against tether.get_include() and linked to
 * tether.get_library(), as any C/C++ extension would be: it shares the
 * Python package's libtether, so it sees the same current-resource table.
 */
#include <stdint.h>
#include <string.h>

#include <tether/tether.h>

#define EXPORT __attribute__((visibility("default")))

/* The handle of the current host resource (for comparison with Python's). */
EXPORT uintptr_t native_current_host_resource(void) {
  tether_resource_t* r = NULL;
  if (tether_current_resource_get(TETHER_DEVICE_HOST, &r) != TETHER_OK) return 0;
  tether_resource_release(r); /* the table still holds it; we only report the value */
  return (uintptr_t)r;
}

/* Allocate n bytes from the current host resource, fill them; the caller owns the buffer. */
EXPORT uintptr_t native_make_buffer(size_t n, int fill) {
  tether_buffer_t* b = NULL;
  if (tether_buffer_create(NULL, TETHER_DEVICE_HOST, n, 0, &b) != TETHER_OK) return 0;
  void* p = NULL;
  tether_buffer_get_ptr(b, &p);
  memset(p, fill, n);
  return (uintptr_t)b;
}

/* The last error message of this thread, for the demo's error path. */
EXPORT const char* native_last_error(void) { return tether_last_error_message(); }
