// PoolResource behaviour beyond the conformance suite: coalescing, growth,
// limits, trimming, recovery from upstream exhaustion, stream ordering.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "fakes.hpp"
#include "tether_core/host.hpp"
#include "tether_core/pool.hpp"
#include "tether_core/statistics.hpp"
#include "test_util.hpp"

namespace {

using namespace tether;
using core::PoolOptions;
using core::ResourcePtr;
using test::fails_with;
using test::KiB;
using test::MiB;

ResourcePtr make_pool(ResourcePtr upstream, std::size_t initial, std::size_t maximum = 0, std::size_t growth = 0) {
  PoolOptions o;
  o.initial_size = initial;
  o.maximum_size = maximum;
  o.growth_size = growth;
  return core::make_pool_resource(std::move(upstream), o);
}

// ---- basics ------------------------------------------------------------------

TEST(Pool, PropertiesComeFromUpstreamWithKindPool) {
  auto host = core::make_host_resource();
  auto pool = make_pool(host, 0);
  EXPECT_EQ(pool->properties().kind, TETHER_RESOURCE_KIND_POOL);
  EXPECT_EQ(pool->properties().device, TETHER_DEVICE_HOST);
  EXPECT_TRUE(pool->properties().host_accessible);
  EXPECT_FALSE(pool->properties().device_accessible);
  EXPECT_STREQ(pool->name(), "pool");
  ASSERT_NE(pool->upstream(), nullptr);
  EXPECT_EQ(pool->upstream()->get(), host.get());
  EXPECT_EQ(pool->stream_order(), nullptr);
  auto ordered = std::make_shared<test::OrderedUpstream>();
  auto opool = make_pool(ordered, 0);
  EXPECT_EQ(opool->properties().kind, TETHER_RESOURCE_KIND_POOL);
  EXPECT_EQ(opool->properties().device, 0);
  EXPECT_TRUE(opool->properties().device_accessible);
  EXPECT_EQ(opool->stream_order(), ordered->stream_order());
}

TEST(Pool, InitialSizeLargerThanMaximumIsInvalid) {
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [] { make_pool(core::make_host_resource(), 2 * MiB, MiB); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [] { core::make_pool_resource(nullptr, PoolOptions{}); }));
  EXPECT_NO_THROW(make_pool(core::make_host_resource(), MiB, MiB));
}

TEST(Pool, InitialSizeIsTakenAtConstruction) {
  auto stats = core::make_statistics_adaptor(core::make_host_resource());
  auto pool = make_pool(stats, 3 * MiB);
  EXPECT_EQ(core::statistics_of(*stats).current_bytes, 3 * MiB);
  const core::PoolInfo i = core::pool_info(*pool);
  EXPECT_EQ(i.pool_size, 3 * MiB);
  EXPECT_EQ(i.free_bytes, 3 * MiB);
  EXPECT_EQ(i.largest_free_block, 3 * MiB);
  EXPECT_EQ(i.chunk_count, 1u);
}

TEST(Pool, InitialSizeThatUpstreamCannotGiveIsOutOfMemory) {
  auto limited = std::make_shared<test::LimitedUpstream>(MiB);
  EXPECT_THROW(make_pool(limited, 2 * MiB), core::OutOfMemory);
  EXPECT_EQ(limited->outstanding_count(), 0u);
}

TEST(Pool, InfoOfOtherResourcesIsNotSupported) {
  auto host = core::make_host_resource();
  EXPECT_TRUE(fails_with(TETHER_ERROR_NOT_SUPPORTED, [&] { core::pool_info(*host); }));
  auto stats = core::make_statistics_adaptor(make_pool(host, 0));
  EXPECT_TRUE(fails_with(TETHER_ERROR_NOT_SUPPORTED, [&] { core::pool_info(*stats); }));
}

TEST(Pool, DoubleFreeIsRejected) {
  auto pool = make_pool(core::make_host_resource(), MiB);
  void* p = pool->allocate(1000, 0, 0);
  pool->deallocate(p, 1000, 0, 0);
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { pool->deallocate(p, 1000, 0, 0); }));
  EXPECT_EQ(core::pool_info(*pool).free_bytes, MiB);
}

TEST(Pool, RejectedFreeChangesNothing) {
  auto pool = make_pool(core::make_host_resource(), MiB, MiB);
  void* p = pool->allocate(4096, 0, 0);
  const core::PoolInfo before = core::pool_info(*pool);
  EXPECT_NE(test::error_message([&] { pool->deallocate(p, 4095, 0, 0); }).find("size mismatch"), std::string::npos);
  EXPECT_NE(test::error_message([&] { pool->deallocate(p, 4096, 512, 0); }).find("alignment"), std::string::npos);
  EXPECT_NE(test::error_message([&] { pool->deallocate(static_cast<char*>(p) + 256, 256, 0, 0); }).find("not allocated"),
            std::string::npos);
  const core::PoolInfo after = core::pool_info(*pool);
  EXPECT_EQ(after.free_bytes, before.free_bytes);
  EXPECT_EQ(after.largest_free_block, before.largest_free_block);
  pool->deallocate(p, 4096, 0, 0);
  EXPECT_EQ(core::pool_info(*pool).free_bytes, MiB);
}

// A small block freed on its stream waits whole in the arena's quick cache
// (and in its table) for the next request of its size. A second free of it -
// on its stream, on another stream, with another size - is refused and
// changes nothing: the next request of its size gets it back, once, and the
// outstanding counters stay exact.
TEST(Pool, RepeatedFreesOfACachedBlockAreRejected) {
  for (const bool ordered : {false, true}) {
    SCOPED_TRACE(ordered ? "stream-ordered" : "host");
    ResourcePtr up = ordered ? ResourcePtr(std::make_shared<test::OrderedUpstream>()) : core::make_host_resource();
    auto pool = make_pool(up, MiB);
    void* p = pool->allocate(1000, 0, 1);
    void* other = pool->allocate(1000, 0, 1);
    pool->deallocate(p, 1000, 0, 1);
    EXPECT_EQ(pool->outstanding_count(), 1u);
    EXPECT_EQ(pool->outstanding_bytes(), 1000u);
    EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { pool->deallocate(p, 1000, 0, 1); }));
    EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { pool->deallocate(p, 1000, 0, 2); }));
    EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { pool->deallocate(p, 512, 0, 1); }));
    EXPECT_EQ(pool->outstanding_count(), 1u);
    EXPECT_EQ(pool->outstanding_bytes(), 1000u);
    void* q = pool->allocate(1000, 0, 1);
    EXPECT_EQ(q, p);
    void* r = pool->allocate(1000, 0, 1);
    EXPECT_NE(r, p);
    EXPECT_EQ(pool->outstanding_count(), 3u);
    pool->deallocate(r, 1000, 0, 1);
    pool->deallocate(q, 1000, 0, 1);
    pool->deallocate(other, 1000, 0, 1);
    EXPECT_EQ(pool->outstanding_count(), 0u);
    EXPECT_EQ(pool->outstanding_bytes(), 0u);
    EXPECT_EQ(core::pool_info(*pool).free_bytes, MiB);
    EXPECT_EQ(core::pool_info(*pool).free_blocks, 1u);
    EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { pool->deallocate(q, 1000, 0, 1); }));
  }
}

// A larger block (here 1 MiB) freed on its stream waits whole in the quick
// cache's slot for the last larger size that missed, so a tensor of one size
// allocated and freed over and over skips the split and the merge: it comes
// back at the same address, a second free of it is refused and changes
// nothing, and a request of another size flushes it (coalesced, as if never
// cached), as does pool_info().
TEST(Pool, ALargerSizeAskedForAgainComesBackFromTheCache) {
  for (const bool ordered : {false, true}) {
    SCOPED_TRACE(ordered ? "stream-ordered" : "host");
    ResourcePtr up = ordered ? ResourcePtr(std::make_shared<test::OrderedUpstream>()) : core::make_host_resource();
    auto pool = make_pool(up, 8 * MiB);
    void* p = pool->allocate(MiB, 0, 1);
    pool->deallocate(p, MiB, 0, 1);
    for (int i = 0; i < 100; ++i) {
      void* q = pool->allocate(MiB, 0, 1);
      EXPECT_EQ(q, p);
      pool->deallocate(q, MiB, 0, 1);
    }
    EXPECT_EQ(pool->outstanding_count(), 0u);
    EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { pool->deallocate(p, MiB, 0, 1); }));
    EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { pool->deallocate(p, MiB, 0, 2); }));
    EXPECT_EQ(pool->outstanding_count(), 0u);
    EXPECT_EQ(core::pool_info(*pool).free_bytes, 8 * MiB);
    // The layout checks below are the host pool's: a stream-ordered pool
    // hands its initial size to streams in slabs, which stay apart.
    if (ordered) continue;
    // pool_info() merges the cached block back: one free block, the whole pool.
    core::PoolInfo info = core::pool_info(*pool);
    EXPECT_EQ(info.free_blocks, 1u);
    EXPECT_EQ(info.largest_free_block, 8 * MiB);
    // Cached again, then a request of another larger size flushes it and can use its memory.
    void* a = pool->allocate(MiB, 0, 1);
    pool->deallocate(a, MiB, 0, 1);
    void* whole = pool->allocate(8 * MiB, 0, 1);
    EXPECT_EQ(core::pool_info(*pool).chunk_count, 1u);  // no growth: the cached MiB merged back
    pool->deallocate(whole, 8 * MiB, 0, 1);
    // A free of the size cached while another larger size is the last that missed is not kept.
    void* b = pool->allocate(2 * MiB, 0, 1);
    void* c = pool->allocate(MiB, 0, 1);  // misses: 1 MiB is now the cached larger size
    pool->deallocate(b, 2 * MiB, 0, 1);   // not 1 MiB: into the free index
    info = core::pool_info(*pool);
    EXPECT_EQ(info.free_bytes, 7 * MiB);
    pool->deallocate(c, MiB, 0, 1);
    EXPECT_EQ(core::pool_info(*pool).free_blocks, 1u);
  }
}

// A free the quick cache does not take (here: sizes above 16 KiB, none of
// them the last larger size that missed) leaves the address table at once
// but is merged later, in a batch (merge_unmerged, Arena::kUnmerged = 8).
// A second free of it is refused all the same, the counters see it freed at
// once, and the pool's figures (info() merges first) are those of merged
// blocks.
TEST(Pool, UnmergedFreesAreRefusedTwiceAndMergeLater) {
  auto pool = make_pool(core::make_host_resource(), MiB);
  const std::size_t sizes[5] = {20 * KiB, 24 * KiB, 28 * KiB, 32 * KiB, 36 * KiB};
  std::vector<char*> p;
  for (std::size_t s : sizes) p.push_back(static_cast<char*>(pool->allocate(s, 0, 0)));
  for (int i = 1; i < 5; ++i) ASSERT_EQ(p[static_cast<std::size_t>(i)], p[static_cast<std::size_t>(i - 1)] + sizes[i - 1]);
  for (int i = 0; i < 4; ++i) pool->deallocate(p[static_cast<std::size_t>(i)], sizes[i], 0, 0);
  EXPECT_EQ(pool->outstanding_count(), 1u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { pool->deallocate(p[static_cast<std::size_t>(i)], sizes[i], 0, 0); }));
  }
  core::PoolInfo info = core::pool_info(*pool);
  EXPECT_EQ(info.free_bytes, MiB - 36 * KiB);
  EXPECT_EQ(info.free_blocks, 2u);  // the four freed ones as one, and the rest of the chunk
  // A request for the four together: the merged block, where the first was.
  EXPECT_EQ(pool->allocate(104 * KiB, 0, 0), p[0]);
  pool->deallocate(p[0], 104 * KiB, 0, 0);
  pool->deallocate(p[4], 36 * KiB, 0, 0);
  info = core::pool_info(*pool);
  EXPECT_EQ(info.free_bytes, MiB);
  EXPECT_EQ(info.free_blocks, 1u);
  EXPECT_EQ(info.chunk_count, 1u);
}

// A request that fits only once unmerged frees have merged is served from
// them, before the pool thinks of growing (the slow path merges them first).
// And more frees than the batch holds merge too, whatever their order.
TEST(Pool, UnmergedFreesAreMergedBeforeThePoolGrows) {
  auto pool = make_pool(core::make_host_resource(), MiB);
  const std::size_t sizes[4] = {192 * KiB, 240 * KiB, 280 * KiB, 312 * KiB};  // the whole chunk
  std::vector<void*> p;
  for (std::size_t s : sizes) p.push_back(pool->allocate(s, 0, 0));
  for (int i = 0; i < 3; ++i) pool->deallocate(p[static_cast<std::size_t>(i)], sizes[i], 0, 0);
  void* whole = pool->allocate(712 * KiB, 0, 0);
  EXPECT_EQ(whole, p[0]);
  EXPECT_EQ(core::pool_info(*pool).chunk_count, 1u);
  pool->deallocate(whole, 712 * KiB, 0, 0);
  pool->deallocate(p[3], 312 * KiB, 0, 0);

  std::vector<std::pair<void*, std::size_t>> many;
  for (std::size_t i = 0; i < 40; ++i) {
    const std::size_t s = (17 + i) * KiB;  // 17 - 56 KiB, all different: none cached
    many.emplace_back(pool->allocate(s, 0, 0), s);
  }
  std::mt19937 rng(7);
  std::shuffle(many.begin(), many.end(), rng);
  for (const auto& [q, s] : many) pool->deallocate(q, s, 0, 0);
  const core::PoolInfo info = core::pool_info(*pool);
  EXPECT_EQ(info.free_bytes, info.pool_size);
  EXPECT_EQ(info.free_blocks, info.chunk_count);
}

// An unmerged free on a stream is that stream's, like a cached one: another
// stream takes it only after waiting on the stream's event.
TEST(PoolStreams, UnmergedFreesReachOtherStreamsOnlyAfterAnEvent) {
  auto up = std::make_shared<test::OrderedUpstream>();
  auto pool = make_pool(up, 0, 0, MiB);
  std::vector<std::pair<void*, std::size_t>> blocks;
  for (std::size_t i = 0; i < 12; ++i) {
    const std::size_t s = (20 + i) * KiB;
    void* q = pool->allocate(s, 0, 7);
    up->allocated(q, s, 7);
    blocks.emplace_back(q, s);
  }
  for (const auto& [q, s] : blocks) {
    up->freed(q, s, 7);
    pool->deallocate(q, s, 0, 7);
  }
  const std::size_t chunks = core::pool_info(*pool).chunk_count;
  for (int round = 0; round < 2; ++round) {
    void* q = pool->allocate(MiB / 2, 0, 8);
    up->allocated(q, MiB / 2, 8);
    void* small = pool->allocate(256, 0, 7);  // stream 7's next free records, if asked
    up->allocated(small, 256, 7);
    up->freed(small, 256, 7);
    pool->deallocate(small, 256, 0, 7);
    up->freed(q, MiB / 2, 8);
    pool->deallocate(q, MiB / 2, 0, 8);
  }
  EXPECT_LE(core::pool_info(*pool).chunk_count, chunks + 1);
  EXPECT_EQ(up->violations(), 0u);
}

// The larger-size slot holds at most QuickCache::kLargeDepth (4) blocks:
// freeing more of that size leaves the rest to the free index, and they come
// back from either in turn, each block once.
TEST(Pool, TheLargerSizeSlotIsBounded) {
  auto pool = make_pool(core::make_host_resource(), 16 * MiB);
  std::vector<void*> blocks;
  for (int i = 0; i < 8; ++i) blocks.push_back(pool->allocate(MiB, 0, 0));
  for (void* b : blocks) pool->deallocate(b, MiB, 0, 0);
  std::vector<void*> again;
  for (int i = 0; i < 8; ++i) again.push_back(pool->allocate(MiB, 0, 0));
  std::vector<void*> sorted = again;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::unique(sorted.begin(), sorted.end()), sorted.end());  // no block handed out twice
  // The first four freed filled the slot; they come back first, the last of them first.
  for (int i = 0; i < 4; ++i) EXPECT_EQ(again[static_cast<std::size_t>(i)], blocks[static_cast<std::size_t>(3 - i)]);
  for (void* b : again) pool->deallocate(b, MiB, 0, 0);
  const core::PoolInfo info = core::pool_info(*pool);
  EXPECT_EQ(info.free_bytes, 16 * MiB);
  EXPECT_EQ(info.free_blocks, 1u);
}

// A free finds its block through the granule map: an address where a block
// started before it merged away, one inside a later, larger block, one not
// on a granule, one outside every chunk and one in a chunk already given back
// must all be refused, and change nothing.
TEST(Pool, PointersWhereNoBlockStartsAreRejected) {
  auto pool = make_pool(core::make_host_resource(), MiB);
  char* a = static_cast<char*>(pool->allocate(256, 0, 0));
  char* b = static_cast<char*>(pool->allocate(256, 0, 0));
  ASSERT_EQ(b, a + 256);
  pool->deallocate(b, 256, 0, 0);
  pool->deallocate(a, 256, 0, 0);  // a and b merge back into the chunk's one block
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { pool->deallocate(b, 256, 0, 0); }));
  char* big = static_cast<char*>(pool->allocate(4096, 0, 0));
  ASSERT_EQ(big, a);
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { pool->deallocate(b, 256, 0, 0); }));  // inside big
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { pool->deallocate(big + 1, 4096, 0, 0); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { pool->deallocate(a - 256, 256, 0, 0); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { pool->deallocate(a + MiB, 256, 0, 0); }));
  int local = 0;
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { pool->deallocate(&local, sizeof local, 0, 0); }));
  EXPECT_EQ(core::pool_info(*pool).free_bytes, MiB - 4096);
  pool->deallocate(big, 4096, 0, 0);
  EXPECT_EQ(core::pool_info(*pool).free_blocks, 1u);

  // A chunk given back by trim: its addresses are no longer the pool's.
  auto grown = make_pool(core::make_host_resource(), 0);
  void* p = grown->allocate(4096, 0, 0);
  grown->deallocate(p, 4096, 0, 0);
  grown->trim();
  ASSERT_EQ(core::pool_info(*grown).chunk_count, 0u);
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { grown->deallocate(p, 4096, 0, 0); }));
}

TEST(Pool, SizesAreRoundedToTheGranule) {
  auto pool = make_pool(core::make_host_resource(), MiB, MiB);
  void* a = pool->allocate(1, 0, 0);
  EXPECT_EQ(core::pool_info(*pool).free_bytes, MiB - 256);
  void* b = pool->allocate(257, 0, 0);
  EXPECT_EQ(core::pool_info(*pool).free_bytes, MiB - 256 - 512);
  pool->deallocate(a, 1, 0, 0);
  pool->deallocate(b, 257, 0, 0);
  EXPECT_EQ(core::pool_info(*pool).free_bytes, MiB);
}

// ---- coalescing --------------------------------------------------------------

// Four quarters of one chunk: a, b, c allocated, the fourth free. Free a, b,
// c in every order; after each step the largest free block must be the
// longest run of free quarters, and at the end the whole chunk.
TEST(Pool, FreeNeighboursCoalesceInAnyOrder) {
  std::vector<int> order = {0, 1, 2};
  do {
    auto pool = make_pool(core::make_host_resource(), MiB, MiB);
    const std::size_t q = MiB / 4;
    void* block[3];
    for (auto& p : block) p = pool->allocate(q, 0, 0);
    ASSERT_EQ(static_cast<char*>(block[1]) - static_cast<char*>(block[0]), static_cast<std::ptrdiff_t>(q));
    ASSERT_EQ(static_cast<char*>(block[2]) - static_cast<char*>(block[1]), static_cast<std::ptrdiff_t>(q));
    bool free_quarter[4] = {false, false, false, true};
    EXPECT_EQ(core::pool_info(*pool).largest_free_block, q);
    for (int i : order) {
      pool->deallocate(block[i], q, 0, 0);
      free_quarter[i] = true;
      std::size_t run = 0, best = 0;
      for (bool f : free_quarter) best = std::max(best, run = f ? run + 1 : 0);
      EXPECT_EQ(core::pool_info(*pool).largest_free_block, best * q) << "after freeing " << i;
    }
    const core::PoolInfo info = core::pool_info(*pool);
    EXPECT_EQ(info.largest_free_block, MiB);
    EXPECT_EQ(info.free_bytes, MiB);
    // The whole chunk can be handed out again in one piece.
    void* all = pool->allocate(MiB, 0, 0);
    EXPECT_EQ(all, block[0]);
    pool->deallocate(all, MiB, 0, 0);
  } while (std::next_permutation(order.begin(), order.end()));
}

TEST(Pool, AlignedCarvingCoalescesBack) {
  auto pool = make_pool(core::make_host_resource(), 4 * MiB, 4 * MiB);
  std::mt19937 rng(3);
  std::vector<std::pair<void*, std::size_t>> live;
  for (int i = 0; i < 200; ++i) {
    const std::size_t size = 1 + rng() % 5000;
    void* p = pool->allocate(size, 4096, 0);
    ASSERT_EQ(reinterpret_cast<std::uintptr_t>(p) % 4096, 0u);
    live.emplace_back(p, size);
  }
  std::shuffle(live.begin(), live.end(), rng);
  for (auto& [p, size] : live) pool->deallocate(p, size, 4096, 0);
  EXPECT_EQ(core::pool_info(*pool).largest_free_block, 4 * MiB);
  EXPECT_EQ(core::pool_info(*pool).chunk_count, 1u);
}

TEST(Pool, ManyLiveAllocationsAreTracked) {
  auto stats = core::make_statistics_adaptor(core::make_host_resource());
  auto pool = make_pool(stats, 0);
  std::vector<void*> live;
  for (int i = 0; i < 20000; ++i) live.push_back(pool->allocate(256, 0, 0));
  std::vector<void*> sorted = live;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end()) << "a pointer was handed out twice";
  for (std::size_t i = 0; i < live.size(); i += 2) pool->deallocate(live[i], 256, 0, 0);
  for (std::size_t i = 1; i < live.size(); i += 2) pool->deallocate(live[i], 256, 0, 0);
  const core::PoolInfo info = core::pool_info(*pool);
  EXPECT_EQ(info.free_bytes, info.pool_size);
  pool->trim();
  EXPECT_EQ(core::statistics_of(*stats).current_bytes, 0u);
}

// ---- growth, limits, trim ----------------------------------------------------

TEST(Pool, GrowsByGrowthSizeAndGivesHugeRequestsTheirOwnChunk) {
  auto stats = core::make_statistics_adaptor(core::make_host_resource());
  auto pool = make_pool(stats, 0, 0, MiB);
  EXPECT_EQ(core::pool_info(*pool).pool_size, 0u);
  void* small = pool->allocate(256, 0, 0);
  EXPECT_EQ(core::pool_info(*pool).pool_size, MiB);
  EXPECT_EQ(core::pool_info(*pool).chunk_count, 1u);
  void* big = pool->allocate(5 * MiB, 0, 0);  // larger than any chunk the pool would pick
  EXPECT_EQ(core::pool_info(*pool).pool_size, 6 * MiB);
  EXPECT_EQ(core::pool_info(*pool).chunk_count, 2u);
  EXPECT_EQ(core::statistics_of(*stats).current_bytes, 6 * MiB);
  pool->deallocate(big, 5 * MiB, 0, 0);
  pool->trim();
  EXPECT_EQ(core::pool_info(*pool).pool_size, MiB);
  pool->deallocate(small, 256, 0, 0);
}

TEST(Pool, GrowthIsAtLeastGrowthSize) {
  auto stats = core::make_statistics_adaptor(core::make_host_resource());
  auto pool = make_pool(stats, 0, 0, 64 * KiB);
  std::vector<void*> live;
  std::uint64_t last_size = 0, chunks = 0;
  for (int i = 0; i < 64; ++i) {
    live.push_back(pool->allocate(10 * KiB, 0, 0));
    const core::PoolInfo info = core::pool_info(*pool);
    if (info.chunk_count != chunks) {
      EXPECT_GE(info.pool_size - last_size, 64 * KiB);
      chunks = info.chunk_count;
      last_size = info.pool_size;
    }
    EXPECT_EQ(core::statistics_of(*stats).current_bytes, info.pool_size);
  }
  EXPECT_GT(chunks, 1u);
  for (void* p : live) pool->deallocate(p, 10 * KiB, 0, 0);
}

// Growth first gives back the wholly free chunks it grew and asks for one
// chunk of their size more (pool.cpp, merge_free_chunks): held grows by the
// step alone, and the chunks get fewer and larger.
TEST(Pool, GrowthMergesWhollyFreeGrownChunksIntoTheNewOne) {
  auto stats = core::make_statistics_adaptor(core::make_host_resource());
  auto pool = make_pool(stats, 0, 0, MiB);
  void* a = pool->allocate(MiB, 0, 0);  // chunk 1 (1 MiB)
  void* b = pool->allocate(MiB, 0, 0);  // chunk 2 (1 MiB)
  ASSERT_EQ(core::pool_info(*pool).chunk_count, 2u);
  pool->deallocate(a, MiB, 0, 0);  // chunk 1 wholly free, too small for 2 MiB
  void* c = pool->allocate(2 * MiB, 0, 0);
  core::PoolInfo i = core::pool_info(*pool);
  EXPECT_EQ(i.chunk_count, 2u);         // chunk 1 given back, one 3 MiB chunk asked for
  EXPECT_EQ(i.pool_size, 4 * MiB);      // 1 MiB (b's) + 1 MiB merged + 2 MiB grown
  EXPECT_EQ(core::statistics_of(*stats).current_bytes, 4 * MiB);
  void* d = pool->allocate(MiB, 0, 0);  // the merged megabyte, no growth
  EXPECT_EQ(core::pool_info(*pool).pool_size, 4 * MiB);
  EXPECT_EQ(core::pool_info(*pool).chunk_count, 2u);
  for (auto [p, n] : {std::pair{b, MiB}, std::pair{c, 2 * MiB}, std::pair{d, MiB}}) pool->deallocate(p, n, 0, 0);
}

TEST(Pool, GrowthDoesNotMergeTheInitialChunk) {
  auto stats = core::make_statistics_adaptor(core::make_host_resource());
  auto pool = make_pool(stats, MiB, 0, MiB);
  void* b = pool->allocate(MiB, 0, 0);  // the initial chunk
  void* c = pool->allocate(MiB, 0, 0);  // a grown one
  pool->deallocate(b, MiB, 0, 0);       // the initial chunk wholly free: it stays as asked for
  void* d = pool->allocate(2 * MiB, 0, 0);
  EXPECT_EQ(core::pool_info(*pool).chunk_count, 3u);
  EXPECT_EQ(core::pool_info(*pool).pool_size, 4 * MiB);
  pool->deallocate(c, MiB, 0, 0);
  pool->deallocate(d, 2 * MiB, 0, 0);
}

// A stream-ordered pool merges without blocking the host: its own fresh
// blocks are settled by an event first; a chunk with another stream's fresh
// (uncovered) blocks stays, since giving it back would need the device.
TEST(Pool, StreamOrderedGrowthMergesWithoutDeviceSync) {
  auto up = std::make_shared<test::OrderedUpstream>();
  auto pool = make_pool(up, 0, 0, MiB);
  void* a = pool->allocate(MiB, 0, 1);
  void* b = pool->allocate(MiB, 0, 1);
  pool->deallocate(a, MiB, 0, 1);  // fresh on stream 1
  void* c = pool->allocate(2 * MiB, 0, 1);
  EXPECT_EQ(core::pool_info(*pool).chunk_count, 2u);
  EXPECT_EQ(core::pool_info(*pool).pool_size, 4 * MiB);
  void* d = pool->allocate(MiB, 0, 1);
  EXPECT_EQ(core::pool_info(*pool).pool_size, 4 * MiB);
  pool->deallocate(d, MiB, 0, 1);
  pool->deallocate(c, 2 * MiB, 0, 1);  // stream 1's 3 MiB chunk wholly free, fresh
  // Stream 2 needs 4 MiB: stream 1's free chunk is not its to settle, so it stays.
  void* e = pool->allocate(4 * MiB, 0, 2);
  EXPECT_EQ(core::pool_info(*pool).chunk_count, 3u);
  EXPECT_EQ(core::pool_info(*pool).pool_size, 8 * MiB);
  EXPECT_EQ(up->device_syncs(), 0u);
  EXPECT_EQ(up->violations(), 0u);
  pool->deallocate(e, 4 * MiB, 0, 2);
  pool->deallocate(b, MiB, 0, 1);
}

TEST(Pool, MaximumSizeIsEnforcedAndThePoolStaysUsable) {
  auto stats = core::make_statistics_adaptor(core::make_host_resource());
  auto pool = make_pool(stats, MiB, 2 * MiB, MiB);
  void* a = pool->allocate(MiB, 0, 0);
  void* b = pool->allocate(MiB, 0, 0);
  EXPECT_EQ(core::pool_info(*pool).pool_size, 2 * MiB);
  const std::string m = test::error_message([&] { pool->allocate(256, 0, 0); });
  EXPECT_NE(m.find("maximum_size"), std::string::npos) << m;
  EXPECT_NE(m.find(std::to_string(2 * MiB)), std::string::npos) << m;
  EXPECT_THROW(pool->allocate(256, 0, 0), core::OutOfMemory);
  const std::uint64_t upstream_calls = core::statistics_of(*stats).total_count;
  EXPECT_THROW(pool->allocate(3 * MiB, 0, 0), core::OutOfMemory);  // can never fit
  EXPECT_EQ(core::statistics_of(*stats).total_count, upstream_calls);
  EXPECT_LE(core::statistics_of(*stats).peak_bytes, 2 * MiB);
  pool->deallocate(a, MiB, 0, 0);
  void* c = pool->allocate(256, 0, 0);
  EXPECT_NE(c, nullptr);
  pool->deallocate(c, 256, 0, 0);
  pool->deallocate(b, MiB, 0, 0);
  EXPECT_LE(core::statistics_of(*stats).peak_bytes, 2 * MiB);
}

TEST(Pool, MaximumSizeCountsDedicatedChunks) {
  auto stats = core::make_statistics_adaptor(core::make_host_resource());
  auto pool = make_pool(stats, 0, 8 * MiB, MiB);
  void* big = pool->allocate(6 * MiB, 0, 0);
  void* small = pool->allocate(MiB, 0, 0);
  EXPECT_THROW(pool->allocate(2 * MiB, 0, 0), core::OutOfMemory);
  EXPECT_LE(core::statistics_of(*stats).peak_bytes, 8 * MiB);
  pool->deallocate(big, 6 * MiB, 0, 0);
  void* again = pool->allocate(2 * MiB, 0, 0);  // fits in the freed dedicated chunk
  pool->deallocate(again, 2 * MiB, 0, 0);
  pool->deallocate(small, MiB, 0, 0);
}

TEST(Pool, TrimReturnsOnlyWhollyFreeChunks) {
  auto stats = core::make_statistics_adaptor(core::make_host_resource());
  auto pool = make_pool(stats, 0, 0, MiB);
  void* a = pool->allocate(768 * KiB, 0, 0);
  void* b = pool->allocate(768 * KiB, 0, 0);
  ASSERT_EQ(core::pool_info(*pool).chunk_count, 2u);
  pool->trim();  // both chunks in use
  EXPECT_EQ(core::pool_info(*pool).chunk_count, 2u);
  pool->deallocate(a, 768 * KiB, 0, 0);
  pool->trim();
  EXPECT_EQ(core::pool_info(*pool).chunk_count, 1u);
  EXPECT_EQ(core::pool_info(*pool).pool_size, MiB);
  EXPECT_EQ(core::statistics_of(*stats).current_bytes, MiB);
  std::memset(b, 0x7f, 768 * KiB);  // still ours
  pool->deallocate(b, 768 * KiB, 0, 0);
  pool->trim();
  EXPECT_EQ(core::pool_info(*pool).chunk_count, 0u);
  EXPECT_EQ(core::statistics_of(*stats).current_bytes, 0u);
  void* c = pool->allocate(100, 0, 0);  // grows again after a full trim
  pool->deallocate(c, 100, 0, 0);
}

TEST(Pool, UpstreamIsFreedAtDestruction) {
  auto stats = core::make_statistics_adaptor(core::make_host_resource());
  {
    auto pool = make_pool(stats, 2 * MiB, 0, MiB);
    std::vector<std::pair<void*, std::size_t>> live;
    for (std::size_t size : {KiB, 3 * MiB, 10 * KiB, 700 * KiB}) live.emplace_back(pool->allocate(size, 0, 0), size);
    pool->deallocate(live[1].first, live[1].second, 0, 0);
    pool->deallocate(live[3].first, live[3].second, 0, 0);
    EXPECT_GT(core::statistics_of(*stats).current_bytes, 0u);
    pool->deallocate(live[0].first, live[0].second, 0, 0);
    pool->deallocate(live[2].first, live[2].second, 0, 0);
  }
  EXPECT_EQ(core::statistics_of(*stats).current_bytes, 0u);
  EXPECT_EQ(core::statistics_of(*stats).current_count, 0u);
}

// ---- upstream exhaustion -----------------------------------------------------

TEST(Pool, UpstreamOutOfMemoryTrimsAndRetriesExactly) {
  auto limited = std::make_shared<test::LimitedUpstream>(4 * MiB);
  auto pool = make_pool(limited, 0, 0, MiB);
  void* a = pool->allocate(MiB, 0, 0);
  void* b = pool->allocate(MiB, 0, 0);
  ASSERT_EQ(core::pool_info(*pool).chunk_count, 2u);
  pool->deallocate(a, MiB, 0, 0);
  pool->deallocate(b, MiB, 0, 0);
  // 2 MiB held, wholly free; 3 MiB more would pass the limit: the pool must
  // give back its free chunks and ask again.
  void* c = pool->allocate(3 * MiB, 0, 0);
  ASSERT_NE(c, nullptr);
  EXPECT_GE(limited->failures(), 1u);
  EXPECT_EQ(core::pool_info(*pool).chunk_count, 1u);
  EXPECT_EQ(core::pool_info(*pool).pool_size, 3 * MiB);
  EXPECT_EQ(limited->requests().back(), 3 * MiB);
  std::memset(c, 1, 3 * MiB);
  pool->deallocate(c, 3 * MiB, 0, 0);
}

TEST(Pool, UpstreamOutOfMemoryRetriesWithExactlyWhatIsNeeded) {
  auto limited = std::make_shared<test::LimitedUpstream>(3 * MiB + 512 * KiB);
  auto pool = make_pool(limited, 0, 0, 2 * MiB);
  void* a = pool->allocate(MiB, 0, 0);  // one 2 MiB chunk
  void* b = pool->allocate(MiB, 0, 0);
  // The pool would like a 2 MiB chunk (its growth size); only 1.5 MiB is left.
  void* c = pool->allocate(MiB + 512 * KiB, 0, 0);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(limited->failures(), 1u);
  EXPECT_EQ(limited->requests().back(), MiB + 512 * KiB);
  for (auto [p, n] : {std::pair{a, MiB}, std::pair{b, MiB}, std::pair{c, MiB + 512 * KiB}}) pool->deallocate(p, n, 0, 0);
}

TEST(Pool, UpstreamOutOfMemoryIsReportedAndThePoolStaysUsable) {
  auto limited = std::make_shared<test::LimitedUpstream>(4 * MiB);
  auto pool = make_pool(limited, MiB, 0, MiB);
  void* keep = pool->allocate(100, 0, 0);
  const std::string m = test::error_message([&] { pool->allocate(5 * MiB, 0, 0); });
  EXPECT_NE(m.find("upstream 'limited'"), std::string::npos) << m;
  EXPECT_NE(m.find(std::to_string(5 * MiB)), std::string::npos) << m;
  EXPECT_THROW(pool->allocate(5 * MiB, 0, 0), core::OutOfMemory);
  void* p = pool->allocate(2 * MiB, 0, 0);
  std::memset(p, 3, 2 * MiB);
  pool->deallocate(p, 2 * MiB, 0, 0);
  pool->deallocate(keep, 100, 0, 0);
  EXPECT_EQ(pool->outstanding_count(), 0u);
}

// ---- streams -----------------------------------------------------------------

TEST(PoolStreams, HostPoolsTreatAllStreamsAsOne) {
  auto pool = make_pool(core::make_host_resource(), MiB, MiB);
  void* p = pool->allocate(MiB, 0, 5);
  pool->deallocate(p, MiB, 0, 9);
  void* q = pool->allocate(MiB, 0, 3);  // would not fit if stream 9's block were kept apart
  EXPECT_EQ(q, p);
  pool->deallocate(q, MiB, 0, 0);
}

// A bounded pool records at every free, so all its free memory can go to any stream.
TEST(PoolStreams, EveryFreeRecordsTheStreamsEventSoTheStreamIsNeverUsedAgain) {
  auto up = std::make_shared<test::OrderedUpstream>();
  auto pool = make_pool(up, MiB, MiB);
  void* p = pool->allocate(4096, 0, 7);
  const std::size_t before = up->event_records();  // taking a piece of the initial chunk may record too
  pool->deallocate(p, 4096, 0, 7);
  EXPECT_EQ(up->event_records(), before + 1);
  p = pool->allocate(4096, 0, 7);
  pool->deallocate(p, 4096, 0, 7);
  EXPECT_EQ(up->event_records(), before + 2);
  // Stream 7 may be destroyed now: taking its memory on stream 8 waits on the
  // event (logged as a wait for stream 7), never on stream 7's handle.
  void* q = pool->allocate(MiB, 0, 8);
  using W = std::vector<std::pair<core::stream_t, core::stream_t>>;
  EXPECT_EQ(up->waits(), (W{{8, 7}}));
  pool->deallocate(q, MiB, 0, 8);
}

// What growing adds beyond the request is the growing stream's (a
// stream-ordered upstream orders it there). Another stream takes it by
// waiting on that stream's event - never by blocking the host (a blocked
// stream, e.g. one waiting on a host-side gate, would deadlock a device-wide
// synchronisation). Since stop 37 an unbounded pool takes pieces of another
// stream's partly used chunk only once upstream has no more memory (growth
// order in pool.cpp), hence the limit here.
TEST(PoolStreams, TheRestOfAGrownChunkIsTakenByWaitingOnAnEventNotTheDevice) {
  auto up = std::make_shared<test::OrderedUpstream>();
  auto pool = make_pool(up, 0, 0, MiB);  // no initial chunk: the first allocation grows
  up->set_limit(MiB);  // upstream gives that one chunk only
  void* a = pool->allocate(256 * KiB, 0, 1);  // stream 1 grows a 1 MiB chunk, keeps 768 KiB
  up->allocated(a, 256 * KiB, 1);
  void* b = pool->allocate(256 * KiB, 0, 2);  // stream 2 takes from that rest
  up->allocated(b, 256 * KiB, 2);
  EXPECT_EQ(core::pool_info(*pool).chunk_count, 1u);
  using W = std::vector<std::pair<core::stream_t, core::stream_t>>;
  EXPECT_EQ(up->waits(), (W{{2, 1}}));
  EXPECT_EQ(up->device_syncs(), 0u);
  EXPECT_EQ(up->violations(), 0u);
  pool->deallocate(a, 256 * KiB, 0, 1);
  pool->deallocate(b, 256 * KiB, 0, 2);
}

TEST(PoolStreams, SameStreamReuseMakesNoCall) {
  auto up = std::make_shared<test::OrderedUpstream>();
  auto pool = make_pool(up, MiB);
  up->clear_waits();
  void* p = pool->allocate(4096, 0, 7);
  pool->deallocate(p, 4096, 0, 7);
  up->clear_waits();
  for (int i = 0; i < 100; ++i) {
    void* q = pool->allocate(4096, 0, 7);
    EXPECT_EQ(q, p);
    pool->deallocate(q, 4096, 0, 7);
  }
  EXPECT_TRUE(up->waits().empty());
}

TEST(PoolStreams, AnotherStreamsBlockIsTakenOnlyAfterWaiting) {
  auto up = std::make_shared<test::OrderedUpstream>();
  auto pool = make_pool(up, MiB, MiB);  // cannot grow: must reuse
  void* p = pool->allocate(MiB, 0, 1);
  pool->deallocate(p, MiB, 0, 1);
  up->clear_waits();
  void* q = pool->allocate(MiB, 0, 2);
  EXPECT_EQ(q, p);
  using W = std::vector<std::pair<core::stream_t, core::stream_t>>;
  EXPECT_EQ(up->waits(), (W{{2, 1}}));
  pool->deallocate(q, MiB, 0, 2);
}

TEST(PoolStreams, OwnStreamIsPreferred) {
  auto up = std::make_shared<test::OrderedUpstream>();
  auto pool = make_pool(up, MiB, MiB);
  void* a = pool->allocate(256 * KiB, 0, 1);
  void* b = pool->allocate(256 * KiB, 0, 1);
  void* c = pool->allocate(256 * KiB, 0, 1);  // keeps a and b apart from the tail
  pool->deallocate(a, 256 * KiB, 0, 1);
  pool->deallocate(b, 256 * KiB, 0, 2);
  up->clear_waits();
  EXPECT_EQ(pool->allocate(256 * KiB, 0, 2), b);
  EXPECT_EQ(pool->allocate(256 * KiB, 0, 1), a);
  EXPECT_TRUE(up->waits().empty());
  pool->deallocate(a, 256 * KiB, 0, 1);
  pool->deallocate(b, 256 * KiB, 0, 1);
  pool->deallocate(c, 256 * KiB, 0, 1);
}

TEST(PoolStreams, BlocksOfDifferentStreamsMergeOnlyAfterWaiting) {
  auto up = std::make_shared<test::OrderedUpstream>();
  auto pool = make_pool(up, MiB, MiB);
  const std::size_t h = MiB / 2;
  void* a = pool->allocate(h, 0, 1);
  void* b = pool->allocate(h, 0, 1);
  pool->deallocate(a, h, 0, 1);
  pool->deallocate(b, h, 0, 2);
  EXPECT_EQ(core::pool_info(*pool).largest_free_block, h);  // not merged: different streams
  up->clear_waits();
  void* all = pool->allocate(MiB, 0, 1);  // needs both halves
  EXPECT_EQ(all, a);
  using W = std::vector<std::pair<core::stream_t, core::stream_t>>;
  EXPECT_EQ(up->waits(), (W{{1, 2}}));
  pool->deallocate(all, MiB, 0, 1);
  EXPECT_EQ(core::pool_info(*pool).largest_free_block, MiB);
}

TEST(PoolStreams, ExhaustionWaitsForEveryStreamOnce) {
  auto up = std::make_shared<test::OrderedUpstream>();
  auto pool = make_pool(up, MiB, MiB);
  const std::size_t q = MiB / 4;
  void* block[4];
  for (auto& p : block) p = pool->allocate(q, 0, 9);
  for (int i = 0; i < 4; ++i) pool->deallocate(block[i], q, 0, static_cast<core::stream_t>(i + 1));
  up->clear_waits();
  void* all = pool->allocate(MiB, 0, 5);
  EXPECT_EQ(all, block[0]);
  auto waits = up->waits();
  std::sort(waits.begin(), waits.end());
  using W = std::vector<std::pair<core::stream_t, core::stream_t>>;
  EXPECT_EQ(waits, (W{{5, 1}, {5, 2}, {5, 3}, {5, 4}}));
  pool->deallocate(all, MiB, 0, 5);
}

TEST(PoolStreams, TrimWaitsBeforeGivingBackMixedChunks) {
  auto up = std::make_shared<test::OrderedUpstream>();
  auto pool = make_pool(up, MiB, MiB);  // bounded: every free is covered by an event
  void* a = pool->allocate(MiB / 2, 0, 1);
  void* b = pool->allocate(MiB / 2, 0, 1);
  up->freed(a, MiB / 2, 1);
  pool->deallocate(a, MiB / 2, 0, 1);
  up->freed(b, MiB / 2, 2);
  pool->deallocate(b, MiB / 2, 0, 2);
  up->clear_waits();
  pool->trim();
  EXPECT_EQ(core::pool_info(*pool).chunk_count, 0u);
  EXPECT_EQ(up->upstream_frees(), 1u);
  EXPECT_EQ(up->violations(), 0u);
  // The chunk went back on stream 0 (streams 1 and 2 may be gone by now),
  // after stream 0 waited on both streams' events.
  EXPECT_EQ(up->cross_stream_reuses(), 2u);
  using W = std::vector<std::pair<core::stream_t, core::stream_t>>;
  auto waits = up->waits();
  std::sort(waits.begin(), waits.end());
  EXPECT_EQ(waits, (W{{0, 1}, {0, 2}}));
  EXPECT_EQ(up->device_syncs(), 0u);
}

// An unbounded pool covers frees lazily: frees not covered by an event yet
// (their streams may be gone) make trim() synchronise the device, once.
TEST(PoolStreams, TrimSynchronisesTheDeviceOnceForUncoveredFrees) {
  auto up = std::make_shared<test::OrderedUpstream>();
  auto pool = make_pool(up, MiB);
  void* a = pool->allocate(MiB / 2, 0, 1);
  void* b = pool->allocate(MiB / 2, 0, 1);
  up->freed(a, MiB / 2, 1);
  pool->deallocate(a, MiB / 2, 0, 1);
  up->freed(b, MiB / 2, 2);
  pool->deallocate(b, MiB / 2, 0, 2);
  const std::size_t syncs = up->device_syncs();
  pool->trim();
  EXPECT_EQ(core::pool_info(*pool).chunk_count, 0u);
  EXPECT_EQ(up->upstream_frees(), 1u);
  EXPECT_EQ(up->device_syncs(), syncs + 1);
  EXPECT_EQ(up->violations(), 0u);
}

// Same-stream frees in an unbounded pool record the stream's event only every
// so often (the hot path makes no CUDA call most of the time), and never wait.
// Two sizes in turn, both above the quick cache's small sizes (16 KiB), so
// every freed block goes into `fresh` (the cache's larger-size slot keeps
// one only until the other size is asked for).
TEST(PoolStreams, UnboundedPoolsRecordLazily) {
  auto up = std::make_shared<test::OrderedUpstream>();
  auto pool = make_pool(up, 4 * MiB);
  void* p = pool->allocate(64 * 1024, 0, 7);
  pool->deallocate(p, 64 * 1024, 0, 7);
  up->clear_waits();
  const std::size_t before = up->event_records();
  for (int i = 0; i < 1000; ++i) {
    const std::size_t size = i % 2 == 0 ? 64 * 1024 : 80 * 1024;
    void* q = pool->allocate(size, 0, 7);
    EXPECT_EQ(q, p);
    pool->deallocate(q, size, 0, 7);
  }
  const std::size_t records = up->event_records() - before;
  EXPECT_GE(records, 1u);  // still covered now and then: other streams can take it
  EXPECT_LE(records, 50u);  // but far from once per free
  EXPECT_TRUE(up->waits().empty());
}

// A block in the quick cache (a small size freed and asked for again on one
// stream) goes back to that stream only, so the hot same-size pair records no
// event at all; the block counts as an uncovered free once it leaves the
// cache, and another stream that wants it then asks for a record and takes it
// after waiting on the event, as for any fresh free.
TEST(PoolStreams, CachedSmallBlocksNeedNoEventUntilAnotherStreamWantsThem) {
  auto up = std::make_shared<test::OrderedUpstream>();
  auto pool = make_pool(up, 0, 0, MiB);  // 1 MiB chunks, grown on demand
  void* p = pool->allocate(4096, 0, 7);
  up->allocated(p, 4096, 7);
  up->freed(p, 4096, 7);
  pool->deallocate(p, 4096, 0, 7);
  up->clear_waits();
  const std::size_t before = up->event_records();
  for (int i = 0; i < 1000; ++i) {
    void* q = pool->allocate(4096, 0, 7);
    EXPECT_EQ(q, p);
    up->allocated(q, 4096, 7);
    up->freed(q, 4096, 7);
    pool->deallocate(q, 4096, 0, 7);
  }
  EXPECT_EQ(up->event_records(), before);
  EXPECT_TRUE(up->waits().empty());
  // Stream 8 wants all of stream 7's chunk: the cached block is flushed into
  // stream 7's fresh memory, not covered yet, so stream 8 grows and asks 7 to record.
  const std::size_t chunks = core::pool_info(*pool).chunk_count;
  void* big = pool->allocate(MiB, 0, 8);
  up->allocated(big, MiB, 8);
  EXPECT_EQ(core::pool_info(*pool).chunk_count, chunks + 1);
  EXPECT_TRUE(up->waits().empty());
  void* small = pool->allocate(256, 0, 7);  // stream 7 works on...
  up->allocated(small, 256, 7);
  up->freed(small, 256, 7);
  const std::size_t asked = up->event_records();
  pool->deallocate(small, 256, 0, 7);  // ...and its next free records, as asked
  EXPECT_EQ(up->event_records(), asked + 1);
  void* again = pool->allocate(MiB, 0, 8);  // stream 7's chunk, after a wait on its event
  up->allocated(again, MiB, 8);
  EXPECT_EQ(core::pool_info(*pool).chunk_count, chunks + 1);
  using W = std::vector<std::pair<core::stream_t, core::stream_t>>;
  EXPECT_EQ(up->waits(), (W{{8, 7}}));
  EXPECT_EQ(up->violations(), 0u);
  up->freed(big, MiB, 8);
  pool->deallocate(big, MiB, 0, 8);
  up->freed(again, MiB, 8);
  pool->deallocate(again, MiB, 0, 8);
}

// The same for a larger size (the quick cache's larger-size slot): a 1 MiB
// block allocated and freed over and over on one stream records no event (a
// free into the free index would count towards the next record, every 64).
TEST(PoolStreams, CachedLargerBlocksNeedNoEventEither) {
  auto up = std::make_shared<test::OrderedUpstream>();
  auto pool = make_pool(up, 0, 0, 4 * MiB);
  void* p = pool->allocate(MiB, 0, 7);
  up->allocated(p, MiB, 7);
  up->freed(p, MiB, 7);
  pool->deallocate(p, MiB, 0, 7);
  const std::size_t before = up->event_records();
  for (int i = 0; i < 1000; ++i) {
    void* q = pool->allocate(MiB, 0, 7);
    EXPECT_EQ(q, p);
    up->allocated(q, MiB, 7);
    up->freed(q, MiB, 7);
    pool->deallocate(q, MiB, 0, 7);
  }
  EXPECT_EQ(up->event_records(), before);
  // Another size flushes it into the stream's fresh memory: from then on, frees count again.
  void* other = pool->allocate(2 * MiB, 0, 7);
  up->allocated(other, 2 * MiB, 7);
  for (int i = 0; i < 200; ++i) {
    void* q = pool->allocate(3 * MiB / 2 + static_cast<std::size_t>(i % 2) * KiB, 0, 7);
    up->allocated(q, 3 * MiB / 2 + static_cast<std::size_t>(i % 2) * KiB, 7);
    up->freed(q, 3 * MiB / 2 + static_cast<std::size_t>(i % 2) * KiB, 7);
    pool->deallocate(q, 3 * MiB / 2 + static_cast<std::size_t>(i % 2) * KiB, 0, 7);
  }
  EXPECT_GT(up->event_records(), before);
  up->freed(other, 2 * MiB, 7);
  pool->deallocate(other, 2 * MiB, 0, 7);
  EXPECT_EQ(up->violations(), 0u);
}

// A stream that wants memory another stream freed but has not covered yet
// asks it to record at its next free; after that, the memory is taken by
// waiting on the event, without growing again.
TEST(PoolStreams, AStreamAsksAnotherToRecordAndThenTakesItsMemory) {
  auto up = std::make_shared<test::OrderedUpstream>();
  auto pool = make_pool(up, 0, 0, MiB);
  void* keep = pool->allocate(256, 0, 1);  // grows a first chunk
  void* a = pool->allocate(MiB, 0, 1);     // a second one, exactly
  up->allocated(a, MiB, 1);
  up->freed(a, MiB, 1);
  pool->deallocate(a, MiB, 0, 1);  // fresh on stream 1: not covered yet
  void* b = pool->allocate(2 * MiB, 0, 2);  // cannot take it: grows instead, asks stream 1 to record
  up->allocated(b, 2 * MiB, 2);
  const std::size_t chunks = core::pool_info(*pool).chunk_count;
  up->freed(keep, 256, 1);
  pool->deallocate(keep, 256, 0, 1);  // stream 1's next free records: a is covered now
  up->clear_waits();
  void* c = pool->allocate(MiB, 0, 2);
  up->allocated(c, MiB, 2);
  EXPECT_EQ(core::pool_info(*pool).chunk_count, chunks);  // stream 1's memory, not a new chunk
  using W = std::vector<std::pair<core::stream_t, core::stream_t>>;
  EXPECT_EQ(up->waits(), (W{{2, 1}}));
  EXPECT_EQ(up->violations(), 0u);
  up->freed(b, 2 * MiB, 2);
  pool->deallocate(b, 2 * MiB, 0, 2);
  up->freed(c, MiB, 2);
  pool->deallocate(c, MiB, 0, 2);
}

// An unbounded pool hands another stream a chunk that is wholly free as a
// whole: the stream waits on the owner's event once, and later allocations
// from the rest of that chunk are its own (no second wait, no new chunk).
TEST(PoolStreams, AWhollyFreeChunkMovesToAnotherStreamWhole) {
  auto up = std::make_shared<test::OrderedUpstream>();
  auto pool = make_pool(up, 0, 0, MiB);
  void* keep = pool->allocate(256, 0, 1);  // stream 1's first chunk (1 MiB), kept partly used
  void* keep2 = pool->allocate(256, 0, 1);
  void* a = pool->allocate(2 * MiB, 0, 1);  // a second one, exactly 2 MiB
  up->allocated(keep, 256, 1);
  up->allocated(keep2, 256, 1);
  up->allocated(a, 2 * MiB, 1);
  up->freed(a, 2 * MiB, 1);
  pool->deallocate(a, 2 * MiB, 0, 1);  // fresh on stream 1
  void* b = pool->allocate(4 * MiB, 0, 2);  // grows; asks stream 1 to record
  up->allocated(b, 4 * MiB, 2);
  up->freed(keep2, 256, 1);
  pool->deallocate(keep2, 256, 0, 1);  // records: a's chunk is wholly free and covered
  const std::size_t chunks = core::pool_info(*pool).chunk_count;
  up->clear_waits();
  void* c = pool->allocate(MiB, 0, 2);
  void* d = pool->allocate(MiB, 0, 2);  // the rest of the chunk that moved
  up->allocated(c, MiB, 2);
  up->allocated(d, MiB, 2);
  const auto lo = reinterpret_cast<std::uintptr_t>(a), hi = lo + 2 * MiB;
  for (void* p : {c, d}) {
    EXPECT_GE(reinterpret_cast<std::uintptr_t>(p), lo);
    EXPECT_LT(reinterpret_cast<std::uintptr_t>(p), hi);
  }
  EXPECT_EQ(core::pool_info(*pool).chunk_count, chunks);
  using W = std::vector<std::pair<core::stream_t, core::stream_t>>;
  EXPECT_EQ(up->waits(), (W{{2, 1}}));  // once, for the whole chunk
  EXPECT_EQ(up->violations(), 0u);
  for (void* p : {c, d}) {
    up->freed(p, MiB, 2);
    pool->deallocate(p, MiB, 0, 2);
  }
  up->freed(b, 4 * MiB, 2);
  pool->deallocate(b, 4 * MiB, 0, 2);
  up->freed(keep, 256, 1);
  pool->deallocate(keep, 256, 0, 1);
}

// Free memory in a chunk another stream still partly uses stays that
// stream's while upstream has memory: the pool grows instead (threads on
// their own streams would otherwise keep taking pieces back and forth).
// Once upstream is out, the piece is taken after a wait on the owner's event,
// and the allocation succeeds.
TEST(PoolStreams, PiecesOfAnotherStreamsChunkOnlyOnceUpstreamIsOut) {
  auto up = std::make_shared<test::OrderedUpstream>();
  auto pool = make_pool(up, 0, 0, MiB);
  void* keep = pool->allocate(256, 0, 1);    // stream 1's chunk (1 MiB): keep stays in it
  void* keep2 = pool->allocate(256, 0, 1);
  void* a = pool->allocate(MiB / 2, 0, 1);
  up->allocated(keep, 256, 1);
  up->allocated(keep2, 256, 1);
  up->allocated(a, MiB / 2, 1);
  up->freed(a, MiB / 2, 1);
  pool->deallocate(a, MiB / 2, 0, 1);      // fresh on stream 1
  void* b = pool->allocate(2 * MiB, 0, 2);  // stream 2's chunk, exactly; asks stream 1 to record
  up->allocated(b, 2 * MiB, 2);
  up->freed(keep2, 256, 1);
  pool->deallocate(keep2, 256, 0, 1);      // records: stream 1's free memory is covered
  const auto lo = reinterpret_cast<std::uintptr_t>(keep), hi = lo + MiB;
  const auto inside = [&](void* p) {
    return reinterpret_cast<std::uintptr_t>(p) >= lo && reinterpret_cast<std::uintptr_t>(p) < hi;
  };
  up->clear_waits();
  const std::size_t chunks = core::pool_info(*pool).chunk_count;
  void* c = pool->allocate(MiB / 2, 0, 2);  // would fit in stream 1's chunk: grows instead
  up->allocated(c, MiB / 2, 2);
  EXPECT_FALSE(inside(c));
  EXPECT_EQ(core::pool_info(*pool).chunk_count, chunks + 1);
  EXPECT_TRUE(up->waits().empty());
  // Upstream has no more: the next one that stream 2's chunks cannot hold
  // is carved from stream 1's chunk, after a wait on its event.
  up->set_limit(core::pool_info(*pool).pool_size);
  void* d = pool->allocate(3 * MiB / 4, 0, 2);
  up->allocated(d, 3 * MiB / 4, 2);
  EXPECT_TRUE(inside(d));
  EXPECT_EQ(core::pool_info(*pool).chunk_count, chunks + 1);
  using W = std::vector<std::pair<core::stream_t, core::stream_t>>;
  EXPECT_EQ(up->waits(), (W{{2, 1}}));
  EXPECT_EQ(up->device_syncs(), 0u);
  EXPECT_EQ(up->violations(), 0u);
  for (auto [p, n] : {std::pair<void*, std::size_t>{b, 2 * MiB}, {c, MiB / 2}, {d, 3 * MiB / 4}}) {
    up->freed(p, n, 2);
    pool->deallocate(p, n, 0, 2);
  }
  up->freed(keep, 256, 1);
  pool->deallocate(keep, 256, 0, 1);
}

// Memory one stream allocated and another freed (a producer stream whose
// buffers a consumer stream frees) goes back to a stream that needs it before
// the pool grows, even as a piece of a partly used chunk: otherwise each such
// free would leave the consumer with memory it never asked for, and the pool
// would grow without bound (bench_pool_vs_malloc_core handoff).
TEST(PoolStreams, MemoryFreedOnAnotherStreamIsTakenBackBeforeGrowing) {
  auto up = std::make_shared<test::OrderedUpstream>();
  auto pool = make_pool(up, 0, 0, MiB);
  void* keep = pool->allocate(256, 0, 1);    // stream 1's chunk (1 MiB)
  void* x = pool->allocate(MiB / 2, 0, 1);  // in it
  up->allocated(keep, 256, 1);
  up->allocated(x, MiB / 2, 1);
  up->freed(x, MiB / 2, 2);
  pool->deallocate(x, MiB / 2, 0, 2);  // freed on stream 2: now in stream 2's memory, not covered yet
  void* y = pool->allocate(3 * MiB / 4, 0, 1);  // nothing fits: grows, and asks stream 2 to record
  up->allocated(y, 3 * MiB / 4, 1);
  void* z = pool->allocate(256, 0, 2);
  up->allocated(z, 256, 2);
  up->freed(z, 256, 2);
  pool->deallocate(z, 256, 0, 2);  // stream 2 records: x's piece is covered
  const std::size_t chunks = core::pool_info(*pool).chunk_count;
  up->clear_waits();
  void* w = pool->allocate(MiB / 2, 0, 1);  // x's piece, back from stream 2
  up->allocated(w, MiB / 2, 1);
  EXPECT_EQ(w, x);
  EXPECT_EQ(core::pool_info(*pool).chunk_count, chunks);
  using W = std::vector<std::pair<core::stream_t, core::stream_t>>;
  EXPECT_EQ(up->waits(), (W{{1, 2}}));
  EXPECT_EQ(up->violations(), 0u);
  for (auto [p, n] : {std::pair<void*, std::size_t>{keep, 256}, {y, 3 * MiB / 4}, {w, MiB / 2}}) {
    up->freed(p, n, 1);
    pool->deallocate(p, n, 0, 1);
  }
}

// Once an unbounded pool has run out of memory it records at every free, so
// later shortages are met by waiting on events, not by synchronising the device.
TEST(PoolStreams, AfterRunningOutEveryFreeIsCovered) {
  auto up = std::make_shared<test::OrderedUpstream>();
  auto pool = make_pool(up, 0, 0, MiB);
  up->set_limit(MiB);  // upstream can give one chunk only
  void* a = pool->allocate(MiB / 2, 0, 1);
  void* b = pool->allocate(MiB / 2, 0, 1);
  up->allocated(a, MiB / 2, 1);
  up->allocated(b, MiB / 2, 1);
  up->freed(a, MiB / 2, 1);
  pool->deallocate(a, MiB / 2, 0, 1);  // fresh: not covered
  void* c = pool->allocate(MiB / 2, 0, 2);  // upstream is out: the pool synchronises once
  up->allocated(c, MiB / 2, 2);
  EXPECT_EQ(c, a);
  EXPECT_EQ(up->device_syncs(), 1u);
  up->freed(c, MiB / 2, 2);
  pool->deallocate(c, MiB / 2, 0, 2);  // covered at once now
  up->clear_waits();
  void* d = pool->allocate(MiB / 2, 0, 3);
  up->allocated(d, MiB / 2, 3);
  EXPECT_EQ(d, a);
  EXPECT_EQ(up->device_syncs(), 1u);
  using W = std::vector<std::pair<core::stream_t, core::stream_t>>;
  EXPECT_EQ(up->waits(), (W{{3, 2}}));
  EXPECT_EQ(up->violations(), 0u);
  for (auto [p, s] : {std::pair{b, core::stream_t{1}}, std::pair{d, core::stream_t{3}}}) {
    up->freed(p, MiB / 2, s);
    pool->deallocate(p, MiB / 2, 0, s);
  }
}

// Random allocations and frees on several streams against a pool too small to
// avoid reuse: no range is ever handed to a stream that has not waited for
// the stream that freed it (vector clocks in OrderedUpstream).
// Bounded: the pool's maximum forces reuse (every free recorded at once).
// Unbounded over an upstream that runs out: frees are recorded lazily until
// the first shortage, then at once.
void random_cross_stream_reuse(bool bounded) {
  auto up = std::make_shared<test::OrderedUpstream>();
  if (!bounded) up->set_limit(2 * MiB);
  std::size_t ooms = 0;
  {
    auto pool = make_pool(up, 0, bounded ? 2 * MiB : 0, 256 * KiB);
    std::mt19937_64 rng(11);
    struct Live {
      void* p;
      std::size_t n;
      core::stream_t s;
    };
    std::vector<Live> live;
    for (int op = 0; op < 20000; ++op) {
      const core::stream_t s = 1 + rng() % 4;
      if (live.empty() || (live.size() < 24 && rng() % 2 == 0)) {
        const std::size_t n = 256 * (1 + rng() % 512);  // whole granules: exact ranges
        try {
          void* p = pool->allocate(n, 0, s);
          up->allocated(p, n, s);
          live.push_back({p, n, s});
        } catch (const core::OutOfMemory&) {
          ++ooms;
        }
      } else {
        const std::size_t i = rng() % live.size();
        up->freed(live[i].p, live[i].n, s);  // freed on a random stream, not necessarily its own
        pool->deallocate(live[i].p, live[i].n, 0, s);
        live[i] = live.back();
        live.pop_back();
      }
    }
    for (const Live& l : live) {
      up->freed(l.p, l.n, l.s);
      pool->deallocate(l.p, l.n, 0, l.s);
    }
  }  // the destructor gives chunks back: checked too
  EXPECT_EQ(up->violations(), 0u);
  EXPECT_GT(up->cross_stream_reuses(), 100u) << "the test did not exercise cross-stream reuse";
  EXPECT_GT(up->waits().size(), 100u);
  EXPECT_EQ(up->outstanding_count(), 0u);
  EXPECT_GT(ooms, 0u) << "the pool was never under pressure";
}

TEST(PoolStreams, RandomCrossStreamReuseIsAlwaysOrdered) { random_cross_stream_reuse(true); }
TEST(PoolStreams, RandomCrossStreamReuseIsAlwaysOrderedWhenRecordingLazily) { random_cross_stream_reuse(false); }

// Threads on their own streams share a pool too small for all of them: it
// must hand memory across streams, always after a wait. With `initial`, the
// memory starts as one initial size that the streams share out in slabs.
void concurrent_streams_reuse(bool bounded, std::size_t initial = 0) {
  auto up = std::make_shared<test::OrderedUpstream>();
  if (!bounded) up->set_limit(MiB);
  {
    auto pool = make_pool(up, initial, bounded ? MiB : 0, 64 * KiB);
    std::vector<std::thread> threads;
    std::atomic<int> errors{0};
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        const core::stream_t s = static_cast<core::stream_t>(t + 1);
        std::mt19937_64 rng(100 + t);
        std::vector<std::pair<void*, std::size_t>> live;
        try {
          for (int op = 0; op < 3000; ++op) {
            if (live.empty() || (live.size() < 8 && rng() % 2 == 0)) {
              const std::size_t n = 256 * (1 + rng() % 128);
              try {
                void* p = pool->allocate(n, 0, s);
                up->allocated(p, n, s);
                live.emplace_back(p, n);
              } catch (const core::OutOfMemory&) {
              }
            } else {
              const std::size_t i = rng() % live.size();
              up->freed(live[i].first, live[i].second, s);  // before the pool may hand it on
              pool->deallocate(live[i].first, live[i].second, 0, s);
              live[i] = live.back();
              live.pop_back();
            }
          }
          for (auto& [p, n] : live) {
            up->freed(p, n, s);
            pool->deallocate(p, n, 0, s);
          }
        } catch (...) {
          ++errors;
        }
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(errors, 0);
    EXPECT_EQ(pool->outstanding_count(), 0u);
  }
  EXPECT_EQ(up->violations(), 0u);
  EXPECT_GT(up->cross_stream_reuses(), 0u);
  EXPECT_EQ(up->outstanding_count(), 0u);
}

TEST(PoolStreams, ConcurrentStreamsReuseSafely) { concurrent_streams_reuse(true); }
TEST(PoolStreams, ConcurrentStreamsReuseSafelyWhenRecordingLazily) { concurrent_streams_reuse(false); }
TEST(PoolSlabs, ConcurrentStreamsShareAnInitialSizeSafely) { concurrent_streams_reuse(true, MiB); }
TEST(PoolSlabs, ConcurrentStreamsShareAnInitialSizeSafelyWhenRecordingLazily) { concurrent_streams_reuse(false, MiB); }

// ---- info: free blocks; growth after an initial size -------------------------

TEST(Pool, InfoCountsFreeBlocks) {
  auto pool = make_pool(core::make_host_resource(), MiB, MiB);
  EXPECT_EQ(core::pool_info(*pool).free_blocks, 1u);
  const std::size_t q = MiB / 4;
  void* a = pool->allocate(q, 0, 0);
  void* b = pool->allocate(q, 0, 0);
  void* c = pool->allocate(q, 0, 0);
  EXPECT_EQ(core::pool_info(*pool).free_blocks, 1u);  // the tail
  pool->deallocate(a, q, 0, 0);
  EXPECT_EQ(core::pool_info(*pool).free_blocks, 2u);  // a, the tail
  pool->deallocate(c, q, 0, 0);
  EXPECT_EQ(core::pool_info(*pool).free_blocks, 2u);  // a, c merged with the tail
  pool->deallocate(b, q, 0, 0);
  const core::PoolInfo i = core::pool_info(*pool);
  EXPECT_EQ(i.free_blocks, 1u);  // all one again
  EXPECT_EQ(i.largest_free_block, MiB);
  EXPECT_EQ(i.free_bytes, MiB);
}

TEST(Pool, GrowsUpToTheMaximumAfterAnInitialSize) {
  auto stats = core::make_statistics_adaptor(core::make_host_resource());
  auto pool = make_pool(stats, MiB, 4 * MiB);  // default growth
  void* a = pool->allocate(MiB, 0, 0);            // the initial chunk
  void* b = pool->allocate(2 * MiB, 0, 0);        // grows
  void* c = pool->allocate(MiB, 0, 0);            // grows to the maximum exactly
  core::PoolInfo i = core::pool_info(*pool);
  EXPECT_EQ(i.pool_size, 4 * MiB);
  EXPECT_EQ(i.free_bytes, 0u);
  EXPECT_THROW(pool->allocate(256, 0, 0), core::OutOfMemory);
  EXPECT_LE(core::statistics_of(*stats).peak_bytes, 4 * MiB);
  pool->deallocate(b, 2 * MiB, 0, 0);
  void* d = pool->allocate(2 * MiB, 0, 0);  // reused, no growth
  EXPECT_EQ(core::pool_info(*pool).pool_size, 4 * MiB);
  for (auto [p, n] : {std::pair{a, MiB}, std::pair{c, MiB}, std::pair{d, 2 * MiB}}) pool->deallocate(p, n, 0, 0);
}

// ---- slabs: a large initial size is shared out among streams ------------------

TEST(PoolSlabs, EachStreamTakesASlabOfTheInitialSizeWithoutWaiting) {
  auto up = std::make_shared<test::OrderedUpstream>();
  auto pool = make_pool(up, 64 * MiB, 0, MiB);
  up->clear_waits();
  void* a = pool->allocate(256 * KiB, 0, 1);
  void* b = pool->allocate(256 * KiB, 0, 2);
  up->allocated(a, 256 * KiB, 1);
  up->allocated(b, 256 * KiB, 2);
  const auto pa = reinterpret_cast<std::uintptr_t>(a), pb = reinterpret_cast<std::uintptr_t>(b);
  EXPECT_GE(pb > pa ? pb - pa : pa - pb, MiB);  // different slabs of one growth size each
  EXPECT_TRUE(up->waits().empty());               // memory no stream used: nothing to wait for
  EXPECT_EQ(up->device_syncs(), 0u);
  const core::PoolInfo i = core::pool_info(*pool);
  EXPECT_EQ(i.chunk_count, 1u);  // still one allocation from upstream
  EXPECT_EQ(i.pool_size, 64 * MiB);
  EXPECT_EQ(i.free_blocks, 3u);  // the rest of each slab, and what no stream took
  // A stream's own frees come straight back to it, within its slab.
  pool->deallocate(a, 256 * KiB, 0, 1);
  EXPECT_EQ(pool->allocate(256 * KiB, 0, 1), a);
  pool->deallocate(a, 256 * KiB, 0, 1);
  pool->deallocate(b, 256 * KiB, 0, 2);
  EXPECT_EQ(up->violations(), 0u);
}

TEST(PoolSlabs, SlabsGrowGeometricallyPerStream) {
  auto up = std::make_shared<test::OrderedUpstream>();
  auto pool = make_pool(up, 64 * MiB, 0, MiB);
  // Stream 1 takes slabs of 1, 1, 2 and 4 MiB: 8 MiB for 8 blocks of 1 MiB.
  std::vector<void*> ones;
  for (int i = 0; i < 7; ++i) ones.push_back(pool->allocate(MiB, 0, 1));
  void* other = pool->allocate(MiB, 0, 2);  // stream 2's first slab comes after them
  std::uintptr_t base = ~std::uintptr_t{0};
  for (void* p : ones) base = std::min(base, reinterpret_cast<std::uintptr_t>(p));
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(other), base + 8 * MiB);
  void* eighth = pool->allocate(MiB, 0, 1);  // the rest of stream 1's 4 MiB slab
  EXPECT_LT(reinterpret_cast<std::uintptr_t>(eighth), base + 8 * MiB);
  ones.push_back(eighth);
  for (void* p : ones) pool->deallocate(p, MiB, 0, 1);
  pool->deallocate(other, MiB, 0, 2);
}

// Out of memory, every stream's slab comes back together: a request as large
// as the whole initial size fits again after the streams cut it into slabs.
void slabs_join_when_out_of_memory(bool bounded) {
  auto up = std::make_shared<test::OrderedUpstream>();
  if (!bounded) up->set_limit(8 * MiB);
  auto pool = make_pool(up, 8 * MiB, bounded ? 8 * MiB : 0, MiB);
  for (core::stream_t s = 1; s <= 4; ++s) {
    void* p = pool->allocate(256 * KiB, 0, s);
    up->allocated(p, 256 * KiB, s);
    up->freed(p, 256 * KiB, s);
    pool->deallocate(p, 256 * KiB, 0, s);
  }
  EXPECT_GE(core::pool_info(*pool).free_blocks, 5u);  // four slabs and the untouched rest
  EXPECT_LT(core::pool_info(*pool).largest_free_block, 8 * MiB);
  void* all = pool->allocate(8 * MiB, 0, 5);
  up->allocated(all, 8 * MiB, 5);  // checks that stream 5 waited for streams 1-4
  EXPECT_EQ(up->violations(), 0u);
  core::PoolInfo i = core::pool_info(*pool);
  EXPECT_EQ(i.pool_size, 8 * MiB);
  EXPECT_EQ(i.free_blocks, 0u);
  up->freed(all, 8 * MiB, 5);
  pool->deallocate(all, 8 * MiB, 0, 5);
  i = core::pool_info(*pool);
  EXPECT_EQ(i.free_blocks, 1u);
  EXPECT_EQ(i.largest_free_block, 8 * MiB);
  pool->trim();  // one extent, wholly free: given back whole
  EXPECT_EQ(core::pool_info(*pool).pool_size, 0u);
  EXPECT_EQ(up->outstanding_count(), 0u);
  EXPECT_EQ(up->violations(), 0u);
}

TEST(PoolSlabs, SlabsJoinAroundAllocatedBlocks) {
  auto up = std::make_shared<test::OrderedUpstream>();
  auto pool = make_pool(up, 8 * MiB, 8 * MiB, MiB);
  void* kept = pool->allocate(256 * KiB, 0, 1);  // stays allocated in stream 1's slab, at its start
  up->allocated(kept, 256 * KiB, 1);
  for (core::stream_t s = 2; s <= 3; ++s) {
    void* p = pool->allocate(256 * KiB, 0, s);
    up->allocated(p, 256 * KiB, s);
    up->freed(p, 256 * KiB, s);
    pool->deallocate(p, 256 * KiB, 0, s);
  }
  // 7.5 MiB fits only in the free memory after `kept`, across three slab seams.
  const std::size_t big = 7 * MiB + 512 * KiB;
  void* p = pool->allocate(big, 0, 5);
  up->allocated(p, big, 5);
  EXPECT_EQ(p, static_cast<char*>(kept) + 256 * KiB);
  EXPECT_EQ(up->violations(), 0u);
  EXPECT_EQ(core::pool_info(*pool).free_blocks, 1u);  // the last 256 KiB
  up->freed(p, big, 5);
  pool->deallocate(p, big, 0, 5);
  up->freed(kept, 256 * KiB, 1);
  pool->deallocate(kept, 256 * KiB, 0, 1);
  const core::PoolInfo i = core::pool_info(*pool);
  EXPECT_EQ(i.free_blocks, 2u);  // one chunk again, but freed on two streams: not merged before a wait
  EXPECT_EQ(i.largest_free_block, 8 * MiB - 256 * KiB);
  void* all = pool->allocate(8 * MiB, 0, 6);  // out of memory: takes both after waiting, merges them
  up->allocated(all, 8 * MiB, 6);
  EXPECT_EQ(all, kept);
  EXPECT_EQ(up->violations(), 0u);
  up->freed(all, 8 * MiB, 6);
  pool->deallocate(all, 8 * MiB, 0, 6);
  EXPECT_EQ(core::pool_info(*pool).free_blocks, 1u);
}

TEST(PoolSlabs, SlabsJoinWhenTheMaximumIsReached) { slabs_join_when_out_of_memory(true); }
TEST(PoolSlabs, SlabsJoinWhenUpstreamRunsOut) { slabs_join_when_out_of_memory(false); }

TEST(PoolSlabs, TrimGivesBackTheInitialSizeOnlyWhenEverySlabIsFree) {
  auto up = std::make_shared<test::OrderedUpstream>();
  auto pool = make_pool(up, 16 * MiB, 0, MiB);
  void* a = pool->allocate(256 * KiB, 0, 1);
  void* b = pool->allocate(256 * KiB, 0, 2);
  pool->deallocate(a, 256 * KiB, 0, 1);
  pool->trim();  // stream 2's slab is in use: the extent stays whole
  EXPECT_EQ(core::pool_info(*pool).pool_size, 16 * MiB);
  EXPECT_EQ(up->upstream_frees(), 0u);
  EXPECT_EQ(up->outstanding_count(), 1u);
  up->freed(b, 256 * KiB, 2);
  pool->deallocate(b, 256 * KiB, 0, 2);
  pool->trim();
  EXPECT_EQ(core::pool_info(*pool).pool_size, 0u);
  EXPECT_EQ(core::pool_info(*pool).chunk_count, 0u);
  EXPECT_EQ(up->upstream_frees(), 1u);  // one call, for the whole initial size
  EXPECT_EQ(up->outstanding_count(), 0u);
  EXPECT_EQ(up->violations(), 0u);
  void* c = pool->allocate(100, 0, 3);  // grows again after a full trim
  pool->deallocate(c, 100, 0, 3);
}

TEST(PoolSlabs, ForeignAndRepeatedFreesAreRejectedWithSlabs) {
  auto up = std::make_shared<test::OrderedUpstream>();
  auto pool = make_pool(up, 16 * MiB, 0, MiB);
  void* a = pool->allocate(4096, 0, 1);
  void* b = pool->allocate(4096, 0, 2);
  const core::PoolInfo before = core::pool_info(*pool);
  EXPECT_THROW(pool->deallocate(static_cast<char*>(a) + 256, 4096, 0, 1), core::Error);  // inside a block
  EXPECT_THROW(pool->deallocate(b, 8192, 0, 2), core::Error);                            // wrong size
  pool->deallocate(b, 4096, 0, 1);  // freed on another stream than its slab's: allowed
  EXPECT_THROW(pool->deallocate(b, 4096, 0, 2), core::Error);  // already freed
  const core::PoolInfo after = core::pool_info(*pool);
  EXPECT_EQ(after.pool_size, before.pool_size);
  EXPECT_EQ(after.free_bytes, before.free_bytes + 4096);
  pool->deallocate(a, 4096, 0, 1);
}

}  // namespace
