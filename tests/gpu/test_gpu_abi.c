/*
 * test_gpu_abi.c - the CUDA resources through the C ABI on a real device:
 * properties, allocation, buffers and copies in device memory, pools over
 * CUDA upstreams, the current-resource slot of a device, out-of-memory, and
 * argument checks. Exits 77 (skipped) when no device is usable.
 */
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

#define MIB ((size_t)1 << 20)
#define TIB ((size_t)1 << 40)

static void fill_pattern(unsigned char* p, size_t n, unsigned seed) {
  size_t i;
  for (i = 0; i < n; ++i) p[i] = (unsigned char)(i * 2654435761u + seed);
}

/* Copies host -> buffer -> buffer -> host round-trip through `r`'s memory. */
static void check_round_trip(tether_resource_t* r, const char* what) {
  const size_t n = 2 * MIB + 77;
  unsigned char* in = malloc(n);
  unsigned char* out = malloc(n);
  tether_buffer_t* a = NULL;
  tether_buffer_t* b = NULL;
  REQUIRE(in != NULL && out != NULL);
  fill_pattern(in, n, 3);
  memset(out, 0, n);
  CHECK_OK(tether_buffer_create(r, 0, n, 0, &a));
  CHECK_OK(tether_buffer_create(r, 0, n, 0, &b));
  CHECK_OK(tether_buffer_copy_from_host(a, 0, in, n));
  CHECK_OK(tether_buffer_copy(b, 0, a, 0, n));
  CHECK_OK(tether_cuda_stream_synchronize(0, 0));
  CHECK_OK(tether_buffer_copy_to_host(b, 0, out, n));
  if (memcmp(in, out, n) != 0) {
    fprintf(stderr, "round trip through %s memory changed the bytes\n", what);
    CHECK(0);
  }
  /* resize keeps the prefix */
  CHECK_OK(tether_buffer_resize(b, MIB));
  memset(out, 0, n);
  CHECK_OK(tether_buffer_copy_to_host(b, 0, out, MIB));
  CHECK(memcmp(in, out, MIB) == 0);
  /* offsets */
  CHECK_OK(tether_buffer_copy_to_host(a, 1000, out, 5000));
  CHECK(memcmp(in + 1000, out, 5000) == 0);
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_copy_to_host(a, n - 10, out, 11), "exceeds");
  tether_buffer_release(a);
  tether_buffer_release(b);
  free(in);
  free(out);
}

static void check_properties(tether_resource_t* r, uint32_t kind, int32_t device, int32_t dev_ok, int32_t host_ok,
                             const char* name) {
  tether_resource_properties_t p = TETHER_RESOURCE_PROPERTIES_INIT;
  CHECK_OK(tether_resource_get_properties(r, &p));
  CHECK(p.kind == kind);
  CHECK(p.device == device);
  CHECK(p.device_accessible == dev_ok);
  CHECK(p.host_accessible == host_ok);
  CHECK(strcmp(tether_resource_get_name(r), name) == 0);
}

static void test_queries(void) {
  int n = 0, v = 0, d = -7;
  CHECK_OK(tether_cuda_get_device_count(&n));
  CHECK(n >= 1);
  CHECK_OK(tether_cuda_get_driver_version(&v));
  CHECK(v >= 12000);
  CHECK_OK(tether_cuda_get_current_device(&d));
  CHECK(d >= 0 && d < n);
  CHECK_OK(tether_cuda_stream_synchronize(0, 0));
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_cuda_stream_synchronize(n, 0), "invalid CUDA device");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_cuda_get_device_count(NULL), "out");
}

static void test_every_resource(void) {
  tether_resource_t* r = NULL;
  tether_async_options_t o = TETHER_ASYNC_OPTIONS_INIT;
  void* p = NULL;

  REQUIRE_OK(tether_cuda_resource_create(0, &r));
  check_properties(r, TETHER_RESOURCE_KIND_CUDA, 0, 1, 0, "cuda");
  check_round_trip(r, "cuda");
  tether_resource_release(r);

  REQUIRE_OK(tether_async_resource_create(0, NULL, &r));
  check_properties(r, TETHER_RESOURCE_KIND_ASYNC, 0, 1, 0, "async");
  check_round_trip(r, "async (owned pool)");
  CHECK_OK(tether_resource_trim(r));
  tether_resource_release(r);

  o.use_default_pool = 1;
  REQUIRE_OK(tether_async_resource_create(0, &o, &r));
  check_properties(r, TETHER_RESOURCE_KIND_ASYNC, 0, 1, 0, "async");
  check_round_trip(r, "async (default pool)");
  tether_resource_release(r);

  o.use_default_pool = 0;
  o.initial_pool_size = 8 * MIB;
  o.release_threshold = 16 * MIB;
  o.maximum_pool_size = 64 * MIB;
  REQUIRE_OK(tether_async_resource_create(TETHER_DEVICE_CURRENT, &o, &r));
  check_round_trip(r, "async (bounded pool)");
  CHECK_ERROR(TETHER_ERROR_OUT_OF_MEMORY, tether_resource_allocate(r, 65 * MIB, 0, 0, &p), "maximum_pool_size");
  CHECK(p == NULL);
  tether_resource_release(r);

  /* A view of the device's current pool (a pool given by handle: tests/python/test_gpu_resources.py). */
  REQUIRE_OK(tether_async_view_resource_create(0, NULL, &r));
  check_properties(r, TETHER_RESOURCE_KIND_ASYNC_VIEW, 0, 1, 0, "async_view");
  check_round_trip(r, "async_view (current pool)");
  {
    char spec[64];
    size_t needed = 0;
    CHECK_OK(tether_resource_get_spec(r, spec, sizeof spec, &needed));
    CHECK(strcmp(spec, "async_view(device=0)") == 0);
  }
  tether_resource_release(r);

  REQUIRE_OK(tether_managed_resource_create(0, &r));
  check_properties(r, TETHER_RESOURCE_KIND_MANAGED, 0, 1, 1, "managed");
  check_round_trip(r, "managed");
  tether_resource_release(r);

  REQUIRE_OK(tether_pinned_host_resource_create(0, &r));
  check_properties(r, TETHER_RESOURCE_KIND_PINNED_HOST, TETHER_DEVICE_HOST, 1, 1, "pinned_host");
  check_round_trip(r, "pinned host");
  /* host-accessible: the pointer is usable directly */
  CHECK_OK(tether_resource_allocate(r, 4096, 0, 0, &p));
  memset(p, 0x5a, 4096);
  CHECK(((unsigned char*)p)[4095] == 0x5a);
  CHECK_OK(tether_resource_deallocate(r, p, 4096, 0, 0));
  tether_resource_release(r);
}

static void test_pools_over_cuda(void) {
  tether_resource_t* up[2] = {NULL, NULL};
  int i;
  REQUIRE_OK(tether_cuda_resource_create(0, &up[0]));
  REQUIRE_OK(tether_async_resource_create(0, NULL, &up[1]));
  for (i = 0; i < 2; ++i) {
    tether_resource_t* pool = NULL;
    tether_resource_t* got = NULL;
    tether_pool_options_t po = TETHER_POOL_OPTIONS_INIT;
    tether_pool_info_t info = TETHER_POOL_INFO_INIT;
    void* p = NULL;
    po.initial_size = 4 * MIB;
    REQUIRE_OK(tether_pool_resource_create(up[i], &po, &pool));
    CHECK_OK(tether_resource_get_upstream(pool, &got));
    CHECK(got == up[i]);
    CHECK_OK(tether_resource_get_pool_info(pool, &info));
    CHECK(info.pool_size >= 4 * MIB);
    check_properties(pool, TETHER_RESOURCE_KIND_POOL, 0, 1, 0, "pool");
    check_round_trip(pool, i == 0 ? "pool(cuda)" : "pool(async)");
    CHECK_ERROR(TETHER_ERROR_OUT_OF_MEMORY, tether_resource_allocate(pool, 2 * TIB, 0, 0, &p), "CUDA_ERROR_OUT_OF_MEMORY");
    CHECK_OK(tether_resource_allocate(pool, MIB, 0, 0, &p));
    CHECK_OK(tether_resource_deallocate(pool, p, MIB, 0, 0));
    CHECK_OK(tether_resource_trim(pool));
    /* the pool keeps its upstream alive */
    tether_resource_release(up[i]);
    up[i] = NULL;
    check_round_trip(pool, "pool after its upstream handle was released");
    tether_resource_release(pool);
  }
}

static void test_out_of_memory(void) {
  tether_resource_t* r = NULL;
  tether_buffer_t* b = NULL;
  void* p = (void*)1;
  REQUIRE_OK(tether_cuda_resource_create(0, &r));
  CHECK_ERROR(TETHER_ERROR_OUT_OF_MEMORY, tether_resource_allocate(r, 2 * TIB, 0, 0, &p), "cuMemAlloc failed");
  CHECK(p == NULL);
  CHECK_ERROR(TETHER_ERROR_OUT_OF_MEMORY, tether_buffer_create(r, 0, 2 * TIB, 0, &b), "CUDA_ERROR_OUT_OF_MEMORY");
  CHECK(b == NULL);
  check_round_trip(r, "cuda after running out");
  tether_resource_release(r);
}

static void test_device_slot(void) {
  tether_resource_t* cuda = NULL;
  tether_resource_t* pool = NULL;
  tether_resource_t* pinned = NULL;
  tether_resource_t* prev = NULL;
  tether_resource_t* got = NULL;
  tether_buffer_t* b = NULL;
  tether_buffer_info_t info = TETHER_BUFFER_INFO_INIT;

  /* The default of a device slot is a plain CUDA resource of that device. */
  REQUIRE_OK(tether_current_resource_get(0, &got));
  check_properties(got, TETHER_RESOURCE_KIND_CUDA, 0, 1, 0, "cuda");
  tether_resource_release(got);

  REQUIRE_OK(tether_cuda_resource_create(0, &cuda));
  REQUIRE_OK(tether_pool_resource_create(cuda, NULL, &pool));
  CHECK_OK(tether_current_resource_set(0, pool, &prev));
  CHECK_OK(tether_buffer_create(NULL, 0, 12345, 0, &b));
  CHECK_OK(tether_buffer_get_resource(b, &got));
  CHECK(got == pool);
  CHECK_OK(tether_buffer_get_info(b, &info));
  CHECK(info.device == 0 && info.device_accessible == 1 && info.host_accessible == 0 && info.size == 12345);
  tether_buffer_release(b);
  b = NULL;
  CHECK_OK(tether_buffer_create(NULL, TETHER_DEVICE_CURRENT, 100, 0, &b));
  CHECK_OK(tether_buffer_get_resource(b, &got));
  CHECK(got == pool);
  /* Releasing every handle but the buffer's: the memory stays valid. */
  CHECK_OK(tether_current_resource_set(0, prev, NULL));
  tether_resource_release(prev);
  tether_resource_release(pool);
  tether_resource_release(cuda);
  check_round_trip(got, "a pool kept alive by its buffer");
  tether_buffer_release(b);

  /* Pinned host memory suits the host slot and every device slot; device memory only its device. */
  REQUIRE_OK(tether_pinned_host_resource_create(0, &pinned));
  CHECK_OK(tether_current_resource_set(TETHER_DEVICE_HOST, pinned, &prev));
  CHECK_OK(tether_current_resource_set(TETHER_DEVICE_HOST, prev, NULL));
  tether_resource_release(prev);
  CHECK_OK(tether_current_resource_set(0, pinned, &prev));
  CHECK_OK(tether_current_resource_set(0, prev, NULL));
  tether_resource_release(prev);
  tether_resource_release(pinned);
  REQUIRE_OK(tether_cuda_resource_create(0, &cuda));
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_current_resource_set(TETHER_DEVICE_HOST, cuda, NULL), "host");
  tether_resource_release(cuda);
}

static void test_equality(void) {
  tether_resource_t* a = NULL;
  tether_resource_t* b = NULL;
  tether_resource_t* c = NULL;
  int eq = -1;
  REQUIRE_OK(tether_cuda_resource_create(0, &a));
  REQUIRE_OK(tether_cuda_resource_create(0, &b));
  REQUIRE_OK(tether_async_resource_create(0, NULL, &c));
  CHECK_OK(tether_resource_is_equal(a, b, &eq));
  CHECK(eq == 1);
  CHECK_OK(tether_resource_is_equal(a, c, &eq));
  CHECK(eq == 0);
  tether_resource_release(a);
  tether_resource_release(b);
  tether_resource_release(c);
}

static void test_arguments(void) {
  tether_resource_t* r = (tether_resource_t*)(uintptr_t)1;
  tether_async_options_t o = TETHER_ASYNC_OPTIONS_INIT;
  int n = 0;
  CHECK_OK(tether_cuda_get_device_count(&n));
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_cuda_resource_create(n, &r), "invalid CUDA device");
  CHECK(r == NULL);
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_cuda_resource_create(TETHER_DEVICE_HOST, &r), "TETHER_DEVICE_HOST");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_managed_resource_create(-9, &r), "invalid CUDA device");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_pinned_host_resource_create(n, &r), "invalid CUDA device");
  o.ipc_handle_type = 9;
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_async_resource_create(0, &o, &r), "ipc_handle_type");
  o.ipc_handle_type = TETHER_IPC_HANDLE_NONE;
  o.initial_pool_size = 64 * MIB;
  o.maximum_pool_size = 32 * MIB;
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_async_resource_create(0, &o, &r), "initial_pool_size");
  o.struct_size = 4;
  CHECK_ERROR(TETHER_ERROR_VERSION_MISMATCH, tether_async_resource_create(0, &o, &r), "struct_size");
  CHECK(r == NULL);
}

int main(void) {
  if (!tt_have_gpu()) {
    printf("skipped: no usable CUDA device (%s)\n", tether_last_error_message());
    return 77;
  }
  RUN(test_queries);
  RUN(test_every_resource);
  RUN(test_pools_over_cuda);
  RUN(test_out_of_memory);
  RUN(test_device_slot);
  RUN(test_equality);
  RUN(test_arguments);
  return tt_finish("test_gpu_abi");
}
