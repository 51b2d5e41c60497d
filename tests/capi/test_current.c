/*
 * The process-wide current-resource table (DESIGN.md 2.3): get hands out +1,
 * set retains the new resource and hands back the previous one as +1, NULL
 * restores the default, device ids are checked. Locking lives in
 * test_current_lock.c (it is irreversible for the process).
 */
#include "test_support.h"

static size_t g_base;

static void test_default_host_resource(void) {
  tether_resource_t *a = NULL, *b = NULL;
  tether_resource_properties_t props = TETHER_RESOURCE_PROPERTIES_INIT;
  int locked = -1;
  CHECK_OK(tether_current_resource_get(TETHER_DEVICE_HOST, &a));
  CHECK_OK(tether_current_resource_get(TETHER_DEVICE_HOST, &b));
  CHECK(a != NULL && a == b); /* the default is created once and kept in the slot */
  CHECK_OK(tether_resource_get_properties(a, &props));
  CHECK(props.kind == TETHER_RESOURCE_KIND_HOST && props.host_accessible);
  CHECK_OK(tether_current_resource_is_locked(TETHER_DEVICE_HOST, &locked));
  CHECK(locked == 0);
  CHECK_OK(tether_resource_release(a));
  CHECK_OK(tether_resource_release(b));
  CHECK(tt_resource_alive(a)); /* the table keeps its own reference */
  CHECK_LIVE(TETHER_OBJECT_ANY, g_base);
}

static void test_set_returns_previous_owned(void) {
  tether_resource_t *dflt = NULL, *a = NULL, *b = NULL, *prev = NULL, *cur = NULL;
  REQUIRE_OK(tether_current_resource_get(TETHER_DEVICE_HOST, &dflt));
  REQUIRE_OK(tether_host_resource_create(&a));
  REQUIRE_OK(tether_host_resource_create(&b));

  CHECK_OK(tether_current_resource_set(TETHER_DEVICE_HOST, a, &prev));
  CHECK(prev == dflt);
  CHECK_OK(tether_resource_release(prev));
  CHECK_OK(tether_current_resource_get(TETHER_DEVICE_HOST, &cur));
  CHECK(cur == a);
  CHECK_OK(tether_resource_release(cur));

  CHECK_OK(tether_resource_release(a)); /* the table's reference keeps it alive */
  CHECK(tt_resource_alive(a));
  CHECK_OK(tether_current_resource_set(TETHER_DEVICE_HOST, b, &prev));
  CHECK(prev == a); /* handed to us as +1: still alive until we release it */
  CHECK(tt_resource_alive(a));
  CHECK_OK(tether_resource_release(prev));
  CHECK(!tt_resource_alive(a));

  /* out_previous NULL: the previous resource is released for us. */
  CHECK_OK(tether_resource_retain(b)); /* b: ours + table */
  CHECK_OK(tether_current_resource_set(TETHER_DEVICE_HOST, dflt, NULL));
  CHECK_OK(tether_resource_release(b));
  CHECK(tt_resource_alive(b)); /* our first reference */
  CHECK_OK(tether_resource_release(b));
  CHECK(!tt_resource_alive(b));

  CHECK_OK(tether_resource_release(dflt)); /* the table holds the default again */
  CHECK(tt_resource_alive(dflt));
  CHECK_LIVE(TETHER_OBJECT_ANY, g_base);
}

/* A reference from get survives a later set that drops the table's reference. */
static void test_get_survives_set(void) {
  tether_resource_t *dflt = NULL, *mine = NULL, *got = NULL, *prev = NULL;
  void* p = NULL;
  REQUIRE_OK(tether_current_resource_get(TETHER_DEVICE_HOST, &dflt));
  REQUIRE_OK(tether_host_resource_create(&mine));
  REQUIRE_OK(tether_current_resource_set(TETHER_DEVICE_HOST, mine, NULL));
  CHECK_OK(tether_resource_release(mine)); /* only the table holds it */
  REQUIRE_OK(tether_current_resource_get(TETHER_DEVICE_HOST, &got));
  CHECK(got == mine);
  CHECK_OK(tether_resource_allocate(got, 128, 0, 0, &p));
  CHECK_OK(tether_current_resource_set(TETHER_DEVICE_HOST, dflt, &prev));
  CHECK(prev == mine);
  CHECK_OK(tether_resource_release(prev)); /* the table's reference, now ours, is gone */
  CHECK(tt_resource_alive(got));            /* get's +1 keeps it */
  CHECK_OK(tether_resource_deallocate(got, p, 128, 0, 0));
  CHECK_OK(tether_resource_release(got));
  CHECK(!tt_resource_alive(got));
  CHECK_OK(tether_resource_release(dflt));
  CHECK_LIVE(TETHER_OBJECT_ANY, g_base);
}

static void test_null_restores_default(void) {
  tether_resource_t *s = NULL, *h = NULL, *prev = NULL, *cur = NULL;
  tether_resource_properties_t props = TETHER_RESOURCE_PROPERTIES_INIT;
  tether_buffer_t* b = NULL;
  tether_statistics_t st = TETHER_STATISTICS_INIT;
  REQUIRE_OK(tether_host_resource_create(&h));
  REQUIRE_OK(tether_statistics_adaptor_create(h, &s));
  REQUIRE_OK(tether_current_resource_set(TETHER_DEVICE_HOST, s, NULL));
  /* Table allocations go through the installed adaptor. */
  REQUIRE_OK(tether_buffer_create(NULL, TETHER_DEVICE_HOST, 300, 0, &b));
  CHECK_OK(tether_resource_get_statistics(s, &st));
  CHECK(st.current_count == 1 && st.current_bytes == 300);
  CHECK_OK(tether_buffer_release(b));

  CHECK_OK(tether_current_resource_set(TETHER_DEVICE_HOST, NULL, &prev));
  CHECK(prev == s);
  CHECK_OK(tether_resource_release(prev));
  CHECK_OK(tether_current_resource_get(TETHER_DEVICE_HOST, &cur));
  CHECK(cur != NULL && cur != s && cur != h);
  CHECK_OK(tether_resource_get_properties(cur, &props));
  CHECK(props.kind == TETHER_RESOURCE_KIND_HOST);
  CHECK_OK(tether_resource_release(cur));
  CHECK_OK(tether_resource_release(s));
  CHECK_OK(tether_resource_release(h));
  /* The old default was replaced by a fresh one: the count is unchanged. */
  CHECK_LIVE(TETHER_OBJECT_ANY, g_base);
}

static void test_bad_device_ids(void) {
  static const int bad[] = {-3, -100, 100000, 256, 1 << 30};
  tether_resource_t *r = (tether_resource_t*)0x1, *h = NULL, *prev = (tether_resource_t*)0x1;
  tether_buffer_t* b = (tether_buffer_t*)0x1;
  int locked = 0;
  size_t i;
  REQUIRE_OK(tether_host_resource_create(&h));
  for (i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_current_resource_get(bad[i], &r), "device");
    CHECK(r == NULL);
    CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_current_resource_set(bad[i], h, &prev), "device");
    CHECK(prev == NULL);
    CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_current_resource_lock(bad[i]), "device");
    CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_current_resource_is_locked(bad[i], &locked), "device");
    CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_create(NULL, bad[i], 64, 0, &b), "device");
    CHECK(b == NULL);
    r = (tether_resource_t*)0x1;
    prev = (tether_resource_t*)0x1;
    b = (tether_buffer_t*)0x1;
  }
  /* A device id is ignored when a resource is given. */
  CHECK_OK(tether_buffer_create(h, -3, 64, 0, &b));
  CHECK_OK(tether_buffer_release(b));
  CHECK_OK(tether_resource_release(h));
  CHECK_LIVE(TETHER_OBJECT_ANY, g_base);
}

/* Without a GPU, device slots fail with NO_DEVICE and host work goes on. */
static void test_device_slots_without_gpu(void) {
  tether_resource_t *r = NULL, *h = NULL;
  tether_buffer_t* b = NULL;
  int n = -1, locked = 0;
  if (tt_have_gpu()) {
    printf("    (skipped: a CUDA device is present)\n");
    return;
  }
  CHECK_ERROR(TETHER_ERROR_NO_DEVICE, tether_cuda_get_device_count(&n), "tether_cuda_get_device_count");
  CHECK_ERROR(TETHER_ERROR_NO_DEVICE, tether_current_resource_get(0, &r), "tether_current_resource_get");
  CHECK(r == NULL);
  CHECK_ERROR(TETHER_ERROR_NO_DEVICE, tether_current_resource_get(TETHER_DEVICE_CURRENT, &r),
              "tether_current_resource_get");
  CHECK_STATUS(TETHER_ERROR_NO_DEVICE, tether_current_resource_get(1, &r));
  REQUIRE_OK(tether_host_resource_create(&h));
  CHECK_STATUS(TETHER_ERROR_NO_DEVICE, tether_current_resource_set(0, h, NULL));
  CHECK_STATUS(TETHER_ERROR_NO_DEVICE, tether_current_resource_lock(0));
  CHECK_STATUS(TETHER_ERROR_NO_DEVICE, tether_current_resource_is_locked(0, &locked));
  CHECK_STATUS(TETHER_ERROR_NO_DEVICE, tether_buffer_create(NULL, 0, 64, 0, &b));
  CHECK_STATUS(TETHER_ERROR_NO_DEVICE, tether_buffer_create(NULL, TETHER_DEVICE_CURRENT, 64, 0, &b));
  CHECK_ERROR(TETHER_ERROR_NO_DEVICE, tether_cuda_resource_create(0, &r), "tether_cuda_resource_create");
  CHECK_ERROR(TETHER_ERROR_NO_DEVICE, tether_async_resource_create(0, NULL, &r), "tether_async_resource_create");
  CHECK_ERROR(TETHER_ERROR_NO_DEVICE, tether_managed_resource_create(0, &r), "tether_managed_resource_create");
  CHECK_ERROR(TETHER_ERROR_NO_DEVICE, tether_pinned_host_resource_create(0, &r),
              "tether_pinned_host_resource_create");
  /* Host work still works after all of that. */
  CHECK_OK(tether_buffer_create(NULL, TETHER_DEVICE_HOST, 64, 0, &b));
  CHECK_OK(tether_buffer_release(b));
  CHECK_OK(tether_resource_release(h));
  CHECK_LIVE(TETHER_OBJECT_ANY, g_base);
}

int main(void) {
  g_base = tt_baseline();
  RUN(test_default_host_resource);
  RUN(test_set_returns_previous_owned);
  RUN(test_get_survives_set);
  RUN(test_null_restores_default);
  RUN(test_bad_device_ids);
  RUN(test_device_slots_without_gpu);
  return tt_finish("test_current");
}
