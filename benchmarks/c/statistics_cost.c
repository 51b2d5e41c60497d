/*
 * What a statistics adaptor and the PyTorch entry points (tether/torch.h) add
 * to one allocate + free through the C ABI, on host memory: a host pool
 * directly, a statistics adaptor over it, and the PyTorch allocate/free pair
 * (device = TETHER_DEVICE_HOST, which the header allows for exactly this) over
 * the pool and over the adaptor. Fixed size (256 B by default), one thread,
 * medians of RUNS runs, all in one process; prints ns per pair.
 *
 * usage: bench_statistics_cost [pairs (default 200000)] [case]
 *   case: pool | stats | torch | torch-stats - run only that one, PAIRS times,
 *   once, and print nothing else (for callgrind: instructions per pair =
 *   Ir of the loop / pairs, e.g.
 *     valgrind --tool=callgrind --toggle-collect=run_case \
 *       ./bench_statistics_cost 100000 stats)
 */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "random_pattern.h" /* bench_now_ns, bench_compare_double */
#include "tether/tether.h"

#define RUNS 15
#define SIZE 256

static void die(const char* what) {
  fprintf(stderr, "bench_statistics_cost: %s failed: %s\n", what, tether_last_error_message());
  exit(1);
}

typedef void* (*torch_alloc_fn)(size_t, int, void*);

/* One case: a resource (r != NULL) or a PyTorch slot function (fn != NULL). */
struct bench_case {
  const char* name;
  tether_resource_t* r;
  torch_alloc_fn fn;
};

static inline void loop(const struct bench_case* c, long pairs) {
  long i;
  if (c->fn != NULL) {
    for (i = 0; i < pairs; ++i) {
      void* p = c->fn(SIZE, TETHER_DEVICE_HOST, NULL);
      if (p == NULL) die("tether_torch_allocate_N");
      tether_torch_deallocate(p, SIZE, TETHER_DEVICE_HOST, NULL);
    }
    return;
  }
  for (i = 0; i < pairs; ++i) {
    void* p = NULL;
    if (tether_resource_allocate(c->r, SIZE, 0, 0, &p) != TETHER_OK) die("tether_resource_allocate");
    if (tether_resource_deallocate(c->r, p, SIZE, 0, 0) != TETHER_OK) die("tether_resource_deallocate");
  }
}

/* noinline, with a name: callgrind's --toggle-collect=run_case counts only this. */
__attribute__((noinline)) void run_case(const struct bench_case* c, long pairs) { loop(c, pairs); }
__attribute__((noinline)) void warm_up(const struct bench_case* c, long pairs) { loop(c, pairs); }

static double median_ns_per_pair(const struct bench_case* c, long pairs) {
  double t[RUNS];
  int run;
  for (run = 0; run < RUNS; ++run) {
    double start = bench_now_ns();
    run_case(c, pairs);
    t[run] = (bench_now_ns() - start) / (double)pairs;
  }
  qsort(t, RUNS, sizeof t[0], bench_compare_double);
  return t[RUNS / 2];
}

static torch_alloc_fn slot_function(int slot) {
  static const torch_alloc_fn fns[TETHER_TORCH_BOUND_SLOTS] = {
      tether_torch_allocate_0, tether_torch_allocate_1, tether_torch_allocate_2, tether_torch_allocate_3,
      tether_torch_allocate_4, tether_torch_allocate_5, tether_torch_allocate_6, tether_torch_allocate_7};
  return fns[slot];
}

int main(int argc, char** argv) {
  long pairs = argc > 1 ? atol(argv[1]) : 200000;
  const char* only = argc > 2 ? argv[2] : NULL;
  tether_resource_t *host = NULL, *pool = NULL, *stats = NULL;
  tether_pool_options_t po = TETHER_POOL_OPTIONS_INIT;
  int slot_pool = -1, slot_stats = -1, i;
  struct bench_case cases[4];
  if (pairs <= 0) pairs = 200000;
  po.initial_size = 16u << 20;
  if (tether_host_resource_create(&host) != TETHER_OK) die("tether_host_resource_create");
  if (tether_pool_resource_create(host, &po, &pool) != TETHER_OK) die("tether_pool_resource_create");
  if (tether_statistics_adaptor_create(pool, &stats) != TETHER_OK) die("tether_statistics_adaptor_create");
  if (tether_torch_bind(pool, 0, &slot_pool) != TETHER_OK) die("tether_torch_bind(pool)");
  if (tether_torch_bind(stats, 0, &slot_stats) != TETHER_OK) die("tether_torch_bind(stats)");
  cases[0] = (struct bench_case){"pool", pool, NULL};
  cases[1] = (struct bench_case){"stats", stats, NULL};
  cases[2] = (struct bench_case){"torch", NULL, slot_function(slot_pool)};
  cases[3] = (struct bench_case){"torch-stats", NULL, slot_function(slot_stats)};

  if (only != NULL) {
    for (i = 0; i < 4; ++i) {
      if (strcmp(only, cases[i].name) == 0) {
        warm_up(&cases[i], 1000);
        run_case(&cases[i], pairs);
        return 0;
      }
    }
    fprintf(stderr, "bench_statistics_cost: unknown case '%s' (pool | stats | torch | torch-stats)\n", only);
    return 2;
  }
  for (i = 0; i < 4; ++i) warm_up(&cases[i], pairs / 10);
  printf("%d B allocate+free, one thread, median of %d runs of %ld pairs\n", SIZE, RUNS, pairs);
  {
    double base = median_ns_per_pair(&cases[0], pairs);
    printf("%-32s %7.1f ns per pair\n", "pool(host)", base);
    for (i = 1; i < 4; ++i) {
      static const char* labels[4] = {"", "statistics(pool)", "torch hook -> pool", "torch hook -> statistics(pool)"};
      double ns = median_ns_per_pair(&cases[i], pairs);
      printf("%-32s %7.1f ns per pair  (+%.1f ns)\n", labels[i], ns, ns - base);
    }
  }
  /* The bound slots keep pool and stats alive for the rest of the process. */
  tether_resource_release(stats);
  tether_resource_release(pool);
  tether_resource_release(host);
  return 0;
}
