/*
 * Locking a current-resource slot (irreversible for the process, so this is
 * a program of its own): later sets fail with LOCKED from every caller, gets
 * keep working, and other slots are unaffected.
 */
#include <pthread.h>

#include "test_support.h"

static tether_resource_t* g_other;

static void* set_from_thread(void* arg) {
  tether_status_t* out = (tether_status_t*)arg;
  *out = tether_current_resource_set(TETHER_DEVICE_HOST, g_other, NULL);
  return NULL;
}

int main(void) {
  tether_resource_t *chosen = NULL, *stats = NULL, *prev = NULL, *cur = NULL;
  tether_buffer_t* b = NULL;
  tether_statistics_t st = TETHER_STATISTICS_INIT;
  tether_status_t from_thread = TETHER_OK;
  pthread_t t;
  int locked = -1;
  size_t base;

  REQUIRE_OK(tether_host_resource_create(&chosen));
  REQUIRE_OK(tether_statistics_adaptor_create(chosen, &stats));
  REQUIRE_OK(tether_host_resource_create(&g_other));
  base = tether_debug_live_objects(TETHER_OBJECT_ANY);

  /* Choose the resource, then lock the slot (what an application does at startup). */
  CHECK_OK(tether_current_resource_is_locked(TETHER_DEVICE_HOST, &locked));
  CHECK(locked == 0);
  CHECK_OK(tether_current_resource_set(TETHER_DEVICE_HOST, stats, &prev));
  CHECK_OK(tether_resource_release(prev)); /* NULL or the default */
  CHECK_OK(tether_current_resource_lock(TETHER_DEVICE_HOST));
  CHECK_OK(tether_current_resource_is_locked(TETHER_DEVICE_HOST, &locked));
  CHECK(locked == 1);
  CHECK_OK(tether_current_resource_lock(TETHER_DEVICE_HOST)); /* locking again is harmless */

  /* Every later set fails, whatever it installs; nothing is handed back. */
  prev = (tether_resource_t*)0x1;
  CHECK_ERROR(TETHER_ERROR_LOCKED, tether_current_resource_set(TETHER_DEVICE_HOST, g_other, &prev),
              "tether_current_resource_set");
  CHECK(prev == NULL);
  CHECK_ERROR(TETHER_ERROR_LOCKED, tether_current_resource_set(TETHER_DEVICE_HOST, NULL, &prev),
              "tether_current_resource_set");
  CHECK_ERROR(TETHER_ERROR_LOCKED, tether_current_resource_set(TETHER_DEVICE_HOST, stats, NULL),
              "tether_current_resource_set");
  REQUIRE(pthread_create(&t, NULL, set_from_thread, &from_thread) == 0);
  pthread_join(t, NULL);
  CHECK(from_thread == TETHER_ERROR_LOCKED);

  /* The locked slot still serves gets and allocations from the chosen resource. */
  CHECK_OK(tether_current_resource_get(TETHER_DEVICE_HOST, &cur));
  CHECK(cur == stats);
  CHECK_OK(tether_resource_release(cur));
  CHECK_OK(tether_buffer_create(NULL, TETHER_DEVICE_HOST, 1024, 0, &b));
  CHECK_OK(tether_resource_get_statistics(stats, &st));
  CHECK(st.current_count == 1 && st.current_bytes == 1024);
  CHECK_OK(tether_buffer_release(b));

  /* Failed sets leaked no references: the same objects are alive as before. */
  CHECK_LIVE(TETHER_OBJECT_ANY, base);
  CHECK_OK(tether_resource_release(g_other));
  CHECK(!tt_resource_alive(g_other));
  CHECK_OK(tether_resource_release(stats));
  CHECK_OK(tether_resource_release(chosen));
  CHECK(tt_resource_alive(stats)); /* the table keeps it, for good */

  /* Bad ids are still INVALID_ARGUMENT; without a GPU device slots are NO_DEVICE. */
  CHECK_STATUS(TETHER_ERROR_INVALID_ARGUMENT, tether_current_resource_lock(-3));
  if (!tt_have_gpu()) CHECK_STATUS(TETHER_ERROR_NO_DEVICE, tether_current_resource_lock(0));
  return tt_finish("test_current_lock");
}
