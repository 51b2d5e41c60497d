/* The prefetch adaptor through the C ABI: its creation rule everywhere, prefetching on a GPU. */
#include "test_support.h"

static void refuses_memory_that_is_not_managed(void) {
  tether_resource_t *host = NULL, *pf = NULL;
  REQUIRE_OK(tether_host_resource_create(&host));
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_prefetch_adaptor_create(host, &pf), "managed memory");
  CHECK(pf == NULL);
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_prefetch_adaptor_create(host, NULL), "out");
  CHECK_ERROR(TETHER_ERROR_INVALID_HANDLE, tether_prefetch_adaptor_create(NULL, &pf), "NULL");
  tether_resource_release(host);
}

/* GPU: allocations over managed memory are prefetched on their stream and usable. */
static void prefetches_managed_memory(void) {
  tether_resource_t *managed = NULL, *pf = NULL, *cuda = NULL;
  tether_resource_properties_t p = TETHER_RESOURCE_PROPERTIES_INIT;
  unsigned char* m = NULL;
  int i, ok = 1;
  if (!tt_have_gpu()) {
    printf("  (skipped: no CUDA device)\n");
    return;
  }
  REQUIRE_OK(tether_managed_resource_create(0, &managed));
  REQUIRE_OK(tether_prefetch_adaptor_create(managed, &pf));
  CHECK_OK(tether_resource_get_properties(pf, &p));
  CHECK(p.kind == TETHER_RESOURCE_KIND_PREFETCH && p.device == 0 && p.device_accessible && p.host_accessible);
  REQUIRE_OK(tether_resource_allocate(pf, 1 << 20, 0, 0, (void**)&m));
  CHECK_OK(tether_cuda_stream_synchronize(0, 0));
  for (i = 0; i < (1 << 20); i += 4096) m[i] = (unsigned char)i;
  for (i = 0; i < (1 << 20); i += 4096) ok &= m[i] == (unsigned char)i;
  CHECK(ok);
  CHECK_OK(tether_resource_deallocate(pf, m, 1 << 20, 0, 0));
  /* Plain device memory is not managed. */
  REQUIRE_OK(tether_cuda_resource_create(0, &cuda));
  tether_resource_release(pf);
  pf = NULL;
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_prefetch_adaptor_create(cuda, &pf), "managed");
  tether_resource_release(cuda);
  tether_resource_release(managed);
}

int main(void) {
  RUN(refuses_memory_that_is_not_managed);
  RUN(prefetches_managed_memory);
  return tt_finish("test_prefetch");
}
