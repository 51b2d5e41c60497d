/*
 * The random allocation pattern shared by the pool-vs-malloc benchmarks
 * (C11 and C++). Sizes are log-uniform in [256 B, 4 MiB]; at most
 * BENCH_MAX_LIVE allocations are live; each step allocates (coin flip, if
 * fewer than BENCH_MAX_LIVE are live) or frees a random live allocation.
 * The whole sequence is generated up front from a fixed seed, so every
 * allocator under test replays exactly the same operations and the random
 * number generator costs nothing during timing.
 */
#ifndef TETHER_BENCH_RANDOM_PATTERN_H
#define TETHER_BENCH_RANDOM_PATTERN_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#define BENCH_MAX_LIVE 1000
#define BENCH_MIN_SIZE 256.0
#define BENCH_MAX_SIZE (4.0 * 1024 * 1024)

typedef struct bench_op {
  uint32_t is_alloc; /* 1: allocate `arg` bytes; 0: free the live allocation at index `arg` */
  uint32_t arg;
} bench_op;

typedef struct bench_pattern {
  bench_op* ops;
  size_t n_ops;
  size_t n_allocs; /* = number of allocate+free pairs (all live ones are freed at the end) */
} bench_pattern;

/* splitmix64: small, fast, good enough for a benchmark. */
static inline uint64_t bench_next(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Returns 0 on success, -1 if out of memory. */
static inline int bench_make_pattern(bench_pattern* p, size_t n_ops, uint64_t seed) {
  size_t live = 0, i;
  uint64_t state = seed;
  const double lo = log(BENCH_MIN_SIZE), hi = log(BENCH_MAX_SIZE);
  p->ops = (bench_op*)malloc(n_ops * sizeof(bench_op));
  if (p->ops == NULL) return -1;
  p->n_ops = n_ops;
  p->n_allocs = 0;
  for (i = 0; i < n_ops; ++i) {
    const uint64_t r = bench_next(&state);
    if (live == 0 || (live < BENCH_MAX_LIVE && (r & 1))) {
      const double u = (double)(bench_next(&state) >> 11) / 9007199254740992.0; /* [0, 1) */
      p->ops[i].is_alloc = 1;
      p->ops[i].arg = (uint32_t)exp(lo + u * (hi - lo));
      ++live;
      ++p->n_allocs;
    } else {
      p->ops[i].is_alloc = 0;
      p->ops[i].arg = (uint32_t)(bench_next(&state) % live);
      --live;
    }
  }
  return 0;
}

/* The steady-state pattern of the live-allocation sweep: `live` allocations
   are made (untimed fill), then `pairs` steps each free a random live one and
   allocate a new one in its place (timed), then all are freed. Sizes are
   log-uniform in [min_size, max_size]. slot[i] is the live index step i frees
   and size[i] what it allocates; fill[j] the sizes of the fill. */
typedef struct bench_steady {
  size_t live, pairs;
  uint32_t* fill;
  uint32_t* slot;
  uint32_t* size;
} bench_steady;

static inline uint32_t bench_log_uniform(uint64_t* state, double lo, double hi) {
  const double u = (double)(bench_next(state) >> 11) / 9007199254740992.0; /* [0, 1) */
  return (uint32_t)exp(lo + u * (hi - lo));
}

/* Returns 0 on success, -1 if out of memory. */
static inline int bench_make_steady(bench_steady* p, size_t live, size_t pairs, double min_size, double max_size,
                                    uint64_t seed) {
  size_t i;
  uint64_t state = seed;
  const double lo = log(min_size), hi = log(max_size);
  p->live = live;
  p->pairs = pairs;
  p->fill = (uint32_t*)malloc(live * sizeof(uint32_t));
  p->slot = (uint32_t*)malloc(pairs * sizeof(uint32_t));
  p->size = (uint32_t*)malloc(pairs * sizeof(uint32_t));
  if (p->fill == NULL || p->slot == NULL || p->size == NULL) return -1;
  for (i = 0; i < live; ++i) p->fill[i] = bench_log_uniform(&state, lo, hi);
  for (i = 0; i < pairs; ++i) {
    p->slot[i] = (uint32_t)(bench_next(&state) % live);
    p->size[i] = bench_log_uniform(&state, lo, hi);
  }
  return 0;
}

static inline void bench_free_steady(bench_steady* p) {
  free(p->fill);
  free(p->slot);
  free(p->size);
}

static inline double bench_now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static inline int bench_compare_double(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* Median of n values (sorts them). */
static inline double bench_median(double* v, size_t n) {
  qsort(v, n, sizeof(double), bench_compare_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#endif /* TETHER_BENCH_RANDOM_PATTERN_H */
