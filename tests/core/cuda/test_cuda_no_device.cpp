// Without a usable CUDA driver or device, every CUDA function of the core
// fails with NO_DEVICE and a message naming the reason, and host resources
// keep working in the same process. Runs anywhere; where a device is usable
// (and CUDA_VISIBLE_DEVICES does not hide it) there is nothing to test.
#include <dlfcn.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cuda_driver.hpp"
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
  expect_no_device("system", [] { cu::make_system_resource(0); });
  expect_no_device("managed_async", [] { cu::make_managed_async_resource(0); });
  expect_no_device("sam_headroom", [] { cu::make_sam_headroom_resource(0, 1 << 30); });
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

// ---- the loader, fed a fake driver (no GPU needed) ----------------------------

namespace dd = tether::core::cuda::detail;

// The newer entry points and the ABI version each is asked for at.
std::vector<std::pair<std::string, int>> newer_entry_points() {
  std::vector<std::pair<std::string, int>> out;
#define TETHER_NAME(name, abi, params) out.emplace_back("cu" #name, abi);
  TETHER_CUDA_NEWER_ENTRY_POINTS(TETHER_NAME)
#undef TETHER_NAME
  return out;
}

// A cuGetProcAddress_v2 of a driver of version `version` that provides every function
// except those in `missing`, each at a distinct fake address, and records what it was
// asked for. As a real driver, it refuses a version newer than its own
// (CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT).
struct FakeDriver {
  static inline std::set<std::string> missing;
  static inline std::vector<std::string> asked;
  static inline char addresses[256];
  static inline int driver_version = 13000;
  static CUresult get_proc_address(const char* name, void** fn, int version, cuuint64_t flags,
                                   CUdriverProcAddressQueryResult* status) {
    int want = dd::kMinimumDriverVersion;
    for (const auto& [newer, abi] : newer_entry_points())
      if (newer == name) want = abi;
    EXPECT_EQ(version, want) << name;
    EXPECT_EQ(flags, static_cast<cuuint64_t>(CU_GET_PROC_ADDRESS_LEGACY_STREAM));
    asked.emplace_back(name);
    if (version > driver_version) {
      *fn = nullptr;
      *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
      return CUDA_SUCCESS;
    }
    if (missing.count(name) != 0) {
      *fn = nullptr;
      *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
      return CUDA_ERROR_NOT_FOUND;
    }
    *fn = &addresses[asked.size() % sizeof addresses];
    *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
  }
};

std::vector<std::string> library_entry_points() {
  std::vector<std::string> out;
#define TETHER_NAME(name, params) out.push_back("cu" #name);
  TETHER_CUDA_LIBRARY_ENTRY_POINTS(TETHER_NAME)
#undef TETHER_NAME
  return out;
}

std::vector<std::string> optional_entry_points() {
  std::vector<std::string> out;
#define TETHER_NAME(name, params) out.push_back("cu" #name);
  TETHER_CUDA_OPTIONAL_ENTRY_POINTS(TETHER_NAME)
#undef TETHER_NAME
  return out;
}

std::vector<std::string> test_entry_points() {
  std::vector<std::string> out;
#define TETHER_NAME(name, params) out.push_back("cu" #name);
  TETHER_CUDA_TEST_ENTRY_POINTS(TETHER_NAME)
#undef TETHER_NAME
  return out;
}

TEST(CudaLoader, ResolvesEveryListedEntryPointOnce) {
  FakeDriver::missing.clear();
  FakeDriver::asked.clear();
  dd::Driver d;
  std::string why;
  ASSERT_TRUE(dd::resolve_all(&FakeDriver::get_proc_address, d, why)) << why;
  std::vector<std::string> want = library_entry_points();
  for (const auto& n : optional_entry_points()) want.push_back(n);
  for (const auto& n : newer_entry_points()) want.push_back(n.first);
  for (const auto& n : test_entry_points()) want.push_back(n);
  EXPECT_EQ(FakeDriver::asked, want);
  EXPECT_EQ(std::set<std::string>(want.begin(), want.end()).size(), want.size()) << "a name is listed twice";
  EXPECT_NE(d.MemAlloc, nullptr);
  EXPECT_NE(d.StreamWaitEvent, nullptr);
  EXPECT_NE(d.StreamCreate, nullptr);
  EXPECT_NE(d.LaunchHostFunc, nullptr);
}

TEST(CudaLoader, AMissingTestOnlyEntryPointDoesNotFailTheLoad) {
  std::vector<std::string> optional = test_entry_points();
  for (const auto& n : optional_entry_points()) optional.push_back(n);  // prefetching: NOT_SUPPORTED then
  for (const auto& n : newer_entry_points()) optional.push_back(n.first);
  for (const std::string& name : optional) {
    FakeDriver::missing = {name};
    FakeDriver::asked.clear();
    dd::Driver d;
    std::string why;
    EXPECT_TRUE(dd::resolve_all(&FakeDriver::get_proc_address, d, why)) << name << ": " << why;
    EXPECT_TRUE(why.empty());
    EXPECT_NE(d.MemAlloc, nullptr);  // the library's entry points are all there
  }
  FakeDriver::missing = {"cuStreamCreate", "cuLaunchHostFunc"};
  dd::Driver d;
  std::string why;
  ASSERT_TRUE(dd::resolve_all(&FakeDriver::get_proc_address, d, why));
  EXPECT_EQ(d.StreamCreate, nullptr);
  EXPECT_EQ(d.LaunchHostFunc, nullptr);
  EXPECT_NE(d.StreamDestroy, nullptr);
  EXPECT_TRUE(fails_with(TETHER_ERROR_NOT_SUPPORTED, [&] { dd::test_entry_point(d.StreamCreate, "cuStreamCreate"); }));
  EXPECT_NE(error_message([&] { dd::test_entry_point(d.StreamCreate, "cuStreamCreate"); }).find("cuStreamCreate"),
            std::string::npos);
}

TEST(CudaLoader, ANewerEntryPointIsAskedForAtItsVersionAndIsNullOnAnOlderDriver) {
  FakeDriver::missing.clear();
  for (int version : {12080, 13000}) {
    FakeDriver::driver_version = version;
    dd::Driver d;
    std::string why;
    ASSERT_TRUE(dd::resolve_all(&FakeDriver::get_proc_address, d, why)) << why;
    EXPECT_NE(d.MemAlloc, nullptr);
    EXPECT_EQ(d.MemGetDefaultMemPool == nullptr, version < 13000) << version;
  }
  FakeDriver::driver_version = 13000;
  // What a kind that needs one reports on an older driver: NOT_SUPPORTED, naming the
  // function and the versions (managed_async: cuMemGetDefaultMemPool).
  decltype(dd::Driver::MemGetDefaultMemPool) absent = nullptr;
  auto get = [&] { dd::newer_entry_point(absent, "managed_async resource", "cuMemGetDefaultMemPool", 13000, 12080); };
  EXPECT_TRUE(fails_with(TETHER_ERROR_NOT_SUPPORTED, get));
  EXPECT_EQ(error_message(get),
            "managed_async resource: the CUDA driver (12.8) does not provide cuMemGetDefaultMemPool, which needs a "
            "CUDA 13.0 driver");
}

TEST(CudaLoader, AMissingLibraryEntryPointFailsTheLoadNamingIt) {
  for (const std::string& name : library_entry_points()) {
    FakeDriver::missing = {name};
    dd::Driver d;
    std::string why;
    EXPECT_FALSE(dd::resolve_all(&FakeDriver::get_proc_address, d, why)) << name;
    EXPECT_EQ(why, "CUDA driver is unusable: it does not provide " + name + " (cuGetProcAddress)");
  }
  FakeDriver::missing.clear();
}

}  // namespace
