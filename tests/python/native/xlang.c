/*
 * xlang.c - a separately built C library for the cross-language tests.
 *
 * It is compiled at test time against tether.get_include() and linked to
 * tether.get_library(), exactly as an extension author would, and loaded with
 * ctypes. Everything goes through the public C ABI; handles cross to Python
 * as plain integers (uintptr_t).
 */
#include <stdint.h>
#include <string.h>

#include <tether/tether.h>

#define EXPORT __attribute__((visibility("default")))

static tether_buffer_t* g_kept = NULL;

/* The ABI version the library reports (Python checks it is the same library). */
EXPORT uint32_t xlang_abi_version(void) { return tether_abi_version(); }

/* Live handles as this library's libtether counts them (one table, one census). */
EXPORT size_t xlang_live_objects(void) { return tether_debug_live_objects(TETHER_OBJECT_ANY); }

/* Build host -> pool -> statistics adaptor in C, install the adaptor as the current
   host resource and drop every C reference: only the table keeps them alive.
   *out_handle receives the adaptor's handle value (for comparison only). */
EXPORT int xlang_install_host_stats_pool(uintptr_t* out_handle) {
  tether_resource_t *host = NULL, *pool = NULL, *stats = NULL, *previous = NULL;
  tether_status_t s = tether_host_resource_create(&host);
  if (s == TETHER_OK) s = tether_pool_resource_create(host, NULL, &pool);
  if (s == TETHER_OK) s = tether_statistics_adaptor_create(pool, &stats);
  if (s == TETHER_OK) s = tether_current_resource_set(TETHER_DEVICE_HOST, stats, &previous);
  if (s == TETHER_OK) *out_handle = (uintptr_t)stats;
  tether_resource_release(previous);
  tether_resource_release(host); /* upstream before adaptor, on purpose */
  tether_resource_release(stats);
  tether_resource_release(pool);
  return (int)s;
}

/* The handle value of the current host resource (released again at once: the
   table keeps it alive, the value is for comparison). 0 on failure. */
EXPORT uintptr_t xlang_current_host(void) {
  tether_resource_t* r = NULL;
  if (tether_current_resource_get(TETHER_DEVICE_HOST, &r) != TETHER_OK) return 0;
  tether_resource_release(r);
  return (uintptr_t)r;
}

/* Install the resource `handle` (borrowed) as the current host resource. */
EXPORT int xlang_set_current_host(uintptr_t handle) {
  return (int)tether_current_resource_set(TETHER_DEVICE_HOST, (tether_resource_t*)handle, NULL);
}

/* A buffer of n bytes from the current host resource, filled with `fill`; +1 to the caller. */
EXPORT uintptr_t xlang_buffer_from_current(size_t n, int fill) {
  tether_buffer_t* b = NULL;
  if (tether_buffer_create(NULL, TETHER_DEVICE_HOST, n, 0, &b) != TETHER_OK) return 0;
  void* p = NULL;
  tether_buffer_get_ptr(b, &p);
  if (p != NULL) memset(p, fill, n);
  return (uintptr_t)b;
}

/* Keep a reference to a buffer made elsewhere (Python); give it back with xlang_drop_kept(). */
EXPORT int xlang_keep_buffer(uintptr_t handle) {
  tether_buffer_t* b = (tether_buffer_t*)handle;
  tether_status_t s = tether_buffer_retain(b);
  if (s == TETHER_OK) {
    tether_buffer_release(g_kept);
    g_kept = b;
  }
  return (int)s;
}

/* Sum of the bytes of the kept buffer (reads memory Python wrote), or -1. */
EXPORT long long xlang_kept_sum(void) {
  void* p = NULL;
  size_t n = 0;
  if (tether_buffer_get_ptr(g_kept, &p) != TETHER_OK || tether_buffer_get_size(g_kept, &n) != TETHER_OK)
    return -1;
  long long sum = 0;
  for (size_t i = 0; i < n; ++i) sum += ((const unsigned char*)p)[i];
  return sum;
}

EXPORT int xlang_drop_kept(void) {
  tether_status_t s = tether_buffer_release(g_kept);
  g_kept = NULL;
  return (int)s;
}

/* Raw allocation from the current host resource (Python frees it with Resource.deallocate). */
EXPORT uintptr_t xlang_allocate_current(size_t n) {
  tether_resource_t* r = NULL;
  void* p = NULL;
  if (tether_current_resource_get(TETHER_DEVICE_HOST, &r) != TETHER_OK) return 0;
  tether_resource_allocate(r, n, 0, 0, &p);
  tether_resource_release(r);
  return (uintptr_t)p;
}

/* Give back raw memory (allocated by Python) to the current host resource. */
EXPORT int xlang_deallocate_current(uintptr_t ptr, size_t n) {
  tether_resource_t* r = NULL;
  tether_status_t s = tether_current_resource_get(TETHER_DEVICE_HOST, &r);
  if (s == TETHER_OK) s = tether_resource_deallocate(r, (void*)ptr, n, 0, 0);
  tether_resource_release(r);
  return (int)s;
}

/* Current bytes of a statistics adaptor, read through C (or UINT64_MAX on error). */
EXPORT uint64_t xlang_current_bytes(uintptr_t handle) {
  tether_statistics_t st = TETHER_STATISTICS_INIT;
  if (tether_resource_get_statistics((tether_resource_t*)handle, &st) != TETHER_OK) return UINT64_MAX;
  return st.current_bytes;
}

/* Pass a stale/forged handle straight to the ABI: returns the status (INVALID_HANDLE expected). */
EXPORT int xlang_retain_release_resource(uintptr_t handle) {
  tether_status_t s = tether_resource_retain((tether_resource_t*)handle);
  if (s == TETHER_OK) tether_resource_release((tether_resource_t*)handle);
  return (int)s;
}
