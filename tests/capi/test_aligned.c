/* The aligned adaptor through the C ABI. */
#include "test_support.h"

static void alignment_from_the_threshold_on(void) {
  tether_resource_t *host = NULL, *al = NULL;
  tether_aligned_options_t o, back;
  tether_resource_properties_t p = TETHER_RESOURCE_PROPERTIES_INIT;
  void *big = NULL, *small = NULL;
  REQUIRE_OK(tether_host_resource_create(&host));
  REQUIRE_OK(tether_aligned_options_init(&o, sizeof o));
  CHECK(o.alignment == TETHER_DEFAULT_ALIGNMENT && o.threshold == 0);
  o.alignment = 1 << 16;
  o.threshold = 4096;
  REQUIRE_OK(tether_aligned_adaptor_create(host, &o, &al));
  CHECK_OK(tether_resource_get_properties(al, &p));
  CHECK(p.kind == TETHER_RESOURCE_KIND_ALIGNED);
  CHECK(strcmp(tether_resource_get_name(al), "aligned") == 0);
  back.struct_size = sizeof back;
  CHECK_OK(tether_aligned_adaptor_get_options(al, &back));
  CHECK(back.alignment == 1 << 16 && back.threshold == 4096);
  CHECK_OK(tether_resource_allocate(al, 4096, 0, 0, &big));
  CHECK((uintptr_t)big % (1 << 16) == 0);
  CHECK_OK(tether_resource_allocate(al, 100, 0, 0, &small));
  CHECK((uintptr_t)small % 256 == 0);
  CHECK_STATUS(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_deallocate(host, big, 4096, 1 << 16, 0));
  CHECK_STATUS(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_deallocate(al, small, 100, 4096, 0));
  CHECK_OK(tether_resource_deallocate(al, big, 4096, 0, 0));
  CHECK_OK(tether_resource_deallocate(al, small, 100, 0, 0));
  CHECK_ERROR(TETHER_ERROR_NOT_SUPPORTED, tether_aligned_adaptor_get_options(host, &back), "not an aligned adaptor");
  tether_resource_release(al);
  tether_resource_release(host);
}

static void bad_alignment_is_named(void) {
  tether_resource_t *host = NULL, *al = NULL;
  tether_aligned_options_t o = TETHER_ALIGNED_OPTIONS_INIT;
  REQUIRE_OK(tether_host_resource_create(&host));
  o.alignment = 3;
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_aligned_adaptor_create(host, &o, &al), "alignment 3");
  CHECK(al == NULL);
  o.alignment = 0;
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_aligned_adaptor_create(host, &o, &al), "alignment");
  REQUIRE_OK(tether_aligned_adaptor_create(host, NULL, &al)); /* defaults */
  tether_resource_release(al);
  tether_resource_release(host);
}

int main(void) {
  RUN(alignment_from_the_threshold_on);
  RUN(bad_alignment_is_named);
  return tt_finish("test_aligned");
}
