/*
 * Every call is thread-safe (DESIGN.md 2.8): 8 threads hammer the same table
 * slot, the same pool and the same handles - get/set, allocate/free, buffers
 * created from the table and released, retain/release of shared handles -
 * then every counter and the census must be back where they started.
 * Meant to run under ThreadSanitizer as well (TETHER_SANITIZE=thread).
 */
#include <pthread.h>

#include "test_support.h"

#define THREADS 8
#ifndef ITERATIONS
#define ITERATIONS 20000
#endif

static tether_resource_t* g_host;
static tether_resource_t* g_pool;  /* pool(host) */
static tether_resource_t* g_stats; /* stats(pool) */
static tether_resource_t* g_dflt;  /* the host slot's default */
static atomic_int g_arrived;        /* start line: every thread begins at once */

/* A tiny per-thread PRNG (xorshift): no shared state, no rand(). */
static uint32_t next_random(uint32_t* s) {
  *s ^= *s << 13;
  *s ^= *s >> 17;
  *s ^= *s << 5;
  return *s;
}

static void* worker(void* arg) {
  uint32_t seed = (uint32_t)(uintptr_t)arg * 2654435761u + 1u;
  const int id = (int)(uintptr_t)arg;
  int i;
  atomic_fetch_add(&g_arrived, 1);
  while (atomic_load(&g_arrived) < THREADS) {
  }
  for (i = 0; i < ITERATIONS; ++i) {
    const uint32_t r = next_random(&seed);
    const size_t size = 1 + (size_t)(r % 5000);
    switch (r % 6) {
      case 0: { /* swap the slot among the shared resources */
        tether_resource_t* choice = (r >> 8) % 3 == 0 ? g_pool : (r >> 8) % 3 == 1 ? g_stats : NULL;
        tether_resource_t* prev = NULL;
        CHECK_OK(tether_current_resource_set(TETHER_DEVICE_HOST, choice, &prev));
        CHECK_OK(tether_resource_release(prev));
        break;
      }
      case 1: { /* get the current resource and allocate from it while others swap */
        tether_resource_t* cur = NULL;
        void* p = NULL;
        CHECK_OK(tether_current_resource_get(TETHER_DEVICE_HOST, &cur));
        CHECK_OK(tether_resource_allocate(cur, size, 0, 0, &p));
        if (p) {
          memset(p, id, size);
          CHECK_OK(tether_resource_deallocate(cur, p, size, 0, 0));
        }
        CHECK_OK(tether_resource_release(cur));
        break;
      }
      case 2: { /* a buffer from the table, released after the slot may have changed */
        tether_buffer_t* b = NULL;
        unsigned char bytes[64], back[64];
        memset(bytes, id, sizeof bytes);
        CHECK_OK(tether_buffer_create(NULL, TETHER_DEVICE_HOST, size + 64, 0, &b));
        CHECK_OK(tether_buffer_copy_from_host(b, size, bytes, sizeof bytes));
        CHECK_OK(tether_buffer_copy_to_host(b, size, back, sizeof back));
        CHECK(memcmp(bytes, back, sizeof bytes) == 0);
        CHECK_OK(tether_buffer_release(b));
        break;
      }
      case 3: { /* the shared pool directly, several blocks at once */
        void* p[4] = {NULL, NULL, NULL, NULL};
        int k;
        for (k = 0; k < 4; ++k) CHECK_OK(tether_resource_allocate(g_pool, size * (size_t)(k + 1), 64, 0, &p[k]));
        for (k = 3; k >= 0; --k)
          if (p[k]) CHECK_OK(tether_resource_deallocate(g_pool, p[k], size * (size_t)(k + 1), 64, 0));
        break;
      }
      case 4: { /* retain/release and borrowed getters on shared handles */
        tether_resource_t* up = NULL;
        tether_statistics_t st = TETHER_STATISTICS_INIT;
        CHECK_OK(tether_resource_retain(g_stats));
        CHECK_OK(tether_resource_get_upstream(g_stats, &up));
        CHECK(up == g_pool);
        CHECK_OK(tether_resource_get_statistics(g_stats, &st));
        CHECK(st.peak_count >= st.current_count);
        CHECK_OK(tether_resource_release(g_stats));
        break;
      }
      default: { /* buffers from the stats adaptor, resized, plus failing calls */
        tether_buffer_t* b = NULL;
        void* p = NULL;
        CHECK_OK(tether_buffer_create(g_stats, TETHER_DEVICE_HOST, size, 0, &b));
        CHECK_OK(tether_buffer_resize(b, size * 2));
        CHECK_OK(tether_buffer_release(b));
        CHECK_STATUS(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_allocate(g_pool, 8, 3, 0, &p));
        CHECK(strstr(tether_last_error_message(), "tether_resource_allocate") != NULL);
        break;
      }
    }
  }
  return NULL;
}

int main(void) {
  pthread_t threads[THREADS];
  tether_statistics_t st = TETHER_STATISTICS_INIT;
  tether_pool_info_t info = TETHER_POOL_INFO_INIT;
  tether_resource_t* prev = NULL;
  size_t base;
  int i;

  REQUIRE_OK(tether_current_resource_get(TETHER_DEVICE_HOST, &g_dflt));
  base = tether_debug_live_objects(TETHER_OBJECT_ANY);
  REQUIRE_OK(tether_host_resource_create(&g_host));
  REQUIRE_OK(tether_pool_resource_create(g_host, NULL, &g_pool));
  REQUIRE_OK(tether_statistics_adaptor_create(g_pool, &g_stats));

  for (i = 0; i < THREADS; ++i)
    REQUIRE(pthread_create(&threads[i], NULL, worker, (void*)(uintptr_t)(i + 1)) == 0);
  for (i = 0; i < THREADS; ++i) pthread_join(threads[i], NULL);

  /* Everything came back: no outstanding bytes anywhere. */
  CHECK_OK(tether_resource_get_statistics(g_stats, &st));
  CHECK(st.current_count == 0 && st.current_bytes == 0 && st.total_count > 0);
  CHECK_OK(tether_resource_get_pool_info(g_pool, &info));
  CHECK(info.free_bytes == info.pool_size);
  CHECK_LIVE(TETHER_OBJECT_BUFFER, 0);

  CHECK_OK(tether_current_resource_set(TETHER_DEVICE_HOST, g_dflt, &prev));
  CHECK_OK(tether_resource_release(prev));
  CHECK_OK(tether_resource_release(g_stats));
  CHECK_OK(tether_resource_release(g_pool));
  CHECK_OK(tether_resource_release(g_host));
  CHECK_OK(tether_resource_release(g_dflt));
  /* The slot may have been reset to a fresh default and back: count, not identity. */
  CHECK_LIVE(TETHER_OBJECT_ANY, base);
  printf("%d threads x %d iterations\n", THREADS, ITERATIONS);
  return tt_finish("test_threads");
}
