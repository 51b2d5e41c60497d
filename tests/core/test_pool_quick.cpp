// The pool's quick path (Resource::try_allocate_quick/try_deallocate_quick,
// resource.hpp): what the Python frontend calls with the GIL held. It must
// refuse - at once, changing nothing - wherever allocate()/deallocate() would
// wait, call upstream, record an event or report an error, and otherwise do
// exactly what they do, with the same counters.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "fakes.hpp"
#include "tether_core/host.hpp"
#include "tether_core/pool.hpp"
#include "test_util.hpp"

namespace {

using namespace tether;
using core::PoolOptions;
using test::KiB;
using test::MiB;

core::ResourcePtr host_pool(std::size_t initial = MiB, core::ResourcePtr up = core::make_host_resource()) {
  PoolOptions o;
  o.initial_size = initial;
  return core::make_pool_resource(std::move(up), o);
}

TEST(PoolQuick, TheRepeatedSameSizePairIsServed) {
  auto pool = host_pool();
  void* p = pool->allocate(256, 0, 0);
  pool->deallocate(p, 256, 0, 0);
  for (int i = 0; i < 100; ++i) {
    void* q = pool->try_allocate_quick(256, 0, 0);
    ASSERT_NE(q, nullptr) << i;
    EXPECT_EQ(q, p);  // the quick cache's block, again
    EXPECT_EQ(pool->outstanding_count(), 1u);
    EXPECT_EQ(pool->outstanding_bytes(), 256u);
    ASSERT_TRUE(pool->try_deallocate_quick(q, 256, 0, 0)) << i;
    EXPECT_EQ(pool->outstanding_count(), 0u);
  }
}

TEST(PoolQuick, OwnFreeBlocksServeOtherSizesWithoutGrowing) {
  auto up = std::make_shared<test::LimitedUpstream>(64 * MiB);
  auto pool = host_pool(MiB, up);
  const std::size_t asked = up->requests().size();
  void* a = pool->try_allocate_quick(1000, 0, 0);  // the quick cache is empty: the pool's own free blocks
  ASSERT_NE(a, nullptr);
  void* b = pool->try_allocate_quick(100 * KiB, 4096, 0);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b) % 4096, 0u);
  EXPECT_TRUE(pool->try_deallocate_quick(a, 1000, 0, 0));
  EXPECT_TRUE(pool->try_deallocate_quick(b, 100 * KiB, 4096, 0));
  EXPECT_EQ(up->requests().size(), asked);  // never upstream
  EXPECT_EQ(core::pool_info(*pool).free_bytes, MiB);
}

TEST(PoolQuick, RefusesWhatWouldGrowTheUpstreamOrIsMalformed) {
  auto up = std::make_shared<test::LimitedUpstream>(64 * MiB);
  auto pool = host_pool(0, up);  // nothing held: every first allocation grows
  EXPECT_EQ(pool->try_allocate_quick(256, 0, 0), nullptr);
  EXPECT_TRUE(up->requests().empty());
  EXPECT_EQ(pool->outstanding_count(), 0u);
  // Malformed requests are the normal path's to report.
  EXPECT_EQ(pool->try_allocate_quick(0, 0, 0), nullptr);
  EXPECT_EQ(pool->try_allocate_quick(256, 3, 0), nullptr);
  EXPECT_EQ(pool->try_allocate_quick(SIZE_MAX, 0, 0), nullptr);
  void* p = pool->allocate(256, 0, 0);  // grows
  EXPECT_FALSE(pool->try_deallocate_quick(nullptr, 256, 0, 0));
  EXPECT_FALSE(pool->try_deallocate_quick(p, 0, 0, 0));
  EXPECT_FALSE(pool->try_deallocate_quick(p, 512, 0, 0));  // size mismatch: refused, not reported
  EXPECT_FALSE(pool->try_deallocate_quick(p, 256, 512, 0));
  EXPECT_EQ(pool->outstanding_count(), 1u);
  EXPECT_TRUE(pool->try_deallocate_quick(p, 256, 0, 0));
  // A second free: refused by the quick path, reported by the normal one.
  EXPECT_FALSE(pool->try_deallocate_quick(p, 256, 0, 0));
  EXPECT_TRUE(test::fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { pool->deallocate(p, 256, 0, 0); }));
  int x = 0;
  EXPECT_FALSE(pool->try_deallocate_quick(&x, 256, 0, 0));  // not the pool's
  EXPECT_EQ(pool->outstanding_count(), 0u);
}

TEST(PoolQuick, CountersAndHoldingsMatchTheNormalPath) {
  auto normal = host_pool();
  auto quick = host_pool();
  const std::size_t sizes[] = {256, 256, 1000, 16 * KiB, 300 * KiB, 256, 20, 64 * KiB};
  std::vector<std::pair<void*, std::size_t>> n_live, q_live;
  for (int round = 0; round < 3; ++round) {
    for (std::size_t s : sizes) {
      n_live.emplace_back(normal->allocate(s, 0, 0), s);
      void* q = quick->try_allocate_quick(s, 0, 0);
      if (q == nullptr) q = quick->allocate(s, 0, 0);
      q_live.emplace_back(q, s);
      EXPECT_EQ(quick->outstanding_count(), normal->outstanding_count());
      EXPECT_EQ(quick->outstanding_bytes(), normal->outstanding_bytes());
      EXPECT_EQ(quick->caller_outstanding_bytes(), normal->caller_outstanding_bytes());
    }
    for (std::size_t i = 0; i < n_live.size(); i += 2) {
      normal->deallocate(n_live[i].first, n_live[i].second, 0, 0);
      if (!quick->try_deallocate_quick(q_live[i].first, q_live[i].second, 0, 0))
        quick->deallocate(q_live[i].first, q_live[i].second, 0, 0);
      EXPECT_EQ(quick->outstanding_count(), normal->outstanding_count());
      EXPECT_EQ(quick->outstanding_bytes(), normal->outstanding_bytes());
    }
    std::vector<std::pair<void*, std::size_t>> n_keep, q_keep;
    for (std::size_t i = 1; i < n_live.size(); i += 2) {
      n_keep.push_back(n_live[i]);
      q_keep.push_back(q_live[i]);
    }
    n_live.swap(n_keep);
    q_live.swap(q_keep);
  }
  for (std::size_t i = 0; i < n_live.size(); ++i) {
    normal->deallocate(n_live[i].first, n_live[i].second, 0, 0);
    if (!quick->try_deallocate_quick(q_live[i].first, q_live[i].second, 0, 0))
      quick->deallocate(q_live[i].first, q_live[i].second, 0, 0);
  }
  EXPECT_EQ(quick->outstanding_count(), 0u);
  EXPECT_EQ(normal->outstanding_count(), 0u);
  const core::PoolInfo a = core::pool_info(*normal), b = core::pool_info(*quick);
  EXPECT_EQ(a.pool_size, b.pool_size);
  EXPECT_EQ(a.free_bytes, b.free_bytes);
  EXPECT_EQ(a.chunk_count, b.chunk_count);
}

TEST(PoolQuick, OtherResourcesHaveNone) {
  auto host = core::make_host_resource();
  EXPECT_EQ(host->try_allocate_quick(256, 0, 0), nullptr);
  void* p = host->allocate(256, 0, 0);
  EXPECT_FALSE(host->try_deallocate_quick(p, 256, 0, 0));
  host->deallocate(p, 256, 0, 0);
}

// ---- stream-ordered pools (the pretend CUDA upstream) -------------------------------------

core::ResourcePtr ordered_pool(const std::shared_ptr<test::OrderedUpstream>& up, std::size_t maximum = 0) {
  PoolOptions o;
  o.initial_size = 4 * MiB;
  o.maximum_size = maximum;
  return core::make_pool_resource(up, o);
}

TEST(PoolQuick, AnotherStreamsBlockIsRefused) {
  auto up = std::make_shared<test::OrderedUpstream>();
  auto pool = ordered_pool(up);
  void* p = pool->allocate(256, 0, 1);
  EXPECT_FALSE(pool->try_deallocate_quick(p, 256, 0, 2));  // freed on stream 2: the world's path
  EXPECT_EQ(pool->outstanding_count(), 1u);
  pool->deallocate(p, 256, 0, 2);
  EXPECT_EQ(pool->outstanding_count(), 0u);
}

TEST(PoolQuick, AStreamWithoutAnArenaAtHandIsRefused) {
  auto up = std::make_shared<test::OrderedUpstream>();
  auto pool = ordered_pool(up);
  EXPECT_EQ(pool->try_allocate_quick(256, 0, 7), nullptr);  // finding (making) the arena takes the pool's mutex
  void* p = pool->allocate(256, 0, 7);
  pool->deallocate(p, 256, 0, 7);
  void* q = pool->try_allocate_quick(256, 0, 7);
  EXPECT_EQ(q, p);
  EXPECT_TRUE(pool->try_deallocate_quick(q, 256, 0, 7));
}

TEST(PoolQuick, NeverRecordsAnEvent) {
  auto up = std::make_shared<test::OrderedUpstream>();
  auto pool = ordered_pool(up);
  void* p = pool->allocate(512, 0, 1);
  pool->deallocate(p, 512, 0, 1);
  const std::size_t records = up->event_records();
  int refused = 0;
  for (int i = 0; i < 1000; ++i) {
    const std::size_t n = 256 + 256 * static_cast<std::size_t>(i % 70);  // also sizes the quick cache does not keep
    void* q = pool->try_allocate_quick(n, 0, 1);
    if (q == nullptr) q = pool->allocate(n, 0, 1);
    if (!pool->try_deallocate_quick(q, n, 0, 1)) {
      ++refused;  // a record is due (every kRecordEvery uncached frees): the normal path records it
      const std::size_t before = up->event_records();
      pool->deallocate(q, n, 0, 1);
      EXPECT_GE(up->event_records(), before);
    }
  }
  EXPECT_GT(refused, 0);
  EXPECT_EQ(up->violations(), 0u);
  (void)records;
  // The quick path's own frees recorded nothing: every record came with a refusal.
  EXPECT_LE(up->event_records() - records, static_cast<std::size_t>(refused));
}

TEST(PoolQuick, ABoundedStreamOrderedPoolRecordsAtEveryFreeSoTheQuickFreeRefuses) {
  auto up = std::make_shared<test::OrderedUpstream>();
  auto pool = ordered_pool(up, 8 * MiB);
  void* p = pool->allocate(256, 0, 1);
  const std::size_t records = up->event_records();
  EXPECT_FALSE(pool->try_deallocate_quick(p, 256, 0, 1));
  EXPECT_EQ(up->event_records(), records);
  pool->deallocate(p, 256, 0, 1);
  EXPECT_GT(up->event_records(), records);
}

// An upstream whose device synchronisation blocks until the test lets it go:
// trim() waits there with the pool's world (every arena lock) held.
class StallingUpstream : public test::OrderedUpstream {
 public:
  std::promise<void> entered;
  std::shared_future<void> go;
  std::atomic<bool> stall{false};

 private:
  void synchronize_device() override {
    if (stall.exchange(false)) {
      entered.set_value();
      go.wait();
    }
    test::OrderedUpstream::synchronize_device();
  }
};

TEST(PoolQuick, AnArenaLockHeldByAnotherThreadIsRefusedWithoutWaiting) {
  auto up = std::make_shared<StallingUpstream>();
  std::promise<void> release;
  up->go = release.get_future().share();
  PoolOptions o;
  o.growth_size = MiB;
  auto pool = core::make_pool_resource(up, o);
  void* kept = pool->allocate(256, 0, 1);  // grows a chunk of stream 1's
  void* q = pool->allocate(512, 0, 1);
  pool->deallocate(q, 512, 0, 1);
  void* other = pool->allocate(2 * MiB, 0, 1);  // a second chunk, freed: trim gives it back
  pool->deallocate(other, 2 * MiB, 0, 1);
  up->stall = true;
  std::thread trimmer([&] { pool->trim(); });  // fresh frees: waits for the device under the world
  up->entered.get_future().wait();
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(pool->try_allocate_quick(512, 0, 1), nullptr);
  EXPECT_FALSE(pool->try_deallocate_quick(kept, 256, 0, 1));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_EQ(pool->outstanding_count(), 1u);
  release.set_value();
  trimmer.join();
  EXPECT_TRUE(pool->try_deallocate_quick(kept, 256, 0, 1));
  EXPECT_EQ(pool->outstanding_count(), 0u);
  EXPECT_EQ(up->violations(), 0u);
}

}  // namespace
