/* The statistics adaptor's counter stack through the C ABI. */
#include "test_support.h"

static void push_pop_fold(void) {
  tether_resource_t *host = NULL, *st = NULL;
  tether_statistics_t s = TETHER_STATISTICS_INIT, popped = TETHER_STATISTICS_INIT;
  void *a = NULL, *b = NULL;
  REQUIRE_OK(tether_host_resource_create(&host));
  REQUIRE_OK(tether_statistics_adaptor_create(host, &st));
  REQUIRE_OK(tether_resource_allocate(st, 1000, 0, 0, &a));
  CHECK_OK(tether_statistics_adaptor_push_counters(st));
  CHECK_OK(tether_resource_get_statistics(st, &s));
  CHECK(s.current_bytes == 0 && s.total_bytes == 0);
  REQUIRE_OK(tether_resource_allocate(st, 500, 0, 0, &b));
  CHECK_OK(tether_statistics_adaptor_pop_counters(st, &popped));
  CHECK(popped.struct_size == sizeof popped);
  CHECK(popped.current_bytes == 500 && popped.peak_bytes == 500 && popped.total_bytes == 500);
  CHECK(popped.total_count == 1);
  CHECK_OK(tether_resource_get_statistics(st, &s));
  CHECK(s.current_bytes == 1500 && s.peak_bytes == 1500 && s.total_bytes == 1500 && s.total_count == 2);
  /* Nothing left to pop: refused, nothing changed. */
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_statistics_adaptor_pop_counters(st, &popped), "no counter set");
  CHECK_OK(tether_statistics_adaptor_push_counters(st));
  CHECK_OK(tether_statistics_adaptor_pop_counters(st, NULL)); /* discarding the figures */
  CHECK_ERROR(TETHER_ERROR_NOT_SUPPORTED, tether_statistics_adaptor_push_counters(host), "not a statistics adaptor");
  CHECK_ERROR(TETHER_ERROR_NOT_SUPPORTED, tether_statistics_adaptor_pop_counters(host, &popped), "statistics");
  CHECK_ERROR(TETHER_ERROR_INVALID_HANDLE, tether_statistics_adaptor_push_counters(NULL), "NULL");
  popped.struct_size = 4;
  CHECK_ERROR(TETHER_ERROR_VERSION_MISMATCH, tether_statistics_adaptor_pop_counters(st, &popped), "struct_size");
  CHECK_OK(tether_resource_deallocate(st, a, 1000, 0, 0));
  CHECK_OK(tether_resource_deallocate(st, b, 500, 0, 0));
  tether_resource_release(st);
  tether_resource_release(host);
}

int main(void) {
  RUN(push_pop_fold);
  return tt_finish("test_statistics_stack");
}
