// PrefetchAdaptor without a GPU: its creation rule. (Prefetching itself is
// tested on a GPU in tests/core/cuda/test_cuda_gpu.cpp.)
#include <gtest/gtest.h>

#include "tether_core/host.hpp"
#include "tether_core/prefetch.hpp"
#include "tether_core/statistics.hpp"
#include "test_util.hpp"

namespace {

using namespace tether;
using test::fails_with;

// Host memory that claims to be managed memory of device 0.
class PretendManaged : public core::Resource {
 public:
  PretendManaged() : Resource(core::Properties{TETHER_RESOURCE_KIND_MANAGED, 0, true, true}) {}
  const char* name() const noexcept override { return "pretend_managed"; }

 protected:
  void* do_allocate(std::size_t, std::size_t, core::stream_t) override { return nullptr; }
  void do_deallocate(void*, std::size_t, std::size_t, core::stream_t) override {}
};

TEST(Prefetch, RefusesUpstreamsThatAreNotManagedMemory) {
  auto host = core::make_host_resource();
  const std::string m = test::error_message([&] { core::make_prefetch_adaptor(host); });
  EXPECT_NE(m.find("upstream 'host' does not give managed memory"), std::string::npos) << m;
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT,
                         [&] { core::make_prefetch_adaptor(core::make_statistics_adaptor(host)); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { core::make_prefetch_adaptor(nullptr); }));
}

TEST(Prefetch, ManagedUpstreamWithoutADeviceIsNoDevice) {
  int count = 0;
  try {
    count = core::cuda::can_prefetch(0) ? 1 : 0;
  } catch (const core::Error& e) {
    count = -1;
    EXPECT_EQ(e.status(), TETHER_ERROR_NO_DEVICE);
  }
  if (count >= 0) GTEST_SKIP() << "a CUDA device is present; the GPU tests cover it";
  EXPECT_TRUE(fails_with(TETHER_ERROR_NO_DEVICE,
                         [&] { core::make_prefetch_adaptor(std::make_shared<PretendManaged>()); }));
}

}  // namespace
