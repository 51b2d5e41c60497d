/*
 * test_record_stream.c - tether_buffer_record_stream at the C ABI: bad handles
 * are errors with a message (never a crash), host memory has no streams to
 * wait for (recording is a no-op and the free happens at once), and recording
 * combines with resize and pins. The waiting itself is tested in the core
 * (fake events: tests/core/test_deferred_frees.cpp) and on a GPU
 * (tests/core/cuda/test_cuda_stream_order.cpp, tests/python).
 */
#include "test_support.h"

static uint64_t current_bytes(tether_resource_t* stats) {
  tether_statistics_t s = TETHER_STATISTICS_INIT;
  REQUIRE_OK(tether_resource_get_statistics(stats, &s));
  return s.current_bytes;
}

static void test_bad_handles(void) {
  size_t base = tt_baseline();
  CHECK_ERROR(TETHER_ERROR_INVALID_HANDLE, tether_buffer_record_stream(NULL, 0), "NULL");
  tether_resource_t* host = NULL;
  REQUIRE_OK(tether_host_resource_create(&host));
  tether_buffer_t* b = NULL;
  REQUIRE_OK(tether_buffer_create(host, 0, 64, 0, &b));
  CHECK_OK(tether_buffer_release(b));
  CHECK_ERROR(TETHER_ERROR_INVALID_HANDLE, tether_buffer_record_stream(b, 1), "not a live buffer");
  /* A resource handle is not a buffer handle. */
  CHECK_ERROR(TETHER_ERROR_INVALID_HANDLE, tether_buffer_record_stream((tether_buffer_t*)host, 1),
              "not a live buffer");
  CHECK_OK(tether_resource_release(host));
  CHECK_LIVE(TETHER_OBJECT_ANY, base);
}

/* Host memory: recording any stream, again and again, changes nothing; the
 * free is immediate and the pool hands the same block out again. */
static void test_host_memory_frees_at_once(void) {
  size_t base = tt_baseline();
  tether_resource_t *host = NULL, *pool = NULL, *stats = NULL;
  REQUIRE_OK(tether_host_resource_create(&host));
  REQUIRE_OK(tether_pool_resource_create(host, NULL, &pool));
  REQUIRE_OK(tether_statistics_adaptor_create(pool, &stats));
  tether_buffer_t* b = NULL;
  REQUIRE_OK(tether_buffer_create(stats, 0, 4096, 0, &b));
  void* p = NULL;
  REQUIRE_OK(tether_buffer_get_ptr(b, &p));
  for (tether_stream_t s = 0; s < 8; ++s) CHECK_OK(tether_buffer_record_stream(b, s));
  CHECK_OK(tether_buffer_record_stream(b, 3));
  CHECK(current_bytes(stats) == 4096);
  CHECK_OK(tether_buffer_release(b));
  CHECK(current_bytes(stats) == 0);
  tether_buffer_t* c = NULL;
  REQUIRE_OK(tether_buffer_create(stats, 0, 4096, 0, &c));
  void* q = NULL;
  REQUIRE_OK(tether_buffer_get_ptr(c, &q));
  CHECK(q == p);
  CHECK_OK(tether_buffer_release(c));
  CHECK_OK(tether_resource_release(stats));
  CHECK_OK(tether_resource_release(pool));
  CHECK_OK(tether_resource_release(host));
  CHECK_LIVE(TETHER_OBJECT_ANY, base);
}

/* Record, then resize and pin: the buffer stays usable, its contents move,
 * and releasing it (pinned or not) frees everything. */
static void test_record_then_resize_and_pin(void) {
  size_t base = tt_baseline();
  tether_resource_t *host = NULL, *stats = NULL;
  REQUIRE_OK(tether_host_resource_create(&host));
  REQUIRE_OK(tether_statistics_adaptor_create(host, &stats));
  tether_buffer_t* b = NULL;
  REQUIRE_OK(tether_buffer_create(stats, 0, 16, 0, &b));
  const char text[16] = "recorded stream";
  CHECK_OK(tether_buffer_copy_from_host(b, 0, text, sizeof text));
  CHECK_OK(tether_buffer_record_stream(b, 5));
  CHECK_OK(tether_buffer_resize(b, 64));
  CHECK(current_bytes(stats) == 64);
  char back[16] = {0};
  CHECK_OK(tether_buffer_copy_to_host(b, 0, back, sizeof back));
  CHECK(memcmp(back, text, sizeof text) == 0);
  CHECK_OK(tether_buffer_record_stream(b, 6));
  CHECK_OK(tether_buffer_pin(b));
  CHECK_OK(tether_buffer_release(b));  /* the pin keeps it */
  CHECK(current_bytes(stats) == 64);
  CHECK_OK(tether_buffer_record_stream(b, 7));  /* still live through the pin */
  CHECK_OK(tether_buffer_unpin(b));    /* the last reference: freed */
  CHECK(current_bytes(stats) == 0);
  CHECK_OK(tether_resource_release(stats));
  CHECK_OK(tether_resource_release(host));
  CHECK_LIVE(TETHER_OBJECT_ANY, base);
}

int main(void) {
  RUN(test_bad_handles);
  RUN(test_host_memory_frees_at_once);
  RUN(test_record_then_resize_and_pin);
  return tt_finish("test_record_stream");
}
