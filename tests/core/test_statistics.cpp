// StatisticsAdaptor: what it counts, and that failures count nothing.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "tether_core/host.hpp"
#include "tether_core/pool.hpp"
#include "tether_core/statistics.hpp"
#include "test_util.hpp"

namespace {

using namespace tether;
using test::fails_with;

TEST(Statistics, CountsCurrentPeakAndTotal) {
  auto stats = core::make_statistics_adaptor(core::make_host_resource());
  void* a = stats->allocate(100, 0, 0);
  void* b = stats->allocate(200, 0, 0);
  core::Statistics s = core::statistics_of(*stats);
  EXPECT_EQ(s.current_bytes, 300u);
  EXPECT_EQ(s.current_count, 2u);
  EXPECT_EQ(s.peak_bytes, 300u);
  EXPECT_EQ(s.peak_count, 2u);
  stats->deallocate(a, 100, 0, 0);
  void* c = stats->allocate(50, 0, 0);
  s = core::statistics_of(*stats);
  EXPECT_EQ(s.current_bytes, 250u);
  EXPECT_EQ(s.current_count, 2u);
  EXPECT_EQ(s.peak_bytes, 300u);
  EXPECT_EQ(s.peak_count, 2u);
  EXPECT_EQ(s.total_bytes, 350u);
  EXPECT_EQ(s.total_count, 3u);
  core::reset_peak_statistics(*stats);
  s = core::statistics_of(*stats);
  EXPECT_EQ(s.peak_bytes, 250u);
  EXPECT_EQ(s.peak_count, 2u);
  EXPECT_EQ(s.total_bytes, 350u);  // totals are not reset
  stats->deallocate(b, 200, 0, 0);
  stats->deallocate(c, 50, 0, 0);
  s = core::statistics_of(*stats);
  EXPECT_EQ(s.current_bytes, 0u);
  EXPECT_EQ(s.current_count, 0u);
  EXPECT_EQ(s.peak_bytes, 250u);
}

TEST(Statistics, FailuresCountNothing) {
  auto stats = core::make_statistics_adaptor(core::make_host_resource());
  void* p = stats->allocate(64, 0, 0);
  const core::Statistics before = core::statistics_of(*stats);
  EXPECT_THROW(stats->allocate(SIZE_MAX / 2, 0, 0), core::OutOfMemory);
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { stats->allocate(64, 3, 0); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { stats->deallocate(p, 65, 0, 0); }));
  int local = 0;
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { stats->deallocate(&local, 4, 0, 0); }));
  const core::Statistics after = core::statistics_of(*stats);
  EXPECT_EQ(after.current_bytes, before.current_bytes);
  EXPECT_EQ(after.current_count, before.current_count);
  EXPECT_EQ(after.total_bytes, before.total_bytes);
  EXPECT_EQ(after.total_count, before.total_count);
  EXPECT_EQ(after.peak_bytes, before.peak_bytes);
  stats->deallocate(p, 64, 0, 0);
}

TEST(Statistics, PropertiesComeFromUpstreamWithKindStatistics) {
  auto host = core::make_host_resource();
  auto stats = core::make_statistics_adaptor(host);
  EXPECT_EQ(stats->properties().kind, TETHER_RESOURCE_KIND_STATISTICS);
  EXPECT_EQ(stats->properties().device, host->properties().device);
  EXPECT_EQ(stats->properties().host_accessible, host->properties().host_accessible);
  EXPECT_EQ(stats->properties().device_accessible, host->properties().device_accessible);
  EXPECT_STREQ(stats->name(), "statistics");
  ASSERT_NE(stats->upstream(), nullptr);
  EXPECT_EQ(stats->upstream()->get(), host.get());
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [] { core::make_statistics_adaptor(nullptr); }));
}

TEST(Statistics, OtherResourcesAreNotSupported) {
  auto host = core::make_host_resource();
  EXPECT_TRUE(fails_with(TETHER_ERROR_NOT_SUPPORTED, [&] { core::statistics_of(*host); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_NOT_SUPPORTED, [&] { core::reset_peak_statistics(*host); }));
  auto pool = core::make_pool_resource(core::make_statistics_adaptor(host), core::PoolOptions{});
  EXPECT_TRUE(fails_with(TETHER_ERROR_NOT_SUPPORTED, [&] { core::statistics_of(*pool); }));
}

TEST(Statistics, TrimReachesAPoolUpstream) {
  auto inner = core::make_statistics_adaptor(core::make_host_resource());
  core::PoolOptions o;
  o.initial_size = 1 << 20;
  auto stats = core::make_statistics_adaptor(core::make_pool_resource(inner, o));
  EXPECT_EQ(core::statistics_of(*inner).current_bytes, 1u << 20);
  stats->trim();
  EXPECT_EQ(core::statistics_of(*inner).current_bytes, 0u);
}

TEST(Statistics, ConcurrentCountsAreExact) {
  auto stats = core::make_statistics_adaptor(core::make_host_resource());
  constexpr int kThreads = 8, kOps = 2000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kOps; ++i) {
        const std::size_t n = 1 + static_cast<std::size_t>((t * 7919 + i * 31) % 1000);
        void* p = stats->allocate(n, 0, 0);
        stats->deallocate(p, n, 0, 0);
      }
    });
  }
  for (auto& th : threads) th.join();
  const core::Statistics s = core::statistics_of(*stats);
  EXPECT_EQ(s.current_bytes, 0u);
  EXPECT_EQ(s.current_count, 0u);
  EXPECT_EQ(s.total_count, static_cast<std::uint64_t>(kThreads * kOps));
  EXPECT_GE(s.peak_count, 1u);
  EXPECT_LE(s.peak_count, static_cast<std::uint64_t>(kThreads));
}

}  // namespace

// ---- the counter stack (RMM's push_counters / pop_counters semantics) -------

namespace {

using namespace tether;

TEST(StatisticsStack, PushedSetSeesOnlyWhatHappensWhileOnTop) {
  auto stats = core::make_statistics_adaptor(core::make_host_resource());
  void* a = stats->allocate(1000, 0, 0);
  core::push_statistics_counters(*stats);
  EXPECT_EQ(core::statistics_depth(*stats), 2u);
  core::Statistics s = core::statistics_of(*stats);
  EXPECT_EQ(s.current_bytes, 0u);
  EXPECT_EQ(s.total_count, 0u);
  void* b = stats->allocate(300, 0, 0);
  void* c = stats->allocate(200, 0, 0);
  stats->deallocate(c, 200, 0, 0);
  s = core::statistics_of(*stats);
  EXPECT_EQ(s.current_bytes, 300u);
  EXPECT_EQ(s.peak_bytes, 500u);
  EXPECT_EQ(s.total_bytes, 500u);
  EXPECT_EQ(s.total_count, 2u);
  const core::Statistics popped = core::pop_statistics_counters(*stats);
  EXPECT_EQ(popped.current_bytes, 300u);
  EXPECT_EQ(popped.peak_bytes, 500u);
  EXPECT_EQ(popped.total_bytes, 500u);
  EXPECT_EQ(popped.peak_count, 2u);
  // Folded into the first set: peak = max(1000, 1000 + 500), current and total added.
  s = core::statistics_of(*stats);
  EXPECT_EQ(s.current_bytes, 1300u);
  EXPECT_EQ(s.peak_bytes, 1500u);
  EXPECT_EQ(s.total_bytes, 1500u);
  EXPECT_EQ(s.current_count, 2u);
  EXPECT_EQ(s.peak_count, 3u);
  EXPECT_EQ(s.total_count, 3u);
  stats->deallocate(a, 1000, 0, 0);
  stats->deallocate(b, 300, 0, 0);
  EXPECT_EQ(core::statistics_of(*stats).current_bytes, 0u);
}

TEST(StatisticsStack, FreeingOlderMemoryFoldsExactly) {
  auto stats = core::make_statistics_adaptor(core::make_host_resource());
  void* a = stats->allocate(1000, 0, 0);
  core::push_statistics_counters(*stats);
  stats->deallocate(a, 1000, 0, 0);  // this set's current goes to -1000
  EXPECT_EQ(core::statistics_of(*stats).current_bytes, 0u);  // reported clamped
  const core::Statistics popped = core::pop_statistics_counters(*stats);
  EXPECT_EQ(popped.current_bytes, 0u);
  EXPECT_EQ(popped.total_bytes, 0u);
  const core::Statistics s = core::statistics_of(*stats);
  EXPECT_EQ(s.current_bytes, 0u);  // 1000 + (-1000), exact
  EXPECT_EQ(s.current_count, 0u);
  EXPECT_EQ(s.peak_bytes, 1000u);
}

TEST(StatisticsStack, NestedSetsFoldLevelByLevel) {
  auto stats = core::make_statistics_adaptor(core::make_host_resource());
  core::push_statistics_counters(*stats);
  void* a = stats->allocate(100, 0, 0);
  core::push_statistics_counters(*stats);
  void* b = stats->allocate(50, 0, 0);
  stats->deallocate(b, 50, 0, 0);
  EXPECT_EQ(core::statistics_depth(*stats), 3u);
  EXPECT_EQ(core::pop_statistics_counters(*stats).total_bytes, 50u);
  const core::Statistics mid = core::pop_statistics_counters(*stats);
  EXPECT_EQ(mid.total_bytes, 150u);
  EXPECT_EQ(mid.peak_bytes, 150u);
  EXPECT_EQ(mid.current_bytes, 100u);
  EXPECT_EQ(core::statistics_of(*stats).total_bytes, 150u);
  stats->deallocate(a, 100, 0, 0);
}

TEST(StatisticsStack, PopWithoutPushIsRefusedAndOthersAreNotSupported) {
  auto host = core::make_host_resource();
  auto stats = core::make_statistics_adaptor(host);
  EXPECT_TRUE(test::fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { core::pop_statistics_counters(*stats); }));
  EXPECT_EQ(core::statistics_depth(*stats), 1u);
  EXPECT_TRUE(test::fails_with(TETHER_ERROR_NOT_SUPPORTED, [&] { core::push_statistics_counters(*host); }));
  EXPECT_TRUE(test::fails_with(TETHER_ERROR_NOT_SUPPORTED, [&] { core::pop_statistics_counters(*host); }));
}

// Pushes and pops racing allocations: whatever set each call lands in, the
// folded first set ends exact.
TEST(StatisticsStack, PushPopRacingAllocationsStaysExact) {
  auto stats = core::make_statistics_adaptor(core::make_host_resource());
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 5000; ++i) {
        void* p = stats->allocate(64, 0, 0);
        stats->deallocate(p, 64, 0, 0);
      }
    });
  }
  std::thread pusher([&] {
    while (!stop.load()) {
      core::push_statistics_counters(*stats);
      core::pop_statistics_counters(*stats);
    }
  });
  for (auto& t : threads) t.join();
  stop = true;
  pusher.join();
  const core::Statistics s = core::statistics_of(*stats);
  EXPECT_EQ(core::statistics_depth(*stats), 1u);
  EXPECT_EQ(s.current_bytes, 0u);
  EXPECT_EQ(s.current_count, 0u);
  EXPECT_EQ(s.total_count, 4u * 5000u);
  EXPECT_EQ(s.total_bytes, 64u * 4u * 5000u);
}

// Nested pushes and pops racing allocations (one live allocation of 64 B per
// thread at a time): no set ever reports more than the threads can hold, each
// call lands wholly in one set (a popped set's bytes are 64 times its count),
// the popped sets' totals add up to no more than was done, and the first set
// ends exact (nothing counted during a push or pop is lost).
TEST(StatisticsStack, NestedPushPopRacingAllocationsStaysWithinBoundsAndExact) {
  auto stats = core::make_statistics_adaptor(core::make_host_resource());
  constexpr int kThreads = 4, kOps = 20000;
  constexpr std::uint64_t kSize = 64;
  void* before = stats->allocate(kSize, 0, 0);  // older memory, freed while sets are pushed
  std::atomic<bool> stop{false}, started{false};
  std::atomic<int> running{kThreads};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      while (!started.load()) std::this_thread::yield();  // race the pusher, not run before it
      for (int i = 0; i < kOps; ++i) {
        void* p = stats->allocate(kSize, 0, 0);
        stats->deallocate(p, kSize, 0, 0);
      }
      running.fetch_sub(1);
    });
  }
  std::uint64_t popped_total_count = 0, pops = 0;
  bool freed_before = false;
  bool bounded = true;
  auto within = [&](const core::Statistics& s) {
    // The one older allocation may be freed inside a set: current and peak
    // stay bounded by the threads' own live allocations (+1 for it).
    return s.current_count <= kThreads + 1 && s.peak_count <= kThreads + 1 &&
           s.current_bytes <= (kThreads + 1) * kSize && s.peak_bytes <= (kThreads + 1) * kSize &&
           s.total_bytes <= kThreads * kOps * kSize && s.total_count <= kThreads * kOps;
  };
  bool whole = true;
  auto whole_calls = [&](const core::Statistics& s) {
    return s.total_bytes == s.total_count * kSize && s.current_bytes == s.current_count * kSize;
  };
  std::thread pusher([&] {
    while (!stop.load() || pops == 0) {
      core::push_statistics_counters(*stats);
      started = true;
      core::push_statistics_counters(*stats);
      if (!freed_before && running.load() < kThreads) {
        stats->deallocate(before, kSize, 0, 0);
        freed_before = true;
      }
      bounded = bounded && within(core::statistics_of(*stats));
      const core::Statistics inner = core::pop_statistics_counters(*stats);
      const core::Statistics outer = core::pop_statistics_counters(*stats);
      bounded = bounded && within(inner) && within(outer);
      // Each call lands wholly in one set: with one size, bytes are that size times the count.
      whole = whole && whole_calls(inner) && whole_calls(outer);
      // The outer set folded the inner one: it counted at least what the inner counted.
      bounded = bounded && outer.total_count >= inner.total_count && outer.total_bytes >= inner.total_bytes;
      popped_total_count += outer.total_count;
      ++pops;
    }
  });
  for (auto& t : threads) t.join();
  stop = true;
  pusher.join();
  if (!freed_before) stats->deallocate(before, kSize, 0, 0);
  EXPECT_TRUE(bounded);
  EXPECT_TRUE(whole);
  EXPECT_GT(pops, 0u);
  EXPECT_LE(popped_total_count, static_cast<std::uint64_t>(kThreads) * kOps);
  EXPECT_EQ(core::statistics_depth(*stats), 1u);
  const core::Statistics s = core::statistics_of(*stats);
  EXPECT_EQ(s.current_bytes, 0u);
  EXPECT_EQ(s.current_count, 0u);
  EXPECT_EQ(s.total_count, static_cast<std::uint64_t>(kThreads) * kOps + 1);
  EXPECT_EQ(s.total_bytes, (static_cast<std::uint64_t>(kThreads) * kOps + 1) * kSize);
  EXPECT_GE(s.peak_count, 1u);
  EXPECT_LE(s.peak_count, static_cast<std::uint64_t>(kThreads) + 1);
}

}  // namespace
