// One replay of a random_pattern.h op sequence, for the C++ benchmarks: allocate
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
