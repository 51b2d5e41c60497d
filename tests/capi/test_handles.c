/*
 * Checked handles (DESIGN.md 2.5): a released, stale, forged or wrong-type
 * handle is TETHER_ERROR_INVALID_HANDLE from every function family - never a
 * crash, never a touch of another object. retain/release report it without
 * touching the thread's error message.
 */
#include "test_support.h"

static size_t g_base;

/* A handle that was live once and has been released. */
static tether_resource_t* stale_resource(void) {
  tether_resource_t* h = NULL;
  REQUIRE_OK(tether_host_resource_create(&h));
  REQUIRE_OK(tether_resource_release(h));
  return h;
}

static tether_buffer_t* stale_buffer(void) {
  tether_buffer_t* b = NULL;
  REQUIRE_OK(tether_buffer_create(NULL, TETHER_DEVICE_HOST, 64, 0, &b));
  REQUIRE_OK(tether_buffer_release(b));
  return b;
}

/* Every resource-taking function rejects `bad` with INVALID_HANDLE. */
static void check_resource_rejected(tether_resource_t* bad) {
  tether_resource_t *live = NULL, *out = (tether_resource_t*)0x1, *prev = NULL;
  tether_buffer_t* bout = NULL;
  tether_resource_properties_t props = TETHER_RESOURCE_PROPERTIES_INIT;
  tether_statistics_t st = TETHER_STATISTICS_INIT;
  tether_pool_info_t pi = TETHER_POOL_INFO_INIT;
  void* p = (void*)0x1;
  int eq = 7;
  char word[16];
  const size_t before = tether_debug_live_objects(TETHER_OBJECT_ANY);
  REQUIRE_OK(tether_host_resource_create(&live));

  CHECK_STATUS(TETHER_ERROR_INVALID_HANDLE, tether_resource_retain(bad));
  CHECK_STATUS(TETHER_ERROR_INVALID_HANDLE, tether_resource_release(bad));
  CHECK_ERROR(TETHER_ERROR_INVALID_HANDLE, tether_resource_allocate(bad, 64, 0, 0, &p),
              "tether_resource_allocate");
  CHECK(p == NULL); /* out-pointers are cleared on failure */
  CHECK_ERROR(TETHER_ERROR_INVALID_HANDLE, tether_resource_deallocate(bad, word, sizeof word, 0, 0),
              "tether_resource_deallocate");
  CHECK_ERROR(TETHER_ERROR_INVALID_HANDLE, tether_resource_get_properties(bad, &props),
              "tether_resource_get_properties");
  CHECK(strcmp(tether_resource_get_name(bad), "") == 0);
  CHECK_ERROR(TETHER_ERROR_INVALID_HANDLE, tether_resource_get_upstream(bad, &out),
              "tether_resource_get_upstream");
  CHECK_ERROR(TETHER_ERROR_INVALID_HANDLE, tether_resource_is_equal(bad, live, &eq), "tether_resource_is_equal");
  CHECK_ERROR(TETHER_ERROR_INVALID_HANDLE, tether_resource_is_equal(live, bad, &eq), "tether_resource_is_equal");
  CHECK_ERROR(TETHER_ERROR_INVALID_HANDLE, tether_resource_get_statistics(bad, &st),
              "tether_resource_get_statistics");
  CHECK_ERROR(TETHER_ERROR_INVALID_HANDLE, tether_resource_reset_peak_statistics(bad),
              "tether_resource_reset_peak_statistics");
  CHECK_ERROR(TETHER_ERROR_INVALID_HANDLE, tether_resource_get_pool_info(bad, &pi),
              "tether_resource_get_pool_info");
  CHECK_ERROR(TETHER_ERROR_INVALID_HANDLE, tether_resource_trim(bad), "tether_resource_trim");
  out = (tether_resource_t*)0x1;
  CHECK_ERROR(TETHER_ERROR_INVALID_HANDLE, tether_pool_resource_create(bad, NULL, &out),
              "tether_pool_resource_create");
  CHECK(out == NULL);
  CHECK_ERROR(TETHER_ERROR_INVALID_HANDLE, tether_statistics_adaptor_create(bad, &out),
              "tether_statistics_adaptor_create");
  CHECK_ERROR(TETHER_ERROR_INVALID_HANDLE, tether_buffer_create(bad, TETHER_DEVICE_HOST, 64, 0, &bout),
              "tether_buffer_create");
  CHECK(bout == NULL);
  CHECK_ERROR(TETHER_ERROR_INVALID_HANDLE, tether_current_resource_set(TETHER_DEVICE_HOST, bad, &prev),
              "tether_current_resource_set");
  CHECK(prev == NULL); /* the slot is unchanged: nothing handed back */

  CHECK_OK(tether_resource_release(live));
  CHECK_LIVE(TETHER_OBJECT_ANY, before); /* failed calls created or kept nothing */
}

/* Every buffer-taking function rejects `bad` with INVALID_HANDLE. */
static void check_buffer_rejected(tether_buffer_t* bad) {
  tether_buffer_t* live = NULL;
  tether_buffer_info_t info = TETHER_BUFFER_INFO_INIT;
  tether_resource_t* r = (tether_resource_t*)0x1;
  void* p = (void*)0x1;
  size_t n = 123;
  char bytes[16] = {0};
  const size_t before = tether_debug_live_objects(TETHER_OBJECT_ANY);
  REQUIRE_OK(tether_buffer_create(NULL, TETHER_DEVICE_HOST, sizeof bytes, 0, &live));

  CHECK_STATUS(TETHER_ERROR_INVALID_HANDLE, tether_buffer_retain(bad));
  CHECK_STATUS(TETHER_ERROR_INVALID_HANDLE, tether_buffer_release(bad));
  CHECK_ERROR(TETHER_ERROR_INVALID_HANDLE, tether_buffer_get_info(bad, &info), "tether_buffer_get_info");
  CHECK_ERROR(TETHER_ERROR_INVALID_HANDLE, tether_buffer_get_ptr(bad, &p), "tether_buffer_get_ptr");
  CHECK_ERROR(TETHER_ERROR_INVALID_HANDLE, tether_buffer_get_size(bad, &n), "tether_buffer_get_size");
  CHECK_ERROR(TETHER_ERROR_INVALID_HANDLE, tether_buffer_get_resource(bad, &r), "tether_buffer_get_resource");
  CHECK_ERROR(TETHER_ERROR_INVALID_HANDLE, tether_buffer_set_stream(bad, 0), "tether_buffer_set_stream");
  CHECK_ERROR(TETHER_ERROR_INVALID_HANDLE, tether_buffer_copy_from_host(bad, 0, bytes, sizeof bytes),
              "tether_buffer_copy_from_host");
  CHECK_ERROR(TETHER_ERROR_INVALID_HANDLE, tether_buffer_copy_to_host(bad, 0, bytes, sizeof bytes),
              "tether_buffer_copy_to_host");
  CHECK_ERROR(TETHER_ERROR_INVALID_HANDLE, tether_buffer_copy(bad, 0, live, 0, 8), "tether_buffer_copy");
  CHECK_ERROR(TETHER_ERROR_INVALID_HANDLE, tether_buffer_copy(live, 0, bad, 0, 8), "tether_buffer_copy");
  CHECK_ERROR(TETHER_ERROR_INVALID_HANDLE, tether_buffer_resize(bad, 128), "tether_buffer_resize");

  CHECK_OK(tether_buffer_release(live));
  CHECK_LIVE(TETHER_OBJECT_ANY, before);
}

static void test_stale_resource_everywhere(void) { check_resource_rejected(stale_resource()); }

static void test_stale_buffer_everywhere(void) { check_buffer_rejected(stale_buffer()); }

static void test_null_handles(void) {
  tether_resource_t* out = NULL;
  CHECK_STATUS(TETHER_ERROR_INVALID_HANDLE, tether_resource_retain(NULL));
  CHECK_STATUS(TETHER_OK, tether_resource_release(NULL));
  CHECK_STATUS(TETHER_ERROR_INVALID_HANDLE, tether_buffer_retain(NULL));
  CHECK_STATUS(TETHER_OK, tether_buffer_release(NULL));
  CHECK_ERROR(TETHER_ERROR_INVALID_HANDLE, tether_pool_resource_create(NULL, NULL, &out),
              "tether_pool_resource_create");
  CHECK_ERROR(TETHER_ERROR_INVALID_HANDLE, tether_statistics_adaptor_create(NULL, &out),
              "tether_statistics_adaptor_create");
  CHECK_ERROR(TETHER_ERROR_INVALID_HANDLE, tether_buffer_get_ptr(NULL, (void**)&out), "tether_buffer_get_ptr");
  CHECK_ERROR(TETHER_ERROR_INVALID_HANDLE, tether_resource_trim(NULL), "tether_resource_trim");
}

static void test_forged_resource_handles(void) {
  int on_stack = 0;
  tether_resource_t* live = NULL;
  tether_buffer_t* buf = NULL;
  REQUIRE_OK(tether_host_resource_create(&live));
  REQUIRE_OK(tether_buffer_create(live, TETHER_DEVICE_HOST, 32, 0, &buf));
  check_resource_rejected((tether_resource_t*)(uintptr_t)0x1234);
  check_resource_rejected((tether_resource_t*)(uintptr_t)1);
  check_resource_rejected((tether_resource_t*)UINTPTR_MAX);
  check_resource_rejected((tether_resource_t*)(uintptr_t)0xdeadbeef00000001ull);
  check_resource_rejected((tether_resource_t*)&on_stack);
  /* A live handle of the wrong type. */
  check_resource_rejected((tether_resource_t*)buf);
  /* A live resource handle with its generation changed. */
  check_resource_rejected((tether_resource_t*)((uintptr_t)live + ((uintptr_t)1 << 32)));
  /* None of that disturbed the real objects. */
  CHECK(tt_resource_alive(live));
  CHECK(tt_buffer_alive(buf));
  CHECK_OK(tether_buffer_release(buf));
  CHECK_OK(tether_resource_release(live));
  CHECK_LIVE(TETHER_OBJECT_ANY, g_base);
}

static void test_forged_buffer_handles(void) {
  tether_resource_t* live = NULL;
  REQUIRE_OK(tether_host_resource_create(&live));
  check_buffer_rejected((tether_buffer_t*)(uintptr_t)0x1234);
  check_buffer_rejected((tether_buffer_t*)UINTPTR_MAX);
  check_buffer_rejected((tether_buffer_t*)live); /* a resource handle passed as a buffer */
  CHECK(tt_resource_alive(live));
  CHECK_OK(tether_resource_release(live));
  CHECK_LIVE(TETHER_OBJECT_ANY, g_base);
}

/* A stale handle must stay stale when its slot is reused by a new object, and
 * releasing it must not drop the new object's reference. */
static void test_stale_handle_after_slot_reuse(void) {
  tether_resource_t* handles[64];
  tether_resource_t* old = stale_resource();
  int i, alive = 1;
  for (i = 0; i < 64; ++i) REQUIRE_OK(tether_host_resource_create(&handles[i]));
  for (i = 0; i < 64; ++i) {
    CHECK(handles[i] != old); /* a new handle never equals a released one */
    CHECK_STATUS(TETHER_ERROR_INVALID_HANDLE, tether_resource_release(old));
  }
  for (i = 0; i < 64; ++i) alive &= tt_resource_alive(handles[i]);
  CHECK(alive);
  for (i = 0; i < 64; ++i) CHECK_OK(tether_resource_release(handles[i]));
  CHECK_LIVE(TETHER_OBJECT_ANY, g_base);
}

static void test_double_release(void) {
  tether_resource_t* h = NULL;
  tether_buffer_t* b = NULL;
  REQUIRE_OK(tether_host_resource_create(&h));
  REQUIRE_OK(tether_buffer_create(h, TETHER_DEVICE_HOST, 16, 0, &b));
  CHECK_OK(tether_buffer_release(b));
  CHECK_STATUS(TETHER_ERROR_INVALID_HANDLE, tether_buffer_release(b));
  CHECK_OK(tether_resource_release(h));
  CHECK_STATUS(TETHER_ERROR_INVALID_HANDLE, tether_resource_release(h));
  CHECK_STATUS(TETHER_ERROR_INVALID_HANDLE, tether_resource_retain(h));
  CHECK_LIVE(TETHER_OBJECT_ANY, g_base);
}

/* retain/release and getters never touch the error message; successful calls leave it alone. */
static void test_refcounting_leaves_error_state_alone(void) {
  tether_resource_t* stale = stale_resource();
  tether_resource_t* live = NULL;
  void* p = NULL;
  char saved[512];
  REQUIRE_OK(tether_host_resource_create(&live));
  CHECK_STATUS(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_allocate(live, 64, 3, 0, &p));
  snprintf(saved, sizeof saved, "%s", tether_last_error_message());
  CHECK(saved[0] != '\0');
  CHECK_STATUS(TETHER_ERROR_INVALID_HANDLE, tether_resource_retain(stale));
  CHECK_STATUS(TETHER_ERROR_INVALID_HANDLE, tether_resource_release(stale));
  CHECK_STATUS(TETHER_ERROR_INVALID_HANDLE, tether_buffer_release((tether_buffer_t*)stale));
  CHECK(strcmp(tether_resource_get_name(stale), "") == 0);
  CHECK_OK(tether_resource_retain(live));
  CHECK_OK(tether_resource_release(live));
  CHECK_OK(tether_resource_allocate(live, 64, 0, 0, &p));
  CHECK_OK(tether_resource_deallocate(live, p, 64, 0, 0));
  CHECK(strcmp(tether_last_error_message(), saved) == 0);
  tether_clear_last_error();
  CHECK(strcmp(tether_last_error_message(), "") == 0);
  CHECK_OK(tether_resource_release(live));
}

int main(void) {
  g_base = tt_baseline();
  RUN(test_stale_resource_everywhere);
  RUN(test_stale_buffer_everywhere);
  RUN(test_null_handles);
  RUN(test_forged_resource_handles);
  RUN(test_forged_buffer_handles);
  RUN(test_stale_handle_after_slot_reuse);
  RUN(test_double_release);
  RUN(test_refcounting_leaves_error_state_alone);
  CHECK_LIVE(TETHER_OBJECT_ANY, g_base);
  return tt_finish("test_handles");
}
