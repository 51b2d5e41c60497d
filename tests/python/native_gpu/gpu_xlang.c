/*
 * gpu_xlang.c - the C side of the GPU cross-language tests
 * (tests/python/test_gpu_xlang.py): built at test time against the package's
 * headers and libtether, it reads and sets device 0's current resource and
 * moves device buffers to and from Python.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <tether/tether.h>

/* The handle value of device 0's current resource (the table's, no reference kept), or 0. */
uintptr_t gpu_xlang_current_device0(void) {
  tether_resource_t* r = NULL;
  uintptr_t value;
  if (tether_current_resource_get(0, &r) != TETHER_OK) return 0;
  value = (uintptr_t)r;
  tether_resource_release(r);
  return value;
}

/* The kind of device 0's current resource, or -status on failure. */
int gpu_xlang_current_kind(void) {
  tether_resource_t* r = NULL;
  tether_resource_properties_t p = TETHER_RESOURCE_PROPERTIES_INIT;
  tether_status_t s = tether_current_resource_get(0, &r);
  if (s != TETHER_OK) return -(int)s;
  s = tether_resource_get_properties(r, &p);
  tether_resource_release(r);
  return s == TETHER_OK ? (int)p.kind : -(int)s;
}

/* Install a pool over a CUDA resource of device 0 in device 0's slot. */
tether_status_t gpu_xlang_install_pool(void) {
  tether_resource_t* cuda = NULL;
  tether_resource_t* pool = NULL;
  tether_status_t s = tether_cuda_resource_create(0, &cuda);
  if (s != TETHER_OK) return s;
  s = tether_pool_resource_create(cuda, NULL, &pool);
  tether_resource_release(cuda); /* the pool holds it */
  if (s != TETHER_OK) return s;
  s = tether_current_resource_set(0, pool, NULL);
  tether_resource_release(pool); /* the table holds it */
  return s;
}

/* A device buffer of n bytes from device 0's current resource, each byte
   (i * 7 + seed) mod 256, copied in from the host. +1 for the caller, or 0. */
uintptr_t gpu_xlang_make_buffer(size_t n, unsigned seed) {
  tether_buffer_t* b = NULL;
  unsigned char* host = malloc(n ? n : 1);
  size_t i;
  if (host == NULL) return 0;
  for (i = 0; i < n; ++i) host[i] = (unsigned char)(i * 7 + seed);
  if (tether_buffer_create(NULL, 0, n, 0, &b) != TETHER_OK ||
      tether_buffer_copy_from_host(b, 0, host, n) != TETHER_OK) {
    tether_buffer_release(b);
    b = NULL;
  }
  free(host);
  return (uintptr_t)b;
}

/* Sum of the bytes of a buffer (any memory), read with copy_to_host; -1 on failure. */
long long gpu_xlang_sum(uintptr_t buffer) {
  tether_buffer_t* b = (tether_buffer_t*)buffer;
  size_t n = 0, i;
  long long sum = 0;
  unsigned char* host;
  if (tether_buffer_get_size(b, &n) != TETHER_OK) return -1;
  host = malloc(n ? n : 1);
  if (host == NULL) return -1;
  if (tether_buffer_copy_to_host(b, 0, host, n) != TETHER_OK) {
    free(host);
    return -1;
  }
  for (i = 0; i < n; ++i) sum += host[i];
  free(host);
  return sum;
}

static tether_buffer_t* g_kept;

/* Keep a reference to a buffer made elsewhere (Python) until gpu_xlang_drop(). */
tether_status_t gpu_xlang_keep(uintptr_t buffer) {
  tether_status_t s = tether_buffer_retain((tether_buffer_t*)buffer);
  if (s == TETHER_OK) g_kept = (tether_buffer_t*)buffer;
  return s;
}

long long gpu_xlang_kept_sum(void) { return gpu_xlang_sum((uintptr_t)g_kept); }

tether_status_t gpu_xlang_drop(void) {
  tether_status_t s = tether_buffer_release(g_kept);
  g_kept = NULL;
  return s;
}
