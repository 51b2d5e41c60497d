// The limiting, tracking, aligned and prefetch adaptors over CUDA upstreams:
// prefetching on a stream (their conformance runs in tests/capi/conformance). Skipped without a device.
#include <vector>

#include "cuda_test_support.hpp"
#include "tether_core/aligned.hpp"
#include "tether_core/limiting.hpp"
#include "tether_core/pool.hpp"
#include "tether_core/prefetch.hpp"
#include "tether_core/tracking.hpp"
#include "test_util.hpp"

namespace {

using namespace tether;
namespace cu = tether::core::cuda;

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
