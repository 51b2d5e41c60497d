// pool_vs_malloc_core: the pool_vs_malloc benchmark at the C++ core level
// (tether::core, no C ABI), plus the pool's hot path: allocate+free of one
// size, repeatedly, on one stream.
//
// usage: bench_pool_vs_malloc_core [ops (default 2000000)] [repetitions (default 5)]
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "random_pattern.h"
#include "tether_core/host.hpp"
#include "tether_core/pool.hpp"

namespace {

using namespace tether;

struct Live {
  void* p;
  std::size_t size;
};
Live g_live[BENCH_MAX_LIVE];

double run_malloc(const bench_pattern& pat) {
  std::size_t n = 0;
  const double t0 = bench_now_ns();
  for (std::size_t i = 0; i < pat.n_ops; ++i) {
    const bench_op op = pat.ops[i];
    if (op.is_alloc) {
      void* p = std::malloc(op.arg);
      if (p == nullptr) std::abort();
      *static_cast<volatile char*>(p) = 1;
      g_live[n++] = Live{p, op.arg};
    } else {
      std::free(g_live[op.arg].p);
      g_live[op.arg] = g_live[--n];
    }
  }
  while (n > 0) std::free(g_live[--n].p);
  return (bench_now_ns() - t0) / static_cast<double>(pat.n_allocs);
}

double run_resource(const bench_pattern& pat, core::Resource& mr) {
  std::size_t n = 0;
  const double t0 = bench_now_ns();
  for (std::size_t i = 0; i < pat.n_ops; ++i) {
    const bench_op op = pat.ops[i];
    if (op.is_alloc) {
      void* p = mr.allocate(op.arg, 0, 0);
      *static_cast<volatile char*>(p) = 1;
      g_live[n++] = Live{p, op.arg};
    } else {
      mr.deallocate(g_live[op.arg].p, g_live[op.arg].size, 0, 0);
      g_live[op.arg] = g_live[--n];
    }
  }
  while (n > 0) {
    --n;
    mr.deallocate(g_live[n].p, g_live[n].size, 0, 0);
  }
  return (bench_now_ns() - t0) / static_cast<double>(pat.n_allocs);
}

// Allocate and free `size` bytes `iters` times.
double hot_pair(core::Resource& mr, std::size_t size, std::size_t iters) {
  const double t0 = bench_now_ns();
  for (std::size_t i = 0; i < iters; ++i) {
    void* p = mr.allocate(size, 0, 0);
    *static_cast<volatile char*>(p) = 1;
    mr.deallocate(p, size, 0, 0);
  }
  return (bench_now_ns() - t0) / static_cast<double>(iters);
}

double hot_pair_malloc(std::size_t size, std::size_t iters) {
  const double t0 = bench_now_ns();
  for (std::size_t i = 0; i < iters; ++i) {
    void* p = std::malloc(size);
    *static_cast<volatile char*>(p) = 1;
    std::free(p);
  }
  return (bench_now_ns() - t0) / static_cast<double>(iters);
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t ops = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 2000000u;
  const std::size_t reps = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 5u;
  bench_pattern pat;
  if (ops == 0 || reps == 0 || bench_make_pattern(&pat, ops, 20240601u) != 0) {
    std::fprintf(stderr, "usage: %s [ops > 0] [repetitions > 0]\n", argv[0]);
    return 2;
  }
  auto host = core::make_host_resource();
  std::printf("random pattern: %zu ops, %zu allocate+free pairs, sizes 256 B - 4 MiB log-uniform, <= %d live\n",
              pat.n_ops, pat.n_allocs, BENCH_MAX_LIVE);
  std::vector<double> t_malloc(reps), t_pool(reps), t_host(reps);
  // One pool for all repetitions, as glibc keeps its heap: the first
  // repetition of each pays for first-touch page faults, the median does not.
  auto pool = core::make_pool_resource(host, core::PoolOptions{});
  for (std::size_t r = 0; r < reps; ++r) {
    t_malloc[r] = run_malloc(pat);
    t_pool[r] = run_resource(pat, *pool);
    t_host[r] = run_resource(pat, *host);
    std::printf("  repetition %zu: glibc %.1f, core pool %.1f, core host %.1f ns/pair\n", r + 1, t_malloc[r],
                t_pool[r], t_host[r]);
  }
  const double m = bench_median(t_malloc.data(), reps);
  const double p = bench_median(t_pool.data(), reps);
  const double h = bench_median(t_host.data(), reps);
  std::printf("median of %zu: glibc malloc/free %.1f ns/pair; core pool %.1f ns/pair; core host %.1f ns/pair\n", reps,
              m, p, h);
  std::printf("ratio core pool/glibc: %.3fx (target <= 0.2x)\n", p / m);

  // The hot path: same size, same stream, the block comes straight back.
  std::printf("hot path (allocate+free of one size, repeated; median of %zu):\n", reps);
  const std::size_t iters = 2000000;
  for (std::size_t size : {std::size_t{256}, std::size_t{64} << 10, std::size_t{1} << 20}) {
    // Keep some other blocks live so the pool is not trivially empty.
    std::vector<void*> others;
    for (int i = 0; i < 100; ++i) others.push_back(pool->allocate(4096, 0, 0));
    std::vector<double> tp(reps), tm(reps);
    for (std::size_t r = 0; r < reps; ++r) {
      tp[r] = hot_pair(*pool, size, iters);
      tm[r] = hot_pair_malloc(size, iters);
    }
    for (void* o : others) pool->deallocate(o, 4096, 0, 0);
    std::printf("  %8zu B: core pool %.1f ns/pair, glibc %.1f ns/pair\n", size, bench_median(tp.data(), reps),
                bench_median(tm.data(), reps));
  }
  std::free(pat.ops);
  return 0;
}
