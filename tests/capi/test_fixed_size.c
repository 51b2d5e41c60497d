/*
 * The fixed-size resource over the C ABI (tether/fixed_size.h): defaults,
 * batches from upstream, requests larger than a block, checked frees, trim.
 */
#include "test_support.h"

static uint64_t current_count(tether_resource_t* stats) {
  tether_statistics_t s = TETHER_STATISTICS_INIT;
  if (tether_resource_get_statistics(stats, &s) != TETHER_OK) return UINT64_MAX;
  return s.current_count;
}

int main(void) {
  tether_fixed_size_options_t o;
  tether_fixed_size_info_t info = TETHER_FIXED_SIZE_INFO_INIT;
  tether_resource_t *host = NULL, *stats = NULL, *fixed = NULL;
  tether_resource_properties_t props = TETHER_RESOURCE_PROPERTIES_INIT;
  void* p[5];
  int i;

  CHECK_OK(tether_fixed_size_options_init(&o, sizeof o));
  CHECK(o.block_size == ((size_t)1 << 20) && o.blocks_to_preallocate == 128);
  REQUIRE_OK(tether_host_resource_create(&host));
  REQUIRE_OK(tether_statistics_adaptor_create(host, &stats));

  o.block_size = 0;
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_fixed_size_resource_create(stats, &o, &fixed), "block_size");
  o.block_size = 1000; /* rounded to 1024 */
  o.blocks_to_preallocate = 4;
  REQUIRE_OK(tether_fixed_size_resource_create(stats, &o, &fixed));
  CHECK(strcmp(tether_resource_get_name(fixed), "fixed_size") == 0);
  CHECK_OK(tether_resource_get_properties(fixed, &props));
  CHECK(props.kind == TETHER_RESOURCE_KIND_FIXED_SIZE && props.host_accessible);
  CHECK(current_count(stats) == 1);

  for (i = 0; i < 5; ++i) {
    REQUIRE_OK(tether_resource_allocate(fixed, 1024, 0, 0, &p[i]));
    memset(p[i], i, 1024);
  }
  CHECK(current_count(stats) == 2); /* the fifth block came with a second batch */
  CHECK_OK(tether_fixed_size_get_info(fixed, &info));
  CHECK(info.block_size == 1024 && info.block_alignment == 1024 && info.total_blocks == 8 && info.free_blocks == 3 &&
        info.chunk_count == 2);

  {
    void* none = &info;
    CHECK_ERROR(TETHER_ERROR_OUT_OF_MEMORY, tether_resource_allocate(fixed, 1025, 0, 0, &none), "1025");
    CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_allocate(fixed, 64, 2048, 0, &none), "alignment");
    CHECK(none == NULL);
  }
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_deallocate(fixed, p[1], 1000, 0, 0), "1024");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_deallocate(fixed, (char*)p[1] + 256, 100, 0, 0), "pointer");
  CHECK_ERROR(TETHER_ERROR_NOT_SUPPORTED, tether_fixed_size_get_info(host, &info), "not a fixed_size");
  for (i = 0; i < 5; ++i) CHECK_OK(tether_resource_deallocate(fixed, p[i], 1024, 0, 0));
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_deallocate(fixed, p[1], 1024, 0, 0), "pointer");

  CHECK_OK(tether_resource_trim(fixed));
  CHECK(current_count(stats) == 0);
  CHECK_OK(tether_resource_release(fixed));
  CHECK_OK(tether_resource_release(stats));
  CHECK_OK(tether_resource_release(host));
  return tt_finish("test_fixed_size");
}
