// The PyTorch entry points (tether/torch.h) driven as PyTorch drives them, on
// host memory (device = TETHER_DEVICE_HOST) so no GPU is needed: each
// allocation frees into the resource it came from, whatever is current at
// free time; bound slots; failures throw (or return NULL when bound with
// TETHER_TORCH_NULL_ON_FAILURE); the census comes back.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tether/tether.hpp"

namespace {

tether_torch_stats_t stats() {
  tether_torch_stats_t s = TETHER_TORCH_STATS_INIT;
  EXPECT_EQ(tether_torch_get_stats(&s), TETHER_OK);
  return s;
}

std::size_t outstanding(const tether::resource& statistics_adaptor) {
  return statistics_adaptor.statistics().current_bytes;
}

using alloc_fn = void* (*)(size_t, int, void*);
alloc_fn slot_function(int slot) {
  static const alloc_fn fns[TETHER_TORCH_BOUND_SLOTS] = {
      tether_torch_allocate_0, tether_torch_allocate_1, tether_torch_allocate_2, tether_torch_allocate_3,
      tether_torch_allocate_4, tether_torch_allocate_5, tether_torch_allocate_6, tether_torch_allocate_7};
  return fns[slot];
}

class TorchHook : public ::testing::Test {
 protected:
  void SetUp() override {
    (void)tether::current_resource(tether::device_host);
    base_ = tether::live_objects();
    before_ = stats();
  }
  void TearDown() override {
    EXPECT_EQ(stats().outstanding_count, before_.outstanding_count);
    EXPECT_EQ(stats().outstanding_bytes, before_.outstanding_bytes);
  }
  std::size_t base_ = 0;
  tether_torch_stats_t before_{};
};

TEST_F(TorchHook, FreesGoToTheOriginAfterTheCurrentResourceChanged) {
  auto a = tether::statistics_adaptor(tether::pool_resource(tether::host_resource()));
  auto b = tether::statistics_adaptor(tether::pool_resource(tether::host_resource()));
  {
    tether::scoped_resource use_a(a, tether::device_host);
    void* p = tether_torch_allocate(1000, TETHER_DEVICE_HOST, nullptr);
    ASSERT_NE(p, nullptr);
    std::memset(p, 0x5a, 1000);  // host memory: really usable
    EXPECT_EQ(outstanding(a), 1000u);
    EXPECT_EQ(stats().outstanding_count, before_.outstanding_count + 1);
    EXPECT_EQ(stats().outstanding_bytes, before_.outstanding_bytes + 1000);

    tether::scoped_resource use_b(b, tether::device_host);  // what is current changes ...
    tether_torch_deallocate(p, 1000, TETHER_DEVICE_HOST, nullptr);
  }
  EXPECT_EQ(outstanding(a), 0u);  // ... the free still went to a
  EXPECT_EQ(b.statistics().total_count, 0u);  // b never saw an allocation or a free
}

TEST_F(TorchHook, AnAllocationKeepsItsResourceAliveAfterEveryHandleIsGone) {
  void* p = nullptr;
  tether_resource_t* raw = nullptr;
  {
    auto pool = tether::pool_resource(tether::host_resource());
    raw = pool.get();
    tether::scoped_resource use(pool, tether::device_host);
    p = tether_torch_allocate(4096, TETHER_DEVICE_HOST, nullptr);
    ASSERT_NE(p, nullptr);
  }  // the application dropped the pool and its scope
  EXPECT_GT(tether::live_objects(), base_);  // the allocation still holds it
  EXPECT_EQ(tether_resource_retain(raw), TETHER_OK);
  EXPECT_EQ(tether_resource_release(raw), TETHER_OK);
  tether_torch_deallocate(p, 4096, TETHER_DEVICE_HOST, nullptr);
  EXPECT_EQ(tether::live_objects(), base_);  // the last free let it go
}

TEST_F(TorchHook, ZeroBytesIsNullWithoutError) {
  EXPECT_EQ(tether_torch_allocate(0, TETHER_DEVICE_HOST, nullptr), nullptr);
  EXPECT_EQ(stats().failures, before_.failures);
  tether_torch_deallocate(nullptr, 0, TETHER_DEVICE_HOST, nullptr);  // no-op
  EXPECT_EQ(stats().unknown_frees, before_.unknown_frees);
}

TEST_F(TorchHook, UnknownFreesAreIgnoredAndCounted) {
  int not_ours = 0;
  tether_torch_deallocate(&not_ours, sizeof not_ours, TETHER_DEVICE_HOST, nullptr);
  EXPECT_EQ(stats().unknown_frees, before_.unknown_frees + 1);
  void* p = tether_torch_allocate(64, TETHER_DEVICE_HOST, nullptr);
  tether_torch_deallocate(p, 64, TETHER_DEVICE_HOST, nullptr);
  tether_torch_deallocate(p, 64, TETHER_DEVICE_HOST, nullptr);  // a double free is not a second free
  EXPECT_EQ(stats().unknown_frees, before_.unknown_frees + 2);
}

TEST_F(TorchHook, OutOfMemoryThrowsBadAllocThatSaysSoAndTheResourceKeepsWorking) {
  tether::pool_options o;
  o.maximum_size = 1 << 20;
  auto pool = tether::statistics_adaptor(tether::pool_resource(tether::host_resource(), o));
  tether::scoped_resource use(pool, tether::device_host);
  try {
    (void)tether_torch_allocate(8 << 20, TETHER_DEVICE_HOST, nullptr);
    FAIL() << "no exception";
  } catch (const std::bad_alloc& e) {
    EXPECT_NE(std::string(e.what()).find("out of memory"), std::string::npos) << e.what();
  }
  EXPECT_EQ(stats().failures, before_.failures + 1);
  EXPECT_EQ(outstanding(pool), 0u);
  void* p = tether_torch_allocate(4096, TETHER_DEVICE_HOST, nullptr);
  ASSERT_NE(p, nullptr);
  tether_torch_deallocate(p, 4096, TETHER_DEVICE_HOST, nullptr);
}

TEST_F(TorchHook, OtherFailuresThrowRuntimeErrorNamingTheProblem) {
  // A device id no machine has is refused with INVALID_ARGUMENT, with or without a GPU.
  try {
    (void)tether_torch_allocate(64, 999, nullptr);
    FAIL() << "no exception";
  } catch (const std::bad_alloc&) {
    FAIL() << "not an out-of-memory failure";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("tether_torch_allocate"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("999"), std::string::npos) << e.what();
  }
  EXPECT_EQ(stats().failures, before_.failures + 1);
}

// Bound slots live for the rest of the process, so one test covers them all.
TEST_F(TorchHook, BoundSlots) {
  auto a = tether::statistics_adaptor(tether::pool_resource(tether::host_resource()));
  tether::pool_options small;
  small.maximum_size = 1 << 20;
  auto tiny = tether::statistics_adaptor(tether::pool_resource(tether::host_resource(), small));
  auto other = tether::statistics_adaptor(tether::host_resource());

  int sa = -1, sa2 = -1, sa_null = -1, stiny = -1;
  ASSERT_EQ(tether_torch_bind(a.get(), 0, &sa), TETHER_OK);
  ASSERT_EQ(tether_torch_bind(a.get(), 0, &sa2), TETHER_OK);
  EXPECT_EQ(sa, sa2);  // same resource and flags: same slot
  ASSERT_EQ(tether_torch_bind(a.get(), TETHER_TORCH_NULL_ON_FAILURE, &sa_null), TETHER_OK);
  EXPECT_NE(sa, sa_null);
  ASSERT_EQ(tether_torch_bind(tiny.get(), TETHER_TORCH_NULL_ON_FAILURE, &stiny), TETHER_OK);

  {  // a bound slot ignores the table
    tether::scoped_resource use(other, tether::device_host);
    void* p = slot_function(sa)(512, TETHER_DEVICE_HOST, nullptr);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(outstanding(a), 512u);
    EXPECT_EQ(other.statistics().total_count, 0u);
    tether_torch_deallocate(p, 512, TETHER_DEVICE_HOST, nullptr);
    EXPECT_EQ(outstanding(a), 0u);
  }
  // NULL_ON_FAILURE: out of memory returns NULL (what torch.cuda.MemPool checks).
  EXPECT_EQ(slot_function(stiny)(8 << 20, TETHER_DEVICE_HOST, nullptr), nullptr);
  void* q = slot_function(stiny)(4096, TETHER_DEVICE_HOST, nullptr);
  ASSERT_NE(q, nullptr);
  tether_torch_deallocate(q, 4096, TETHER_DEVICE_HOST, nullptr);

  // Bad arguments are errors with a message, not crashes.
  int out = 0;
  EXPECT_EQ(tether_torch_bind(a.get(), 0x80, &out), TETHER_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tether_last_error_message()).find("flags"), std::string::npos);
  EXPECT_EQ(tether_torch_bind(a.get(), 0, nullptr), TETHER_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(tether_torch_bind(reinterpret_cast<tether_resource_t*>(std::uintptr_t{0x1234}), 0, &out),
            TETHER_ERROR_INVALID_HANDLE);
  tether_torch_stats_t old_layout{};
  old_layout.struct_size = 4;
  EXPECT_EQ(tether_torch_get_stats(&old_layout), TETHER_ERROR_VERSION_MISMATCH);
  EXPECT_EQ(tether_torch_get_stats(nullptr), TETHER_ERROR_INVALID_ARGUMENT);

  // An unbound slot throws instead of allocating from nothing.
  int used = 0;
  for (int i = 0; i < TETHER_TORCH_BOUND_SLOTS; ++i) {
    tether::resource r = tether::host_resource();
    int s = -1;
    if (tether_torch_bind(r.get(), 0, &s) != TETHER_OK) {
      EXPECT_EQ(tether_torch_bind(r.get(), 0, &s), TETHER_ERROR_OUT_OF_MEMORY);  // all taken
      EXPECT_NE(std::string(tether_last_error_message()).find("taken"), std::string::npos);
      break;
    }
    ++used;
  }
  EXPECT_EQ(used, TETHER_TORCH_BOUND_SLOTS - 3);
  // Every slot is bound now; the bound resources stay alive for the process, on purpose.
  base_ = tether::live_objects();
}

TEST_F(TorchHook, ThreadsAllocatingAndFreeingAtOnceKeepExactBooks) {
  auto pool = tether::statistics_adaptor(tether::pool_resource(tether::host_resource()));
  tether::set_current_resource(pool, tether::device_host);
  constexpr int kThreads = 4, kRounds = 2000;
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::pair<void*, std::size_t>> live;
      for (int i = 0; i < kRounds; ++i) {
        const std::size_t n = 64u + static_cast<std::size_t>((i * 37 + t * 101) % 8192);
        void* p = tether_torch_allocate(n, TETHER_DEVICE_HOST, nullptr);
        if (p == nullptr) { bad++; continue; }
        static_cast<unsigned char*>(p)[0] = static_cast<unsigned char>(t);
        live.emplace_back(p, n);
        if (live.size() > 16) {
          tether_torch_deallocate(live.front().first, live.front().second, TETHER_DEVICE_HOST, nullptr);
          live.erase(live.begin());
        }
      }
      for (auto& [p, n] : live) tether_torch_deallocate(p, n, TETHER_DEVICE_HOST, nullptr);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(outstanding(pool), 0u);
  EXPECT_EQ(pool.statistics().total_count, std::uint64_t{kThreads} * kRounds);
  tether::reset_current_resource(tether::device_host);
}

}  // namespace
