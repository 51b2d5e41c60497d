// The pool's choice among one stream's free blocks (pool_detail::pick_own,
// core/src/pool_arena.hpp): best fit across the stream's two indexes, so a
// stream-ordered pool does not cut a large fresh block when a settled one
// fits better (which held more memory than a host pool on the same pattern).
#include <gtest/gtest.h>

#include <cstddef>

#include "pool_arena.hpp"

namespace {

using tether::core::pool_detail::Arena;
using tether::core::pool_detail::Block;
using tether::core::pool_detail::FreeIndex;
using tether::core::pool_detail::kGranule;
using tether::core::pool_detail::pick_own;

constexpr std::size_t kScan = 16;

Block free_block(std::uintptr_t addr, std::size_t size) {
  Block b;
  b.addr = addr;
  b.size = size;
  return b;
}

// Both in the request's own size class (256 - 271 granules): the exact fit
// wins. (Before, a fresh block of the class was taken first.)
TEST(PoolPick, ASettledBlockThatFitsBetterWinsOverAFreshOne) {
  Arena a(1, 0);
  Block fresh = free_block(0x100000, 271 * kGranule);
  Block settled = free_block(0x200000, 256 * kGranule);
  a.fresh.insert(&fresh);
  a.settled.insert(&settled);
  FreeIndex* idx = nullptr;
  EXPECT_EQ(pick_own(a, 256 * kGranule, kScan, idx), &settled);
  EXPECT_EQ(idx, &a.settled);
  a.fresh.remove(&fresh);
  a.settled.remove(&settled);
}

TEST(PoolPick, AFreshBlockThatFitsBetterWinsOverASettledOne) {
  Arena a(1, 0);
  Block fresh = free_block(0x100000, 4 * kGranule);
  Block settled = free_block(0x200000, 64 * kGranule);
  a.fresh.insert(&fresh);
  a.settled.insert(&settled);
  FreeIndex* idx = nullptr;
  EXPECT_EQ(pick_own(a, 4 * kGranule, kScan, idx), &fresh);
  EXPECT_EQ(idx, &a.fresh);
  a.fresh.remove(&fresh);
  a.settled.remove(&settled);
}

// A tie goes to the fresh block: it is the one the stream used last.
TEST(PoolPick, OnATieTheFreshBlockWins) {
  Arena a(1, 0);
  Block fresh = free_block(0x100000, 8 * kGranule);
  Block settled = free_block(0x200000, 8 * kGranule);
  a.fresh.insert(&fresh);
  a.settled.insert(&settled);
  FreeIndex* idx = nullptr;
  EXPECT_EQ(pick_own(a, 6 * kGranule, kScan, idx), &fresh);
  EXPECT_EQ(idx, &a.fresh);
  a.fresh.remove(&fresh);
  a.settled.remove(&settled);
}

// Outside the request's own size class too (each index's find()), the
// smaller of the two candidates is taken; and nothing fits, nothing is found.
TEST(PoolPick, BetweenClassesTheSmallerCandidateWinsAndTooSmallIsNone) {
  Arena a(1, 0);
  Block fresh = free_block(0x100000, 1024 * kGranule);
  Block settled = free_block(0x200000, 40 * kGranule);
  a.fresh.insert(&fresh);
  a.settled.insert(&settled);
  FreeIndex* idx = nullptr;
  EXPECT_EQ(pick_own(a, 20 * kGranule, kScan, idx), &settled);
  EXPECT_EQ(idx, &a.settled);
  EXPECT_EQ(pick_own(a, 2048 * kGranule, kScan, idx), nullptr);
  a.fresh.remove(&fresh);
  a.settled.remove(&settled);
  EXPECT_EQ(pick_own(a, kGranule, kScan, idx), nullptr);
}

}  // namespace
