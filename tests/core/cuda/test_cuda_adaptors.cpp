// The limiting, tracking, aligned and prefetch adaptors over CUDA upstreams:
// the conformance suite, and prefetching on a stream. Skipped without a device.
#include <vector>

#include "conformance.hpp"
#include "cuda_test_support.hpp"
#include "tether_core/aligned.hpp"
#include "tether_core/limiting.hpp"
#include "tether_core/pool.hpp"
#include "tether_core/prefetch.hpp"
#include "tether_core/tracking.hpp"
#include "test_util.hpp"

namespace {

using namespace tether;
using test::ResourceFactory;
using test::cuda::device_access;
using test::cuda::gpu_skip_reason;
namespace cu = tether::core::cuda;

core::ResourcePtr aligned(core::ResourcePtr up, std::size_t alignment, std::size_t threshold) {
  core::AlignedOptions o;
  o.alignment = alignment;
  o.threshold = threshold;
  return core::make_aligned_adaptor(std::move(up), o);
}

constexpr std::size_t kHuge = std::size_t{1} << 46;

std::vector<ResourceFactory> adaptor_factories() {
  const auto skip = [] { return gpu_skip_reason(); };
  const test::MemoryAccess dev = device_access();
  return {
      {"limiting_cuda", [] { return core::make_limiting_adaptor(cu::make_cuda_resource(0), kHuge); }, skip, dev},
      {"tracking_async", [] { return core::make_tracking_adaptor(cu::make_async_resource(0, {}), false); }, skip, dev},
      {"aligned_cuda", [] { return aligned(cu::make_cuda_resource(0), 1 << 16, 1024); }, skip, dev},
      {"prefetch_managed", [] { return core::make_prefetch_adaptor(cu::make_managed_resource(0)); }, skip},
      {"pool_prefetch_managed",
       [] { return core::make_pool_resource(core::make_prefetch_adaptor(cu::make_managed_resource(0)), {}); }, skip},
      {"prefetch_pool_managed",
       [] { return core::make_prefetch_adaptor(core::make_pool_resource(cu::make_managed_resource(0), {})); }, skip},
  };
}

TETHER_INSTANTIATE_CONFORMANCE(CudaAdaptors, adaptor_factories());

TEST(CudaPrefetch, PrefetchesOnTheAllocationStreamAndRefusesDeviceMemory) {
  TETHER_REQUIRE_GPU();
  auto managed = cu::make_managed_resource(0);
  auto pf = core::make_prefetch_adaptor(managed);
  EXPECT_EQ(pf->properties().kind, TETHER_RESOURCE_KIND_PREFETCH);
  test::cuda::Stream stream;
  constexpr std::size_t n = 8 << 20;
  auto* p = static_cast<unsigned char*>(pf->allocate(n, 0, stream.value()));
  test::cuda::device_fill(p, 0x5a, n, stream.value());  // ordered after the prefetch
  cu::stream_synchronize(0, stream.value());
  EXPECT_EQ(p[0], 0x5a);
  EXPECT_EQ(p[n - 1], 0x5a);
  pf->deallocate(p, n, 0, stream.value());
  EXPECT_EQ(managed->outstanding_count(), 0u);
  EXPECT_TRUE(test::fails_with(TETHER_ERROR_INVALID_ARGUMENT,
                               [] { core::make_prefetch_adaptor(cu::make_cuda_resource(0)); }));
  EXPECT_TRUE(test::fails_with(TETHER_ERROR_INVALID_ARGUMENT,
                               [] { core::make_prefetch_adaptor(cu::make_pinned_host_resource(0)); }));
}

TEST(CudaLimiting, LimitOverDeviceMemory) {
  TETHER_REQUIRE_GPU();
  auto lim = core::make_limiting_adaptor(cu::make_cuda_resource(0), 1 << 20);
  void* p = lim->allocate(1 << 20, 0, 0);
  EXPECT_THROW(lim->allocate(1, 0, 0), core::OutOfMemory);
  lim->deallocate(p, 1 << 20, 0, 0);
  EXPECT_EQ(core::limiting_used_bytes(*lim), 0u);
}

}  // namespace
