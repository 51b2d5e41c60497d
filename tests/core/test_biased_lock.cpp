// detail::BiasedLock (core/src/biased_lock.hpp), the pool's arena lock: the
// thread that uses it takes it without an atomic read-modify-write once it
// has taken it often enough in a row; any other thread revokes that bias.
// Mutual exclusion is checked with a plain counter that only the holder
// touches (ThreadSanitizer builds see any overlap as a data race) and an
// occupancy count that must read 1 inside.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "biased_lock.hpp"
#include "tether_core/asymmetric_fence.hpp"

namespace {

using tether::core::asymmetric_fence_available;
using tether::core::detail::BiasedLock;

constexpr std::uint32_t kFirst = BiasedLock::kFirstThreshold;

void hold(BiasedLock& l, int times) {
  for (int i = 0; i < times; ++i) {
    l.lock();
    l.unlock();
  }
}

TEST(BiasedLock, OwnerIsBiasedAfterARunOfHolds) {
  BiasedLock l;
  hold(l, kFirst - 1);
  EXPECT_FALSE(l.biased());
  hold(l, 1);
  // Where the kernel has no membarrier the lock stays a plain exchange lock.
  EXPECT_EQ(l.biased(), asymmetric_fence_available());
  // The biased owner still excludes itself: try_lock while holding fails... a
  // lock is not recursive, so only check that a fast hold and release work.
  ASSERT_TRUE(l.try_lock());
  l.unlock();
  EXPECT_EQ(l.biased(), asymmetric_fence_available());
  EXPECT_EQ(l.revocations(), 0u);
}

TEST(BiasedLock, AnotherThreadRevokesAndTheOwnerBiasesAgainAfterTwiceTheRun) {
  if (!asymmetric_fence_available()) GTEST_SKIP() << "no membarrier PRIVATE_EXPEDITED here: the lock never biases";
  BiasedLock l;
  hold(l, kFirst);
  ASSERT_TRUE(l.biased());
  std::thread([&] { hold(l, 1); }).join();
  EXPECT_FALSE(l.biased());
  EXPECT_EQ(l.revocations(), 1u);
  hold(l, 2 * kFirst - 1);
  EXPECT_FALSE(l.biased());
  hold(l, 1);
  EXPECT_TRUE(l.biased());
  // A second revocation doubles the run again.
  std::thread([&] { hold(l, 1); }).join();
  EXPECT_EQ(l.revocations(), 2u);
  hold(l, 4 * kFirst - 1);
  EXPECT_FALSE(l.biased());
  hold(l, 1);
  EXPECT_TRUE(l.biased());
}

TEST(BiasedLock, TryLockOfAnotherThreadFailsWhileTheOwnerHoldsItBiased) {
  if (!asymmetric_fence_available()) GTEST_SKIP() << "no membarrier PRIVATE_EXPEDITED here: the lock never biases";
  BiasedLock l;
  hold(l, kFirst);
  ASSERT_TRUE(l.biased());
  l.lock();  // a fast hold
  bool got = true;
  std::thread([&] { got = l.try_lock(); }).join();
  EXPECT_FALSE(got);
  EXPECT_FALSE(l.biased());  // revoked all the same
  l.unlock();
  std::thread([&] {
    got = l.try_lock();
    if (got) l.unlock();
  }).join();
  EXPECT_TRUE(got);
}

TEST(BiasedLock, LockOfAnotherThreadWaitsForTheOwnersFastHold) {
  if (!asymmetric_fence_available()) GTEST_SKIP() << "no membarrier PRIVATE_EXPEDITED here: the lock never biases";
  BiasedLock l;
  hold(l, kFirst);
  ASSERT_TRUE(l.biased());
  std::atomic<bool> started{false}, entered{false};
  l.lock();
  std::thread other([&] {
    started = true;
    l.lock();
    entered = true;
    l.unlock();
  });
  while (!started) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(entered);
  l.unlock();
  other.join();
  EXPECT_TRUE(entered);
}

// The owner holds the lock in long runs (so it biases it again and again)
// while other threads take it now and then with lock() and try_lock(), until
// they are done: every hold is alone, and the bias came back after being revoked.
TEST(BiasedLock, MutualExclusionWhileTheBiasComesAndGoes) {
  BiasedLock l;
  std::uint64_t counter = 0;  // plain: only the holder touches it
  std::atomic<int> inside{0};
  std::atomic<bool> overlap{false};
  auto critical = [&] {
    if (inside.fetch_add(1, std::memory_order_relaxed) != 0) overlap = true;
    ++counter;
    inside.fetch_sub(1, std::memory_order_relaxed);
  };
  constexpr int kOthers = 3, kOtherHolds = 3000;
  // This thread takes the lock first, so it is the owner.
  l.lock();
  critical();
  l.unlock();
  std::uint64_t owner_holds = 1;
  std::atomic<int> running{kOthers};
  std::vector<std::thread> others;
  for (int t = 0; t < kOthers; ++t) {
    others.emplace_back([&, t] {
      for (int i = 0; i < kOtherHolds; ++i) {
        if ((i + t) % 2 == 0) {
          l.lock();
        } else {
          while (!l.try_lock()) std::this_thread::yield();
        }
        critical();
        l.unlock();
        if (i % 64 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));  // a run for the owner
      }
      --running;
    });
  }
  for (std::uint64_t i = 0; running.load(std::memory_order_relaxed) != 0; ++i) {
    if (i % 3 == 0) {
      if (!l.try_lock()) continue;
    } else {
      l.lock();
    }
    critical();
    l.unlock();
    ++owner_holds;
  }
  for (auto& t : others) t.join();
  l.lock();
  const std::uint64_t seen = counter;
  l.unlock();
  EXPECT_FALSE(overlap.load());
  EXPECT_EQ(seen, std::uint64_t{kOthers} * kOtherHolds + owner_holds);
  if (asymmetric_fence_available()) {
    EXPECT_GE(l.revocations(), 2u) << "the owner never biased the lock again after a revocation";
  }
}

}  // namespace
