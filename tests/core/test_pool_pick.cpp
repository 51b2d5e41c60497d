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

// One stream's arena with a fresh and a settled free block of the given
// sizes (in granules).
class PoolPick : public ::testing::Test {
 protected:
  void hold(std::size_t fresh_granules, std::size_t settled_granules) {
    fresh_.addr = 0x100000;
    fresh_.size = fresh_granules * kGranule;
    settled_.addr = 0x200000;
    settled_.size = settled_granules * kGranule;
    arena_.fresh.insert(&fresh_);
    arena_.settled.insert(&settled_);
  }
  void TearDown() override {
    if (fresh_.index != nullptr) arena_.fresh.remove(&fresh_);
    if (settled_.index != nullptr) arena_.settled.remove(&settled_);
  }
  // The block picked for a request of `granules`, checking that `idx` names its index.
  const Block* pick(std::size_t granules) {
    FreeIndex* idx = nullptr;
    Block* b = pick_own(arena_, granules * kGranule, 16, idx);
    if (b != nullptr) {
      EXPECT_EQ(idx, b == &fresh_ ? &arena_.fresh : &arena_.settled);
    }
    return b;
  }

  Arena arena_{1, 0};
  Block fresh_, settled_;
};

// Both in the request's own size class (256 - 271 granules): the exact fit
// wins. (Before, a fresh block of the class was taken first.)
TEST_F(PoolPick, ASettledBlockThatFitsBetterWinsOverAFreshOne) {
  hold(271, 256);
  EXPECT_EQ(pick(256), &settled_);
}

TEST_F(PoolPick, AFreshBlockThatFitsBetterWinsOverASettledOne) {
  hold(4, 64);
  EXPECT_EQ(pick(4), &fresh_);
}

// A tie goes to the fresh block: it is the one the stream used last.
TEST_F(PoolPick, OnATieTheFreshBlockWins) {
  hold(8, 8);
  EXPECT_EQ(pick(6), &fresh_);
}

// Outside the request's own size class too (each index's find()), the
// smaller of the two candidates is taken; when nothing fits, nothing is found.
TEST_F(PoolPick, BetweenClassesTheSmallerCandidateWinsAndTooLargeIsNone) {
  hold(1024, 40);
  EXPECT_EQ(pick(20), &settled_);
  EXPECT_EQ(pick(2048), nullptr);
}

TEST_F(PoolPick, AnEmptyArenaHasNone) { EXPECT_EQ(pick(1), nullptr); }

}  // namespace
