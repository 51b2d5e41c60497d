// BinningResource: routing by size, bins as ranges and lists, the fallback,
// checked frees, bins added while allocations are live, threads.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "fakes.hpp"
#include "tether_core/binning.hpp"
#include "tether_core/fixed_size.hpp"
#include "tether_core/host.hpp"
#include "tether_core/pool.hpp"
#include "tether_core/statistics.hpp"
#include "test_util.hpp"

namespace {

using namespace tether;
using test::fails_with;
using test::KiB;
using test::MiB;

core::BinningOptions range(unsigned lo, unsigned hi) {
  core::BinningOptions o;
  o.min_size_exponent = lo;
  o.max_size_exponent = hi;
  o.blocks_to_preallocate = 4;
  return o;
}

TEST(Binning, NoBinsUntilGivenEverythingGoesToTheUpstream) {
  auto stats = core::make_statistics_adaptor(core::make_host_resource());
  auto b = core::make_binning_resource(stats, nullptr, core::BinningOptions{});
  EXPECT_TRUE(core::binning_bin_sizes(*b).empty());
  void* p = b->allocate(100, 0, 0);
  EXPECT_EQ(core::statistics_of(*stats).current_bytes, 100u);
  b->deallocate(p, 100, 0, 0);
  EXPECT_EQ(core::statistics_of(*stats).current_bytes, 0u);
}

TEST(Binning, RangesMakeFixedSizeBinsAndLargerSizesGoToTheFallback) {
  auto upstream = core::make_statistics_adaptor(core::make_host_resource());
  auto fallback = core::make_statistics_adaptor(core::make_host_resource());
  auto b = core::make_binning_resource(upstream, fallback, range(10, 12));
  EXPECT_EQ(core::binning_bin_sizes(*b), (std::vector<std::size_t>{1024, 2048, 4096}));
  const core::BinningInfo info = core::binning_info(*b);
  EXPECT_EQ(info.bin_count, 3u);
  EXPECT_EQ(info.smallest_bin, 1024u);
  EXPECT_EQ(info.largest_bin, 4096u);
  const auto chunks_before = core::statistics_of(*upstream).current_count;  // one batch per bin
  EXPECT_EQ(chunks_before, 3u);
  void* small = b->allocate(1500, 0, 0);  // the 2 KiB bin: no new upstream call
  EXPECT_EQ(core::statistics_of(*upstream).current_count, chunks_before);
  void* big = b->allocate(5000, 0, 0);  // above every bin
  EXPECT_EQ(core::statistics_of(*fallback).current_bytes, 5000u);
  b->deallocate(small, 1500, 0, 0);
  b->deallocate(big, 5000, 0, 0);
  EXPECT_EQ(core::statistics_of(*fallback).current_bytes, 0u);
  EXPECT_EQ(b->outstanding_count(), 0u);
}

TEST(Binning, AddBinWithAndWithoutAResource) {
  auto host = core::make_host_resource();
  auto b = core::make_binning_resource(host, nullptr, core::BinningOptions{});
  auto pool = core::make_statistics_adaptor(core::make_pool_resource(host, core::PoolOptions{}));
  core::binning_add_bin(*b, 256, nullptr);
  core::binning_add_bin(*b, 64 * KiB, pool);
  EXPECT_EQ(core::binning_bin_sizes(*b), (std::vector<std::size_t>{256, 64 * KiB}));
  void* p = b->allocate(300, 0, 0);  // above 256: the pool bin
  EXPECT_EQ(core::statistics_of(*pool).current_bytes, 300u);
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { core::binning_add_bin(*b, 256, nullptr); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { core::binning_add_bin(*b, 0, nullptr); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_NOT_SUPPORTED, [&] { core::binning_add_bin(*host, 256, nullptr); }));
  // A caller of the pool bin may not free what the binning resource took from it.
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { pool->deallocate(p, 300, 0, 0); }));
  b->deallocate(p, 300, 0, 0);
  EXPECT_EQ(core::statistics_of(*pool).current_bytes, 0u);
}

TEST(Binning, BinsOfOtherMemoryAreRefused) {
  auto host = core::make_host_resource();
  auto ordered = std::make_shared<test::OrderedUpstream>();  // device memory
  auto b = core::make_binning_resource(host, nullptr, core::BinningOptions{});
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { core::binning_add_bin(*b, 256, ordered); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT,
                         [&] { core::make_binning_resource(host, ordered, core::BinningOptions{}); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { core::make_binning_resource(host, nullptr, range(12, 10)); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { core::make_binning_resource(nullptr, nullptr, range(0, 0)); }));
}

TEST(Binning, AlignmentsNoFixedSizeBinHonoursGoToTheNextBinOrTheFallback) {
  auto fallback = core::make_statistics_adaptor(core::make_host_resource());
  auto b = core::make_binning_resource(core::make_host_resource(), fallback, range(8, 16));
  void* p = b->allocate(100, 1024, 0);  // the 256 bin's blocks are 256-aligned: the 1 KiB bin
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 1024, 0u);
  EXPECT_EQ(core::statistics_of(*fallback).current_count, 0u);
  void* q = b->allocate(100, 131072, 0);  // beyond every bin's block alignment: the fallback
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(q) % 131072, 0u);
  EXPECT_EQ(core::statistics_of(*fallback).current_bytes, 100u);
  b->deallocate(p, 100, 1024, 0);
  b->deallocate(q, 100, 131072, 0);
  EXPECT_EQ(core::statistics_of(*fallback).current_bytes, 0u);
}

TEST(Binning, AllocationsMadeBeforeABinWasAddedAreStillFreed) {
  auto upstream = core::make_statistics_adaptor(core::make_host_resource());
  auto b = core::make_binning_resource(upstream, nullptr, range(12, 12));  // one 4 KiB bin
  void* p = b->allocate(100, 0, 0);   // served by the 4 KiB bin
  void* q = b->allocate(9000, 0, 0);  // by the fallback
  core::binning_add_bin(*b, 256, nullptr);
  core::binning_add_bin(*b, 16 * KiB, nullptr);
  b->deallocate(p, 100, 0, 0);   // routed now to the 256 bin, which refuses it: found in the 4 KiB bin
  b->deallocate(q, 9000, 0, 0);  // routed now to the 16 KiB bin: found in the fallback
  EXPECT_EQ(b->outstanding_count(), 0u);
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { b->deallocate(p, 100, 0, 0); }));  // double free
}

TEST(Binning, ForeignFreesAreRefusedWithNothingChanged) {
  auto host = core::make_host_resource();
  auto b = core::make_binning_resource(host, nullptr, range(8, 12));
  void* mine = b->allocate(1000, 0, 0);
  void* foreign = host->allocate(1000, 0, 0);
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { b->deallocate(foreign, 1000, 0, 0); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { host->deallocate(mine, 1000, 0, 0); }));
  EXPECT_EQ(b->outstanding_count(), 1u);
  b->deallocate(mine, 1000, 0, 0);
  host->deallocate(foreign, 1000, 0, 0);
}

TEST(Binning, TrimReachesTheBins) {
  auto upstream = core::make_statistics_adaptor(core::make_host_resource());
  auto b = core::make_binning_resource(upstream, nullptr, range(10, 11));
  EXPECT_EQ(core::statistics_of(*upstream).current_count, 2u);
  b->trim();
  EXPECT_EQ(core::statistics_of(*upstream).current_count, 0u);
}

TEST(Binning, ConcurrentThreadsAndAddBin) {
  auto b = core::make_binning_resource(core::make_host_resource(), nullptr, range(8, 10));
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t)
    threads.emplace_back([&, t] {
      std::vector<std::pair<unsigned char*, std::size_t>> live;
      for (int i = 0; i < 3000; ++i) {
        if (live.size() < 16 && i % 3 != 2) {
          const std::size_t n = 1 + (i * 37 + t * 11) % 8000;
          auto* p = static_cast<unsigned char*>(b->allocate(n, 0, 0));
          p[0] = p[n - 1] = static_cast<unsigned char>(t);
          live.emplace_back(p, n);
        } else if (!live.empty()) {
          auto [p, n] = live.back();
          live.pop_back();
          if (p[0] != t || p[n - 1] != t) ++errors;
          b->deallocate(p, n, 0, 0);
        }
        if (t == 0 && i == 1000) core::binning_add_bin(*b, 4096, nullptr);
      }
      for (auto [p, n] : live) b->deallocate(p, n, 0, 0);
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors, 0);
  EXPECT_EQ(b->outstanding_count(), 0u);
  EXPECT_EQ(core::binning_bin_sizes(*b).size(), 4u);
}

TEST(BinningStreams, StreamOrderComesFromTheBins) {
  auto up = std::make_shared<test::OrderedUpstream>();
  {
    auto b = core::make_binning_resource(up, nullptr, range(10, 10));
    EXPECT_NE(b->stream_order(), nullptr);
    EXPECT_TRUE(b->properties().device_accessible);
    EXPECT_EQ(b->properties().kind, TETHER_RESOURCE_KIND_BINNING);
    for (int i = 0; i < 50; ++i) {
      const core::stream_t s = 1 + i % 3;
      void* p = b->allocate(KiB, 0, s);
      up->allocated(p, KiB, s);
      up->freed(p, KiB, s);
      b->deallocate(p, KiB, 0, s);
    }
  }
  EXPECT_EQ(up->violations(), 0u);
  EXPECT_EQ(up->outstanding_count(), 0u);
}

}  // namespace
