/*
 * pool_vs_malloc: a tether pool over the host resource, through the public C
 * ABI only, against glibc malloc/free, on the random pattern of
 * random_pattern.h. Prints the median ns per allocate+free pair of each and
 * the ratio pool/glibc. Both touch one byte of every allocation.
 *
 * usage: bench_pool_vs_malloc [ops (default 2000000)] [repetitions (default 5)]
 */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>

#include "random_pattern.h"
#include "tether/tether.h"

typedef struct live_t {
  void* p;
  size_t size;
} live_t;

static live_t g_live[BENCH_MAX_LIVE];

static double run_malloc(const bench_pattern* pat) {
  size_t n = 0, i;
  const double t0 = bench_now_ns();
  for (i = 0; i < pat->n_ops; ++i) {
    const bench_op op = pat->ops[i];
    if (op.is_alloc) {
      void* p = malloc(op.arg);
      if (p == NULL) {
        fprintf(stderr, "malloc failed\n");
        exit(1);
      }
      *(volatile char*)p = 1;
      g_live[n].p = p;
      g_live[n].size = op.arg;
      ++n;
    } else {
      free(g_live[op.arg].p);
      g_live[op.arg] = g_live[--n];
    }
  }
  while (n > 0) free(g_live[--n].p);
  return (bench_now_ns() - t0) / (double)pat->n_allocs;
}

static void check(tether_status_t s, const char* what) {
  if (s != TETHER_OK) {
    fprintf(stderr, "%s failed: %s: %s\n", what, tether_status_name(s), tether_last_error_message());
    exit(1);
  }
}

static double run_pool(const bench_pattern* pat, tether_resource_t* pool) {
  size_t n = 0, i;
  const double t0 = bench_now_ns();
  for (i = 0; i < pat->n_ops; ++i) {
    const bench_op op = pat->ops[i];
    if (op.is_alloc) {
      void* p = NULL;
      check(tether_resource_allocate(pool, op.arg, 0, 0, &p), "tether_resource_allocate");
      *(volatile char*)p = 1;
      g_live[n].p = p;
      g_live[n].size = op.arg;
      ++n;
    } else {
      check(tether_resource_deallocate(pool, g_live[op.arg].p, g_live[op.arg].size, 0, 0),
            "tether_resource_deallocate");
      g_live[op.arg] = g_live[--n];
    }
  }
  while (n > 0) {
    --n;
    check(tether_resource_deallocate(pool, g_live[n].p, g_live[n].size, 0, 0), "tether_resource_deallocate");
  }
  return (bench_now_ns() - t0) / (double)pat->n_allocs;
}

int main(int argc, char** argv) {
  const size_t ops = argc > 1 ? (size_t)strtoull(argv[1], NULL, 10) : 2000000u;
  const size_t reps = argc > 2 ? (size_t)strtoull(argv[2], NULL, 10) : 5u;
  bench_pattern pat;
  tether_resource_t* host = NULL;
  tether_resource_t* pool = NULL;
  double* t_malloc;
  double* t_pool;
  size_t r;
  double m, p;
  if (ops == 0 || reps == 0 || bench_make_pattern(&pat, ops, 20240601u) != 0) {
    fprintf(stderr, "usage: %s [ops > 0] [repetitions > 0]\n", argv[0]);
    return 2;
  }
  t_malloc = (double*)calloc(reps, sizeof(double));
  t_pool = (double*)calloc(reps, sizeof(double));
  if (t_malloc == NULL || t_pool == NULL) return 1;
  check(tether_host_resource_create(&host), "tether_host_resource_create");
  /* One pool for all repetitions, as glibc keeps its heap: the first
   * repetition of each pays for first-touch page faults, the median does not. */
  check(tether_pool_resource_create(host, NULL, &pool), "tether_pool_resource_create");
  printf("random pattern: %zu ops, %zu allocate+free pairs, sizes 256 B - 4 MiB log-uniform, <= %d live\n",
         pat.n_ops, pat.n_allocs, BENCH_MAX_LIVE);
  for (r = 0; r < reps; ++r) {
    t_malloc[r] = run_malloc(&pat);
    t_pool[r] = run_pool(&pat, pool);
    printf("  repetition %zu: glibc %.1f ns/pair, tether pool %.1f ns/pair\n", r + 1, t_malloc[r], t_pool[r]);
  }
  m = bench_median(t_malloc, reps);
  p = bench_median(t_pool, reps);
  printf("median of %zu: glibc malloc/free %.1f ns/pair; tether pool (C ABI) %.1f ns/pair\n", reps, m, p);
  printf("ratio pool/glibc: %.3fx (target <= 0.5x, issue 22): %s\n", p / m, p <= 0.5 * m ? "met" : "MISSED");
  tether_resource_release(pool);
  tether_resource_release(host);
  free(t_malloc);
  free(t_pool);
  free(pat.ops);
  return 0;
}
