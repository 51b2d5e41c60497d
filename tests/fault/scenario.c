/*
 * scenario.c - a fault-injection scenario over the public C ABI.
 *
 * Run under tests/fault/malloc_shim.c (LD_PRELOAD) by ci/fault.sh: the shim
 * fails the Nth host allocation (or each with a probability) while the
 * scenario is armed. The scenario builds resources, pools (over host, over an
 * adaptor over a pool), adaptors, buffers and table entries, uses them and
 * releases them in three orders, and checks:
 *   - every call returns TETHER_OK or TETHER_ERROR_OUT_OF_MEMORY (with a
 *     message), except where the contract fixes the status: release,
 *     deallocate of a live allocation, retain, pop of a pushed override and
 *     the plain getters always succeed (they may not fail for lack of memory);
 *   - a failed create leaves *out NULL;
 *   - after the failures stop, every resource still held is usable (allocate
 *     and free again) and the table's host slot is what it was;
 *   - after everything is released the census (tether_debug_live_objects) is
 *     back to its baseline and no resource is orphaned.
 * Without the shim it runs unarmed (a plain functional test). Prints
 * "allocations: N failed: F" (the counted allocation sites) and exits 0 on
 * success, 1 on a wrong status, 2 if a census or usability check fails.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tether/tether.h"

static void (*shim_arm)(int);
static long (*shim_count)(void);
static long (*shim_failures)(void);
static int g_wrong;  /* calls with a status the contract forbids */
static int g_broken; /* usability / census failures */

static void arm(int on) {
  if (shim_arm) shim_arm(on);
}

static void complain(int line, const char* call, tether_status_t s, const char* why) {
  arm(0);
  fprintf(stderr, "scenario.c:%d: %s returned %s (%d): %s [%s]\n", line, call, tether_status_name(s), (int)s, why,
          tether_last_error_message());
  ++g_wrong;
  arm(1);
}

/* OK or OUT_OF_MEMORY (with a message). */
static tether_status_t st(int line, const char* call, tether_status_t s) {
  if (s == TETHER_OK) return s;
  if (s != TETHER_ERROR_OUT_OF_MEMORY) {
    complain(line, call, s, "expected OK or OUT_OF_MEMORY");
  } else if (tether_last_error_message()[0] == '\0') {
    complain(line, call, s, "OUT_OF_MEMORY without a message");
  }
  return s;
}
/* Must succeed whatever the heap does. */
static tether_status_t must(int line, const char* call, tether_status_t s) {
  if (s != TETHER_OK) complain(line, call, s, "must not fail");
  return s;
}
#define ST(call) st(__LINE__, #call, (call))
#define MUST(call) must(__LINE__, #call, (call))
#define OK(call) (ST(call) == TETHER_OK)

/* A create that failed must leave *out NULL. */
#define CREATED(call, out)                                                       \
  (OK(call) ? 1 : ((out) != NULL ? (complain(__LINE__, #call, 0, "failed create left *out set"), 0) : 0))

enum { kResources = 5 };

static void use_resource(tether_resource_t* r) {
  static const size_t sizes[] = {1, 100, 4096, 70000, 1u << 20};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; ++i) {
    void* p = NULL;
    const size_t align = (i % 2) ? 256 : 0;
    if (CREATED(tether_resource_allocate(r, sizes[i], align, 0, &p), p)) {
      memset(p, 0x5a, sizes[i]);
      MUST(tether_resource_deallocate(r, p, sizes[i], align, 0));
    }
  }
  tether_resource_properties_t props = TETHER_RESOURCE_PROPERTIES_INIT;
  MUST(tether_resource_get_properties(r, &props));
  if (tether_resource_get_name(r) == NULL) complain(__LINE__, "tether_resource_get_name", 0, "NULL name");
  tether_resource_t* up = NULL;
  ST(tether_resource_get_upstream(r, &up)); /* borrowed */
  int eq = 0;
  ST(tether_resource_is_equal(r, r, &eq));
  MUST(tether_resource_retain(r));
  MUST(tether_resource_release(r));
}

static void use_buffers(tether_resource_t* r, tether_buffer_t** keep) {
  static char src[9000], dst[9000];
  tether_buffer_t* b = NULL;
  if (!CREATED(tether_buffer_create(r, TETHER_DEVICE_HOST, 5000, 0, &b), b)) return;
  ST(tether_buffer_copy_from_host(b, 0, src, 5000));
  ST(tether_buffer_copy_to_host(b, 0, dst, 5000));
  if (OK(tether_buffer_resize(b, 9000))) ST(tether_buffer_copy_from_host(b, 0, src, 9000));
  tether_buffer_t* c = NULL;
  if (CREATED(tether_buffer_create(r, TETHER_DEVICE_HOST, 4000, 0, &c), c)) {
    ST(tether_buffer_copy(c, 0, b, 0, 4000));
    MUST(tether_buffer_release(c));
  }
  tether_buffer_info_t info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  ST(tether_buffer_get_info(b, &info));
  ST(tether_buffer_set_stream(b, 0));
  *keep = b; /* released after its resource: the other order */
}

static void use_table(tether_resource_t* pool, tether_resource_t* stats) {
  tether_resource_t* prev = NULL;
  if (pool != NULL && OK(tether_current_resource_set(TETHER_DEVICE_HOST, pool, &prev))) {
    tether_resource_t* cur = NULL;
    if (CREATED(tether_current_resource_get(TETHER_DEVICE_HOST, &cur), cur)) MUST(tether_resource_release(cur));
    tether_buffer_t* b = NULL;
    if (CREATED(tether_buffer_create(NULL, TETHER_DEVICE_HOST, 300, 0, &b), b)) MUST(tether_buffer_release(b));
    tether_resource_t* mine = NULL;
    /* Putting the previous one back must work even now: it is memory-free. */
    if (OK(tether_current_resource_set(TETHER_DEVICE_HOST, prev, &mine))) MUST(tether_resource_release(mine));
    MUST(tether_resource_release(prev));
  }
  if (stats != NULL && OK(tether_current_resource_push(TETHER_DEVICE_HOST, stats))) {
    tether_buffer_t* b = NULL;
    if (CREATED(tether_buffer_create(NULL, TETHER_DEVICE_HOST, 100, 0, &b), b)) MUST(tether_buffer_release(b));
    MUST(tether_current_resource_pop(TETHER_DEVICE_HOST));
  }
  int locked = 1;
  ST(tether_current_resource_is_locked(TETHER_DEVICE_HOST, &locked));
}

static void round_(int order) {
  tether_resource_t* r[kResources] = {NULL};
  tether_buffer_t* keep[kResources] = {NULL};
  tether_pool_options_t o = TETHER_POOL_OPTIONS_INIT;
  o.growth_size = 1 << 16;
  arm(1);
  CREATED(tether_host_resource_create(&r[0]), r[0]);
  if (r[0]) CREATED(tether_pool_resource_create(r[0], &o, &r[1]), r[1]);
  if (r[1]) CREATED(tether_statistics_adaptor_create(r[1], &r[2]), r[2]);
  if (r[2]) CREATED(tether_pool_resource_create(r[2], NULL, &r[3]), r[3]);
  if (r[0]) CREATED(tether_statistics_adaptor_create(r[0], &r[4]), r[4]);
  for (int i = 0; i < kResources; ++i)
    if (r[i]) {
      use_resource(r[i]);
      use_buffers(r[i], &keep[i]);
    }
  use_table(r[1], r[2]);
  if (r[2]) {
    tether_statistics_t s = TETHER_STATISTICS_INIT;
    ST(tether_resource_get_statistics(r[2], &s));
    ST(tether_resource_reset_peak_statistics(r[2]));
  }
  if (r[1]) {
    tether_pool_info_t pi = TETHER_POOL_INFO_INIT;
    ST(tether_resource_get_pool_info(r[1], &pi));
    ST(tether_resource_trim(r[1]));
  }
  arm(0);

  /* The failures have stopped: everything still held works. */
  for (int i = 0; i < kResources; ++i) {
    if (!r[i]) continue;
    void* p = NULL;
    if (tether_resource_allocate(r[i], 1000, 0, 0, &p) != TETHER_OK ||
        tether_resource_deallocate(r[i], p, 1000, 0, 0) != TETHER_OK) {
      fprintf(stderr, "scenario: resource %d unusable after the failures: %s\n", i, tether_last_error_message());
      ++g_broken;
    }
  }

  /* Releases in three orders, armed again (a release never fails). */
  arm(1);
  static const int orders[3][kResources] = {{0, 1, 2, 3, 4}, {4, 3, 2, 1, 0}, {2, 0, 4, 1, 3}};
  for (int k = 0; k < kResources; ++k) {
    const int i = orders[order % 3][k];
    if (MUST(tether_resource_release(r[i])) != TETHER_OK) fprintf(stderr, "  resource %d (order %d)\n", i, order);
    if (order % 2) MUST(tether_buffer_release(keep[i]));
  }
  if (order % 2 == 0)
    for (int i = 0; i < kResources; ++i) MUST(tether_buffer_release(keep[i]));
  arm(0);
}

int main(void) {
  shim_arm = (void (*)(int))dlsym(RTLD_DEFAULT, "fault_shim_arm");
  shim_count = (long (*)(void))dlsym(RTLD_DEFAULT, "fault_shim_count");
  shim_failures = (long (*)(void))dlsym(RTLD_DEFAULT, "fault_shim_failures");
  printf("scenario: %s\n", shim_arm ? "with the malloc shim" : "without the shim");
  fflush(stdout);

  /* The host slot's default, created before the baseline (it lives as long as the table). */
  tether_resource_t* dflt = NULL;
  if (tether_current_resource_get(TETHER_DEVICE_HOST, &dflt) != TETHER_OK) return 2;
  tether_resource_release(dflt);
  const size_t baseline = tether_debug_live_objects(TETHER_OBJECT_ANY);

  const char* o = getenv("SCENARIO_ORDER");
  for (int order = 0; order < 3; ++order) round_(o ? atoi(o) : order);

  tether_resource_t* now = NULL;
  if (tether_current_resource_get(TETHER_DEVICE_HOST, &now) != TETHER_OK || now != dflt) {
    fprintf(stderr, "scenario: the host slot changed (%p, was %p)\n", (void*)now, (void*)dflt);
    ++g_broken;
  }
  tether_resource_release(now);
  const size_t live = tether_debug_live_objects(TETHER_OBJECT_ANY);
  if (live != baseline) {
    fprintf(stderr, "scenario: census %zu, baseline %zu\n", live, baseline);
    ++g_broken;
  }
  if (tether_debug_orphaned_resources() != 0) {
    fprintf(stderr, "scenario: %zu orphaned resource(s)\n", tether_debug_orphaned_resources());
    ++g_broken;
  }
  printf("allocations: %ld failed: %ld wrong: %d broken: %d\n", shim_count ? shim_count() : 0L,
         shim_failures ? shim_failures() : 0L, g_wrong, g_broken);
  return g_wrong ? 1 : g_broken ? 2 : 0;
}
