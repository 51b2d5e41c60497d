// ArenaResource: per-thread arenas over the global arena, large requests,
// defragmentation before out-of-memory, trim, checked frees, and stream
// order over a pretend CUDA upstream (vector clocks in fakes.hpp).
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "fakes.hpp"
#include "tether_core/arena.hpp"
#include "tether_core/host.hpp"
#include "tether_core/statistics.hpp"
#include "test_util.hpp"

namespace {

using namespace tether;
using test::fails_with;
using test::KiB;
using test::MiB;

core::ResourcePtr arena(core::ResourcePtr up, std::size_t arena_size = 0, std::size_t superblock = 0) {
  core::ArenaOptions o;
  o.arena_size = arena_size;
  o.superblock_size = superblock;
  return core::make_arena_resource(std::move(up), o);
}

TEST(Arena, OptionsAreValidated) {
  auto host = core::make_host_resource();
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { arena(nullptr); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { arena(host, 0, 3 * MiB); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { arena(host, 0, 4 * KiB); }));
  auto a = arena(host);
  EXPECT_STREQ(a->name(), "arena");
  EXPECT_EQ(a->properties().kind, TETHER_RESOURCE_KIND_ARENA);
  EXPECT_TRUE(a->properties().host_accessible);
  EXPECT_TRUE(fails_with(TETHER_ERROR_NOT_SUPPORTED, [&] { core::arena_info(*host); }));
}

TEST(Arena, ArenaSizeIsTakenUpFrontAndNeverExceeded) {
  auto stats = core::make_statistics_adaptor(core::make_host_resource());
  auto a = arena(stats, 4 * MiB);
  EXPECT_EQ(core::statistics_of(*stats).current_bytes, 4 * MiB);
  core::ArenaInfo info = core::arena_info(*a);
  EXPECT_EQ(info.arena_size, 4 * MiB);
  EXPECT_EQ(info.global_free_bytes, 4 * MiB);
  EXPECT_EQ(info.superblock_size, MiB);
  void* big = a->allocate(3 * MiB, 0, 0);
  EXPECT_THROW(a->allocate(2 * MiB, 0, 0), core::OutOfMemory);
  EXPECT_EQ(core::statistics_of(*stats).current_bytes, 4 * MiB);  // never grew
  void* small = a->allocate(1000, 0, 0);
  info = core::arena_info(*a);
  EXPECT_EQ(info.large_bytes, 3 * MiB);
  EXPECT_EQ(info.arena_superblocks, 1u);
  EXPECT_EQ(info.arena_count, 1u);
  a->deallocate(big, 3 * MiB, 0, 0);
  a->deallocate(small, 1000, 0, 0);
  EXPECT_EQ(a->outstanding_count(), 0u);
}

TEST(Arena, GrowsOnDemandAndTrimGivesEverythingBack) {
  auto stats = core::make_statistics_adaptor(core::make_host_resource());
  auto a = arena(stats);
  EXPECT_EQ(core::statistics_of(*stats).current_bytes, 0u);
  std::vector<void*> live;
  for (int i = 0; i < 100; ++i) live.push_back(a->allocate(10 * KiB, 0, 0));
  void* big = a->allocate(40 * MiB, 0, 0);  // beyond the first chunk: a second one
  EXPECT_GE(core::arena_info(*a).chunk_count, 2u);
  a->trim();  // everything in use: nothing to give back
  EXPECT_GT(core::statistics_of(*stats).current_bytes, 40 * MiB);
  for (void* p : live) a->deallocate(p, 10 * KiB, 0, 0);
  a->deallocate(big, 40 * MiB, 0, 0);
  a->trim();
  EXPECT_EQ(core::statistics_of(*stats).current_bytes, 0u);
  EXPECT_EQ(core::arena_info(*a).arena_size, 0u);
  void* again = a->allocate(100, 0, 0);  // and it grows again
  a->deallocate(again, 100, 0, 0);
}

TEST(Arena, SmallAllocationsShareASuperblockAndCoalesce) {
  auto a = arena(core::make_host_resource(), 2 * MiB);
  void* p = a->allocate(100 * KiB, 0, 0);
  void* q = a->allocate(100 * KiB, 0, 0);
  const auto pa = reinterpret_cast<std::uintptr_t>(p), qa = reinterpret_cast<std::uintptr_t>(q);
  EXPECT_EQ(pa / MiB, qa / MiB);  // one superblock
  a->deallocate(p, 100 * KiB, 0, 0);
  a->deallocate(q, 100 * KiB, 0, 0);
  void* whole = a->allocate(512 * KiB, 0, 0);  // coalesced back: the largest small request fits at the start
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(whole) % MiB, 0u);
  a->deallocate(whole, 512 * KiB, 0, 0);
}

TEST(Arena, DefragmentsOtherThreadsArenasBeforeReportingOutOfMemory) {
  auto a = arena(core::make_host_resource(), 4 * MiB);
  // Four threads each leave a wholly free superblock cached in their own arena.
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      void* p = a->allocate(64 * KiB, 0, 0);
      a->deallocate(p, 64 * KiB, 0, 0);
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(core::arena_info(*a).arena_superblocks, 4u);
  EXPECT_EQ(core::arena_info(*a).global_free_bytes, 0u);
  void* all = a->allocate(4 * MiB, 0, 0);  // needs every superblock, contiguous: coalesced again
  EXPECT_EQ(core::arena_info(*a).arena_superblocks, 0u);
  a->deallocate(all, 4 * MiB, 0, 0);
}

TEST(Arena, FreesAreChecked) {
  auto host = core::make_host_resource();
  auto a = arena(host, 4 * MiB);
  void* small = a->allocate(1000, 0, 0);
  void* large = a->allocate(2 * MiB, 0, 0);
  void* foreign = host->allocate(1000, 0, 0);
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { a->deallocate(foreign, 1000, 0, 0); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { a->deallocate(small, 999, 0, 0); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { a->deallocate(small, 1000, 512, 0); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { a->deallocate(static_cast<char*>(small) + 256, 10, 0, 0); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { a->deallocate(large, MiB, 0, 0); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { a->deallocate(static_cast<char*>(large) + MiB, MiB, 0, 0); }));
  EXPECT_NE(test::error_message([&] { a->deallocate(foreign, 1000, 0, 0); }).find("not allocated by this arena"),
            std::string::npos);
  EXPECT_EQ(a->outstanding_count(), 2u);
  a->deallocate(small, 1000, 0, 0);
  a->deallocate(large, 2 * MiB, 0, 0);
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { a->deallocate(small, 1000, 0, 0); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { a->deallocate(large, 2 * MiB, 0, 0); }));
  host->deallocate(foreign, 1000, 0, 0);
}

TEST(Arena, ThreadsAllocateAndFreeAcrossEachOther) {
  auto a = arena(core::make_host_resource());
  constexpr int kThreads = 8;
  std::vector<std::vector<std::pair<unsigned char*, std::size_t>>> handoff(kThreads);
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      std::vector<std::pair<unsigned char*, std::size_t>> live;
      for (int i = 0; i < 4000; ++i) {
        if (live.size() < 32 && rng() % 3 != 0) {
          const std::size_t n = rng() % 7 == 0 ? MiB + rng() % MiB : 1 + rng() % 20000;
          auto* p = static_cast<unsigned char*>(a->allocate(n, 0, 0));
          p[0] = p[n - 1] = static_cast<unsigned char>(t);
          live.emplace_back(p, n);
        } else if (!live.empty()) {
          auto [p, n] = live.back();
          live.pop_back();
          if (p[0] != t || p[n - 1] != t) ++errors;
          a->deallocate(p, n, 0, 0);
        }
      }
      handoff[t] = std::move(live);
    });
  for (auto& th : threads) th.join();
  threads.clear();
  // Each thread frees what the next one allocated.
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      const int from = (t + 1) % kThreads;
      for (auto [p, n] : handoff[from]) {
        if (p[0] != from || p[n - 1] != from) ++errors;
        a->deallocate(p, n, 0, 0);
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors, 0);
  EXPECT_EQ(a->outstanding_count(), 0u);
  EXPECT_EQ(a->outstanding_bytes(), 0u);
  EXPECT_GE(core::arena_info(*a).arena_count, 1u);
}

TEST(ArenaStreams, HostArenasTreatAllStreamsAsOne) {
  auto a = arena(core::make_host_resource(), 2 * MiB);
  void* p = a->allocate(1000, 0, 7);
  a->deallocate(p, 1000, 0, 9);
  void* q = a->allocate(1000, 0, 11);
  EXPECT_EQ(p, q);
  a->deallocate(q, 1000, 0, 0);
}

TEST(ArenaStreams, EachStreamHasItsOwnArena) {
  auto up = std::make_shared<test::OrderedUpstream>();
  {
    auto a = arena(up, 4 * MiB);
    void* p1 = a->allocate(1000, 0, 1);
    void* p2 = a->allocate(1000, 0, 2);
    EXPECT_NE(reinterpret_cast<std::uintptr_t>(p1) / MiB, reinterpret_cast<std::uintptr_t>(p2) / MiB);
    EXPECT_EQ(core::arena_info(*a).arena_count, 2u);
    a->deallocate(p1, 1000, 0, 1);
    a->deallocate(p2, 1000, 0, 2);
  }
  EXPECT_EQ(up->violations(), 0u);
}

TEST(ArenaStreams, ALargeBlockFreedOnOneStreamIsReusedOnAnotherAfterAWaitOnItsEvent) {
  auto up = std::make_shared<test::OrderedUpstream>();
  {
    auto a = arena(up, 4 * MiB);
    void* p = a->allocate(4 * MiB, 0, 1);
    up->allocated(p, 4 * MiB, 1);
    up->freed(p, 4 * MiB, 1);
    a->deallocate(p, 4 * MiB, 0, 1);
    up->clear_waits();
    void* q = a->allocate(4 * MiB, 0, 2);
    up->allocated(q, 4 * MiB, 2);
    EXPECT_EQ(q, p);
    const auto waits = up->waits();
    ASSERT_EQ(waits.size(), 1u);
    EXPECT_EQ(waits[0], std::make_pair(core::stream_t{2}, core::stream_t{1}));
    EXPECT_EQ(up->device_syncs(), 0u);  // the host never blocked
    up->freed(q, 4 * MiB, 2);
    a->deallocate(q, 4 * MiB, 0, 2);
  }
  EXPECT_EQ(up->violations(), 0u);
  EXPECT_GT(up->cross_stream_reuses(), 0u);
}

TEST(ArenaStreams, TrimOrdersTheUpstreamFreeAfterEveryStream) {
  auto up = std::make_shared<test::OrderedUpstream>();
  auto a = arena(up);
  void* large = a->allocate(3 * MiB, 0, 1);
  void* small = a->allocate(4 * KiB, 0, 2);
  void* other = a->allocate(4 * KiB, 0, 3);
  up->allocated(large, 3 * MiB, 1);
  up->allocated(small, 4 * KiB, 2);
  up->allocated(other, 4 * KiB, 3);
  up->freed(large, 3 * MiB, 1);
  a->deallocate(large, 3 * MiB, 0, 1);
  up->freed(small, 4 * KiB, 2);
  a->deallocate(small, 4 * KiB, 0, 2);
  up->freed(other, 4 * KiB, 2);  // freed on another stream than its arena's
  a->deallocate(other, 4 * KiB, 0, 2);
  a->trim();  // the chunk goes back to the upstream on stream 0
  EXPECT_EQ(up->outstanding_count(), 0u);
  EXPECT_EQ(up->violations(), 0u);
  EXPECT_GE(up->device_syncs(), 1u);
}

// Random traffic on four streams (frees often on another stream than the
// allocation's) in an arena too small to avoid reuse: no range is ever used
// on a stream before it waited for the stream that freed it.
TEST(ArenaStreams, RandomCrossStreamReuseIsAlwaysOrdered) {
  auto up = std::make_shared<test::OrderedUpstream>();
  std::size_t ooms = 0;
  {
    auto a = arena(up, 4 * MiB, 64 * KiB);
    std::mt19937_64 rng(5);
    struct Live {
      void* p;
      std::size_t n;
    };
    std::vector<Live> live;
    for (int op = 0; op < 20000; ++op) {
      const core::stream_t s = 1 + rng() % 4;
      if (live.empty() || (live.size() < 40 && rng() % 2 == 0)) {
        // Whole superblocks for large requests: the fake cannot tell that a
        // large block's unused tail was never touched by the stream it went to.
        const std::size_t n = rng() % 8 == 0 ? 64 * KiB * (1 + rng() % 8) : 256 * (1 + rng() % 64);
        try {
          void* p = a->allocate(n, 0, s);
          up->allocated(p, n, s);
          live.push_back({p, n});
        } catch (const core::OutOfMemory&) {
          ++ooms;
        }
      } else {
        const std::size_t i = rng() % live.size();
        up->freed(live[i].p, live[i].n, s);
        a->deallocate(live[i].p, live[i].n, 0, s);
        live[i] = live.back();
        live.pop_back();
      }
    }
    for (const Live& l : live) {
      up->freed(l.p, l.n, 1);
      a->deallocate(l.p, l.n, 0, 1);
    }
    EXPECT_EQ(a->outstanding_count(), 0u);
  }
  EXPECT_EQ(up->violations(), 0u);
  EXPECT_GT(up->cross_stream_reuses(), 100u) << "the test did not exercise cross-stream reuse";
  EXPECT_GT(ooms, 0u) << "the arena was never under pressure";
  EXPECT_EQ(up->outstanding_count(), 0u);
}

TEST(ArenaStreams, ConcurrentStreamsReuseSafely) {
  auto up = std::make_shared<test::OrderedUpstream>();
  {
    auto a = arena(up, 2 * MiB, 64 * KiB);
    std::atomic<int> errors{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&, t] {
        const core::stream_t s = static_cast<core::stream_t>(t + 1);
        std::mt19937_64 rng(50 + t);
        std::vector<std::pair<void*, std::size_t>> live;
        try {
          for (int op = 0; op < 3000; ++op) {
            if (live.empty() || (live.size() < 8 && rng() % 2 == 0)) {
              const std::size_t n = 256 * (1 + rng() % 256);
              try {
                void* p = a->allocate(n, 0, s);
                up->allocated(p, n, s);
                live.emplace_back(p, n);
              } catch (const core::OutOfMemory&) {
              }
            } else {
              const std::size_t i = rng() % live.size();
              up->freed(live[i].first, live[i].second, s);
              a->deallocate(live[i].first, live[i].second, 0, s);
              live[i] = live.back();
              live.pop_back();
            }
          }
          for (auto& [p, n] : live) {
            up->freed(p, n, s);
            a->deallocate(p, n, 0, s);
          }
        } catch (...) {
          ++errors;
        }
      });
    for (auto& th : threads) th.join();
    EXPECT_EQ(errors, 0);
    EXPECT_EQ(a->outstanding_count(), 0u);
  }
  EXPECT_EQ(up->violations(), 0u);
  EXPECT_GT(up->cross_stream_reuses(), 0u);
  EXPECT_EQ(up->outstanding_count(), 0u);
}

}  // namespace
