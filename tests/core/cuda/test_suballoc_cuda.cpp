// The conformance suite for the arena and binning resources over CUDA
// upstreams (device memory filled and read through the driver). Skipped,
// with the reason, where there is no device.
#include <vector>

#include "conformance.hpp"
#include "cuda_test_support.hpp"
#include "tether_core/arena.hpp"
#include "tether_core/binning.hpp"
#include "tether_core/pool.hpp"
#include "test_util.hpp"

namespace {

using namespace tether;
using test::ResourceFactory;
using test::cuda::device_access;
using test::cuda::gpu_skip_reason;
namespace cu = tether::core::cuda;

core::ResourcePtr arena(core::ResourcePtr up, std::size_t size = 0) {
  core::ArenaOptions o;
  o.arena_size = size;
  return core::make_arena_resource(std::move(up), o);
}

core::ResourcePtr binning(core::ResourcePtr up) {
  core::BinningOptions o;
  o.min_size_exponent = 8;
  o.max_size_exponent = 16;
  o.blocks_to_preallocate = 8;
  return core::make_binning_resource(std::move(up), nullptr, o);
}

std::vector<ResourceFactory> suballoc_cuda_factories() {
  using test::MiB;
  const auto skip = [] { return gpu_skip_reason(); };
  const test::MemoryAccess dev = device_access();
  return {
      {"arena_cuda", [] { return arena(cu::make_cuda_resource(0)); }, skip, dev},
      {"arena_cuda_fixed", [] { return arena(cu::make_cuda_resource(0), 256 * MiB); }, skip, dev},
      {"arena_async", [] { return arena(cu::make_async_resource(0, cu::AsyncOptions{})); }, skip, dev},
      {"binning_cuda", [] { return binning(cu::make_cuda_resource(0)); }, skip, dev},
      {"binning_pool_cuda",
       [] { return binning(core::make_pool_resource(cu::make_cuda_resource(0), core::PoolOptions{})); }, skip, dev},
  };
}

TETHER_INSTANTIATE_CONFORMANCE(CudaSuballoc, suballoc_cuda_factories());

}  // namespace
