// The direct-call half of capi_cost.c: the same allocate+free loop on a core
// pool over host memory (tether_core linked statically, no C ABI).
#include <cstddef>
#include <exception>

#include "random_pattern.h"
#include "tether_core/host.hpp"
#include "tether_core/pool.hpp"

namespace {
tether::core::ResourcePtr g_pool;
}

// A core pool over host memory with `initial_size`; 0 if it could not be made.
extern "C" int capi_cost_core_create(std::size_t initial_size) {
  try {
    tether::core::PoolOptions o;
    o.initial_size = initial_size;
    g_pool = tether::core::make_pool_resource(tether::core::make_host_resource(), o);
    return 1;
  } catch (const std::exception&) {
    return 0;
  }
}

// ns per allocate+free pair of `size` bytes over `pairs` pairs; < 0 on failure.
extern "C" double capi_cost_core_run(std::size_t size, long pairs) {
  try {
    tether::core::Resource& mr = *g_pool;
    const double start = bench_now_ns();
    for (long i = 0; i < pairs; ++i) mr.deallocate(mr.allocate(size, 0, 0), size, 0, 0);
    return (bench_now_ns() - start) / static_cast<double>(pairs);
  } catch (const std::exception&) {
    return -1;
  }
}

extern "C" void capi_cost_core_destroy(void) { g_pool.reset(); }
