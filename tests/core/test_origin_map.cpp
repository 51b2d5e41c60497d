// OriginMap (the PyTorch hook's pointer -> origin table): what goes in comes
// out once, under growth, deletions in any order and threads; the totals it
// keeps for tether_torch_get_stats follow.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "tether_core/origin_map.hpp"

namespace {

using tether::core::OriginMap;

void* addr(std::uintptr_t i) { return reinterpret_cast<void*>((i + 1) * 256); }

TEST(OriginMap, WhatGoesInComesOutOnceWithItsWeight) {
  OriginMap<std::unique_ptr<int>> m;  // a move-only value, as the hook's handle reference
  constexpr int kN = 5000;  // far past the first table size: every shard grows several times
  for (int i = 0; i < kN; ++i) ASSERT_TRUE(m.insert(addr(i), std::make_unique<int>(i), 10 + i % 3));
  EXPECT_FALSE(m.insert(addr(7), std::make_unique<int>(-1), 1));  // the same address twice is refused
  auto t = m.totals();
  EXPECT_EQ(t.live_count, std::uint64_t{kN});
  EXPECT_EQ(t.inserted, std::uint64_t{kN});
  std::uint64_t weight = 0;
  for (int i = 0; i < kN; ++i) weight += 10 + i % 3;
  EXPECT_EQ(t.live_weight, weight);

  std::vector<int> order(kN);
  for (int i = 0; i < kN; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937(42));  // deletions in random order shift runs back
  for (int k = 0; k < kN; ++k) {
    const int i = order[k];
    auto v = m.take(addr(i));
    ASSERT_TRUE(v.has_value()) << i;
    EXPECT_EQ(**v, i);
    EXPECT_FALSE(m.take(addr(i)).has_value());  // once
    if (k % 997 == 0) {  // the rest is still found after the shifts
      for (int j = k + 1; j < kN; j += 101) {
        auto again = m.take(addr(order[j]));
        ASSERT_TRUE(again.has_value()) << order[j];
        ASSERT_TRUE(m.insert(addr(order[j]), std::move(*again), 10 + order[j] % 3));
      }
    }
  }
  t = m.totals();
  EXPECT_EQ(t.live_count, 0u);
  EXPECT_EQ(t.live_weight, 0u);
  EXPECT_FALSE(m.take(addr(1)).has_value());
  EXPECT_EQ(m.size(), 0u);
}

TEST(OriginMap, ThreadsInsertingAndTakingAtOnceKeepExactTotals) {
  OriginMap<std::uintptr_t> m;
  constexpr int kThreads = 4, kPerThread = 20000;
  std::vector<std::thread> threads;
  std::vector<int> lost(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::uintptr_t> live;
      for (int i = 0; i < kPerThread; ++i) {
        const std::uintptr_t key = static_cast<std::uintptr_t>(t) * kPerThread + i;
        if (!m.insert(addr(key), key, 64)) ++lost[t];
        live.push_back(key);
        if (live.size() > 50) {
          const std::uintptr_t k = live[(i * 7) % live.size()];
          auto v = m.take(addr(k));
          if (!v || *v != k) ++lost[t];
          live.erase(std::find(live.begin(), live.end(), k));
        }
      }
      for (std::uintptr_t k : live) {
        auto v = m.take(addr(k));
        if (!v || *v != k) ++lost[t];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(lost[t], 0) << t;
  const auto totals = m.totals();
  EXPECT_EQ(totals.live_count, 0u);
  EXPECT_EQ(totals.live_weight, 0u);
  EXPECT_EQ(totals.inserted, std::uint64_t{kThreads} * kPerThread);
}

}  // namespace
