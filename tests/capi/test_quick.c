/*
 * test_quick.c - libtether's quick paths for the Python frontend
 * (capi/src/tether_internal.h): what they do they do as the public calls
 * would, and they refuse - changing nothing - or ask to be finished without
 * the GIL wherever the public call could wait: a dead handle, a resource
 * without a quick path, a release that would drop the resource's last
 * reference, a buffer still pinned, an unset current-resource slot.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "test_support.h"
#include "tether_internal.h"

static tether_resource_t* host_pool(void) {
  tether_resource_t *host = NULL, *pool = NULL;
  tether_pool_options_t o = TETHER_POOL_OPTIONS_INIT;
  o.initial_size = 1 << 20;
  REQUIRE_OK(tether_host_resource_create(&host));
  REQUIRE_OK(tether_pool_resource_create(host, &o, &pool));
  tether_resource_release(host);
  return pool;
}

/* Bytes of the pool handed out and not given back. */
static uint64_t pool_used(tether_resource_t* pool) {
  tether_pool_info_t info = TETHER_POOL_INFO_INIT;
  if (tether_resource_get_pool_info(pool, &info) != TETHER_OK) return UINT64_MAX;
  return info.pool_size - info.free_bytes;
}

static tether_buffer_t* quick_buffer(tether_resource_t* r, size_t size) {
  void* out = NULL;
  int q = tether_internal_buffer_create_quick(r, size, 0, &out);
  CHECK(q == TETHER_QUICK_DONE);
  return q == TETHER_QUICK_DONE ? (tether_buffer_t*)out : NULL;
}

/* The same-size pair, both ways round with the public calls. */
static void test_buffer_pairs(void) {
  size_t base = tt_baseline();
  tether_resource_t* pool = host_pool();
  for (int i = 0; i < 100; ++i) {
    tether_buffer_t* b = quick_buffer(pool, 256);
    REQUIRE(b != NULL);
    size_t size = 0;
    void* p = NULL;
    CHECK_OK(tether_buffer_get_size(b, &size));
    CHECK_OK(tether_buffer_get_ptr(b, &p));
    CHECK(size == 256 && p != NULL);
    tether_resource_t* owner = NULL;
    CHECK_OK(tether_buffer_get_resource(b, &owner));
    CHECK(owner == pool);
    CHECK(pool_used(pool) == 256);
    if (i % 2) {
      CHECK(tether_internal_buffer_release_quick(b) == TETHER_QUICK_DONE);
    } else {
      CHECK_OK(tether_buffer_release(b));
    }
    CHECK(!tt_buffer_alive(b));
    CHECK(pool_used(pool) == 0);
    tether_buffer_t* c = NULL;
    REQUIRE_OK(tether_buffer_create(pool, 0, 256, 0, &c));
    CHECK(tether_internal_buffer_release_quick(c) == TETHER_QUICK_DONE);
    CHECK(pool_used(pool) == 0);
  }
  CHECK(tether_internal_buffer_release_quick(NULL) == TETHER_QUICK_DONE);  /* a no-op, as release(NULL) */
  tether_resource_release(pool);
  CHECK_LIVE(TETHER_OBJECT_ANY, base);
}

/* Releasing the buffer would drop the resource's last reference (destroying
   the pool): the quick path must not; it asks to be finished off the GIL. */
static void test_last_resource_reference_is_not_dropped_quick(void) {
  size_t base = tt_baseline();
  tether_resource_t* pool = host_pool();
  tether_buffer_t* b = quick_buffer(pool, 256);
  REQUIRE(b != NULL);
  tether_resource_release(pool);  /* the buffer's reference is the last */
  CHECK(tt_resource_alive(pool));
  CHECK(tether_internal_buffer_release_quick(b) == TETHER_QUICK_FINISH);
  CHECK(!tt_buffer_alive(b));     /* the handle is dead already */
  CHECK(tt_resource_alive(pool)); /* but the pool is not destroyed */
  tether_internal_buffer_release_finish(b);
  CHECK(!tt_resource_alive(pool));
  CHECK_LIVE(TETHER_OBJECT_ANY, base);
}

/* A pin holds a reference of its own: a quick release drops the caller's
   reference only, the memory stays until the pin goes (the public unpin). */
static void test_pinned_buffer_outlives_a_quick_release(void) {
  size_t base = tt_baseline();
  tether_resource_t* pool = host_pool();
  tether_buffer_t* b = quick_buffer(pool, 512);
  REQUIRE(b != NULL);
  unsigned char* p = NULL;
  REQUIRE_OK(tether_buffer_get_ptr(b, (void**)&p));
  CHECK_OK(tether_buffer_pin(b));
  CHECK(tether_internal_buffer_release_quick(b) == TETHER_QUICK_DONE);
  CHECK(tt_buffer_alive(b));
  CHECK(pool_used(pool) == 512);
  p[0] = 1;
  p[511] = 2; /* still ours (ASan would see a use after free) */
  CHECK_OK(tether_buffer_unpin(b));
  CHECK(!tt_buffer_alive(b));
  CHECK(pool_used(pool) == 0);
  tether_resource_release(pool);
  CHECK_LIVE(TETHER_OBJECT_ANY, base);
}

/* What the quick paths refuse: dead handles, resources without a quick path,
   size 0, a free the pool did not hand out; the public calls report them. */
static void test_refusals(void) {
  size_t base = tt_baseline();
  tether_resource_t* pool = host_pool();
  tether_resource_t* host = NULL;
  REQUIRE_OK(tether_host_resource_create(&host));
  void* out = NULL;
  CHECK(tether_internal_buffer_create_quick(host, 256, 0, &out) == TETHER_QUICK_REFUSED);
  CHECK(tether_internal_allocate_quick(host, 256, 0, 0, &out) == TETHER_QUICK_REFUSED);
  CHECK(tether_internal_buffer_create_quick(pool, 0, 0, &out) == TETHER_QUICK_REFUSED);
  CHECK(tether_internal_buffer_create_quick(NULL, 256, 0, &out) == TETHER_QUICK_REFUSED);
  CHECK(out == NULL);

  tether_buffer_t* b = quick_buffer(pool, 256);
  REQUIRE(b != NULL);
  CHECK(tether_internal_buffer_release_quick(b) == TETHER_QUICK_DONE);
  CHECK(tether_internal_buffer_release_quick(b) == TETHER_QUICK_REFUSED);  /* dead: the public call says so */
  CHECK_STATUS(TETHER_ERROR_INVALID_HANDLE, tether_buffer_release(b));
  tether_internal_buffer_release_finish(b);  /* not a handle the quick release ended: nothing happens */

  tether_buffer_t* live = quick_buffer(pool, 256);
  REQUIRE(live != NULL);
  tether_internal_buffer_release_finish(live);  /* a live handle is never destroyed this way */
  CHECK(tt_buffer_alive(live));
  CHECK_OK(tether_buffer_release(live));

  /* Raw memory: the quick path and the public calls mix. */
  void* p = NULL;
  CHECK(tether_internal_allocate_quick(pool, 1000, 0, 0, &p) == TETHER_QUICK_DONE);
  CHECK(pool_used(pool) == 1024);
  CHECK(tether_internal_deallocate_quick(pool, p, 999, 0, 0) == TETHER_QUICK_REFUSED);  /* wrong size */
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_deallocate(pool, p, 999, 0, 0), "size");
  CHECK(tether_internal_deallocate_quick(pool, p, 1000, 0, 0) == TETHER_QUICK_DONE);
  CHECK(tether_internal_deallocate_quick(pool, p, 1000, 0, 0) == TETHER_QUICK_REFUSED);  /* twice */
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_deallocate(pool, p, 1000, 0, 0), "");
  REQUIRE_OK(tether_resource_allocate(pool, 300, 0, 0, &p));
  CHECK(tether_internal_deallocate_quick(pool, p, 300, 0, 0) == TETHER_QUICK_DONE);
  CHECK(pool_used(pool) == 0);

  tether_resource_t* dead = pool;
  tether_resource_release(pool);
  CHECK(tether_internal_allocate_quick(dead, 256, 0, 0, &p) == TETHER_QUICK_REFUSED);
  CHECK(tether_internal_buffer_create_quick(dead, 256, 0, &out) == TETHER_QUICK_REFUSED);
  tether_resource_release(host);
  CHECK_LIVE(TETHER_OBJECT_ANY, base);
}

/* The current-resource slot and a resource reference (tether_internal.h): the
   slot is read only once it has a value (its default is made by the public
   call, under the slot's lock), a thread's override is read as it is, and a
   reference is dropped only if it is not the handle's last. */
static void test_current_slot_and_references(void) {
  size_t base = tt_baseline(); /* (made the host slot's default) */
  REQUIRE_OK(tether_current_resource_set(TETHER_DEVICE_HOST, NULL, NULL)); /* unset: no default */
  tether_resource_t* got = NULL;
  tether_resource_t* expected = NULL;
  /* An unset slot is read only by the public call, which makes its default. */
  CHECK(tether_internal_current_resource_get_quick(TETHER_DEVICE_HOST, &got) == TETHER_QUICK_REFUSED);
  CHECK(got == NULL);
  REQUIRE_OK(tether_current_resource_get(TETHER_DEVICE_HOST, &expected));
  CHECK(tether_internal_current_resource_get_quick(TETHER_DEVICE_HOST, &got) == TETHER_QUICK_DONE);
  CHECK(got == expected);
  CHECK(tether_internal_resource_release_quick(got) == TETHER_QUICK_DONE); /* the slot keeps one */
  CHECK(tether_internal_resource_release_quick(NULL) == TETHER_QUICK_DONE);
  CHECK_OK(tether_resource_release(expected));

  tether_resource_t* pool = host_pool();
  REQUIRE_OK(tether_current_resource_set(TETHER_DEVICE_HOST, pool, NULL));
  got = NULL;
  CHECK(tether_internal_current_resource_get_quick(TETHER_DEVICE_HOST, &got) == TETHER_QUICK_DONE);
  CHECK(got == pool);
  CHECK(tether_internal_resource_release_quick(got) == TETHER_QUICK_DONE);
  tether_resource_t* other = host_pool();
  REQUIRE_OK(tether_current_resource_push(TETHER_DEVICE_HOST, other));
  CHECK(tether_internal_current_resource_get_quick(TETHER_DEVICE_HOST, &got) == TETHER_QUICK_DONE);
  CHECK(got == other);
  CHECK(tether_internal_resource_release_quick(got) == TETHER_QUICK_DONE);
  CHECK_OK(tether_current_resource_pop(TETHER_DEVICE_HOST));
  /* Bad devices and out pointers: refused, nothing recorded; the public call reports them. */
  CHECK(tether_internal_current_resource_get_quick(-7, &got) == TETHER_QUICK_REFUSED);
  CHECK(tether_internal_current_resource_get_quick(1 << 20, &got) == TETHER_QUICK_REFUSED);
  CHECK(tether_internal_current_resource_get_quick(TETHER_DEVICE_HOST, NULL) == TETHER_QUICK_REFUSED);
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_current_resource_get(-7, &got), "device");
  REQUIRE_OK(tether_current_resource_set(TETHER_DEVICE_HOST, NULL, NULL)); /* unset again */

  /* The last reference is never dropped quick (the release would destroy the resource). */
  CHECK(tt_resource_alive(other));
  CHECK(tether_internal_resource_release_quick(other) == TETHER_QUICK_REFUSED);
  CHECK(tt_resource_alive(other));
  CHECK_OK(tether_resource_release(other));
  CHECK(tether_internal_resource_release_quick(other) == TETHER_QUICK_REFUSED); /* dead */
  CHECK(tether_internal_resource_release_quick((tether_resource_t*)(uintptr_t)0x12345) == TETHER_QUICK_REFUSED);
  tether_buffer_t* b = quick_buffer(pool, 64);
  REQUIRE(b != NULL);
  CHECK(tether_internal_resource_release_quick((tether_resource_t*)b) == TETHER_QUICK_REFUSED); /* a buffer */
  CHECK(tt_buffer_alive(b));
  CHECK_OK(tether_buffer_release(b));
  CHECK_OK(tether_resource_release(pool));
  CHECK_LIVE(TETHER_OBJECT_ANY, base - 1); /* the default went with the slot's unset */
}

/* Threads mixing the quick and the public calls on one pool, and releasing
   buffers other threads made. */
#define THREADS 4
#ifndef ROUNDS
#define ROUNDS 20000
#endif
static tether_resource_t* g_pool;
static _Atomic(tether_buffer_t*) g_handoff[THREADS];

static void* worker(void* arg) {
  int t = (int)(intptr_t)arg;
  for (int i = 0; i < ROUNDS; ++i) {
    size_t size = 64 + (size_t)((i * 37 + t * 11) % 4000);
    tether_buffer_t* b = NULL;
    void* out = NULL;
    if (tether_internal_buffer_create_quick(g_pool, size, 0, &out) == TETHER_QUICK_DONE) {
      b = (tether_buffer_t*)out;
    } else if (tether_buffer_create(g_pool, 0, size, 0, &b) != TETHER_OK) {
      CHECK(0);
      continue;
    }
    unsigned char* p = NULL;
    if (tether_buffer_get_ptr(b, (void**)&p) == TETHER_OK) {
      p[0] = (unsigned char)t;
      p[size - 1] = (unsigned char)t;
    }
    /* Hand it to the next thread; release what the previous one left. */
    tether_buffer_t* theirs = atomic_exchange(&g_handoff[(t + 1) % THREADS], b);
    if (theirs != NULL) {
      int q = tether_internal_buffer_release_quick(theirs);
      if (q == TETHER_QUICK_FINISH) tether_internal_buffer_release_finish(theirs);
      else if (q == TETHER_QUICK_REFUSED) CHECK_OK(tether_buffer_release(theirs));
    }
  }
  return NULL;
}

static void test_threads(void) {
  size_t base = tt_baseline();
  g_pool = host_pool();
  pthread_t th[THREADS];
  for (int t = 0; t < THREADS; ++t) pthread_create(&th[t], NULL, worker, (void*)(intptr_t)t);
  for (int t = 0; t < THREADS; ++t) pthread_join(th[t], NULL);
  for (int t = 0; t < THREADS; ++t) CHECK_OK(tether_buffer_release(atomic_exchange(&g_handoff[t], NULL)));
  CHECK(pool_used(g_pool) == 0);
  tether_resource_release(g_pool);
  CHECK_LIVE(TETHER_OBJECT_ANY, base);
}

int main(void) {
  RUN(test_current_slot_and_references);
  RUN(test_buffer_pairs);
  RUN(test_last_resource_reference_is_not_dropped_quick);
  RUN(test_pinned_buffer_outlives_a_quick_release);
  RUN(test_refusals);
  RUN(test_threads);
  return tt_finish("test_quick");
}
