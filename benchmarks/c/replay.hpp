// Replays of random_pattern.h sequences for the C++ benchmarks. bench_replay: one
// replay of an op sequence: allocate
// and free through the caller's functions, the live set kept as
// random_pattern.h numbers it (a free names a slot; the last slot moves into
// it), and whatever is live at the end freed. Header-only and inlined, so a
// timed loop costs what the allocator costs.
#pragma once

#include <cstddef>

#include "random_pattern.h"

struct BenchLive {
  void* p;
  std::size_t size;
};

// alloc(size) -> void*, free(p, size); `live` holds BENCH_MAX_LIVE slots.
template <class Alloc, class Free>
inline void bench_replay(const bench_pattern& pat, BenchLive* live, Alloc&& alloc, Free&& free) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < pat.n_ops; ++i) {
    const bench_op op = pat.ops[i];
    if (op.is_alloc) {
      live[n++] = BenchLive{alloc(op.arg), op.arg};
    } else {
      free(live[op.arg].p, live[op.arg].size);
      live[op.arg] = live[--n];
    }
  }
  while (n > 0) {
    --n;
    free(live[n].p, live[n].size);
  }
}

// One steady-state run of a random_pattern.h bench_steady: the untimed fill,
// then the timed pairs (free the slot's allocation, allocate the step's size in
// its place), then everything freed. Returns ns per timed pair. `live` holds
// p.live slots.
template <class Alloc, class Free>
inline double bench_steady_run(const bench_steady& p, BenchLive* live, Alloc&& alloc, Free&& free) {
  for (std::size_t i = 0; i < p.live; ++i) live[i] = BenchLive{alloc(p.fill[i]), p.fill[i]};
  const double t0 = bench_now_ns();
  for (std::size_t i = 0; i < p.pairs; ++i) {
    BenchLive& l = live[p.slot[i]];
    free(l.p, l.size);
    l = BenchLive{alloc(p.size[i]), p.size[i]};
  }
  const double t = (bench_now_ns() - t0) / static_cast<double>(p.pairs);
  for (std::size_t i = 0; i < p.live; ++i) free(live[i].p, live[i].size);
  return t;
}
