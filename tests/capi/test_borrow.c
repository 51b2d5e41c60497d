/*
 * A handle's last release racing calls that use it (handles.cpp, "Borrows"):
 * calls borrow a handle without counting a reference, so the release must
 * wait for calls already inside before it destroys the object. Each round,
 * worker threads allocate, free and query a pool while the main thread
 * releases the pool's only handle at a random moment. Every call either works
 * or fails with TETHER_ERROR_INVALID_HANDLE (never a crash or a use after free:
 * run under AddressSanitizer and ThreadSanitizer too); memory allocated
 * before the release and freed after it fails to free (the handle is gone)
 * and is accounted as orphaned, exactly; and every object is gone after the round.
 */
#include <pthread.h>
#include <sched.h>

#include "test_support.h"

#define WORKERS 4
#ifndef ROUNDS
#define ROUNDS 200
#endif
#define SIZE 4096

static tether_resource_t* volatile g_pool;
static atomic_int g_started;
static atomic_ullong g_stranded_bytes; /* allocated, then the free found the handle dead */
static atomic_int g_ok_calls;

static void* worker(void* arg) {
  tether_resource_t* pool = g_pool;
  int i, dead = 0;
  (void)arg;
  atomic_fetch_add(&g_started, 1);
  for (i = 0; i < 100000 && !dead; ++i) {
    void* p = NULL;
    tether_pool_info_t info = TETHER_POOL_INFO_INIT;
    tether_status_t s = tether_resource_allocate(pool, SIZE, 0, 0, &p);
    if (s == TETHER_OK) {
      memset(p, 0x5a, SIZE); /* the memory is ours, even if the handle dies now */
      s = tether_resource_deallocate(pool, p, SIZE, 0, 0);
      if (s == TETHER_ERROR_INVALID_HANDLE) atomic_fetch_add(&g_stranded_bytes, SIZE);
    }
    if (s == TETHER_OK) s = tether_resource_get_pool_info(pool, &info);
    if (s == TETHER_OK) {
      atomic_fetch_add(&g_ok_calls, 1);
    } else {
      CHECK_STATUS(TETHER_ERROR_INVALID_HANDLE, s);
      dead = 1;
    }
  }
  /* Once dead, always dead. */
  if (dead) {
    void* p = NULL;
    CHECK_STATUS(TETHER_ERROR_INVALID_HANDLE, tether_resource_allocate(pool, SIZE, 0, 0, &p));
    CHECK(p == NULL);
  }
  return NULL;
}

int main(void) {
  const size_t base = tether_debug_live_objects(TETHER_OBJECT_ANY);
  const uint64_t orphaned_before = tether_debug_orphaned_bytes();
  uint32_t seed = 12345;
  int round;
  tether_debug_set_leak_report(0); /* stranded allocations are expected here */
  for (round = 0; round < ROUNDS; ++round) {
    pthread_t threads[WORKERS];
    tether_resource_t* host = NULL;
    tether_resource_t* pool = NULL;
    int i;
    unsigned spin;
    REQUIRE_OK(tether_host_resource_create(&host));
    REQUIRE_OK(tether_pool_resource_create(host, NULL, &pool));
    REQUIRE_OK(tether_resource_release(host)); /* the pool keeps its upstream alive */
    g_pool = pool;
    atomic_store(&g_started, 0);
    for (i = 0; i < WORKERS; ++i) REQUIRE(pthread_create(&threads[i], NULL, worker, NULL) == 0);
    while (atomic_load(&g_started) < WORKERS) sched_yield();
    seed ^= seed << 13;
    seed ^= seed >> 17;
    seed ^= seed << 5;
    for (spin = seed % 20000; spin != 0; --spin) atomic_signal_fence(memory_order_seq_cst);
    CHECK_OK(tether_resource_release(pool)); /* the last reference, while the workers run */
    for (i = 0; i < WORKERS; ++i) pthread_join(threads[i], NULL);
    CHECK_LIVE(TETHER_OBJECT_ANY, base);
  }
  CHECK(atomic_load(&g_ok_calls) > 0);
  CHECK(tether_debug_orphaned_bytes() - orphaned_before == atomic_load(&g_stranded_bytes));
  printf("%d rounds x %d workers: %d calls worked, %llu bytes stranded by the race\n", ROUNDS, WORKERS,
         atomic_load(&g_ok_calls), (unsigned long long)atomic_load(&g_stranded_bytes));
  return tt_finish("test_borrow");
}
