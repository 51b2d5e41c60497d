/*
 * What the C ABI adds to the pool's hot path (issue #13): allocate + free of
 * one size, repeatedly, on one thread, on a tether pool over host memory with
 * a large initial size, through tether_resource_allocate/deallocate, and the
 * same loop on the same kind of pool called directly through the C++ core
 * (capi_cost_core.cpp), in one run. Also the C ABI with a non-zero stream
 * (the CUDA path's shape: a stream-ordered pool keys its free lists by it).
 * Prints the median ns per pair of RUNS runs, the difference and the ratio.
 * A benchmark, not a test: it never fails (it says what it skipped).
 *
 * usage: bench_capi_cost [pairs per run (default 2000000)] [initial size in MiB (default 8192)]
 */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tether/tether.h"

#define RUNS 9
#define SIZE 256

/* capi_cost_core.cpp: the same loop on a core pool over host memory; < 0 if it could not run. */
double capi_cost_core_ns_per_pair(size_t initial_size, size_t size, long pairs, int runs);

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* Median ns per pair, or -1 if a call failed (the message is printed). */
static double capi_ns_per_pair(tether_resource_t* r, tether_stream_t stream, long pairs) {
  double t[RUNS];
  int run;
  long i;
  for (run = 0; run < RUNS; ++run) {
    double start = now_ns();
    for (i = 0; i < pairs; ++i) {
      void* p = NULL;
      if (tether_resource_allocate(r, SIZE, 0, stream, &p) != TETHER_OK ||
          tether_resource_deallocate(r, p, SIZE, 0, stream) != TETHER_OK) {
        printf("  (failed: %s)\n", tether_last_error_message());
        return -1;
      }
    }
    t[run] = (now_ns() - start) / (double)pairs;
  }
  qsort(t, RUNS, sizeof t[0], cmp);
  return t[RUNS / 2];
}

static tether_resource_t* make_pool(tether_resource_t* host, size_t initial) {
  tether_pool_options_t o = TETHER_POOL_OPTIONS_INIT;
  tether_resource_t* pool = NULL;
  o.initial_size = initial;
  if (tether_pool_resource_create(host, &o, &pool) != TETHER_OK) {
    printf("pool with initial size %zu MiB: %s\n", initial >> 20, tether_last_error_message());
    return NULL;
  }
  return pool;
}

int main(int argc, char** argv) {
  long pairs = argc > 1 ? atol(argv[1]) : 2000000L;
  size_t initial = (argc > 2 ? (size_t)atol(argv[2]) : (size_t)8192) << 20;
  tether_resource_t *host = NULL, *pool = NULL;
  double capi, capi_stream, core;
  if (pairs <= 0) pairs = 2000000L;
  if (tether_host_resource_create(&host) != TETHER_OK) {
    printf("no host resource: %s\n", tether_last_error_message());
    return 0;
  }
  pool = make_pool(host, initial);
  if (pool == NULL && initial > ((size_t)64 << 20)) {
    initial = (size_t)64 << 20;
    printf("falling back to a %zu MiB initial size\n", initial >> 20);
    pool = make_pool(host, initial);
  }
  if (pool == NULL) {
    tether_resource_release(host);
    return 0;
  }
  printf("allocate+free of %d B on one thread, pool over host memory, %zu MiB initial, "
         "median of %d runs of %ld pairs:\n", SIZE, initial >> 20, RUNS, pairs);
  (void)capi_ns_per_pair(pool, 0, pairs / 10 + 1); /* warm up */
  core = capi_cost_core_ns_per_pair(initial, SIZE, pairs, RUNS);
  capi = capi_ns_per_pair(pool, 0, pairs);
  capi_stream = capi_ns_per_pair(pool, (tether_stream_t)(uintptr_t)0x1000, pairs);
  if (core > 0)
    printf("  core pool, direct C++ call : %7.1f ns/pair\n", core);
  else
    printf("  core pool, direct C++ call : skipped\n");
  if (capi > 0) {
    printf("  C ABI, stream 0            : %7.1f ns/pair", capi);
    if (core > 0) printf("   (+%.1f ns, %.2fx the core)", capi - core, capi / core);
    printf("\n");
  }
  if (capi_stream > 0) {
    printf("  C ABI, non-zero stream     : %7.1f ns/pair", capi_stream);
    if (core > 0) printf("   (+%.1f ns, %.2fx the core)", capi_stream - core, capi_stream / core);
    printf("\n");
  }
  tether_resource_release(pool);
  tether_resource_release(host);
  return 0;
}
