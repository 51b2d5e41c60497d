// The CUDA resources on a real device: what they are, how they fail, the
// async pool's options, copies between every kind of memory, contexts, and
// teardown at exit. Skipped, with the reason, where there is no device.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "cuda_test_support.hpp"
#include "tether/cuda.h"
#include "tether_core/host.hpp"
#include "tether_core/pool.hpp"
#include "tether_core/process.hpp"
#include "test_util.hpp"

namespace {

using namespace tether;
using namespace tether::test::cuda;
using test::error_message;
using test::fails_with;
using test::MiB;

constexpr std::size_t kTiB = std::size_t{1} << 40;

class Gpu : public ::testing::Test {
 protected:
  void SetUp() override { TETHER_REQUIRE_GPU(); }
};

// Tests that measure the device's free memory: ctest runs them alone
// (RUN_SERIAL, see CMakeLists.txt), since other test processes allocate too.
class GpuSerial : public Gpu {};

std::size_t free_device_memory() {
  std::size_t free_bytes = 0, total = 0;
  dd::ScopedContext ctx(0);
  dd::check(dd::driver().MemGetInfo(&free_bytes, &total), "cuMemGetInfo", 0);
  return free_bytes;
}

core::ResourcePtr async_with(std::size_t initial, std::size_t threshold, std::size_t maximum,
                             unsigned ipc = TETHER_IPC_HANDLE_NONE) {
  cu::AsyncOptions o;
  o.initial_pool_size = initial;
  o.release_threshold = threshold;
  o.maximum_pool_size = maximum;
  o.ipc_handle_type = ipc;
  return cu::make_async_resource(0, o);
}

core::ResourcePtr default_pool() {
  cu::AsyncOptions o;
  o.use_default_pool = true;
  return cu::make_async_resource(0, o);
}

TEST_F(Gpu, DriverQueries) {
  EXPECT_GE(cu::device_count(), 1);
  EXPECT_GE(cu::driver_version(), 12000);
  EXPECT_NO_THROW(cu::check_device(0));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [] { cu::check_device(cu::device_count()); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [] { cu::check_device(-1); }));
  EXPECT_NE(error_message([] { cu::make_cuda_resource(cu::device_count()); }).find("invalid CUDA device"),
            std::string::npos);
  EXPECT_NO_THROW(cu::stream_synchronize(0, 0));
}

TEST_F(Gpu, PropertiesSayWhereTheMemoryIs) {
  struct Expect {
    core::ResourcePtr r;
    tether_resource_kind_t kind;
    const char* name;
    int device;
    bool device_accessible, host_accessible;
  };
  const Expect all[] = {
      {cu::make_cuda_resource(0), TETHER_RESOURCE_KIND_CUDA, "cuda", 0, true, false},
      {async_with(0, 0, 0), TETHER_RESOURCE_KIND_ASYNC, "async", 0, true, false},
      {default_pool(), TETHER_RESOURCE_KIND_ASYNC, "async", 0, true, false},
      {cu::make_managed_resource(0), TETHER_RESOURCE_KIND_MANAGED, "managed", 0, true, true},
      {cu::make_pinned_host_resource(0), TETHER_RESOURCE_KIND_PINNED_HOST, "pinned_host", TETHER_DEVICE_HOST, true,
       true},
  };
  for (const Expect& e : all) {
    const core::Properties& p = e.r->properties();
    EXPECT_EQ(p.kind, e.kind) << e.name;
    EXPECT_STREQ(e.r->name(), e.name);
    EXPECT_EQ(p.device, e.device) << e.name;
    EXPECT_EQ(p.device_accessible, e.device_accessible) << e.name;
    EXPECT_EQ(p.host_accessible, e.host_accessible) << e.name;
    EXPECT_NE(e.r->stream_order(), nullptr) << e.name << " gives pools stream ordering";
    auto pool = core::make_pool_resource(e.r, core::PoolOptions{});
    EXPECT_NE(pool->stream_order(), nullptr) << "a pool over " << e.name << " is stream-ordered";
  }
}

TEST_F(Gpu, EqualityFollowsWhoCanFreeWhat) {
  auto cuda_a = cu::make_cuda_resource(0), cuda_b = cu::make_cuda_resource(0);
  auto own_a = async_with(0, 0, 0), own_b = async_with(0, 0, 0);
  auto def_a = default_pool(), def_b = default_pool();
  auto managed_a = cu::make_managed_resource(0), managed_b = cu::make_managed_resource(0);
  auto pinned_a = cu::make_pinned_host_resource(0), pinned_b = cu::make_pinned_host_resource(0);
  EXPECT_TRUE(cuda_a->is_equal(*cuda_b));
  EXPECT_TRUE(def_a->is_equal(*def_b));
  EXPECT_TRUE(managed_a->is_equal(*managed_b));
  EXPECT_TRUE(pinned_a->is_equal(*pinned_b));
  EXPECT_FALSE(own_a->is_equal(*own_b)) << "two owned pools are different memory";
  EXPECT_FALSE(own_a->is_equal(*def_a));
  EXPECT_FALSE(cuda_a->is_equal(*managed_a));
  EXPECT_FALSE(cuda_a->is_equal(*def_a));
  EXPECT_FALSE(pinned_a->is_equal(*core::make_host_resource()));
  // Equal resources really do take each other's memory.
  void* p = cuda_a->allocate(1000, 0, 0);
  EXPECT_NO_THROW(cuda_b->deallocate(p, 1000, 0, 0));
  void* q = def_a->allocate(1000, 0, 0);
  EXPECT_NO_THROW(def_b->deallocate(q, 1000, 0, 0));
  // And unequal ones refuse it.
  void* r = own_a->allocate(1000, 0, 0);
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { own_b->deallocate(r, 1000, 0, 0); }));
  own_a->deallocate(r, 1000, 0, 0);
}

TEST_F(Gpu, OutOfDeviceMemoryIsOutOfMemoryAndHarmless) {
  auto cuda = cu::make_cuda_resource(0);
  try {
    cuda->allocate(2 * kTiB, 0, 0);
    FAIL() << "2 TiB of device memory";
  } catch (const core::OutOfMemory& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY"), std::string::npos) << m;
    EXPECT_NE(m.find("on device 0"), std::string::npos) << m;
    EXPECT_NE(m.find(std::to_string(2 * kTiB)), std::string::npos) << m;
  }
  EXPECT_THROW(async_with(0, 0, 0)->allocate(2 * kTiB, 0, 0), core::OutOfMemory);
  EXPECT_THROW(default_pool()->allocate(2 * kTiB, 0, 0), core::OutOfMemory);
  // More than device + host memory is refused before the driver sees it.
  EXPECT_THROW(cu::make_managed_resource(0)->allocate(64 * kTiB, 0, 0), core::OutOfMemory);
  // A pool over device memory survives its upstream running out.
  auto pool = core::make_pool_resource(cuda, core::PoolOptions{});
  EXPECT_THROW(pool->allocate(2 * kTiB, 0, 0), core::OutOfMemory);
  void* p = pool->allocate(MiB, 0, 0);
  device_fill(p, 0x42, MiB);
  EXPECT_TRUE(device_holds(p, 0x42, MiB));
  pool->deallocate(p, MiB, 0, 0);
  pool->trim();  // the pool gives its chunks back
  EXPECT_EQ(cuda->outstanding_count(), 0u);
}

TEST_F(Gpu, AsyncOptionsAreChecked) {
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [] { async_with(0, 0, 0, 7); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [] { async_with(64 * MiB, 0, 32 * MiB); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [] { cu::make_async_resource(-1, cu::AsyncOptions{}); }));
}

TEST_F(GpuSerial, AsyncInitialPoolSizeIsReservedAndTrimGivesItBack) {
  const std::size_t reserve = 4096 * MiB, slack = 1024 * MiB;
  const std::size_t before = free_device_memory();
  auto r = async_with(reserve, 0, 0);
  cu::stream_synchronize(0, 0);  // a sync point: an unkept reservation would be released here
  const std::size_t reserved = free_device_memory();
  EXPECT_LE(reserved + reserve, before + slack) << "initial_pool_size is taken at creation and kept";
  r->trim();
  cu::stream_synchronize(0, 0);
  EXPECT_GE(free_device_memory() + slack, reserved + reserve) << "trim() returns the unused reservation";
}

TEST_F(Gpu, AsyncMaximumPoolSizeIsEnforced) {
  if (cu::driver_version() < 12020) GTEST_SKIP() << "maximum_pool_size needs a 12.2 driver";
  auto r = async_with(0, 0, 64 * MiB);
  void* a = r->allocate(40 * MiB, 0, 0);
  try {
    r->allocate(40 * MiB, 0, 0);
    FAIL() << "80 MiB from a 64 MiB pool";
  } catch (const core::OutOfMemory& e) {
    EXPECT_NE(std::string(e.what()).find("maximum_pool_size"), std::string::npos) << e.what();
  }
  r->deallocate(a, 40 * MiB, 0, 0);
  void* b = r->allocate(40 * MiB, 0, 0);  // fits again once the first is back
  r->deallocate(b, 40 * MiB, 0, 0);
}

TEST_F(Gpu, AsyncPoolWithIpcHandles) {
  core::ResourcePtr r;
  try {
    r = async_with(0, 0, 0, TETHER_IPC_HANDLE_POSIX_FD);
  } catch (const core::Error& e) {
    ASSERT_EQ(e.status(), TETHER_ERROR_NOT_SUPPORTED) << e.what();
    GTEST_SKIP() << e.what();
  }
  void* p = r->allocate(MiB, 0, 0);
  device_fill(p, 7, MiB);
  EXPECT_TRUE(device_holds(p, 7, MiB));
  r->deallocate(p, MiB, 0, 0);
}

TEST_F(Gpu, CopiesBetweenEveryKindOfMemory) {
  const std::size_t n = 3 * MiB + 123;
  std::vector<unsigned char> src(n), back(n);
  for (std::size_t i = 0; i < n; ++i) src[i] = static_cast<unsigned char>(i * 131 + 7);
  std::vector<core::ResourcePtr> rs = {cu::make_cuda_resource(0), async_with(0, 0, 0),
                                       cu::make_managed_resource(0), cu::make_pinned_host_resource(0)};
  Stream s;
  for (const auto& a : rs) {
    for (const auto& b : rs) {
      void* pa = a->allocate(n, 0, s.value());
      void* pb = b->allocate(n, 0, s.value());
      cu::copy(pa, src.data(), n, 0, s.value(), false);  // host -> a
      cu::copy(pb, pa, n, 0, s.value(), false);          // a -> b, ordered after
      std::fill(back.begin(), back.end(), 0);
      cu::copy(back.data(), pb, n, 0, s.value(), true);  // b -> host, complete on return
      EXPECT_EQ(std::memcmp(back.data(), src.data(), n), 0) << a->name() << " -> " << b->name();
      a->deallocate(pa, n, 0, s.value());
      b->deallocate(pb, n, 0, s.value());
    }
  }
  // Plain host memory on both sides.
  std::vector<unsigned char> other(n, 0);
  cu::copy(other.data(), src.data(), n, 0, s.value(), true);
  EXPECT_EQ(other, src);
  EXPECT_NO_THROW(cu::copy(nullptr, nullptr, 0, 0, 0, true));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { cu::copy(nullptr, src.data(), 10, 0, 0, true); }));
}

TEST_F(Gpu, ContextsAreLeftAsTheyWereFound) {
  auto cuda = cu::make_cuda_resource(0);
  std::thread([&] {
    // A fresh thread has no current context; tether borrows the primary one and gives it back.
    CUcontext before = reinterpret_cast<CUcontext>(1);
    ASSERT_EQ(dd::driver().CtxGetCurrent(&before), CUDA_SUCCESS);
    EXPECT_EQ(before, nullptr);
    EXPECT_EQ(cu::current_device(), 0);
    void* p = cuda->allocate(4096, 0, 0);
    cuda->deallocate(p, 4096, 0, 0);
    CUcontext after = reinterpret_cast<CUcontext>(1);
    ASSERT_EQ(dd::driver().CtxGetCurrent(&after), CUDA_SUCCESS);
    EXPECT_EQ(after, nullptr) << "the primary context was left current";
    // With the primary context current, it stays current.
    ASSERT_EQ(dd::driver().CtxPushCurrent(dd::primary_context(0)), CUDA_SUCCESS);
    p = cuda->allocate(4096, 0, 0);
    cuda->deallocate(p, 4096, 0, 0);
    ASSERT_EQ(dd::driver().CtxGetCurrent(&after), CUDA_SUCCESS);
    EXPECT_EQ(after, dd::primary_context(0));
    EXPECT_EQ(cu::current_device(), 0);
    CUcontext popped = nullptr;
    EXPECT_EQ(dd::driver().CtxPopCurrent(&popped), CUDA_SUCCESS);
  }).join();
}

TEST_F(Gpu, FreesWithTheWrongDetailsNeverReachTheDriver) {
  auto cuda = cu::make_cuda_resource(0);
  void* p = cuda->allocate(MiB, 4096, 0);
  device_fill(p, 0x3c, MiB);
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { cuda->deallocate(p, MiB, 0, 0); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { cuda->deallocate(p, MiB - 1, 4096, 0); }));
  EXPECT_TRUE(device_holds(p, 0x3c, MiB)) << "the memory is still allocated and intact";
  cuda->deallocate(p, MiB, 4096, 0);
  const std::string m = error_message([&] { cuda->deallocate(p, MiB, 4096, 0); });
  EXPECT_NE(m.find("already freed"), std::string::npos) << m;
}

// At exit: CUDA resources and pools over them with live allocations, some
// released by static destructors, some never, do not crash the exit and print
// nothing. In child processes (re-executed, not forked: CUDA does not survive
// fork), as marking the process as exiting cannot be undone.
[[noreturn]] void exit_with_live_memory() {
  struct Holder {
    std::vector<core::ResourcePtr> keep;
    std::vector<std::pair<core::ResourcePtr, void*>> live;
    ~Holder() {
      for (auto& [r, p] : live) r->deallocate(p, 4096, 0, 0);
    }
  };
  static Holder* leaked = new Holder;  // never destroyed
  static Holder late;                  // destroyed by exit()
  for (Holder* h : {leaked, &late}) {
    auto cuda = cu::make_cuda_resource(0);
    auto async = async_with(16 * MiB, 0, 0);
    auto pool_cuda = core::make_pool_resource(cuda, core::PoolOptions{});
    auto pool_async = core::make_pool_resource(async, core::PoolOptions{});
    for (const auto& r : {cuda, async, pool_cuda, pool_async, cu::make_managed_resource(0),
                          cu::make_pinned_host_resource(0)}) {
      h->live.emplace_back(r, r->allocate(4096, 0, 0));
      h->keep.push_back(r);
    }
  }
  std::exit(0);
}

TEST(GpuExitDeathTest, LiveMemoryAtExitIsHarmless) {
  TETHER_REQUIRE_GPU();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(exit_with_live_memory(), ::testing::ExitedWithCode(0), "^$");
}

// Once exit has begun, a free makes no CUDA call: the memory stays allocated.
[[noreturn]] void free_after_exit_began() {
  auto cuda = cu::make_cuda_resource(0);
  auto async = async_with(0, 0, 0);
  void* p = cuda->allocate(MiB, 0, 0);
  void* q = async->allocate(MiB, 0, 0);
  core::mark_process_exiting();
  cuda->deallocate(p, MiB, 0, 0);
  async->deallocate(q, MiB, 0, 0);
  async.reset();  // the owned pool is not destroyed either
  unsigned type = 0;
  dd::ScopedContext ctx(0);
  const bool p_alive =
      dd::driver().PointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, dd::as_dptr(p)) == CUDA_SUCCESS;
  const bool q_alive =
      dd::driver().PointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, dd::as_dptr(q)) == CUDA_SUCCESS;
  std::exit(p_alive && q_alive ? 0 : 3);
}

TEST(GpuExitDeathTest, FreesAfterExitBeganLeak) {
  TETHER_REQUIRE_GPU();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(free_after_exit_began(), ::testing::ExitedWithCode(0), "^$");
}

}  // namespace
