/*
 * test_buffer_pin.c - exports pin a buffer's memory in the C object, so no
 * handle and no language can resize (free) it under a live view; and
 * tether_buffer_copy_from_host / copy_to_host with host memory that overlaps
 * the buffer behave as memmove (under ASan, an overlapping memcpy aborts).
 */
#include <pthread.h>
#include <stdatomic.h>

#include "test_support.h"

static tether_buffer_t* host_buffer(tether_resource_t* host, size_t size) {
  tether_buffer_t* b = NULL;
  REQUIRE_OK(tether_buffer_create(host, 0, size, 0, &b));
  return b;
}

static void fill(tether_buffer_t* b, size_t size) {
  unsigned char* p = NULL;
  REQUIRE_OK(tether_buffer_get_ptr(b, (void**)&p));
  for (size_t i = 0; i < size; ++i) p[i] = (unsigned char)i;
}

static size_t pins(tether_buffer_t* b) {
  size_t n = (size_t)-1;
  CHECK_OK(tether_buffer_get_pin_count(b, &n));
  return n;
}

/* A pinned buffer refuses resize, whatever handle asks, and is unchanged. */
static void test_resize_refused_while_pinned(void) {
  size_t base = tt_baseline();
  tether_resource_t* host = NULL;
  REQUIRE_OK(tether_host_resource_create(&host));
  tether_buffer_t* b = host_buffer(host, 64);
  fill(b, 64);
  CHECK(pins(b) == 0);
  void* before = NULL;
  REQUIRE_OK(tether_buffer_get_ptr(b, &before));

  CHECK_OK(tether_buffer_pin(b));
  CHECK(pins(b) == 1);
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_resize(b, 8192), "pinned");
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_resize(b, 64), "pinned");
  void* after = NULL;
  size_t size = 0;
  CHECK_OK(tether_buffer_get_ptr(b, &after));
  CHECK_OK(tether_buffer_get_size(b, &size));
  CHECK(after == before);
  CHECK(size == 64);
  CHECK(((unsigned char*)after)[63] == 63);

  /* Two pins: one unpin is not enough. */
  CHECK_OK(tether_buffer_pin(b));
  CHECK(pins(b) == 2);
  CHECK_OK(tether_buffer_unpin(b));
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_resize(b, 128), "pinned");
  CHECK_OK(tether_buffer_unpin(b));
  CHECK(pins(b) == 0);

  /* Unpinned: resize works again and keeps the prefix. */
  CHECK_OK(tether_buffer_resize(b, 8192));
  CHECK_OK(tether_buffer_get_size(b, &size));
  CHECK(size == 8192);
  unsigned char* p = NULL;
  CHECK_OK(tether_buffer_get_ptr(b, (void**)&p));
  CHECK(p[0] == 0 && p[63] == 63);

  CHECK_OK(tether_buffer_release(b));
  CHECK_OK(tether_resource_release(host));
  CHECK_LIVE(TETHER_OBJECT_ANY, base);
}

/* A pin holds its own reference: the memory outlives the creator's release. */
static void test_pin_keeps_the_memory(void) {
  size_t base = tt_baseline();
  tether_resource_t* host = NULL;
  REQUIRE_OK(tether_host_resource_create(&host));
  tether_buffer_t* b = host_buffer(host, 32);
  fill(b, 32);
  CHECK_OK(tether_buffer_pin(b));
  CHECK_OK(tether_buffer_release(b));      /* the creator's reference */
  CHECK_OK(tether_resource_release(host));
  CHECK(tt_buffer_alive(b));
  unsigned char* p = NULL;
  CHECK_OK(tether_buffer_get_ptr(b, (void**)&p));
  CHECK(p != NULL && p[31] == 31);
  CHECK_OK(tether_buffer_unpin(b));        /* the last reference: frees */
  CHECK(!tt_buffer_alive(b));
  CHECK_LIVE(TETHER_OBJECT_ANY, base);
}

/* Bad pins and unpins: clear statuses, nothing released. */
static void test_bad_pin_and_unpin(void) {
  size_t base = tt_baseline();
  tether_resource_t* host = NULL;
  REQUIRE_OK(tether_host_resource_create(&host));
  tether_buffer_t* b = host_buffer(host, 16);

  CHECK_ERROR(TETHER_ERROR_INVALID_HANDLE, tether_buffer_pin(NULL), "NULL");
  CHECK_STATUS(TETHER_ERROR_INVALID_HANDLE, tether_buffer_unpin(NULL));
  /* Unbalanced unpin: refused, and the caller's reference is not taken. */
  CHECK_STATUS(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_unpin(b));
  CHECK(tt_buffer_alive(b));
  CHECK(pins(b) == 0);
  /* A resource handle is not a buffer handle. */
  CHECK_ERROR(TETHER_ERROR_INVALID_HANDLE, tether_buffer_pin((tether_buffer_t*)host), "not a live buffer");
  CHECK_STATUS(TETHER_ERROR_INVALID_HANDLE, tether_buffer_unpin((tether_buffer_t*)host));
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_get_pin_count(b, NULL), "out");

  CHECK_OK(tether_buffer_release(b));
  /* Stale handle. */
  CHECK_ERROR(TETHER_ERROR_INVALID_HANDLE, tether_buffer_pin(b), "not a live buffer");
  CHECK_STATUS(TETHER_ERROR_INVALID_HANDLE, tether_buffer_unpin(b));
  CHECK_OK(tether_resource_release(host));
  CHECK_LIVE(TETHER_OBJECT_ANY, base);
}

/* Racing pins and resizes: while a pin is held the pointer never changes. */
#ifndef ROUNDS
#define ROUNDS 20000
#endif
static tether_buffer_t* g_race;
static atomic_int g_moved, g_stop, g_started, g_pinned_rounds;

/* Pins, reads the pointer twice, unpins - until the resizer is done. */
static void* pinner(void* arg) {
  (void)arg;
  atomic_store(&g_started, 1);
  while (!atomic_load(&g_stop)) {
    if (tether_buffer_pin(g_race) != TETHER_OK) { atomic_fetch_add(&g_moved, 1000); break; }
    void *p1 = NULL, *p2 = NULL;
    tether_buffer_get_ptr(g_race, &p1);
    for (volatile int k = 0; k < 50; ++k) {}
    tether_buffer_get_ptr(g_race, &p2);
    if (p1 != p2) atomic_fetch_add(&g_moved, 1);
    if (tether_buffer_unpin(g_race) != TETHER_OK) atomic_fetch_add(&g_moved, 1000);
    atomic_fetch_add(&g_pinned_rounds, 1);
  }
  return NULL;
}

static void test_pin_races_resize(void) {
  size_t base = tt_baseline();
  tether_resource_t* host = NULL;
  REQUIRE_OK(tether_host_resource_create(&host));
  g_race = host_buffer(host, 64);
  atomic_store(&g_moved, 0);
  atomic_store(&g_stop, 0);
  atomic_store(&g_started, 0);
  atomic_store(&g_pinned_rounds, 0);
  pthread_t t;
  REQUIRE(pthread_create(&t, NULL, pinner, NULL) == 0);
  while (!atomic_load(&g_started)) {}
  long ok = 0, refused = 0, other = 0;
  for (long n = 0; n < ROUNDS || atomic_load(&g_pinned_rounds) == 0; ++n) {
    tether_status_t s = tether_buffer_resize(g_race, (n & 1) ? 64 : 128);
    if (s == TETHER_OK) ++ok;
    else if (s == TETHER_ERROR_INVALID_ARGUMENT) ++refused;
    else ++other;
  }
  atomic_store(&g_stop, 1);
  pthread_join(t, NULL);
  CHECK(atomic_load(&g_moved) == 0);  /* no pinned pointer ever moved */
  CHECK(other == 0);
  CHECK(ok + refused >= ROUNDS);
  CHECK(pins(g_race) == 0);
  CHECK_OK(tether_buffer_resize(g_race, 256));
  CHECK_OK(tether_buffer_release(g_race));
  CHECK_OK(tether_resource_release(host));
  CHECK_LIVE(TETHER_OBJECT_ANY, base);
}

/* copy_from_host / copy_to_host with memory overlapping the buffer: memmove semantics. */
static void test_copy_overlapping_host_memory(void) {
  size_t base = tt_baseline();
  tether_resource_t* host = NULL;
  REQUIRE_OK(tether_host_resource_create(&host));
  tether_buffer_t* b = host_buffer(host, 64);
  unsigned char* p = NULL;
  REQUIRE_OK(tether_buffer_get_ptr(b, (void**)&p));
  unsigned char expect[64];

  /* Forward: source before the destination, overlapping. */
  fill(b, 64);
  for (int i = 0; i < 64; ++i) expect[i] = (unsigned char)i;
  memmove(expect + 8, expect, 40);
  CHECK_OK(tether_buffer_copy_from_host(b, 8, p, 40));
  CHECK(memcmp(p, expect, 64) == 0);

  /* Backward: source after the destination. */
  fill(b, 64);
  for (int i = 0; i < 64; ++i) expect[i] = (unsigned char)i;
  memmove(expect, expect + 3, 50);
  CHECK_OK(tether_buffer_copy_from_host(b, 0, p + 3, 50));
  CHECK(memcmp(p, expect, 64) == 0);

  /* Exactly onto itself. */
  fill(b, 64);
  CHECK_OK(tether_buffer_copy_from_host(b, 0, p, 64));
  CHECK(p[0] == 0 && p[63] == 63);

  /* copy_to_host into the buffer's own memory. */
  fill(b, 64);
  for (int i = 0; i < 64; ++i) expect[i] = (unsigned char)i;
  memmove(expect + 1, expect, 60);
  CHECK_OK(tether_buffer_copy_to_host(b, 0, p + 1, 60));
  CHECK(memcmp(p, expect, 64) == 0);

  CHECK_OK(tether_buffer_release(b));
  CHECK_OK(tether_resource_release(host));
  CHECK_LIVE(TETHER_OBJECT_ANY, base);
}

/* With a GPU: device-visible host memory (managed, pinned) overlapping itself is
   staged (no overlapping CUDA copy), and a device buffer's pin works the same. */
static void test_gpu_overlap_and_pins(void) {
  if (!tt_have_gpu()) {
    printf("  (no CUDA device: skipped)\n");
    return;
  }
  size_t base = tt_baseline();
  tether_status_t (*creators[2])(int, tether_resource_t**) = {tether_managed_resource_create,
                                                              tether_pinned_host_resource_create};
  for (int c = 0; c < 2; ++c) {
    tether_resource_t* r = NULL;
    REQUIRE_OK(creators[c](0, &r));
    tether_buffer_t* b = host_buffer(r, 64);
    unsigned char* p = NULL;
    REQUIRE_OK(tether_buffer_get_ptr(b, (void**)&p));
    unsigned char expect[64];
    for (int i = 0; i < 64; ++i) p[i] = expect[i] = (unsigned char)i;
    memmove(expect + 8, expect, 40);
    CHECK_OK(tether_buffer_copy_from_host(b, 8, p, 40));
    CHECK_OK(tether_cuda_stream_synchronize(0, 0));
    CHECK(memcmp(p, expect, 64) == 0);
    for (int i = 0; i < 64; ++i) p[i] = expect[i] = (unsigned char)i;
    memmove(expect, expect + 5, 50);
    CHECK_OK(tether_buffer_copy_to_host(b, 5, p, 50));
    CHECK(memcmp(p, expect, 64) == 0);
    CHECK_OK(tether_buffer_release(b));
    CHECK_OK(tether_resource_release(r));
  }
  tether_resource_t* dev = NULL;
  REQUIRE_OK(tether_cuda_resource_create(0, &dev));
  tether_buffer_t* d = host_buffer(dev, 4096);
  CHECK_OK(tether_buffer_pin(d));
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_buffer_resize(d, 8192), "pinned");
  CHECK_OK(tether_buffer_unpin(d));
  CHECK_OK(tether_buffer_resize(d, 8192));
  CHECK_OK(tether_buffer_release(d));
  CHECK_OK(tether_resource_release(dev));
  CHECK_LIVE(TETHER_OBJECT_ANY, base);
}

int main(void) {
  RUN(test_resize_refused_while_pinned);
  RUN(test_pin_keeps_the_memory);
  RUN(test_bad_pin_and_unpin);
  RUN(test_pin_races_resize);
  RUN(test_copy_overlapping_host_memory);
  RUN(test_gpu_overlap_and_pins);
  return tt_finish("test_buffer_pin");
}
