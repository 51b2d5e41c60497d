/*
 * Argument checking: NULL out-pointers, alignments, huge and zero sizes,
 * memory given back to the wrong resource (rejected, nothing lost), option
 * structs sized by struct_size, versions, status names, error messages.
 */
#include <pthread.h>

#include "test_support.h"

static size_t g_base;

static void test_null_out_pointers(void) {
  tether_resource_t* h = NULL;
  tether_buffer_t* b = NULL;
  REQUIRE_OK(tether_host_resource_create(&h));
  REQUIRE_OK(tether_buffer_create(h, TETHER_DEVICE_HOST, 64, 0, &b));
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_host_resource_create(NULL), "tether_host_resource_create");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_pool_resource_create(h, NULL, NULL),
              "tether_pool_resource_create");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_statistics_adaptor_create(h, NULL),
              "tether_statistics_adaptor_create");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_allocate(h, 64, 0, 0, NULL),
              "tether_resource_allocate");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_get_properties(h, NULL),
              "tether_resource_get_properties");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_get_upstream(h, NULL),
              "tether_resource_get_upstream");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_is_equal(h, h, NULL), "tether_resource_is_equal");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_create(h, TETHER_DEVICE_HOST, 64, 0, NULL),
              "tether_buffer_create");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_get_info(b, NULL), "tether_buffer_get_info");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_get_ptr(b, NULL), "tether_buffer_get_ptr");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_get_size(b, NULL), "tether_buffer_get_size");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_get_resource(b, NULL), "tether_buffer_get_resource");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_copy_from_host(b, 0, NULL, 8),
              "tether_buffer_copy_from_host");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_copy_to_host(b, 0, NULL, 8),
              "tether_buffer_copy_to_host");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_current_resource_get(TETHER_DEVICE_HOST, NULL),
              "tether_current_resource_get");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_current_resource_is_locked(TETHER_DEVICE_HOST, NULL),
              "tether_current_resource_is_locked");
  CHECK_OK(tether_buffer_release(b));
  CHECK_OK(tether_resource_release(h));
  CHECK_LIVE(TETHER_OBJECT_ANY, g_base);
}

/* Alignment rules hold for every resource kind tether offers on the host. */
static void check_alignments(tether_resource_t* r) {
  static const size_t bad[] = {3, 24, 100, 257, (size_t)1 << 31, SIZE_MAX};
  static const size_t good[] = {1, 2, 8, 16, 256, 4096, 65536};
  size_t i;
  void* p = NULL;
  for (i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    p = (void*)0x1;
    CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_allocate(r, 64, bad[i], 0, &p), "align");
    CHECK(p == NULL);
  }
  for (i = 0; i < sizeof good / sizeof good[0]; ++i) {
    CHECK_OK(tether_resource_allocate(r, 100, good[i], 0, &p));
    CHECK(p != NULL && (uintptr_t)p % good[i] == 0);
    if (p) CHECK_OK(tether_resource_deallocate(r, p, 100, good[i], 0));
  }
  /* 0 means TETHER_DEFAULT_ALIGNMENT. */
  CHECK_OK(tether_resource_allocate(r, 1, 0, 0, &p));
  CHECK(p != NULL && (uintptr_t)p % TETHER_DEFAULT_ALIGNMENT == 0);
  if (p) CHECK_OK(tether_resource_deallocate(r, p, 1, 0, 0));
}

/* Sizes that cannot be satisfied, or overflow when rounded, are OUT_OF_MEMORY. */
static void check_huge_sizes(tether_resource_t* r) {
  static const size_t huge[] = {SIZE_MAX, SIZE_MAX - 1, SIZE_MAX - 255, SIZE_MAX / 2 + 1, (size_t)1 << 62};
  size_t i;
  void* p;
  tether_buffer_t* b;
  for (i = 0; i < sizeof huge / sizeof huge[0]; ++i) {
    p = (void*)0x1;
    CHECK_ERROR(TETHER_ERROR_OUT_OF_MEMORY, tether_resource_allocate(r, huge[i], 0, 0, &p),
                "tether_resource_allocate");
    CHECK(p == NULL);
    b = (tether_buffer_t*)0x1;
    CHECK_ERROR(TETHER_ERROR_OUT_OF_MEMORY, tether_buffer_create(r, TETHER_DEVICE_HOST, huge[i], 0, &b),
                "tether_buffer_create");
    CHECK(b == NULL);
  }
  p = (void*)0x1;
  CHECK_STATUS(TETHER_ERROR_OUT_OF_MEMORY, tether_resource_allocate(r, SIZE_MAX - 10, 4096, 0, &p));
  CHECK(p == NULL);
  /* Still usable afterwards. */
  CHECK_OK(tether_resource_allocate(r, 64, 0, 0, &p));
  if (p) CHECK_OK(tether_resource_deallocate(r, p, 64, 0, 0));
}

static void check_zero_size(tether_resource_t* r) {
  void* p = (void*)0x1;
  char word[8];
  CHECK_OK(tether_resource_allocate(r, 0, 0, 0, &p));
  CHECK(p == NULL);
  CHECK_OK(tether_resource_deallocate(r, NULL, 0, 0, 0));
  CHECK_STATUS(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_deallocate(r, NULL, 16, 0, 0));
  CHECK_STATUS(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_deallocate(r, word, 0, 0, 0));
}

static void test_host_pool_stats_arguments(void) {
  tether_resource_t *h = NULL, *p = NULL, *s = NULL;
  tether_resource_t* all[3];
  tether_statistics_t st = TETHER_STATISTICS_INIT;
  int i;
  REQUIRE_OK(tether_host_resource_create(&h));
  REQUIRE_OK(tether_pool_resource_create(h, NULL, &p));
  REQUIRE_OK(tether_statistics_adaptor_create(p, &s));
  all[0] = h; all[1] = p; all[2] = s;
  for (i = 0; i < 3; ++i) {
    check_alignments(all[i]);
    check_huge_sizes(all[i]);
    check_zero_size(all[i]);
  }
  /* Failed and zero-size requests are not counted as allocations. */
  CHECK_OK(tether_resource_get_statistics(s, &st));
  CHECK(st.current_count == 0 && st.current_bytes == 0);
  CHECK(st.total_count == 9); /* 7 good alignments + default + the post-OOM probe */
  CHECK_OK(tether_resource_release(s));
  CHECK_OK(tether_resource_release(p));
  CHECK_OK(tether_resource_release(h));
  CHECK_LIVE(TETHER_OBJECT_ANY, g_base);
}

static void test_zero_size_buffer(void) {
  tether_buffer_t* b = NULL;
  tether_buffer_info_t info = TETHER_BUFFER_INFO_INIT;
  void* ptr = (void*)0x1;
  size_t n = 99;
  char src[32] = "tether zero-size buffer", dst[32] = {0};
  REQUIRE_OK(tether_buffer_create(NULL, TETHER_DEVICE_HOST, 0, 0, &b));
  CHECK_OK(tether_buffer_get_ptr(b, &ptr));
  CHECK(ptr == NULL);
  CHECK_OK(tether_buffer_get_size(b, &n));
  CHECK(n == 0);
  CHECK_OK(tether_buffer_get_info(b, &info));
  CHECK(info.ptr == NULL && info.size == 0 && info.device == TETHER_DEVICE_HOST && info.host_accessible);
  CHECK_OK(tether_buffer_copy_from_host(b, 0, src, 0));
  CHECK_STATUS(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_copy_from_host(b, 0, src, 1));
  CHECK_OK(tether_buffer_resize(b, sizeof src));
  CHECK_OK(tether_buffer_copy_from_host(b, 0, src, sizeof src));
  CHECK_OK(tether_buffer_resize(b, 0));
  CHECK_OK(tether_buffer_get_ptr(b, &ptr));
  CHECK(ptr == NULL);
  CHECK_OK(tether_buffer_resize(b, 8));
  CHECK_OK(tether_buffer_copy_to_host(b, 0, dst, 8)); /* contents unspecified, but readable */
  CHECK_OK(tether_buffer_release(b));
  CHECK_LIVE(TETHER_OBJECT_ANY, g_base);
}

static void test_buffer_ranges(void) {
  tether_buffer_t *a = NULL, *b = NULL;
  char bytes[64];
  REQUIRE_OK(tether_buffer_create(NULL, TETHER_DEVICE_HOST, 64, 0, &a));
  REQUIRE_OK(tether_buffer_create(NULL, TETHER_DEVICE_HOST, 32, 0, &b));
  memset(bytes, 7, sizeof bytes);
  CHECK_OK(tether_buffer_copy_from_host(a, 0, bytes, 64));
  CHECK_OK(tether_buffer_copy_from_host(a, 63, bytes, 1));
  CHECK_OK(tether_buffer_copy_from_host(a, 64, bytes, 0));
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_copy_from_host(a, 1, bytes, 64),
              "tether_buffer_copy_from_host");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_copy_from_host(a, 65, bytes, 0),
              "tether_buffer_copy_from_host");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_copy_from_host(a, SIZE_MAX, bytes, 2),
              "tether_buffer_copy_from_host"); /* offset + size wraps around */
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_copy_to_host(a, 2, bytes, SIZE_MAX),
              "tether_buffer_copy_to_host");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_copy(b, 0, a, 0, 33), "tether_buffer_copy");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_copy(a, 0, b, 1, 32), "tether_buffer_copy");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_copy(a, SIZE_MAX, b, 0, 2), "tether_buffer_copy");
  CHECK_OK(tether_buffer_copy(b, 0, a, 32, 32));
  CHECK_ERROR(TETHER_ERROR_OUT_OF_MEMORY, tether_buffer_resize(a, SIZE_MAX), "tether_buffer_resize");
  {
    size_t n = 0;
    CHECK_OK(tether_buffer_get_size(a, &n));
    CHECK(n == 64); /* unchanged on failure */
  }
  CHECK_OK(tether_buffer_release(a));
  CHECK_OK(tether_buffer_release(b));
  CHECK_LIVE(TETHER_OBJECT_ANY, g_base);
}

/* Memory given back to a resource that did not hand it out is refused and
 * left intact: it can still be given back to its owner afterwards. */
static void test_wrong_resource_frees(void) {
  tether_resource_t *h = NULL, *a = NULL, *b = NULL, *s = NULL;
  tether_pool_info_t ia = TETHER_POOL_INFO_INIT, ib = TETHER_POOL_INFO_INIT;
  tether_statistics_t st = TETHER_STATISTICS_INIT;
  void *pa = NULL, *pb = NULL, *ph = NULL;
  REQUIRE_OK(tether_host_resource_create(&h));
  REQUIRE_OK(tether_pool_resource_create(h, NULL, &a));
  REQUIRE_OK(tether_pool_resource_create(h, NULL, &b));
  REQUIRE_OK(tether_statistics_adaptor_create(a, &s));
  REQUIRE_OK(tether_resource_allocate(a, 1000, 0, 0, &pa));
  REQUIRE_OK(tether_resource_allocate(b, 1000, 0, 0, &pb));
  REQUIRE_OK(tether_resource_allocate(h, 1000, 0, 0, &ph));
  memset(pa, 0x5a, 1000);

  /* pool A's memory into pool B, host memory into a pool, pool memory into host */
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_deallocate(b, pa, 1000, 0, 0),
              "tether_resource_deallocate");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_deallocate(a, ph, 1000, 0, 0),
              "tether_resource_deallocate");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_deallocate(h, pb, 1000, 0, 0),
              "tether_resource_deallocate");
  /* the statistics adaptor forwards the refusal and counts nothing */
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_deallocate(s, pb, 1000, 0, 0),
              "tether_resource_deallocate");
  CHECK_OK(tether_resource_get_statistics(s, &st));
  CHECK(st.current_count == 0 && st.total_count == 0);
  /* wrong size or alignment for the host resource's own memory */
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_deallocate(h, ph, 999, 0, 0),
              "tether_resource_deallocate");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_deallocate(h, ph, 1000, 4096, 0),
              "tether_resource_deallocate");
  /* pointers a pool never handed out */
  CHECK_STATUS(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_deallocate(a, (char*)pa + 256, 256, 0, 0));

  /* Nothing was lost or corrupted: each block goes home. */
  {
    unsigned char* c = (unsigned char*)pa;
    int i, same = 1;
    for (i = 0; i < 1000; ++i) same &= c[i] == 0x5a;
    CHECK(same);
  }
  CHECK_OK(tether_resource_deallocate(a, pa, 1000, 0, 0));
  CHECK_OK(tether_resource_deallocate(b, pb, 1000, 0, 0));
  CHECK_OK(tether_resource_deallocate(h, ph, 1000, 0, 0));
  CHECK_OK(tether_resource_get_pool_info(a, &ia));
  CHECK_OK(tether_resource_get_pool_info(b, &ib));
  CHECK(ia.free_bytes == ia.pool_size && ib.free_bytes == ib.pool_size);
  CHECK_OK(tether_resource_trim(a));
  CHECK_OK(tether_resource_get_pool_info(a, &ia));
  CHECK(ia.pool_size == 0 && ia.chunk_count == 0);
  CHECK_OK(tether_resource_release(s));
  CHECK_OK(tether_resource_release(a));
  CHECK_OK(tether_resource_release(b));
  CHECK_OK(tether_resource_release(h));
  CHECK_LIVE(TETHER_OBJECT_ANY, g_base);
}

static void test_queries_of_the_wrong_kind(void) {
  tether_resource_t *h = NULL, *p = NULL;
  tether_statistics_t st = TETHER_STATISTICS_INIT;
  tether_pool_info_t pi = TETHER_POOL_INFO_INIT;
  tether_resource_t* up = (tether_resource_t*)0x1;
  REQUIRE_OK(tether_host_resource_create(&h));
  REQUIRE_OK(tether_pool_resource_create(h, NULL, &p));
  CHECK_ERROR(TETHER_ERROR_NOT_SUPPORTED, tether_resource_get_statistics(h, &st), "tether_resource_get_statistics");
  CHECK_ERROR(TETHER_ERROR_NOT_SUPPORTED, tether_resource_reset_peak_statistics(p),
              "tether_resource_reset_peak_statistics");
  CHECK_ERROR(TETHER_ERROR_NOT_SUPPORTED, tether_resource_get_pool_info(h, &pi), "tether_resource_get_pool_info");
  CHECK_OK(tether_resource_get_upstream(h, &up));
  CHECK(up == NULL);
  CHECK_OK(tether_resource_trim(h)); /* nothing held: a no-op */
  CHECK(strcmp(tether_resource_get_name(h), "host") == 0);
  CHECK(strcmp(tether_resource_get_name(p), "pool") == 0);
  CHECK_OK(tether_resource_release(p));
  CHECK_OK(tether_resource_release(h));
}

static void test_properties_and_equality(void) {
  tether_resource_t *h = NULL, *p = NULL, *s = NULL;
  tether_resource_properties_t props = TETHER_RESOURCE_PROPERTIES_INIT;
  /* A caller built against newer headers passes a larger struct. */
  struct {
    tether_resource_properties_t base;
    char future[64];
  } bigger;
  int eq = -1;
  REQUIRE_OK(tether_host_resource_create(&h));
  REQUIRE_OK(tether_pool_resource_create(h, NULL, &p));
  REQUIRE_OK(tether_statistics_adaptor_create(p, &s));
  CHECK_OK(tether_resource_get_properties(h, &props));
  CHECK(props.kind == TETHER_RESOURCE_KIND_HOST && props.device == TETHER_DEVICE_HOST);
  CHECK(props.host_accessible && !props.device_accessible);
  CHECK_OK(tether_resource_get_properties(p, &props));
  CHECK(props.kind == TETHER_RESOURCE_KIND_POOL && props.host_accessible);
  CHECK_OK(tether_resource_get_properties(s, &props));
  CHECK(props.kind == TETHER_RESOURCE_KIND_STATISTICS && props.host_accessible);
  memset(&bigger, 0x77, sizeof bigger);
  bigger.base.struct_size = (uint32_t)sizeof bigger;
  CHECK_OK(tether_resource_get_properties(h, &bigger.base));
  CHECK(bigger.base.kind == TETHER_RESOURCE_KIND_HOST);
  CHECK_OK(tether_resource_is_equal(p, p, &eq));
  CHECK(eq == 1);
  CHECK_OK(tether_resource_is_equal(p, h, &eq));
  CHECK(eq == 0);
  CHECK_OK(tether_resource_release(s));
  CHECK_OK(tether_resource_release(p));
  CHECK_OK(tether_resource_release(h));
}

static void test_options_init(void) {
  tether_pool_options_t o;
  tether_async_options_t ao;
  struct {
    tether_pool_options_t base;
    size_t future_field;
  } bigger;
  tether_resource_t *h = NULL, *p = NULL;
  tether_pool_info_t info = TETHER_POOL_INFO_INIT;

  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_pool_options_init(NULL, sizeof o), "tether_pool_options_init");
  CHECK_ERROR(TETHER_ERROR_VERSION_MISMATCH, tether_pool_options_init(&o, 0), "tether_pool_options_init");
  CHECK_STATUS(TETHER_ERROR_VERSION_MISMATCH, tether_pool_options_init(&o, 3));
  memset(&o, 0xff, sizeof o);
  CHECK_OK(tether_pool_options_init(&o, sizeof o));
  CHECK(o.struct_size == sizeof o && o.initial_size == 0 && o.maximum_size == 0 && o.growth_size == 0);
  memset(&bigger, 0xff, sizeof bigger);
  CHECK_OK(tether_pool_options_init(&bigger.base, sizeof bigger));
  CHECK(bigger.base.initial_size == 0 && bigger.base.maximum_size == 0 && bigger.base.growth_size == 0);

  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_async_options_init(NULL, sizeof ao), "tether_async_options_init");
  CHECK_ERROR(TETHER_ERROR_VERSION_MISMATCH, tether_async_options_init(&ao, 0), "tether_async_options_init");
  memset(&ao, 0xff, sizeof ao);
  CHECK_OK(tether_async_options_init(&ao, sizeof ao));
  CHECK(ao.struct_size == sizeof ao && ao.use_default_pool == 0 && ao.initial_pool_size == 0 &&
        ao.ipc_handle_type == TETHER_IPC_HANDLE_NONE);

  /* The options are honoured, and checked. */
  REQUIRE_OK(tether_host_resource_create(&h));
  CHECK_OK(tether_pool_options_init(&o, sizeof o));
  o.initial_size = (size_t)1 << 20;
  o.maximum_size = (size_t)2 << 20;
  REQUIRE_OK(tether_pool_resource_create(h, &o, &p));
  CHECK_OK(tether_resource_get_pool_info(p, &info));
  CHECK(info.pool_size >= o.initial_size && info.pool_size <= o.maximum_size);
  {
    void* big = (void*)0x1;
    void* fits = NULL;
    CHECK_ERROR(TETHER_ERROR_OUT_OF_MEMORY, tether_resource_allocate(p, (size_t)3 << 20, 0, 0, &big),
                "tether_resource_allocate");
    CHECK(big == NULL);
    CHECK_OK(tether_resource_allocate(p, (size_t)1 << 19, 0, 0, &fits));
    if (fits) CHECK_OK(tether_resource_deallocate(p, fits, (size_t)1 << 19, 0, 0));
  }
  CHECK_OK(tether_resource_release(p));
  o.initial_size = (size_t)4 << 20; /* more than the maximum */
  p = (tether_resource_t*)0x1;
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_pool_resource_create(h, &o, &p), "tether_pool_resource_create");
  CHECK(p == NULL);
  o.initial_size = SIZE_MAX / 2;
  o.maximum_size = 0;
  CHECK_ERROR(TETHER_ERROR_OUT_OF_MEMORY, tether_pool_resource_create(h, &o, &p), "tether_pool_resource_create");
  o.struct_size = 0; /* an options struct from no known layout */
  CHECK_ERROR(TETHER_ERROR_VERSION_MISMATCH, tether_pool_resource_create(h, &o, &p), "tether_pool_resource_create");
  CHECK_OK(tether_pool_options_init(&bigger.base, sizeof bigger));
  bigger.base.struct_size = (uint32_t)sizeof bigger; /* a newer caller */
  bigger.future_field = 12345;
  CHECK_OK(tether_pool_resource_create(h, &bigger.base, &p));
  CHECK_OK(tether_resource_release(p));
  CHECK_OK(tether_resource_release(h));
  CHECK_LIVE(TETHER_OBJECT_ANY, g_base);
}

static void test_versions(void) {
  char expected[32];
  CHECK(TETHER_VERSION_NUMBER == TETHER_VERSION_MAJOR * 10000 + TETHER_VERSION_MINOR * 100 + TETHER_VERSION_PATCH);
  CHECK(tether_version_number() == TETHER_VERSION_NUMBER);
  CHECK(tether_abi_version() == TETHER_ABI_VERSION);
  snprintf(expected, sizeof expected, "%d.%d.%d", TETHER_VERSION_MAJOR, TETHER_VERSION_MINOR, TETHER_VERSION_PATCH);
  CHECK(tether_version_string() != NULL && strcmp(tether_version_string(), expected) == 0);
}

static void test_status_names(void) {
  static const struct {
    tether_status_t status;
    const char* name;
  } names[] = {
      {TETHER_OK, "TETHER_OK"},
      {TETHER_ERROR_INVALID_ARGUMENT, "TETHER_ERROR_INVALID_ARGUMENT"},
      {TETHER_ERROR_INVALID_HANDLE, "TETHER_ERROR_INVALID_HANDLE"},
      {TETHER_ERROR_OUT_OF_MEMORY, "TETHER_ERROR_OUT_OF_MEMORY"},
      {TETHER_ERROR_NOT_SUPPORTED, "TETHER_ERROR_NOT_SUPPORTED"},
      {TETHER_ERROR_NO_DEVICE, "TETHER_ERROR_NO_DEVICE"},
      {TETHER_ERROR_CUDA, "TETHER_ERROR_CUDA"},
      {TETHER_ERROR_LOCKED, "TETHER_ERROR_LOCKED"},
      {TETHER_ERROR_VERSION_MISMATCH, "TETHER_ERROR_VERSION_MISMATCH"},
      {TETHER_ERROR_SHUTTING_DOWN, "TETHER_ERROR_SHUTTING_DOWN"},
      {TETHER_ERROR_INTERNAL, "TETHER_ERROR_INTERNAL"},
  };
  size_t i;
  /* The values are part of the ABI: never renumbered. */
  CHECK(TETHER_OK == 0 && TETHER_ERROR_INVALID_ARGUMENT == 1 && TETHER_ERROR_INVALID_HANDLE == 2 &&
        TETHER_ERROR_OUT_OF_MEMORY == 3 && TETHER_ERROR_NOT_SUPPORTED == 4 && TETHER_ERROR_NO_DEVICE == 5 &&
        TETHER_ERROR_CUDA == 6 && TETHER_ERROR_LOCKED == 7 && TETHER_ERROR_VERSION_MISMATCH == 8 &&
        TETHER_ERROR_SHUTTING_DOWN == 9 && TETHER_ERROR_INTERNAL == 10);
  for (i = 0; i < sizeof names / sizeof names[0]; ++i)
    CHECK(strcmp(tether_status_name(names[i].status), names[i].name) == 0);
  CHECK(strcmp(tether_status_name((tether_status_t)11), "TETHER_UNKNOWN_STATUS") == 0);
  CHECK(strcmp(tether_status_name((tether_status_t)-1), "TETHER_UNKNOWN_STATUS") == 0);
  CHECK(strcmp(tether_status_name((tether_status_t)100000), "TETHER_UNKNOWN_STATUS") == 0);
}

static void* other_thread_message(void* arg) {
  const char** out = (const char**)arg;
  /* A fresh thread has no message, whatever other threads did. */
  *out = strcmp(tether_last_error_message(), "") == 0 ? "empty" : "inherited";
  return NULL;
}

static void test_error_messages_are_per_thread(void) {
  tether_resource_t* h = NULL;
  void* p = NULL;
  const char* seen = NULL;
  pthread_t t;
  REQUIRE_OK(tether_host_resource_create(&h));
  CHECK_STATUS(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_allocate(h, 64, 48, 0, &p));
  CHECK(strstr(tether_last_error_message(), "48") != NULL); /* names the bad alignment */
  REQUIRE(pthread_create(&t, NULL, other_thread_message, &seen) == 0);
  pthread_join(t, NULL);
  CHECK(seen != NULL && strcmp(seen, "empty") == 0);
  CHECK(strstr(tether_last_error_message(), "48") != NULL);
  CHECK_OK(tether_resource_release(h));
}

int main(void) {
  g_base = tt_baseline();
  RUN(test_null_out_pointers);
  RUN(test_host_pool_stats_arguments);
  RUN(test_zero_size_buffer);
  RUN(test_buffer_ranges);
  RUN(test_wrong_resource_frees);
  RUN(test_queries_of_the_wrong_kind);
  RUN(test_properties_and_equality);
  RUN(test_options_init);
  RUN(test_versions);
  RUN(test_status_names);
  RUN(test_error_messages_are_per_thread);
  CHECK_LIVE(TETHER_OBJECT_ANY, g_base);
  return tt_finish("test_arguments");
}
