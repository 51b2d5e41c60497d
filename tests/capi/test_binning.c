/*
 * The binning resource over the C ABI (tether/binning.h): bins as a range and
 * one by one, routing to bins and the fallback, the retained bin resources
 * and fallback, checked frees.
 */
#include "test_support.h"

static uint64_t current_bytes(tether_resource_t* stats) {
  tether_statistics_t s = TETHER_STATISTICS_INIT;
  if (tether_resource_get_statistics(stats, &s) != TETHER_OK) return UINT64_MAX;
  return s.current_bytes;
}

int main(void) {
  tether_binning_options_t o;
  tether_binning_info_t info = TETHER_BINNING_INFO_INIT;
  tether_resource_t *host = NULL, *fallback = NULL, *bin = NULL, *binning = NULL, *pool = NULL;
  tether_resource_properties_t props = TETHER_RESOURCE_PROPERTIES_INIT;
  size_t sizes[8], count = 0;
  void *small = NULL, *mid = NULL, *big = NULL;

  CHECK_OK(tether_binning_options_init(&o, sizeof o));
  CHECK(o.min_size_exponent == 0 && o.max_size_exponent == 0 && o.fallback == NULL);
  REQUIRE_OK(tether_host_resource_create(&host));
  REQUIRE_OK(tether_statistics_adaptor_create(host, &fallback));
  REQUIRE_OK(tether_pool_resource_create(host, NULL, &pool));
  REQUIRE_OK(tether_statistics_adaptor_create(pool, &bin));

  o.min_size_exponent = 12;
  o.max_size_exponent = 10;
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_binning_resource_create(host, &o, &binning), "exponent");
  o.min_size_exponent = 8; /* 256, 512, 1024 */
  o.max_size_exponent = 10;
  o.blocks_to_preallocate = 4;
  o.fallback = fallback;
  REQUIRE_OK(tether_binning_resource_create(host, &o, &binning));
  CHECK(strcmp(tether_resource_get_name(binning), "binning") == 0);
  CHECK_OK(tether_resource_get_properties(binning, &props));
  CHECK(props.kind == TETHER_RESOURCE_KIND_BINNING && props.host_accessible);

  CHECK_OK(tether_binning_resource_add_bin(binning, 64 * 1024, bin));
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_binning_resource_add_bin(binning, 512, NULL), "already");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_binning_resource_add_bin(binning, 0, NULL), "size");
  CHECK_ERROR(TETHER_ERROR_NOT_SUPPORTED, tether_binning_resource_add_bin(host, 512, NULL), "not a binning");
  CHECK_OK(tether_binning_get_bin_sizes(binning, sizes, 8, &count));
  CHECK(count == 4 && sizes[0] == 256 && sizes[1] == 512 && sizes[2] == 1024 && sizes[3] == 64 * 1024);
  CHECK_OK(tether_binning_get_bin_sizes(binning, NULL, 0, &count));
  CHECK(count == 4);
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_binning_get_bin_sizes(binning, NULL, 3, &count), "sizes");
  CHECK_OK(tether_binning_get_info(binning, &info));
  CHECK(info.bin_count == 4 && info.smallest_bin == 256 && info.largest_bin == 64 * 1024);

  /* The binning resource retains the fallback and the bin: release ours first. */
  CHECK_OK(tether_resource_retain(fallback));
  CHECK_OK(tether_resource_retain(bin));
  REQUIRE_OK(tether_resource_allocate(binning, 300, 0, 0, &small));      /* 512 bin */
  REQUIRE_OK(tether_resource_allocate(binning, 5000, 0, 0, &mid));       /* the given bin */
  REQUIRE_OK(tether_resource_allocate(binning, 100000, 0, 0, &big));     /* the fallback */
  CHECK(current_bytes(bin) == 5000 && current_bytes(fallback) == 100000);
  memset(small, 1, 300);
  memset(mid, 2, 5000);
  memset(big, 3, 100000);
  /* The bin's own callers may not free what the binning resource took from it. */
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_deallocate(bin, mid, 5000, 0, 0), "pointer");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_deallocate(binning, mid, 5001, 0, 0), "5000");
  CHECK_OK(tether_resource_deallocate(binning, small, 300, 0, 0));
  CHECK_OK(tether_resource_deallocate(binning, mid, 5000, 0, 0));
  CHECK_OK(tether_resource_deallocate(binning, big, 100000, 0, 0));
  CHECK(current_bytes(bin) == 0 && current_bytes(fallback) == 0);
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_deallocate(binning, big, 100000, 0, 0), "pointer");
  CHECK_OK(tether_resource_release(fallback));
  CHECK_OK(tether_resource_release(bin));
  CHECK_OK(tether_resource_release(fallback)); /* ours: the binning resource still holds one */
  CHECK_OK(tether_resource_release(bin));
  REQUIRE_OK(tether_resource_allocate(binning, 100000, 0, 0, &big));
  CHECK_OK(tether_resource_deallocate(binning, big, 100000, 0, 0));

  CHECK_OK(tether_resource_release(binning));
  CHECK_OK(tether_resource_release(pool));
  CHECK_OK(tether_resource_release(host));
  return tt_finish("test_binning");
}
