// The conformance suite (tests/core/conformance.hpp) for every CUDA resource
// and for pools and adaptors over them. Device memory is filled and read
// through the driver. Skipped, with the reason, where there is no device.
#include <vector>

#include "conformance.hpp"
#include "cuda_test_support.hpp"
#include "tether_core/pool.hpp"
#include "tether_core/statistics.hpp"
#include "test_util.hpp"

namespace {

using namespace tether;
using test::ResourceFactory;
using test::cuda::device_access;
using test::cuda::gpu_skip_reason;
namespace cu = tether::core::cuda;

core::ResourcePtr pool(core::ResourcePtr upstream, std::size_t initial = 0, std::size_t maximum = 0) {
  core::PoolOptions o;
  o.initial_size = initial;
  o.maximum_size = maximum;
  return core::make_pool_resource(std::move(upstream), o);
}

core::ResourcePtr async(bool use_default_pool, std::size_t initial = 0, std::size_t maximum = 0) {
  cu::AsyncOptions o;
  o.use_default_pool = use_default_pool;
  o.initial_pool_size = initial;
  o.maximum_pool_size = maximum;
  return cu::make_async_resource(0, o);
}

std::vector<ResourceFactory> cuda_factories() {
  using test::MiB;
  const auto skip = [] { return gpu_skip_reason(); };
  const test::MemoryAccess dev = device_access();
  return {
      {"cuda", [] { return cu::make_cuda_resource(0); }, skip, dev},
      {"async_owned", [] { return async(false); }, skip, dev},
      {"async_owned_reserved_bounded", [] { return async(false, 32 * MiB, 512 * MiB); }, skip, dev},
      {"async_default_pool", [] { return async(true); }, skip, dev},
      {"managed", [] { return cu::make_managed_resource(0); }, skip},
      {"pinned_host", [] { return cu::make_pinned_host_resource(0); }, skip},
      {"pool_cuda", [] { return pool(cu::make_cuda_resource(0)); }, skip, dev},
      {"pool_cuda_bounded", [] { return pool(cu::make_cuda_resource(0), 4 * MiB, 96 * MiB); }, skip, dev},
      {"pool_async", [] { return pool(async(false)); }, skip, dev},
      {"pool_async_default_pool", [] { return pool(async(true)); }, skip, dev},
      {"pool_managed", [] { return pool(cu::make_managed_resource(0)); }, skip},
      {"pool_pinned_host", [] { return pool(cu::make_pinned_host_resource(0)); }, skip},
      {"statistics_cuda", [] { return core::make_statistics_adaptor(cu::make_cuda_resource(0)); }, skip, dev},
      {"pool_statistics_async",
       [] { return pool(core::make_statistics_adaptor(async(false))); }, skip, dev},
  };
}

TETHER_INSTANTIATE_CONFORMANCE(Cuda, cuda_factories());

}  // namespace
