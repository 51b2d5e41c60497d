// Without a usable CUDA driver or device, every CUDA function of the core
// fails with NO_DEVICE and a message naming the reason, and host resources
// keep working in the same process. Runs anywhere; where a device is usable
// (and CUDA_VISIBLE_DEVICES does not hide it) there is nothing to test.
#include <dlfcn.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tether_core/cuda.hpp"
#include "tether_core/host.hpp"
#include "tether_core/pool.hpp"
#include "test_util.hpp"

namespace {

using namespace tether;
namespace cu = tether::core::cuda;
using test::error_message;
using test::fails_with;

// What tether must say, judged independently of tether: "" if CUDA should work.
std::string expected_reason() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return "no CUDA driver: libcuda.so.1 could not be loaded (";
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (visible != nullptr && visible[0] == '\0') return "CUDA driver has no devices (cuInit: CUDA_ERROR_NO_DEVICE)";
  return "";
}

class NoDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    reason_ = expected_reason();
    if (reason_.empty())
      GTEST_SKIP() << "a CUDA driver is present and CUDA_VISIBLE_DEVICES does not hide the devices: the no-device "
                      "path is tested on machines without a driver and under CUDA_VISIBLE_DEVICES=\"\"";
  }

  // f() fails with NO_DEVICE and its message carries the reason.
  template <class F>
  void expect_no_device(const char* what, F&& f) {
    EXPECT_TRUE(fails_with(TETHER_ERROR_NO_DEVICE, f)) << what;
    const std::string m = error_message(f);
    EXPECT_NE(m.find(reason_), std::string::npos) << what << ": message \"" << m << "\" lacks \"" << reason_ << "\"";
  }

  std::string reason_;
};

TEST_F(NoDevice, QueriesReportTheReason) {
  expect_no_device("device_count", [] { cu::device_count(); });
  expect_no_device("driver_version", [] { cu::driver_version(); });
  expect_no_device("current_device", [] { cu::current_device(); });
  expect_no_device("check_device(0)", [] { cu::check_device(0); });
  expect_no_device("stream_synchronize", [] { cu::stream_synchronize(0, 0); });
}

TEST_F(NoDevice, ResourceFactoriesReportTheReason) {
  expect_no_device("cuda", [] { cu::make_cuda_resource(0); });
  expect_no_device("async", [] { cu::make_async_resource(0, cu::AsyncOptions{}); });
  cu::AsyncOptions pooled;
  pooled.use_default_pool = true;
  expect_no_device("async (default pool)", [&] { cu::make_async_resource(0, pooled); });
  expect_no_device("managed", [] { cu::make_managed_resource(0); });
  expect_no_device("pinned_host", [] { cu::make_pinned_host_resource(0); });
}

TEST_F(NoDevice, BadDeviceIdsReportTheMissingDeviceFirst) {
  // The real problem is the missing device, not the id.
  expect_no_device("check_device(-3)", [] { cu::check_device(-3); });
  expect_no_device("check_device(99)", [] { cu::check_device(99); });
  expect_no_device("cuda(7)", [] { cu::make_cuda_resource(7); });
}

TEST_F(NoDevice, CopiesReportTheReason) {
  char a[16] = {1}, b[16] = {0};
  expect_no_device("copy", [&] { cu::copy(b, a, sizeof a, 0, 0, true); });
}

TEST_F(NoDevice, TheReasonIsTheSameEveryTime) {
  const std::string first = error_message([] { cu::device_count(); });
  for (int i = 0; i < 3; ++i) EXPECT_EQ(error_message([] { cu::make_cuda_resource(0); }), first);
}

TEST_F(NoDevice, HostResourcesKeepWorking) {
  EXPECT_TRUE(fails_with(TETHER_ERROR_NO_DEVICE, [] { cu::make_cuda_resource(0); }));
  auto host = core::make_host_resource();
  auto pool = core::make_pool_resource(host, core::PoolOptions{});
  EXPECT_EQ(pool->stream_order(), nullptr);
  std::vector<void*> ps;
  for (std::size_t size : {1u, 100u, 4096u, 1u << 20}) {
    void* p = pool->allocate(size, 0, 0);
    ASSERT_NE(p, nullptr);
    std::memset(p, 0x5a, size);
    ps.push_back(p);
    void* q = host->allocate(size, 64, 0);
    std::memset(q, 0x11, size);
    host->deallocate(q, size, 64, 0);
  }
  std::size_t i = 0;
  for (std::size_t size : {1u, 100u, 4096u, 1u << 20}) pool->deallocate(ps[i++], size, 0, 0);
  EXPECT_EQ(pool->outstanding_count(), 0u);
}

}  // namespace
