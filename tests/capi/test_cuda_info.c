/*
 * The CUDA queries `tether info` prints: tether_cuda_get_device_name (the text
 * out-parameter rule of tracking.h) and tether_cuda_get_memory_info. Without a
 * device every query fails cleanly (NO_DEVICE, or NOT_SUPPORTED in a build
 * without CUDA headers) and leaves the outputs empty; bad arguments are named
 * whether or not there is a device.
 */
#include <string.h>

#include "test_support.h"

static void test_bad_arguments_are_named(void) {
  char name[8];
  size_t needed = 99;
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_cuda_get_device_name(0, name, sizeof name, NULL), "out_needed");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_cuda_get_device_name(0, NULL, 8, &needed), "buffer");
  CHECK(needed == 0);
  size_t free_bytes = 1, total = 1;
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_cuda_get_memory_info(0, NULL, &total), "out_free");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_cuda_get_memory_info(0, &free_bytes, NULL), "out_total");
}

static void test_without_a_device_the_outputs_stay_empty(void) {
  if (tt_have_gpu()) return;
  char name[32] = "untouched";
  size_t needed = 99;
  tether_status_t s = tether_cuda_get_device_name(0, name, sizeof name, &needed);
  CHECK(s == TETHER_ERROR_NO_DEVICE || s == TETHER_ERROR_NOT_SUPPORTED);
  CHECK(name[0] == '\0');
  CHECK(needed == 0);
  printf("  (no GPU: the device name checked for its error only)\n");
}

static void test_the_name_follows_the_text_rule(void) {
  if (!tt_have_gpu()) return;
  size_t needed = 0;
  REQUIRE_OK(tether_cuda_get_device_name(0, NULL, 0, &needed));
  CHECK(needed > 1 && needed <= 256);
  char full[256];
  size_t again = 0;
  REQUIRE_OK(tether_cuda_get_device_name(0, full, sizeof full, &again));
  CHECK(again == needed);
  CHECK(strlen(full) + 1 == needed);
  printf("  device 0: %s\n", full);
  /* Cut short: NUL-terminated prefix, the full size still reported. */
  char cut[4];
  REQUIRE_OK(tether_cuda_get_device_name(0, cut, sizeof cut, &again));
  CHECK(again == needed);
  CHECK(strlen(cut) == 3 && strncmp(cut, full, 3) == 0);
  /* The current device names the same device as its id here (device 0 is current by default). */
  char current[256];
  REQUIRE_OK(tether_cuda_get_device_name(TETHER_DEVICE_CURRENT, current, sizeof current, &again));
  CHECK(strcmp(current, full) == 0);
  int count = 0;
  REQUIRE_OK(tether_cuda_get_device_count(&count));
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_cuda_get_device_name(count, full, sizeof full, &again), "device");
}

int main(void) {
  RUN(test_bad_arguments_are_named);
  RUN(test_without_a_device_the_outputs_stay_empty);
  RUN(test_the_name_follows_the_text_rule);
  return tt_finish("test_cuda_info");
}
