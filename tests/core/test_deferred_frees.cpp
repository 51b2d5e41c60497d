// Resource::deallocate_after (record_stream): memory used on other streams is
// handed out again only once every one of them has finished the work it had
// when the memory was freed. Checked with OrderedUpstream's events: a use is
// stamped with used(), a stream's work finishes with complete(), and every
// hand-out is checked against the uses (violations()).
#include <gtest/gtest.h>

#include <atomic>
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
using core::ResourcePtr;
using core::stream_t;
using test::MiB;

ResourcePtr make_pool(ResourcePtr upstream, std::size_t initial, std::size_t maximum = 0) {
  core::PoolOptions o;
  o.initial_size = initial;
  o.maximum_size = maximum;
  return core::make_pool_resource(std::move(upstream), o);
}

constexpr std::size_t kBlock = 4096;

// p handed out on `stream`, checked against every recorded use.
void* take(core::Resource& pool, test::OrderedUpstream& up, stream_t stream, std::size_t n = kBlock) {
  void* p = pool.allocate(n, 0, stream);
  up.allocated(p, n, stream);
  return p;
}

TEST(DeferredFrees, ReuseWaitsForEveryRecordedStream) {
  auto up = std::make_shared<test::OrderedUpstream>();
  auto pool = make_pool(up, MiB);
  void* p = take(*pool, *up, 1);
  up->used(p, kBlock, 2);
  up->used(p, kBlock, 3);
  const stream_t uses[] = {2, 3};
  pool->deallocate_after(p, kBlock, 0, 1, uses, 2);
  EXPECT_EQ(pool->deferred_frees(), 1u);
  EXPECT_EQ(pool->outstanding_count(), 1u);  // still waiting: still outstanding

  void* q = take(*pool, *up, 1);
  EXPECT_NE(q, p);
  up->complete(2);
  void* r = take(*pool, *up, 1);
  EXPECT_NE(r, p);  // stream 3 is still reading
  up->complete(3);
  void* s = take(*pool, *up, 1);  // on the stream it was freed on: the uses are all it needs
  EXPECT_EQ(s, p);
  EXPECT_EQ(pool->deferred_frees(), 0u);
  EXPECT_EQ(up->violations(), 0u);
  EXPECT_EQ(up->event_syncs(), 0u);  // the host never waited
  EXPECT_EQ(up->device_syncs(), 0u);
  for (void* x : {q, r, s}) pool->deallocate(x, kBlock, 0, 1);
}

TEST(DeferredFrees, AnotherStreamAlsoWaitsForTheStreamItWasFreedOn) {
  auto up = std::make_shared<test::OrderedUpstream>();
  auto pool = make_pool(up, MiB);
  void* p = take(*pool, *up, 1);
  up->used(p, kBlock, 1);
  up->used(p, kBlock, 2);
  const stream_t uses[] = {2};
  pool->deallocate_after(p, kBlock, 0, 1, uses, 1);
  up->complete(2);
  void* q = take(*pool, *up, 5);  // stream 1's own work before the free is not done yet
  EXPECT_EQ(pool->deferred_frees(), 1u);
  up->complete(1);
  void* r = take(*pool, *up, 5);
  EXPECT_EQ(pool->deferred_frees(), 0u);
  EXPECT_EQ(up->violations(), 0u);
  pool->deallocate(q, kBlock, 0, 5);
  pool->deallocate(r, kBlock, 0, 5);
}

TEST(DeferredFrees, OutOfMemoryWaitsForTheRecordedStreamsAndRetries) {
  auto up = std::make_shared<test::OrderedUpstream>();
  auto pool = make_pool(up, MiB, MiB);  // one block's worth, no growth
  void* p = take(*pool, *up, 1, MiB);
  up->used(p, MiB, 2);
  const stream_t uses[] = {2};
  pool->deallocate_after(p, MiB, 0, 1, uses, 1);
  void* q = take(*pool, *up, 3, MiB);  // only p's memory exists: the host waits, then it is reused
  EXPECT_EQ(q, p);
  EXPECT_GT(up->event_syncs(), 0u);
  EXPECT_EQ(up->violations(), 0u);
  pool->deallocate(q, MiB, 0, 3);
}

TEST(DeferredFrees, ManyStreamsOnOneBlockDuplicatesAndTheFreeStreamItself) {
  auto up = std::make_shared<test::OrderedUpstream>();
  auto pool = make_pool(up, MiB);
  void* p = take(*pool, *up, 100);
  std::vector<stream_t> uses;
  for (stream_t s = 1; s <= 32; ++s) {
    up->used(p, kBlock, s);
    uses.push_back(s);
    uses.push_back(s);  // recorded twice
  }
  uses.push_back(100);  // the allocation stream itself
  uses.push_back(0);    // the default stream
  const std::size_t events_before = up->events_created();
  pool->deallocate_after(p, kBlock, 0, 100, uses.data(), uses.size());
  EXPECT_EQ(up->events_created() - events_before, 34u);  // 32 streams, 0, and the free stream
  for (stream_t s = 0; s <= 31; ++s) up->complete(s);
  void* q = take(*pool, *up, 100);
  EXPECT_NE(q, p);  // stream 32 is not done
  up->complete(32);
  void* r = take(*pool, *up, 100);
  EXPECT_EQ(r, p);
  EXPECT_EQ(up->violations(), 0u);
  pool->deallocate(q, kBlock, 0, 100);
  pool->deallocate(r, kBlock, 0, 100);
}

TEST(DeferredFrees, UsesOnlyOnTheFreeStreamOrHostMemoryFreeAtOnce) {
  auto up = std::make_shared<test::OrderedUpstream>();
  auto pool = make_pool(up, MiB);
  void* p = take(*pool, *up, 4);
  const stream_t same[] = {4, 4};
  pool->deallocate_after(p, kBlock, 0, 4, same, 2);
  EXPECT_EQ(pool->deferred_frees(), 0u);
  EXPECT_EQ(pool->outstanding_count(), 0u);
  pool->deallocate_after(nullptr, 0, 0, 4, nullptr, 0);  // like deallocate: a no-op

  auto host = make_pool(core::make_host_resource(), MiB);
  void* h = host->allocate(kBlock, 0, 0);
  const stream_t uses[] = {1, 2, 3};
  host->deallocate_after(h, kBlock, 0, 0, uses, 3);  // host memory: no streams to wait for
  EXPECT_EQ(host->deferred_frees(), 0u);
  EXPECT_EQ(host->allocate(kBlock, 0, 0), h);
  host->deallocate(h, kBlock, 0, 0);
}

TEST(DeferredFrees, BadArgumentsAreRefusedWithNothingChanged) {
  auto up = std::make_shared<test::OrderedUpstream>();
  auto pool = make_pool(up, MiB);
  void* p = take(*pool, *up, 1);
  const stream_t uses[] = {2};
  EXPECT_THROW(pool->deallocate_after(nullptr, kBlock, 0, 1, uses, 1), core::Error);
  EXPECT_THROW(pool->deallocate_after(p, 0, 0, 1, uses, 1), core::Error);
  EXPECT_THROW(pool->deallocate_after(p, kBlock, 3, 1, uses, 1), core::Error);  // not a power of two
  EXPECT_THROW(pool->deallocate_after(p, kBlock, 0, 1, nullptr, 1), core::Error);
  EXPECT_EQ(pool->outstanding_count(), 1u);
  EXPECT_EQ(pool->deferred_frees(), 0u);
  pool->deallocate(p, kBlock, 0, 1);
}

TEST(DeferredFrees, AFailedRecordSynchronisesTheDeviceAndFreesAtOnce) {
  auto up = std::make_shared<test::OrderedUpstream>();
  auto pool = make_pool(up, MiB);
  void* p = take(*pool, *up, 1);
  up->used(p, kBlock, 2);
  up->fail_event_records(true);
  const stream_t uses[] = {2};
  pool->deallocate_after(p, kBlock, 0, 1, uses, 1);
  up->fail_event_records(false);
  EXPECT_EQ(up->device_syncs(), 1u);
  EXPECT_EQ(pool->deferred_frees(), 0u);
  void* q = take(*pool, *up, 7);
  EXPECT_EQ(up->violations(), 0u);
  pool->deallocate(q, kBlock, 0, 7);
}

TEST(DeferredFrees, AFailedQueryKeepsTheBlockWaitingAndTheAllocationGoesOn) {
  auto up = std::make_shared<test::OrderedUpstream>();
  auto pool = make_pool(up, MiB);
  void* p = take(*pool, *up, 1);
  up->used(p, kBlock, 2);
  const stream_t uses[] = {2};
  pool->deallocate_after(p, kBlock, 0, 1, uses, 1);
  up->complete(2);
  up->fail_event_queries(true);
  void* q = take(*pool, *up, 1);
  EXPECT_NE(q, p);
  EXPECT_EQ(pool->deferred_frees(), 1u);
  EXPECT_THROW(pool->finish_deferred_frees(false), core::Error);
  up->fail_event_queries(false);
  void* r = take(*pool, *up, 1);
  EXPECT_EQ(r, p);
  EXPECT_EQ(up->violations(), 0u);
  pool->deallocate(q, kBlock, 0, 1);
  pool->deallocate(r, kBlock, 0, 1);
}

TEST(DeferredFrees, AReleasedResourceLivesUntilItsWaitingFreesAreDone) {
  auto up = std::make_shared<test::OrderedUpstream>();
  auto pool = make_pool(up, MiB);
  void* p = take(*pool, *up, 1);
  up->used(p, kBlock, 2);
  const stream_t uses[] = {2};
  pool->deallocate_after(p, kBlock, 0, 1, uses, 1);
  std::weak_ptr<core::Resource> alive = pool;
  pool.reset();  // the user lets go while stream 2 still reads p
  EXPECT_FALSE(alive.expired());
  EXPECT_EQ(core::finish_all_deferred_frees(false), 0u);  // not done: nothing freed
  EXPECT_FALSE(alive.expired());
  up->complete(1);
  up->complete(2);
  EXPECT_EQ(core::finish_all_deferred_frees(false), 1u);
  EXPECT_TRUE(alive.expired());  // freed, then destroyed: its memory went back upstream
  EXPECT_EQ(up->outstanding_count(), 0u);
}

TEST(DeferredFrees, FinishAllWithWaitBlocksUntilEveryStreamIsDone) {
  auto up = std::make_shared<test::OrderedUpstream>();
  auto pool = make_pool(up, MiB);
  void* p = take(*pool, *up, 1);
  up->used(p, kBlock, 2);
  const stream_t uses[] = {2};
  pool->deallocate_after(p, kBlock, 0, 1, uses, 1);
  EXPECT_EQ(pool->finish_deferred_frees(true), 1u);
  EXPECT_GT(up->event_syncs(), 0u);
  EXPECT_EQ(pool->outstanding_count(), 0u);
  void* q = take(*pool, *up, 9);
  EXPECT_EQ(up->violations(), 0u);
  pool->deallocate(q, kBlock, 0, 9);
}

TEST(DeferredFrees, AnAdaptorCountsTheBlockUntilItIsFreed) {
  auto up = std::make_shared<test::OrderedUpstream>();
  auto pool = make_pool(up, MiB);
  auto stats = core::make_statistics_adaptor(pool);
  void* p = stats->allocate(kBlock, 0, 1);
  up->allocated(p, kBlock, 1);
  up->used(p, kBlock, 2);
  const stream_t uses[] = {2};
  stats->deallocate_after(p, kBlock, 0, 1, uses, 1);
  EXPECT_EQ(stats->outstanding_bytes(), kBlock);
  EXPECT_EQ(pool->outstanding_count(), 1u);
  void* q = take(*stats, *up, 1);
  EXPECT_NE(q, p);
  up->complete(2);
  void* r = take(*stats, *up, 1);
  EXPECT_EQ(r, p);
  EXPECT_EQ(up->violations(), 0u);
  stats->deallocate(q, kBlock, 0, 1);
  stats->deallocate(r, kBlock, 0, 1);
  EXPECT_EQ(pool->outstanding_count(), 0u);
}

TEST(DeferredFrees, ThreadsOnTheirOwnStreamsNeverGetMemoryAStreamStillUses) {
  auto up = std::make_shared<test::OrderedUpstream>();
  auto pool = make_pool(up, 4 * MiB, 4 * MiB);
  constexpr int kThreads = 4;
  std::vector<std::thread> ts;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      const stream_t own = 10 + static_cast<stream_t>(t);
      const stream_t side = 100 + static_cast<stream_t>(t);
      for (int i = 0; i < 400; ++i) {
        const std::size_t n = kBlock << (rng() % 4);
        void* p = nullptr;
        try {
          p = take(*pool, *up, own, n);
        } catch (const core::OutOfMemory&) {
          failures.fetch_add(1);
          continue;
        }
        up->used(p, n, side);
        const stream_t uses[] = {side};
        pool->deallocate_after(p, n, 0, own, uses, 1);
        if (rng() % 3 == 0) up->complete(side);
        if (rng() % 5 == 0) up->complete(own);
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(failures.load(), 0);  // the out-of-memory path waits for the waiting frees
  EXPECT_EQ(up->violations(), 0u);
  pool->finish_deferred_frees(true);
  EXPECT_EQ(pool->outstanding_count(), 0u);
}

}  // namespace
