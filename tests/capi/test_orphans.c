/*
 * A resource whose last handle is released while raw allocations are still
 * outstanding is kept, with its memory, and reported (DESIGN.md 2.4) - never
 * destroyed under the allocations. A program of its own: the orphan it makes
 * stays for the life of the process.
 */
#include "test_support.h"

int main(void) {
  tether_resource_t *h = NULL, *p = NULL, *p2 = NULL;
  tether_buffer_t* b = NULL;
  void* raw = NULL;
  size_t base_orphans, base_live;
  uint64_t base_bytes;
  unsigned char bytes[4096];

  base_live = tt_baseline();
  base_orphans = tether_debug_orphaned_resources();
  base_bytes = tether_debug_orphaned_bytes();

  /* Raw allocation outstanding when the last handle goes: orphaned. */
  REQUIRE_OK(tether_host_resource_create(&h));
  REQUIRE_OK(tether_pool_resource_create(h, NULL, &p));
  CHECK_OK(tether_resource_release(h));
  REQUIRE_OK(tether_resource_allocate(p, sizeof bytes, 0, 0, &raw));
  CHECK_OK(tether_resource_release(p));
  CHECK(!tt_resource_alive(p)); /* the handle is stale even though the resource lives on */
  CHECK(tether_debug_orphaned_resources() == base_orphans + 1);
  CHECK(tether_debug_orphaned_bytes() >= base_bytes + sizeof bytes);
  memset(raw, 0x42, sizeof bytes); /* the memory is still valid: it was not freed behind us */
  CHECK_STATUS(TETHER_ERROR_INVALID_HANDLE, tether_resource_deallocate(p, raw, sizeof bytes, 0, 0));

  /* A buffer is not a raw allocation: it keeps its resource's handle alive,
   * so releasing the caller's handle orphans nothing. */
  REQUIRE_OK(tether_host_resource_create(&p2));
  REQUIRE_OK(tether_buffer_create(p2, TETHER_DEVICE_HOST, sizeof bytes, 0, &b));
  CHECK_OK(tether_resource_release(p2));
  CHECK(tt_resource_alive(p2));
  CHECK(tether_debug_orphaned_resources() == base_orphans + 1);
  CHECK_OK(tether_buffer_copy_from_host(b, 0, bytes, sizeof bytes));
  CHECK_OK(tether_buffer_release(b));
  CHECK(!tt_resource_alive(p2));
  CHECK(tether_debug_orphaned_resources() == base_orphans + 1);

  /* Resources without outstanding memory are not orphans. */
  REQUIRE_OK(tether_host_resource_create(&h));
  CHECK_OK(tether_resource_allocate(h, 64, 0, 0, &raw));
  CHECK_OK(tether_resource_deallocate(h, raw, 64, 0, 0));
  CHECK_OK(tether_resource_release(h));
  CHECK(tether_debug_orphaned_resources() == base_orphans + 1);

  /* Orphans hold no handles. */
  CHECK_LIVE(TETHER_OBJECT_ANY, base_live);
  return tt_finish("test_orphans");
}
