/* The limiting adaptor through the C ABI: options, the limit, queries, refused frees, lifetime. */
#include <pthread.h>

#include "test_support.h"

static tether_resource_t* limiting(tether_resource_t* up, size_t limit) {
  tether_limiting_options_t o;
  tether_resource_t* r = NULL;
  REQUIRE_OK(tether_limiting_options_init(&o, sizeof o));
  CHECK(o.struct_size == sizeof o && o.limit == 0);
  o.limit = limit;
  REQUIRE_OK(tether_limiting_adaptor_create(up, &o, &r));
  return r;
}

static void limit_and_queries(void) {
  tether_resource_t *host = NULL, *lim, *got = NULL;
  tether_resource_properties_t p = TETHER_RESOURCE_PROPERTIES_INIT;
  void *a = NULL, *b = NULL;
  uint64_t used = 1, limit = 0;
  REQUIRE_OK(tether_host_resource_create(&host));
  lim = limiting(host, 4096);
  CHECK_OK(tether_resource_get_properties(lim, &p));
  CHECK(p.kind == TETHER_RESOURCE_KIND_LIMITING && p.host_accessible && p.device == TETHER_DEVICE_HOST);
  CHECK(strcmp(tether_resource_get_name(lim), "limiting") == 0);
  CHECK_OK(tether_resource_get_upstream(lim, &got));
  CHECK(got == host);
  CHECK_OK(tether_limiting_adaptor_get_limit(lim, &limit));
  CHECK(limit == 4096);
  CHECK_OK(tether_resource_allocate(lim, 3000, 0, 0, &a));
  CHECK_ERROR(TETHER_ERROR_OUT_OF_MEMORY, tether_resource_allocate(lim, 1097, 0, 0, &b), "limit of 4096");
  CHECK(b == NULL);
  CHECK_OK(tether_limiting_adaptor_get_used_bytes(lim, &used));
  CHECK(used == 3000);
  CHECK_OK(tether_resource_allocate(lim, 1096, 0, 0, &b));
  CHECK_OK(tether_resource_deallocate(lim, a, 3000, 0, 0));
  CHECK_OK(tether_resource_deallocate(lim, b, 1096, 0, 0));
  CHECK_OK(tether_limiting_adaptor_get_used_bytes(lim, &used));
  CHECK(used == 0);
  /* Wrong kind, bad arguments. */
  CHECK_ERROR(TETHER_ERROR_NOT_SUPPORTED, tether_limiting_adaptor_get_used_bytes(host, &used), "not a limiting adaptor");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_limiting_adaptor_get_limit(lim, NULL), "out");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_limiting_adaptor_create(host, NULL, NULL), "out");
  CHECK_ERROR(TETHER_ERROR_INVALID_HANDLE, tether_limiting_adaptor_create(NULL, NULL, &got), "NULL");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_limiting_options_init(NULL, 16), "options");
  tether_resource_release(lim);
  tether_resource_release(host);
}

static void null_options_mean_a_zero_limit(void) {
  tether_resource_t *host = NULL, *lim = NULL;
  void* p = NULL;
  tether_limiting_options_t old = TETHER_LIMITING_OPTIONS_INIT;
  REQUIRE_OK(tether_host_resource_create(&host));
  REQUIRE_OK(tether_limiting_adaptor_create(host, NULL, &lim));
  CHECK_STATUS(TETHER_ERROR_OUT_OF_MEMORY, tether_resource_allocate(lim, 1, 0, 0, &p));
  tether_resource_release(lim);
  old.struct_size = 4; /* no published layout is this small */
  CHECK_ERROR(TETHER_ERROR_VERSION_MISMATCH, tether_limiting_adaptor_create(host, &old, &lim), "struct_size");
  tether_resource_release(host);
}

static void refuses_what_it_did_not_hand_out(void) {
  tether_resource_t *host = NULL, *lim;
  void *mine = NULL, *direct = NULL;
  uint64_t used = 0;
  REQUIRE_OK(tether_host_resource_create(&host));
  lim = limiting(host, 1 << 20);
  REQUIRE_OK(tether_resource_allocate(lim, 100, 0, 0, &mine));
  REQUIRE_OK(tether_resource_allocate(host, 100, 0, 0, &direct));
  CHECK_STATUS(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_deallocate(lim, direct, 100, 0, 0));
  CHECK_STATUS(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_deallocate(host, mine, 100, 0, 0));
  CHECK_OK(tether_limiting_adaptor_get_used_bytes(lim, &used));
  CHECK(used == 100);
  /* The adaptor keeps its upstream alive: release the caller's upstream first. */
  CHECK_OK(tether_resource_deallocate(host, direct, 100, 0, 0));
  tether_resource_release(host);
  CHECK_OK(tether_resource_deallocate(lim, mine, 100, 0, 0));
  tether_resource_release(lim);
}

#define THREADS 8
#define ROUNDS 2000
static tether_resource_t* g_lim;
static atomic_int g_live, g_peak;

static void* hammer(void* arg) {
  int i;
  (void)arg;
  for (i = 0; i < ROUNDS; ++i) {
    void* p = NULL;
    int now, seen;
    if (tether_resource_allocate(g_lim, 512, 0, 0, &p) != TETHER_OK) continue;
    now = atomic_fetch_add(&g_live, 1) + 1;
    seen = atomic_load(&g_peak);
    while (seen < now && !atomic_compare_exchange_weak(&g_peak, &seen, now)) {
    }
    atomic_fetch_sub(&g_live, 1);
    CHECK_OK(tether_resource_deallocate(g_lim, p, 512, 0, 0));
  }
  return NULL;
}

static void exact_under_threads(void) {
  tether_resource_t* host = NULL;
  pthread_t t[THREADS];
  uint64_t used = 1;
  int i;
  REQUIRE_OK(tether_host_resource_create(&host));
  g_lim = limiting(host, 3 * 512);
  for (i = 0; i < THREADS; ++i) REQUIRE(pthread_create(&t[i], NULL, hammer, NULL) == 0);
  for (i = 0; i < THREADS; ++i) pthread_join(t[i], NULL);
  CHECK(atomic_load(&g_peak) <= 3);
  CHECK_OK(tether_limiting_adaptor_get_used_bytes(g_lim, &used));
  CHECK(used == 0);
  tether_resource_release(g_lim);
  tether_resource_release(host);
}

int main(void) {
  RUN(limit_and_queries);
  RUN(null_options_mean_a_zero_limit);
  RUN(refuses_what_it_did_not_hand_out);
  RUN(exact_under_threads);
  return tt_finish("test_limiting");
}
