/*
 * Every free is validated (issue 11, items 1-3 and 8): a resource accepts
 * only memory it handed out itself; anything else is INVALID_ARGUMENT naming
 * the pointer, with no memory touched and every layer's books exact. And a
 * caller's release too many never destroys a resource under its raw
 * allocations, nor leaves the current-resource table handing out a dead
 * handle as OK. A program of its own: the orphans it makes stay for the life
 * of the process.
 */
#define _DEFAULT_SOURCE 1 /* mmap's MAP_ANONYMOUS */
#include <sys/mman.h>
#include <unistd.h>

#include "test_support.h"

static size_t page(void) { return (size_t)sysconf(_SC_PAGESIZE); }

static uint64_t current_bytes(tether_resource_t* stats) {
  tether_statistics_t s = TETHER_STATISTICS_INIT;
  if (tether_resource_get_statistics(stats, &s) != TETHER_OK) return UINT64_MAX;
  return s.current_bytes;
}

/* 1. Pointers the host resource never handed out. */
static void foreign_pointers_into_host(void) {
  tether_resource_t* h = NULL;
  unsigned char* two;
  void *p = NULL, *theirs;
  size_t ps = page(), i;
  int intact = 1;
  REQUIRE_OK(tether_host_resource_create(&h));

  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_deallocate(h, (void*)4096, 1, 0, 0), "0x1000");

  two = mmap(NULL, 2 * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(two != MAP_FAILED);
  memset(two, 0x5a, 2 * ps);
  /* The start of an mmap'd page (whatever lies before it) ... */
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_deallocate(h, two + ps, 64, 0, 0), "pointer");
  for (i = 0; i < 2 * ps; ++i) intact &= two[i] == 0x5a;
  CHECK(intact); /* nothing touched */
  /* ... and the page right after a PROT_NONE page. */
  REQUIRE(mprotect(two, ps, PROT_NONE) == 0);
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_deallocate(h, two + ps, 64, 256, 0), "not allocated");
  munmap(two, 2 * ps);

  /* Another allocator's memory (numpy's data pointer is one). */
  theirs = malloc(1000);
  REQUIRE(theirs != NULL);
  CHECK_STATUS(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_deallocate(h, theirs, 1000, 16, 0));
  free(theirs);

  /* A double free of a large block (gone back to the system after the first). */
  REQUIRE_OK(tether_resource_allocate(h, (size_t)64 << 20, 4096, 0, &p));
  CHECK_OK(tether_resource_deallocate(h, p, (size_t)64 << 20, 4096, 0));
  CHECK_STATUS(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_deallocate(h, p, (size_t)64 << 20, 4096, 0));

  /* Still usable. */
  REQUIRE_OK(tether_resource_allocate(h, 100, 0, 0, &p));
  CHECK_OK(tether_resource_deallocate(h, p, 100, 0, 0));
  CHECK_OK(tether_resource_release(h));
}

/* 2. A dependent's chunk freed into its upstream by a caller. */
static void dependents_chunks_stay_theirs(void) {
  tether_resource_t *h = NULL, *lower = NULL, *upper = NULL;
  tether_pool_options_t o = TETHER_POOL_OPTIONS_INIT;
  tether_pool_info_t info = TETHER_POOL_INFO_INIT;
  void *p = NULL, *q = NULL;
  o.initial_size = (size_t)1 << 20;
  REQUIRE_OK(tether_host_resource_create(&h));
  REQUIRE_OK(tether_pool_resource_create(h, &o, &lower));
  REQUIRE_OK(tether_resource_allocate(lower, 4096, 0, 0, &p)); /* the start of lower's chunk */
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_deallocate(h, p, (size_t)1 << 20, 256, 0),
              "held by a resource over this one");
  REQUIRE_OK(tether_resource_allocate(lower, 4096, 0, 0, &q));
  CHECK(q != p); /* not handed out twice */
  CHECK_OK(tether_resource_deallocate(lower, q, 4096, 0, 0));

  /* Pool over pool: upper's chunk is a block of lower. */
  REQUIRE_OK(tether_pool_resource_create(lower, &o, &upper));
  REQUIRE_OK(tether_resource_allocate(upper, 4096, 0, 0, &q));
  CHECK_STATUS(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_deallocate(lower, q, (size_t)1 << 20, 256, 0));
  CHECK_OK(tether_resource_get_pool_info(upper, &info));
  CHECK(info.chunk_count == 1);
  CHECK_OK(tether_resource_deallocate(upper, q, 4096, 0, 0));
  CHECK_OK(tether_resource_trim(upper)); /* the dependent gives its chunk back */
  CHECK_OK(tether_resource_get_pool_info(upper, &info));
  CHECK(info.chunk_count == 0);
  CHECK_OK(tether_resource_release(upper));
  CHECK_OK(tether_resource_deallocate(lower, p, 4096, 0, 0));
  CHECK_OK(tether_resource_release(lower)); /* its destructor gives its chunk back */
  CHECK_OK(tether_resource_release(h));
}

/* 3. Wrong-resource frees: every layer's books stay exact. */
static void wrong_resource_frees(void) {
  tether_resource_t *a = NULL, *b = NULL, *stats = NULL;
  void *p = NULL, *q = NULL;
  int equal = 0;
  const size_t orphans = tether_debug_orphaned_resources();
  REQUIRE_OK(tether_host_resource_create(&a));
  REQUIRE_OK(tether_host_resource_create(&b));
  REQUIRE_OK(tether_statistics_adaptor_create(a, &stats));

  /* (a) upstream memory freed through the adaptor */
  REQUIRE_OK(tether_resource_allocate(a, 64, 0, 0, &p));
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_deallocate(stats, p, 64, 0, 0), "not through");
  CHECK(current_bytes(stats) == 0); /* did not wrap to 2^64 - 64 */
  /* (b) the adaptor's memory freed directly into its upstream */
  REQUIRE_OK(tether_resource_allocate(stats, 64, 0, 0, &q));
  CHECK_STATUS(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_deallocate(a, q, 64, 0, 0));
  CHECK(current_bytes(stats) == 64);
  CHECK_OK(tether_resource_deallocate(stats, q, 64, 0, 0));
  CHECK(current_bytes(stats) == 0);
  /* (c) host A's pointer freed into host B: equal for comparison, not for frees */
  CHECK_OK(tether_resource_is_equal(a, b, &equal));
  CHECK(equal == 1);
  CHECK_ERROR(TETHER_ERROR_INVALID_ARGUMENT, tether_resource_deallocate(b, p, 64, 0, 0), "this host resource");
  CHECK_OK(tether_resource_deallocate(a, p, 64, 0, 0));

  CHECK_OK(tether_resource_release(stats));
  CHECK_OK(tether_resource_release(a));
  CHECK_OK(tether_resource_release(b));
  CHECK(tether_debug_orphaned_resources() == orphans); /* no phantom orphan */
}

/* 8. A release too many while a buffer holds the resource's core: orphaned, never destroyed under raw memory. */
static void extra_release_with_a_buffer_live(void) {
  tether_resource_t *h = NULL, *p = NULL;
  tether_buffer_t* buf = NULL;
  void* raw = NULL;
  const size_t orphans = tether_debug_orphaned_resources();
  REQUIRE_OK(tether_host_resource_create(&h));
  REQUIRE_OK(tether_pool_resource_create(h, NULL, &p));
  CHECK_OK(tether_resource_release(h));
  REQUIRE_OK(tether_buffer_create(p, TETHER_DEVICE_HOST, 4096, 0, &buf)); /* retains p */
  REQUIRE_OK(tether_resource_allocate(p, 4096, 0, 0, &raw));
  CHECK_OK(tether_resource_release(p));
  CHECK_OK(tether_resource_release(p)); /* the bug: the buffer's reference */
  CHECK(!tt_resource_alive(p));
  CHECK(tether_debug_orphaned_resources() == orphans + 1);
  CHECK(tether_debug_orphaned_bytes() >= 4096);
  CHECK_OK(tether_buffer_release(buf)); /* frees into the pool, which must stay */
  memset(raw, 0x42, 4096);              /* still ours (AddressSanitizer would see a use after free) */
  CHECK(tether_debug_orphaned_resources() == orphans + 1);
}

/* 8. A release too many of the installed current resource. */
static void extra_release_of_the_current_resource(void) {
  tether_resource_t *h = NULL, *h2 = NULL, *got = NULL, *prev = NULL;
  tether_buffer_t* buf = NULL;
  void *raw = NULL, *p = NULL;
  const size_t orphans = tether_debug_orphaned_resources();
  const size_t live = tt_baseline();
  REQUIRE_OK(tether_host_resource_create(&h));     /* +1 */
  CHECK_OK(tether_current_resource_set(TETHER_DEVICE_HOST, h, NULL)); /* the table's +1 */
  REQUIRE_OK(tether_resource_allocate(h, 256, 0, 0, &raw));
  CHECK_OK(tether_resource_release(h));
  CHECK_OK(tether_resource_release(h)); /* the bug: the table's reference */
  CHECK(!tt_resource_alive(h));
  CHECK(tether_debug_orphaned_resources() == orphans + 1); /* kept with its raw memory */
  memset(raw, 0x17, 256);

  got = (tether_resource_t*)1;
  CHECK_ERROR(TETHER_ERROR_INVALID_HANDLE, tether_current_resource_get(TETHER_DEVICE_HOST, &got), "released");
  CHECK(got == NULL);
  CHECK_STATUS(TETHER_ERROR_INVALID_HANDLE, tether_buffer_create(NULL, TETHER_DEVICE_HOST, 64, 0, &buf));
  CHECK(buf == NULL);
  CHECK_STATUS(TETHER_ERROR_INVALID_HANDLE, tether_resource_allocate(h, 64, 0, 0, &p));

  /* A new resource can be installed; the dead one is not handed back as owned. */
  REQUIRE_OK(tether_host_resource_create(&h2));
  prev = (tether_resource_t*)1;
  CHECK_OK(tether_current_resource_set(TETHER_DEVICE_HOST, h2, &prev));
  CHECK(prev == NULL);
  CHECK_OK(tether_current_resource_get(TETHER_DEVICE_HOST, &got));
  CHECK(got == h2);
  CHECK_OK(tether_resource_release(got));
  CHECK_OK(tether_current_resource_set(TETHER_DEVICE_HOST, NULL, &prev));
  CHECK(prev == h2);
  CHECK_OK(tether_resource_release(prev));
  CHECK_OK(tether_resource_release(h2));
  CHECK(tt_baseline() == live);
}

/* Runs every case, or only the one named by the first argument (one crash per run when checking old code). */
#define RUN_IF(test)                                      \
  do {                                                    \
    if (only == NULL || strcmp(only, #test) == 0) RUN(test); \
  } while (0)

int main(int argc, char** argv) {
  const char* only = argc > 1 ? argv[1] : NULL;
  RUN_IF(foreign_pointers_into_host);
  RUN_IF(dependents_chunks_stay_theirs);
  RUN_IF(wrong_resource_frees);
  RUN_IF(extra_release_with_a_buffer_live);
  RUN_IF(extra_release_of_the_current_resource);
  return tt_finish("test_frees");
}
