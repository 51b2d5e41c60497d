// The direct-call half of capi_cost.c: the same allocate+free loop on a core
// pool over host memory (tether_core linked statically, no C ABI).
#include <algorithm>
#include <cstddef>
#include <exception>
#include <vector>

#include "random_pattern.h"
#include "tether_core/host.hpp"
#include "tether_core/pool.hpp"

extern "C" double capi_cost_core_ns_per_pair(std::size_t initial_size, std::size_t size, long pairs, int runs) {
  using namespace tether;
  try {
    core::PoolOptions o;
    o.initial_size = initial_size;
    core::ResourcePtr pool = core::make_pool_resource(core::make_host_resource(), o);
    core::Resource& mr = *pool;
    std::vector<double> t(static_cast<std::size_t>(runs));
    for (long i = 0; i < pairs / 10 + 1; ++i) mr.deallocate(mr.allocate(size, 0, 0), size, 0, 0);  // warm up
    for (auto& v : t) {
      const double start = bench_now_ns();
      for (long i = 0; i < pairs; ++i) mr.deallocate(mr.allocate(size, 0, 0), size, 0, 0);
      v = (bench_now_ns() - start) / static_cast<double>(pairs);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  } catch (const std::exception&) {
    return -1;
  }
}
