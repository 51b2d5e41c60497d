/*
 * The ownership contract (DESIGN.md section 2): dependents retain their
 * dependencies, so handles can be released in any order - what garbage
 * collectors need - and every scenario ends with the live-handle census back
 * at its baseline.
 */
#include "test_support.h"

static size_t g_base;

/* A pool over a fresh host resource; the caller owns both. */
static void make_pool(tether_resource_t** host, tether_resource_t** pool) {
  REQUIRE_OK(tether_host_resource_create(host));
  REQUIRE_OK(tether_pool_resource_create(*host, NULL, pool));
}

/* Allocate, write and free through `r`: proves it (and what it depends on) works. */
static void exercise(tether_resource_t* r) {
  void* p = NULL;
  CHECK_OK(tether_resource_allocate(r, 1000, 0, 0, &p));
  CHECK(p != NULL);
  if (p != NULL) {
    memset(p, 0xab, 1000);
    CHECK_OK(tether_resource_deallocate(r, p, 1000, 0, 0));
  }
}

static void test_create_release_returns_to_baseline(void) {
  tether_resource_t* h = NULL;
  REQUIRE_OK(tether_host_resource_create(&h));
  CHECK_LIVE(TETHER_OBJECT_RESOURCE, g_base + 1);
  CHECK_LIVE(TETHER_OBJECT_BUFFER, 0);
  CHECK_OK(tether_resource_release(h));
  CHECK_LIVE(TETHER_OBJECT_ANY, g_base);
  CHECK(!tt_resource_alive(h));
}

static void test_retain_counts(void) {
  tether_resource_t* h = NULL;
  REQUIRE_OK(tether_host_resource_create(&h));
  CHECK_OK(tether_resource_retain(h));
  CHECK_OK(tether_resource_retain(h));
  CHECK_OK(tether_resource_release(h)); /* 2 left */
  CHECK_OK(tether_resource_release(h)); /* 1 left */
  CHECK(tt_resource_alive(h));
  exercise(h);
  CHECK_OK(tether_resource_release(h)); /* gone */
  CHECK_STATUS(TETHER_ERROR_INVALID_HANDLE, tether_resource_release(h)); /* double release */
  CHECK_STATUS(TETHER_OK, tether_resource_release(NULL));                /* NULL: no-op */
  CHECK_LIVE(TETHER_OBJECT_ANY, g_base);
}

static void test_upstream_released_before_pool(void) {
  tether_resource_t *h = NULL, *p = NULL, *up = NULL;
  make_pool(&h, &p);
  CHECK_OK(tether_resource_release(h)); /* the pool still holds it */
  CHECK(tt_resource_alive(h));
  CHECK_OK(tether_resource_get_upstream(p, &up));
  CHECK(up == h); /* handle identity is kept */
  exercise(p);
  CHECK_OK(tether_resource_release(p));
  CHECK(!tt_resource_alive(p));
  CHECK(!tt_resource_alive(h)); /* the pool's reference was the last one */
  CHECK_LIVE(TETHER_OBJECT_ANY, g_base);
}

static void test_resource_released_before_buffer(void) {
  tether_resource_t *h = NULL, *p = NULL, *from = NULL;
  tether_buffer_t* b = NULL;
  unsigned char in[256], out[256];
  size_t i;
  for (i = 0; i < sizeof in; ++i) in[i] = (unsigned char)i;
  make_pool(&h, &p);
  REQUIRE_OK(tether_buffer_create(p, TETHER_DEVICE_HOST, sizeof in, 0, &b));
  CHECK_OK(tether_resource_release(p));
  CHECK_OK(tether_resource_release(h));
  CHECK_LIVE(TETHER_OBJECT_BUFFER, 1);
  /* The buffer keeps the pool (and through it the host resource) alive. */
  CHECK_OK(tether_buffer_get_resource(b, &from));
  CHECK(from == p);
  CHECK(tt_resource_alive(p));
  CHECK_OK(tether_buffer_copy_from_host(b, 0, in, sizeof in));
  memset(out, 0, sizeof out);
  CHECK_OK(tether_buffer_copy_to_host(b, 0, out, sizeof out));
  CHECK(memcmp(in, out, sizeof in) == 0);
  CHECK_OK(tether_buffer_resize(b, 4096)); /* still allocates from the released-by-us pool */
  CHECK_OK(tether_buffer_copy_to_host(b, 0, out, sizeof out));
  CHECK(memcmp(in, out, sizeof in) == 0);
  CHECK_OK(tether_buffer_release(b));
  CHECK(!tt_buffer_alive(b));
  CHECK(!tt_resource_alive(p));
  CHECK_LIVE(TETHER_OBJECT_ANY, g_base);
}

static void test_buffer_outlives_table_slot(void) {
  tether_resource_t *h = NULL, *s = NULL, *prev = NULL, *prev2 = NULL, *from = NULL;
  tether_buffer_t* b = NULL;
  tether_statistics_t st = TETHER_STATISTICS_INIT;
  REQUIRE_OK(tether_host_resource_create(&h));
  REQUIRE_OK(tether_statistics_adaptor_create(h, &s));
  CHECK_OK(tether_resource_release(h));
  REQUIRE_OK(tether_current_resource_set(TETHER_DEVICE_HOST, s, &prev));
  /* NULL resource: the buffer comes from the host slot's current resource. */
  REQUIRE_OK(tether_buffer_create(NULL, TETHER_DEVICE_HOST, 512, 0, &b));
  CHECK_OK(tether_buffer_get_resource(b, &from));
  CHECK(from == s);
  /* Replace the slot's resource and drop every reference we hold to it. */
  CHECK_OK(tether_current_resource_set(TETHER_DEVICE_HOST, prev, &prev2));
  CHECK(prev2 == s); /* handed back as +1 */
  CHECK_OK(tether_resource_release(prev));
  CHECK_OK(tether_resource_release(prev2));
  CHECK_OK(tether_resource_release(s));
  /* Only the buffer keeps the adaptor alive now; it still counts the buffer. */
  CHECK(tt_resource_alive(s));
  CHECK_OK(tether_resource_get_statistics(s, &st));
  CHECK(st.current_count == 1 && st.current_bytes == 512);
  CHECK_OK(tether_buffer_release(b));
  CHECK(!tt_resource_alive(s));
  CHECK_LIVE(TETHER_OBJECT_ANY, g_base);
}

/*
 * Every release order of {host, pool(host), stats(pool), buffer(stats)}:
 * 24 permutations, each checked for working objects along the way and the
 * census at the end. Covers front-to-back and back-to-front adaptor chains.
 */
static void release_in_order(const int order[4]) {
  tether_resource_t *h = NULL, *p = NULL, *s = NULL;
  tether_buffer_t* b = NULL;
  tether_statistics_t st = TETHER_STATISTICS_INIT;
  int i, j;
  int released[4] = {0, 0, 0, 0};
  make_pool(&h, &p);
  REQUIRE_OK(tether_statistics_adaptor_create(p, &s));
  REQUIRE_OK(tether_buffer_create(s, TETHER_DEVICE_HOST, 100, 0, &b));
  for (i = 0; i < 4; ++i) {
    switch (order[i]) {
      case 0: CHECK_OK(tether_resource_release(h)); break;
      case 1: CHECK_OK(tether_resource_release(p)); break;
      case 2: CHECK_OK(tether_resource_release(s)); break;
      default: CHECK_OK(tether_buffer_release(b)); break;
    }
    released[order[i]] = 1;
    /* Whatever is still referenced by us works, and sees its dependencies. */
    for (j = 0; j < 3; ++j) {
      tether_resource_t* r = j == 0 ? h : j == 1 ? p : s;
      if (!released[j]) exercise(r);
    }
    if (!released[2]) {
      CHECK_OK(tether_resource_get_statistics(s, &st));
      CHECK(st.current_count == (released[3] ? 0u : 1u));
    }
    if (!released[3]) {
      unsigned char x[100] = {1, 2, 3};
      CHECK_OK(tether_buffer_copy_from_host(b, 0, x, sizeof x));
    }
  }
  CHECK(!tt_resource_alive(h) && !tt_resource_alive(p) && !tt_resource_alive(s) && !tt_buffer_alive(b));
  CHECK_LIVE(TETHER_OBJECT_ANY, g_base);
}

static void test_every_release_order(void) {
  int order[4], a, b2, c, d, n = 0;
  for (a = 0; a < 4; ++a)
    for (b2 = 0; b2 < 4; ++b2)
      for (c = 0; c < 4; ++c)
        for (d = 0; d < 4; ++d) {
          if (a == b2 || a == c || a == d || b2 == c || b2 == d || c == d) continue;
          order[0] = a; order[1] = b2; order[2] = c; order[3] = d;
          release_in_order(order);
          ++n;
        }
  CHECK(n == 24);
}

/* stats(pool(host)) with outstanding raw allocations given back after the
 * caller dropped its references to the inner resources. */
static void test_chain_raw_allocations(void) {
  tether_resource_t *h = NULL, *p = NULL, *s = NULL;
  void* ptrs[16];
  int i;
  tether_statistics_t st = TETHER_STATISTICS_INIT;
  make_pool(&h, &p);
  REQUIRE_OK(tether_statistics_adaptor_create(p, &s));
  CHECK_OK(tether_resource_release(p));
  CHECK_OK(tether_resource_release(h));
  for (i = 0; i < 16; ++i) CHECK_OK(tether_resource_allocate(s, (size_t)(i + 1) * 64, 0, 0, &ptrs[i]));
  CHECK_OK(tether_resource_get_statistics(s, &st));
  CHECK(st.current_count == 16);
  for (i = 15; i >= 0; --i) CHECK_OK(tether_resource_deallocate(s, ptrs[i], (size_t)(i + 1) * 64, 0, 0));
  CHECK_OK(tether_resource_get_statistics(s, &st));
  CHECK(st.current_count == 0 && st.current_bytes == 0 && st.total_count == 16 && st.peak_count == 16);
  CHECK_OK(tether_resource_release(s));
  CHECK_LIVE(TETHER_OBJECT_ANY, g_base);
}

/* Retained references from many places (table, buffers, adaptors, caller). */
static void test_shared_references(void) {
  tether_resource_t *h = NULL, *s1 = NULL, *s2 = NULL, *prev = NULL, *back = NULL;
  tether_buffer_t *b1 = NULL, *b2 = NULL;
  REQUIRE_OK(tether_host_resource_create(&h));
  REQUIRE_OK(tether_statistics_adaptor_create(h, &s1));
  REQUIRE_OK(tether_statistics_adaptor_create(h, &s2)); /* two adaptors share one upstream */
  REQUIRE_OK(tether_buffer_create(h, TETHER_DEVICE_HOST, 64, 0, &b1));
  REQUIRE_OK(tether_buffer_create(s2, TETHER_DEVICE_HOST, 64, 0, &b2));
  REQUIRE_OK(tether_current_resource_set(TETHER_DEVICE_HOST, h, &prev));
  CHECK_OK(tether_resource_release(h));
  CHECK_OK(tether_resource_release(s1));
  exercise(s2);
  CHECK_OK(tether_resource_release(s2));
  CHECK_OK(tether_buffer_release(b2));
  CHECK(!tt_resource_alive(s2));
  CHECK(tt_resource_alive(h)); /* table + b1 */
  CHECK_OK(tether_current_resource_set(TETHER_DEVICE_HOST, prev, &back));
  CHECK(back == h);
  CHECK_OK(tether_resource_release(back));
  CHECK_OK(tether_resource_release(prev));
  CHECK(tt_resource_alive(h)); /* b1 */
  CHECK_OK(tether_buffer_release(b1));
  CHECK(!tt_resource_alive(h));
  CHECK_LIVE(TETHER_OBJECT_ANY, g_base);
}

int main(void) {
  g_base = tt_baseline();
  CHECK_LIVE(TETHER_OBJECT_BUFFER, 0);
  RUN(test_create_release_returns_to_baseline);
  RUN(test_retain_counts);
  RUN(test_upstream_released_before_pool);
  RUN(test_resource_released_before_buffer);
  RUN(test_buffer_outlives_table_slot);
  RUN(test_every_release_order);
  RUN(test_chain_raw_allocations);
  RUN(test_shared_references);
  return tt_finish("test_ownership");
}
