// LimitingAdaptor: the limit holds exactly, alone and under threads, and a
// refused request or free changes nothing.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "tether_core/host.hpp"
#include "tether_core/limiting.hpp"
#include "tether_core/statistics.hpp"
#include "test_util.hpp"

namespace {

using namespace tether;
using test::fails_with;

TEST(Limiting, AllowsUpToTheLimitAndNotAByteMore) {
  auto host = core::make_host_resource();
  auto lim = core::make_limiting_adaptor(host, 1000);
  EXPECT_EQ(core::limiting_limit(*lim), 1000u);
  void* a = lim->allocate(600, 0, 0);
  void* b = lim->allocate(400, 0, 0);
  EXPECT_EQ(core::limiting_used_bytes(*lim), 1000u);
  EXPECT_THROW(lim->allocate(1, 0, 0), core::OutOfMemory);
  EXPECT_EQ(core::limiting_used_bytes(*lim), 1000u);
  EXPECT_EQ(host->outstanding_count(), 2u);  // the upstream was not asked
  lim->deallocate(a, 600, 0, 0);
  EXPECT_EQ(core::limiting_used_bytes(*lim), 400u);
  void* c = lim->allocate(600, 0, 0);
  lim->deallocate(b, 400, 0, 0);
  lim->deallocate(c, 600, 0, 0);
  EXPECT_EQ(core::limiting_used_bytes(*lim), 0u);
  EXPECT_EQ(host->outstanding_count(), 0u);
}

TEST(Limiting, OutOfMemoryNamesTheLimit) {
  auto lim = core::make_limiting_adaptor(core::make_host_resource(), 100);
  const std::string m = test::error_message([&] { lim->allocate(101, 0, 0); });
  EXPECT_NE(m.find("limit of 100 bytes"), std::string::npos) << m;
  EXPECT_THROW(lim->allocate(SIZE_MAX / 4, 0, 0), core::OutOfMemory);  // no overflow in the check
}

TEST(Limiting, UpstreamFailureGivesTheReservationBack) {
  auto lim = core::make_limiting_adaptor(core::make_host_resource(), SIZE_MAX / 2);
  EXPECT_THROW(lim->allocate(SIZE_MAX / 4, 0, 0), core::OutOfMemory);  // the host cannot
  EXPECT_EQ(core::limiting_used_bytes(*lim), 0u);
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { lim->allocate(8, 3, 0); }));
  EXPECT_EQ(core::limiting_used_bytes(*lim), 0u);
}

TEST(Limiting, RefusesForeignFreesAndChangesNothing) {
  auto host = core::make_host_resource();
  auto lim = core::make_limiting_adaptor(host, 4096);
  void* mine = lim->allocate(100, 0, 0);
  void* direct = host->allocate(100, 0, 0);
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { lim->deallocate(direct, 100, 0, 0); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { host->deallocate(mine, 100, 0, 0); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { lim->deallocate(mine, 99, 0, 0); }));
  EXPECT_EQ(core::limiting_used_bytes(*lim), 100u);
  lim->deallocate(mine, 100, 0, 0);
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { lim->deallocate(mine, 100, 0, 0); }));
  EXPECT_EQ(core::limiting_used_bytes(*lim), 0u);
  host->deallocate(direct, 100, 0, 0);
}

TEST(Limiting, ZeroLimitRefusesEverythingButZeroBytes) {
  auto lim = core::make_limiting_adaptor(core::make_host_resource(), 0);
  EXPECT_EQ(lim->allocate(0, 0, 0), nullptr);
  EXPECT_THROW(lim->allocate(1, 0, 0), core::OutOfMemory);
}

TEST(Limiting, QueriesRefuseOtherResources) {
  auto host = core::make_host_resource();
  EXPECT_TRUE(fails_with(TETHER_ERROR_NOT_SUPPORTED, [&] { core::limiting_used_bytes(*host); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_NOT_SUPPORTED, [&] { core::limiting_limit(*host); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { core::make_limiting_adaptor(nullptr, 1); }));
}

// Threads race for a limit that fits exactly `slots` blocks: at no instant may
// more be live, and every block a thread got must be within the limit.
TEST(Limiting, ExactUnderConcurrentThreads) {
  constexpr std::size_t kBlock = 1024, kSlots = 10;
  auto stats = core::make_statistics_adaptor(core::make_host_resource());
  auto lim = core::make_limiting_adaptor(stats, kBlock * kSlots);
  std::atomic<int> live{0}, peak{0};
  std::atomic<long> successes{0}, refusals{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 3000; ++i) {
        void* p = nullptr;
        try {
          p = lim->allocate(kBlock, 0, 0);
        } catch (const core::OutOfMemory&) {
          ++refusals;
          continue;
        }
        const int now = ++live;
        int seen = peak.load();
        while (seen < now && !peak.compare_exchange_weak(seen, now)) {
        }
        ++successes;
        --live;
        lim->deallocate(p, kBlock, 0, 0);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LE(peak.load(), static_cast<int>(kSlots));
  EXPECT_LE(core::statistics_of(*stats).peak_bytes, kBlock * kSlots);  // the upstream never saw more
  EXPECT_EQ(successes + refusals, 8 * 3000);
  EXPECT_EQ(core::limiting_used_bytes(*lim), 0u);
}

}  // namespace
