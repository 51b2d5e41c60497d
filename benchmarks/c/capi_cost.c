/*
 * What the C ABI adds to the pool's hot path (issue #13): allocate + free of
 * one size, repeatedly, on one thread, on a tether pool over host memory with
 * a large initial size, through tether_resource_allocate/deallocate, and the
 * same loop on the same kind of pool called directly through the C++ core
 * (capi_cost_core.cpp), in one run. Also the C ABI with a non-zero stream
 * (the CUDA path's shape: a stream-ordered pool keys its free lists by it).
 * Prints the median ns per pair of RUNS interleaved runs of each, the
 * difference and the ratio to the core.
 * A benchmark, not a test: it never fails (it says what it skipped).
 *
 * usage: bench_capi_cost [pairs per run (default 2000000)] [initial size in MiB (default 8192)]
 *        bench_capi_cost --count PAIRS [STREAM]
 * The second form only makes PAIRS C ABI allocate+free pairs (stream STREAM,
 * default 0) on a pool with a 64 MiB initial size, for an instruction count:
 *   valgrind --tool=callgrind bench_capi_cost --count 100000   (and 200000)
 * and the difference of the two totals / 100000 is instructions per pair.
 */
#define _POSIX_C_SOURCE 199309L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "random_pattern.h" /* bench_now_ns, bench_compare_double */
#include "tether/tether.h"

#define RUNS 9
#define SIZE 256

/* capi_cost_core.cpp: the same loop on a core pool over host memory. */
int capi_cost_core_create(size_t initial_size);
double capi_cost_core_run(size_t size, long pairs);
void capi_cost_core_destroy(void);

/* ns per pair of one run, or -1 if a call failed (the message is printed). */
static double capi_run(tether_resource_t* r, tether_stream_t stream, long pairs) {
  double start = bench_now_ns();
  long i;
  for (i = 0; i < pairs; ++i) {
    void* p = NULL;
    if (tether_resource_allocate(r, SIZE, 0, stream, &p) != TETHER_OK ||
        tether_resource_deallocate(r, p, SIZE, 0, stream) != TETHER_OK) {
      printf("  (C ABI call failed: %s)\n", tether_last_error_message());
      return -1;
    }
  }
  return (bench_now_ns() - start) / (double)pairs;
}

static double median(double* t, int n) {
  int i;
  for (i = 0; i < n; ++i)
    if (t[i] < 0) return -1;
  qsort(t, (size_t)n, sizeof t[0], bench_compare_double);
  return t[n / 2];
}

static void print_row(const char* what, double ns, double core) {
  if (ns < 0) {
    printf("  %-27s: skipped\n", what);
    return;
  }
  printf("  %-27s: %7.1f ns/pair", what, ns);
  if (core > 0 && ns != core) printf("   (%+.1f ns, %.2fx the core)", ns - core, ns / core);
  printf("\n");
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

/* --count: the loop alone, nothing timed. */
static int count_only(long pairs, tether_stream_t stream) {
  tether_resource_t *host = NULL, *pool = NULL;
  if (tether_host_resource_create(&host) != TETHER_OK) return 0;
  pool = make_pool(host, (size_t)64 << 20);
  if (pool != NULL) (void)capi_run(pool, stream, pairs);
  tether_resource_release(pool);
  tether_resource_release(host);
  return 0;
}

int main(int argc, char** argv) {
  if (argc > 2 && strcmp(argv[1], "--count") == 0)
    return count_only(atol(argv[2]), (tether_stream_t)(uintptr_t)(argc > 3 ? atol(argv[3]) : 0));
  long pairs = argc > 1 ? atol(argv[1]) : 2000000L;
  size_t initial = (argc > 2 ? (size_t)atol(argv[2]) : (size_t)8192) << 20;
  tether_resource_t *host = NULL, *pool = NULL;
  double t_core[RUNS], t_capi[RUNS], t_stream[RUNS], core;
  int run, have_core;
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
  have_core = capi_cost_core_create(initial);
  printf("allocate+free of %d B on one thread, pool over host memory, %zu MiB initial, "
         "median of %d interleaved runs of %ld pairs:\n", SIZE, initial >> 20, RUNS, pairs);
  /* Warm up, then interleave the three loops so load on the machine hits all alike. */
  (void)capi_run(pool, 0, pairs / 10 + 1);
  if (have_core) (void)capi_cost_core_run(SIZE, pairs / 10 + 1);
  for (run = 0; run < RUNS; ++run) {
    t_core[run] = have_core ? capi_cost_core_run(SIZE, pairs) : -1;
    t_capi[run] = capi_run(pool, 0, pairs);
    t_stream[run] = capi_run(pool, (tether_stream_t)(uintptr_t)0x1000, pairs);
  }
  core = median(t_core, RUNS);
  print_row("core pool, direct C++ call", core, core);
  print_row("C ABI, stream 0", median(t_capi, RUNS), core);
  print_row("C ABI, non-zero stream", median(t_stream, RUNS), core);
  if (have_core) capi_cost_core_destroy();
  tether_resource_release(pool);
  tether_resource_release(host);
  return 0;
}
