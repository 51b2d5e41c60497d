// The header-only C++ wrapper (tether/tether.hpp): RAII maps onto the C
// ownership contract, every status becomes the right exception, and the
// table helpers (scoped_resource) are thread-scoped and restore what they replaced.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

#include "tether/tether.hpp"

namespace {

// True if the raw handle is live (probed with retain + release).
bool alive(tether_resource_t* h) {
  if (tether_resource_retain(h) != TETHER_OK) return false;
  return tether_resource_release(h) == TETHER_OK;
}

bool have_gpu() {
  int n = 0;
  return tether_cuda_get_device_count(&n) == TETHER_OK && n > 0;
}

// Every test must leave the census where it found it.
class Wrapper : public ::testing::Test {
 protected:
  void SetUp() override {
    (void)tether::current_resource(tether::device_host);  // make the host default exist
    base_ = tether::live_objects();
  }
  void TearDown() override { EXPECT_EQ(tether::live_objects(), base_); }
  std::size_t base_ = 0;
};

// A stream-like type as CCCL's cuda::stream_ref is: get() returns a pointer.
struct fake_stream_ref {
  struct CUstream_st* s;
  struct CUstream_st* get() const noexcept { return s; }
};

TEST_F(Wrapper, CheckMapsEveryStatusToItsType) {
  EXPECT_NO_THROW(tether::check(TETHER_OK));
  EXPECT_THROW(tether::check(TETHER_ERROR_OUT_OF_MEMORY), tether::out_of_memory_error);
  EXPECT_THROW(tether::check(TETHER_ERROR_INVALID_ARGUMENT), tether::invalid_argument_error);
  EXPECT_THROW(tether::check(TETHER_ERROR_INVALID_HANDLE), tether::invalid_handle_error);
  EXPECT_THROW(tether::check(TETHER_ERROR_NOT_SUPPORTED), tether::not_supported_error);
  EXPECT_THROW(tether::check(TETHER_ERROR_NO_DEVICE), tether::no_device_error);
  EXPECT_THROW(tether::check(TETHER_ERROR_CUDA), tether::cuda_error);
  EXPECT_THROW(tether::check(TETHER_ERROR_LOCKED), tether::locked_error);
  EXPECT_THROW(tether::check(TETHER_ERROR_VERSION_MISMATCH), tether::version_mismatch_error);
  EXPECT_THROW(tether::check(TETHER_ERROR_SHUTTING_DOWN), tether::shutting_down_error);
  EXPECT_THROW(tether::check(TETHER_ERROR_INTERNAL), tether::internal_error);
  EXPECT_THROW(tether::check(static_cast<tether_status_t>(77)), tether::internal_error);
  try {
    tether::check(TETHER_ERROR_LOCKED);
    FAIL() << "no throw";
  } catch (const std::exception& e) {  // catchable as std::exception (single base)
    auto* te = dynamic_cast<const tether::error*>(&e);
    ASSERT_NE(te, nullptr);
    EXPECT_EQ(te->status(), TETHER_ERROR_LOCKED);
    EXPECT_STREQ(te->status_name(), "TETHER_ERROR_LOCKED");
  }
}

TEST_F(Wrapper, ExceptionsCarryTheLibraryMessage) {
  tether::resource h = tether::host_resource();
  try {
    (void)h.allocate(64, 3);
    FAIL() << "bad alignment accepted";
  } catch (const tether::invalid_argument_error& e) {
    EXPECT_EQ(e.status(), TETHER_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("tether_resource_allocate"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)h.allocate(std::numeric_limits<std::size_t>::max()), tether::out_of_memory_error);
  EXPECT_THROW(h.statistics(), tether::not_supported_error);
  EXPECT_THROW(h.pool_info(), tether::not_supported_error);
}

TEST_F(Wrapper, CopyRetainsMoveTransfersDestructorReleases) {
  tether_resource_t* raw = nullptr;
  {
    tether::resource a = tether::host_resource();
    raw = a.get();
    ASSERT_NE(raw, nullptr);
    tether::resource b = a;  // retain
    EXPECT_EQ(b.get(), raw);
    EXPECT_EQ(tether::live_objects(), base_ + 1);  // one handle, two references
    a.reset();
    EXPECT_FALSE(a);
    EXPECT_TRUE(alive(raw));
    tether::resource c = std::move(b);
    EXPECT_FALSE(b);  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
    EXPECT_EQ(c.get(), raw);
    tether::resource d;
    d = c;
    c = tether::resource();
    EXPECT_TRUE(alive(raw));
    EXPECT_EQ(d.get(), raw);
  }
  EXPECT_FALSE(alive(raw));
}

TEST_F(Wrapper, AdoptBorrowRelease) {
  tether_resource_t* raw = nullptr;
  ASSERT_EQ(tether_host_resource_create(&raw), TETHER_OK);
  {
    tether::resource borrowed = tether::resource::borrow(raw);  // +1 of its own
    EXPECT_EQ(borrowed.get(), raw);
  }
  EXPECT_TRUE(alive(raw));
  tether::resource owner = tether::resource::adopt(raw);  // takes our +1
  tether_resource_t* back = owner.release();              // hands it out again
  EXPECT_FALSE(owner);
  EXPECT_EQ(back, raw);
  EXPECT_TRUE(alive(raw));
  EXPECT_EQ(tether_resource_release(back), TETHER_OK);
  EXPECT_FALSE(alive(raw));
  EXPECT_THROW(tether::resource::borrow(raw), tether::invalid_handle_error);  // stale
  EXPECT_THROW(tether::resource::borrow(reinterpret_cast<tether_resource_t*>(std::uintptr_t{0x1234})),
               tether::invalid_handle_error);
  EXPECT_FALSE(tether::resource::borrow(nullptr));
}

TEST_F(Wrapper, EmptyResourceThrowsInvalidHandle) {
  tether::resource empty;
  EXPECT_THROW((void)empty.allocate(8), tether::invalid_handle_error);
  EXPECT_THROW(empty.properties(), tether::invalid_handle_error);
  EXPECT_STREQ(empty.name(), "");
  EXPECT_THROW(tether::pool_resource(empty), tether::invalid_handle_error);
  EXPECT_THROW(tether::buffer(empty, 8), tether::invalid_handle_error);
  EXPECT_TRUE(empty == tether::resource());
}

TEST_F(Wrapper, AllocateSpellings) {
  tether::resource pool = tether::pool_resource(tether::host_resource());
  void* p = pool.allocate(100);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % tether::default_alignment, 0u);
  pool.deallocate(p, 100);
  p = pool.allocate(100, 4096, 0);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 4096, 0u);
  pool.deallocate(p, 100, 4096, 0);
  p = pool.allocate_sync(64, 64);
  pool.deallocate_sync(p, 64, 64);
  fake_stream_ref stream{nullptr};
  p = pool.allocate(stream, 64, 128);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 128, 0u);
  pool.deallocate(stream, p, 64, 128);
  p = pool.allocate_async(64, 256, stream);
  pool.deallocate_async(p, 64, 256, stream);
  EXPECT_EQ(pool.allocate(0), nullptr);
  pool.deallocate(nullptr, 0);
  // Memory from elsewhere is refused and left intact.
  tether::resource other = tether::pool_resource(tether::host_resource());
  void* q = other.allocate(256);
  EXPECT_THROW(pool.deallocate(q, 256), tether::invalid_argument_error);
  other.deallocate(q, 256);
  const tether_pool_info_t info = pool.pool_info();
  EXPECT_EQ(info.free_bytes, info.pool_size);
  EXPECT_EQ(info.free_blocks, info.pool_size == 0 ? 0u : 1u);  // all free, all coalesced (C++ sees the appended field)
}

TEST_F(Wrapper, QueriesAndEquality) {
  tether::resource host = tether::host_resource();
  tether::resource pool = tether::pool_resource(host, {1 << 20, 0, 0});
  tether::resource stats = tether::statistics_adaptor(pool);
  EXPECT_STREQ(host.name(), "host");
  EXPECT_EQ(host.kind(), TETHER_RESOURCE_KIND_HOST);
  EXPECT_EQ(pool.kind(), TETHER_RESOURCE_KIND_POOL);
  EXPECT_EQ(stats.kind(), TETHER_RESOURCE_KIND_STATISTICS);
  EXPECT_EQ(host.device(), tether::device_host);
  EXPECT_TRUE(host.is_host_accessible());
  EXPECT_FALSE(host.is_device_accessible());
  EXPECT_GE(pool.pool_info().pool_size, std::uint64_t{1} << 20);
  EXPECT_EQ(stats.upstream().get(), pool.get());
  EXPECT_EQ(pool.upstream().get(), host.get());
  EXPECT_FALSE(host.upstream());
  EXPECT_TRUE(pool == pool);
  tether::resource pool_copy = pool;
  EXPECT_TRUE(pool == pool_copy);
  EXPECT_TRUE(pool != host);
  EXPECT_TRUE(pool.is_equal(pool_copy));
  EXPECT_FALSE(pool.is_equal(host));
  pool.trim();
}

TEST_F(Wrapper, StatisticsThroughAdaptorChain) {
  tether::resource stats = tether::statistics_adaptor(tether::pool_resource(tether::host_resource()));
  std::vector<void*> ptrs;
  for (int i = 1; i <= 10; ++i) ptrs.push_back(stats.allocate(static_cast<std::size_t>(i) * 100));
  tether_statistics_t s = stats.statistics();
  EXPECT_EQ(s.current_count, 10u);
  EXPECT_EQ(s.current_bytes, 5500u);
  for (int i = 1; i <= 10; ++i) stats.deallocate(ptrs[static_cast<std::size_t>(i - 1)], static_cast<std::size_t>(i) * 100);
  s = stats.statistics();
  EXPECT_EQ(s.current_count, 0u);
  EXPECT_EQ(s.peak_count, 10u);
  EXPECT_EQ(s.total_bytes, 5500u);
  stats.reset_peak_statistics();
  EXPECT_EQ(stats.statistics().peak_count, 0u);
}

TEST_F(Wrapper, BufferRaii) {
  tether::resource stats = tether::statistics_adaptor(tether::host_resource());
  tether_resource_t* raw_stats = stats.get();
  tether::buffer b(stats, 64);
  EXPECT_EQ(b.size(), 64u);
  ASSERT_NE(b.data(), nullptr);
  EXPECT_EQ(b.stream(), 0u);
  EXPECT_EQ(b.resource().get(), raw_stats);
  const char text[] = "tether buffer";
  b.copy_from_host(text, sizeof text);
  char back[sizeof text] = {};
  b.copy_to_host(back, sizeof back);
  EXPECT_STREQ(back, text);
  b.resize(4096);
  EXPECT_EQ(b.size(), 4096u);
  std::memset(back, 0, sizeof back);
  b.copy_to_host(back, sizeof back);
  EXPECT_STREQ(back, text);  // min(old, new) bytes kept
  EXPECT_THROW(b.copy_from_host(text, sizeof text, 4096), tether::invalid_argument_error);

  tether::buffer c = b;  // same memory, one more reference
  EXPECT_EQ(c.get(), b.get());
  tether::buffer d(stats, 16);
  d.copy_from(b, 8, 0, 0);
  stats.reset();         // the buffers keep the adaptor alive
  EXPECT_TRUE(alive(raw_stats));
  EXPECT_EQ(c.resource().statistics().current_count, 2u);
  b.reset();
  EXPECT_EQ(c.size(), 4096u);
  c = tether::buffer();
  EXPECT_EQ(d.resource().statistics().current_count, 1u);
  d.reset();
  EXPECT_FALSE(alive(raw_stats));
}

TEST_F(Wrapper, BufferFromTheTable) {
  tether::resource stats = tether::statistics_adaptor(tether::host_resource());
  tether::scoped_resource use(stats);  // host memory: goes to the host slot
  EXPECT_EQ(use.device(), tether::device_host);
  tether::buffer b = tether::buffer::from_current(tether::device_host, 128);
  EXPECT_EQ(b.resource().get(), stats.get());
  EXPECT_EQ(stats.statistics().current_bytes, 128u);
  EXPECT_THROW(tether::buffer::from_current(-3, 8), tether::invalid_argument_error);
}

TEST_F(Wrapper, CurrentResourceSetGet) {
  tether::resource before = tether::current_resource(tether::device_host);
  tether::resource mine = tether::host_resource();
  tether::resource prev = tether::set_current_resource(mine, tether::device_host);
  EXPECT_EQ(prev.get(), before.get());
  EXPECT_EQ(tether::current_resource(tether::device_host).get(), mine.get());
  tether::resource again = tether::set_current_resource(prev);  // infers the host slot
  EXPECT_EQ(again.get(), mine.get());
  EXPECT_EQ(tether::current_resource(tether::device_host).get(), before.get());
  EXPECT_FALSE(tether::is_current_resource_locked(tether::device_host));
  EXPECT_THROW(tether::current_resource(100000), tether::invalid_argument_error);
}

TEST_F(Wrapper, ScopedResourceRestoresAndNests) {
  tether_resource_t* before = tether::current_resource(tether::device_host).get();
  tether::resource a = tether::host_resource();
  tether::resource b = tether::statistics_adaptor(a);
  {
    tether::scoped_resource ga(a, tether::device_host);
    EXPECT_EQ(ga.previous().get(), before);
    EXPECT_EQ(tether::current_resource(tether::device_host).get(), a.get());
    {
      tether::scoped_resource gb(b);
      EXPECT_EQ(tether::current_resource(tether::device_host).get(), b.get());
    }
    EXPECT_EQ(tether::current_resource(tether::device_host).get(), a.get());
  }
  EXPECT_EQ(tether::current_resource(tether::device_host).get(), before);
  static_assert(!std::is_copy_constructible_v<tether::scoped_resource>, "");
  static_assert(!std::is_move_constructible_v<tether::scoped_resource>, "");
}

TEST_F(Wrapper, ScopedResourceSurvivesItsResourceObject) {
  tether_resource_t* before = tether::current_resource(tether::device_host).get();
  tether_resource_t* raw = nullptr;
  {
    tether::scoped_resource g(tether::host_resource());  // a temporary: the table holds it
    raw = tether::current_resource(tether::device_host).get();
    EXPECT_TRUE(alive(raw));
  }
  EXPECT_FALSE(alive(raw));
  EXPECT_EQ(tether::current_resource(tether::device_host).get(), before);
}

TEST_F(Wrapper, ScopedResourceIsPerThread) {
  tether::resource before = tether::current_resource(tether::device_host);
  tether::resource a = tether::host_resource();
  tether::resource b = tether::statistics_adaptor(tether::host_resource());
  // Main makes its guard, then the other thread makes its own; main's guard
  // ends first, the other's last - the order a process-wide save/restore breaks.
  std::atomic<int> step{0};
  auto wait_for = [&](int s) {
    while (step.load() != s) std::this_thread::yield();
  };
  tether_resource_t* other_saw = nullptr;
  tether_resource_t* other_prev = nullptr;
  tether_resource_t* other_after = nullptr;
  std::thread other;
  {
    tether::scoped_resource ga(a, tether::device_host);
    other = std::thread([&] {
      {
        tether::scoped_resource gb(b);
        other_prev = gb.previous().get();  // this thread saw the process slot, not main's guard
        other_saw = tether::current_resource(tether::device_host).get();
        step = 1;
        wait_for(2);
      }
      other_after = tether::current_resource(tether::device_host).get();
    });
    wait_for(1);
    EXPECT_EQ(tether::current_resource(tether::device_host).get(), a.get());  // not b
  }
  EXPECT_EQ(tether::current_resource(tether::device_host).get(), before.get());
  step = 2;
  other.join();
  EXPECT_EQ(other_saw, b.get());
  EXPECT_EQ(other_prev, before.get());
  EXPECT_EQ(other_after, before.get());
  EXPECT_EQ(tether::current_resource(tether::device_host).get(), before.get());
}

TEST_F(Wrapper, ScopedResourceKeepsItsOverrideWhenTheSlotIsSet) {
  tether::resource before = tether::current_resource(tether::device_host);
  tether::resource mine = tether::host_resource();
  tether::resource app = tether::host_resource();
  {
    tether::scoped_resource g(mine);
    tether::resource prev = tether::set_current_resource(app);
    EXPECT_EQ(prev.get(), before.get());                                   // the process slot's
    EXPECT_EQ(tether::current_resource(tether::device_host).get(), mine.get());  // still the override
  }
  EXPECT_EQ(tether::current_resource(tether::device_host).get(), app.get());
  tether::set_current_resource(before);
}

TEST_F(Wrapper, PushAndPop) {
  tether::resource before = tether::current_resource(tether::device_host);
  tether::resource a = tether::host_resource();
  tether::push_current_resource(a);  // host memory: the host slot
  tether::push_current_resource(a, tether::device_host);
  EXPECT_EQ(tether::current_resource(tether::device_host).get(), a.get());
  tether::pop_current_resource(tether::device_host);
  EXPECT_EQ(tether::current_resource(tether::device_host).get(), a.get());
  tether::pop_current_resource(tether::device_host);
  EXPECT_EQ(tether::current_resource(tether::device_host).get(), before.get());
  EXPECT_THROW(tether::pop_current_resource(tether::device_host), tether::invalid_argument_error);
  EXPECT_THROW(tether::push_current_resource(tether::resource(), tether::device_host),
               tether::invalid_argument_error);
}

TEST_F(Wrapper, SetCurrentResourceIfUnset) {
  tether::resource was = tether::reset_current_resource(tether::device_host);  // unset now
  (void)tether::current_resource(tether::device_host);  // a default exists: it does not count as set
  tether::resource lib = tether::host_resource();
  EXPECT_TRUE(tether::set_current_resource_if_unset(lib));  // infers the host slot
  EXPECT_EQ(tether::current_resource(tether::device_host).get(), lib.get());
  tether::resource lib2 = tether::host_resource();
  EXPECT_FALSE(tether::set_current_resource_if_unset(lib2, tether::device_host));
  tether::resource app = tether::host_resource();
  EXPECT_EQ(tether::set_current_resource(app).get(), lib.get());
  EXPECT_FALSE(tether::set_current_resource_if_unset(lib2));  // the application's choice wins
  EXPECT_EQ(tether::current_resource(tether::device_host).get(), app.get());
  EXPECT_THROW(tether::set_current_resource_if_unset(tether::resource(), tether::device_host),
               tether::invalid_argument_error);
  (void)tether::reset_current_resource(tether::device_host);  // unset again
  EXPECT_TRUE(tether::set_current_resource_if_unset(lib2));
  (void)tether::reset_current_resource(tether::device_host);
  (void)tether::current_resource(tether::device_host);  // the default SetUp counted
}

TEST_F(Wrapper, ConcurrentCopiesAndBuffers) {
  tether::resource pool = tether::pool_resource(tether::host_resource());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([pool] {  // each thread copies (retains) the resource
      for (int i = 0; i < 500; ++i) {
        tether::resource local = pool;
        tether::buffer buf(local, 1 + static_cast<std::size_t>(i));
        (void)tether::current_resource(tether::device_host);
      }
    });
  for (auto& t : threads) t.join();
  const tether_pool_info_t info = pool.pool_info();
  EXPECT_EQ(info.free_bytes, info.pool_size);
}

TEST_F(Wrapper, ResourceWithChecksProperties) {
  tether::resource host = tether::host_resource();
  tether::host_accessible_resource h(host);
  EXPECT_EQ(h.get(), host.get());
  EXPECT_THROW(tether::device_resource{host}, tether::invalid_argument_error);
  void* p = h.allocate_sync(32);
  h.deallocate_sync(p, 32);
}

TEST_F(Wrapper, DeviceFactoriesWithoutGpu) {
  if (have_gpu()) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_THROW(tether::cuda_resource(0), tether::no_device_error);
  EXPECT_THROW(tether::async_resource(0), tether::no_device_error);
  EXPECT_THROW(tether::managed_resource(0), tether::no_device_error);
  EXPECT_THROW(tether::pinned_host_resource(0), tether::no_device_error);
  EXPECT_THROW(tether::cuda_device_count(), tether::no_device_error);
  EXPECT_THROW(tether::cuda_device_name(0), tether::no_device_error);
  EXPECT_THROW(tether::current_resource(), tether::no_device_error);  // default: the current device
  EXPECT_THROW(tether::current_resource(0), tether::no_device_error);
}

TEST_F(Wrapper, DeviceNameWithGpu) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const std::string name = tether::cuda_device_name(0);
  EXPECT_FALSE(name.empty());
  EXPECT_EQ(name.size(), std::char_traits<char>::length(name.c_str()));  // no NUL kept inside
  EXPECT_THROW(tether::cuda_device_name(tether::cuda_device_count()), tether::invalid_argument_error);
}

TEST_F(Wrapper, Versions) {
  EXPECT_EQ(tether::version_number(), tether::header_version_number);
  EXPECT_EQ(tether::abi_version(), tether::header_abi_version);
  EXPECT_NO_THROW(tether::check_abi_version());
  EXPECT_STREQ(tether::version_string(), (std::to_string(TETHER_VERSION_MAJOR) + "." +
                                          std::to_string(TETHER_VERSION_MINOR) + "." +
                                          std::to_string(TETHER_VERSION_PATCH)).c_str());
}

TEST_F(Wrapper, SpecsBuildAndDescribeStacks) {
  tether::resource r = tether::resource_from_spec("statistics(pool(host, initial_size=1MiB))");
  EXPECT_EQ(r.spec(), "statistics(pool(host, initial_size=1MiB))");
  EXPECT_EQ(tether::resource_from_spec(r.spec()).spec(), r.spec());
  tether::resource pool = tether::pool_resource(tether::host_resource(), {0, 3 << 20, 0});
  EXPECT_EQ(pool.spec(), "pool(host, maximum_size=3MiB)");
  try {
    tether::resource_from_spec("pool(host, initial=1)");
    ADD_FAILURE() << "a bad spec was accepted";
  } catch (const tether::invalid_argument_error& e) {
    EXPECT_NE(std::string(e.what()).find("spec:12: unknown parameter 'initial' of pool"), std::string::npos) << e.what();
  }
  EXPECT_THROW(tether::resource().spec(), tether::invalid_handle_error);
}

}  // namespace

// ---- suballocators (tether/cpp/arena.hpp, binning.hpp, fixed_size.hpp) ----------

TEST(Suballocators, ArenaResource) {
  tether::resource host = tether::host_resource();
  tether::resource arena = tether::arena_resource(host, {8u << 20, 0});
  EXPECT_EQ(arena.name(), std::string("arena"));
  void* p = arena.allocate(1000);
  void* big = arena.allocate(3u << 20);
  const tether_arena_info_t info = tether::arena_info(arena);
  EXPECT_EQ(info.arena_size, 8u << 20);
  EXPECT_EQ(info.large_bytes, 3u << 20);
  EXPECT_THROW(arena.allocate(6u << 20), tether::out_of_memory_error);
  EXPECT_THROW(arena.deallocate(p, 999), tether::invalid_argument_error);
  arena.deallocate(p, 1000);
  arena.deallocate(big, 3u << 20);
  EXPECT_THROW(tether::arena_info(host), tether::not_supported_error);
  EXPECT_THROW(tether::arena_resource(host, {0, 12345}), tether::invalid_argument_error);
}

TEST(Suballocators, BinningResourceWithBinsAndFallback) {
  tether::resource host = tether::host_resource();
  tether::binning_options o;
  o.min_size_exponent = 8;
  o.max_size_exponent = 10;
  o.blocks_to_preallocate = 2;
  o.fallback = tether::statistics_adaptor(host);
  tether::resource binning = tether::binning_resource(host, o);
  tether::resource pool_bin = tether::statistics_adaptor(tether::pool_resource(host));
  tether::add_bin(binning, 64 * 1024, pool_bin);
  tether::add_bin(binning, 4096);
  EXPECT_EQ(tether::bin_sizes(binning), (std::vector<std::size_t>{256, 512, 1024, 4096, 64 * 1024}));
  EXPECT_EQ(tether::binning_info(binning).bin_count, 5u);
  void* a = binning.allocate(5000);    // the pool bin
  void* b = binning.allocate(100000);  // the fallback
  EXPECT_EQ(pool_bin.statistics().current_bytes, 5000u);
  EXPECT_EQ(o.fallback.statistics().current_bytes, 100000u);
  binning.deallocate(a, 5000);
  binning.deallocate(b, 100000);
  EXPECT_THROW(tether::add_bin(binning, 4096), tether::invalid_argument_error);
  EXPECT_THROW(tether::add_bin(host, 4096), tether::not_supported_error);
}

TEST(Suballocators, FixedSizeResource) {
  tether::resource fixed = tether::fixed_size_resource(tether::host_resource(), {4096, 4});
  void* p = fixed.allocate(4096);
  EXPECT_THROW(fixed.allocate(4097), tether::out_of_memory_error);
  const tether_fixed_size_info_t info = tether::fixed_size_info(fixed);
  EXPECT_EQ(info.block_size, 4096u);
  EXPECT_EQ(info.total_blocks, 4u);
  EXPECT_EQ(info.free_blocks, 3u);
  fixed.deallocate(p, 4096);
}

// CUDA IPC through the wrapper, the parts that need no GPU (tests/gpu/test_gpu_ipc.c has the rest).
TEST_F(Wrapper, IpcExportOfHostMemoryIsNotSupportedAndForeignBytesAreRefused) {
  tether::resource host = tether::host_resource();
  tether::buffer b(host, 4096);
  try {
    (void)b.export_ipc();
    ADD_FAILURE() << "export_ipc of host memory did not throw";
  } catch (const tether::not_supported_error& e) {
    EXPECT_NE(std::string(e.what()).find("host memory"), std::string::npos) << e.what();
  }
  b.resize(8192);  // a refused export is no export
  tether_ipc_handle_t zeros{};
  static_assert(sizeof zeros == TETHER_IPC_HANDLE_SIZE, "plain bytes");
  try {
    (void)tether::import_ipc(zeros);
    ADD_FAILURE() << "import_ipc of zeros did not throw";
  } catch (const tether::invalid_argument_error& e) {
    EXPECT_NE(std::string(e.what()).find("handle"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)tether::import_ipc(zeros, 0), tether::invalid_argument_error);
}
