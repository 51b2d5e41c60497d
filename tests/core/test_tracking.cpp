// TrackingAdaptor: what it records, the report, stacks, refused frees, threads.
#include <gtest/gtest.h>

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <thread>
#include <vector>

#include "tether_core/host.hpp"
#include "tether_core/pool.hpp"
#include "tether_core/tracking.hpp"
#include "test_util.hpp"

namespace {

using namespace tether;
using test::fails_with;

std::uint64_t gettid_now() { return static_cast<std::uint64_t>(::syscall(SYS_gettid)); }

TEST(Tracking, RecordsWhatIsOutstandingOldestFirst) {
  auto tr = core::make_tracking_adaptor(core::make_host_resource(), false);
  void* a = tr->allocate(100, 0, 7);
  void* b = tr->allocate(200, 512, 9);
  void* c = tr->allocate(300, 0, 0);
  tr->deallocate(b, 200, 512, 9);
  auto recs = core::tracking_outstanding(*tr);
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0].ptr, a);
  EXPECT_EQ(recs[0].size, 100u);
  EXPECT_EQ(recs[0].alignment, 256u);
  EXPECT_EQ(recs[0].stream, 7u);
  EXPECT_EQ(recs[0].thread_id, gettid_now());
  EXPECT_TRUE(recs[0].frames.empty());
  EXPECT_EQ(recs[1].ptr, c);
  EXPECT_LT(recs[0].sequence, recs[1].sequence);
  tr->deallocate(a, 100, 0, 7);
  tr->deallocate(c, 300, 0, 0);
  EXPECT_TRUE(core::tracking_outstanding(*tr).empty());
}

TEST(Tracking, RecordsTheAllocatingThread) {
  auto tr = core::make_tracking_adaptor(core::make_host_resource(), false);
  void* p = nullptr;
  std::uint64_t tid = 0;
  std::thread t([&] {
    p = tr->allocate(64, 0, 0);
    tid = gettid_now();
  });
  t.join();
  auto recs = core::tracking_outstanding(*tr);
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].thread_id, tid);
  EXPECT_NE(recs[0].thread_id, gettid_now());
  tr->deallocate(p, 64, 0, 0);  // freed on another thread than the allocating one
}

TEST(Tracking, ReportListsEachAllocationAndTheTotal) {
  auto tr = core::make_tracking_adaptor(core::make_host_resource(), false);
  EXPECT_EQ(core::tracking_report(*tr).rfind("tether tracking adaptor: 0 outstanding allocations, 0 bytes", 0), 0u);
  void* a = tr->allocate(4096, 0, 0);
  void* b = tr->allocate(1024, 0, 0x10);
  const std::string rep = core::tracking_report(*tr);
  EXPECT_EQ(rep.rfind("tether tracking adaptor: 2 outstanding allocations, 5120 bytes\n", 0), 0u) << rep;
  EXPECT_NE(rep.find("size=4096 alignment=256 stream=0x0 thread="), std::string::npos) << rep;
  EXPECT_NE(rep.find("size=1024 alignment=256 stream=0x10"), std::string::npos) << rep;
  EXPECT_LT(rep.find("size=4096"), rep.find("size=1024"));  // oldest first
  tr->deallocate(a, 4096, 0, 0);
  tr->deallocate(b, 1024, 0, 0x10);
}

__attribute__((noinline)) void* allocate_here(core::Resource& r) { return r.allocate(128, 0, 0); }

TEST(Tracking, CapturesStacksWhenAsked) {
  auto tr = core::make_tracking_adaptor(core::make_host_resource(), true);
  EXPECT_TRUE(core::tracking_captures_stacks(*tr));
  void* p = allocate_here(*tr);
  auto recs = core::tracking_outstanding(*tr);
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_GE(recs[0].frames.size(), 2u);
  const std::string text = core::tracking_stack_text(recs[0].frames);
  EXPECT_EQ(text.rfind("  #0 ", 0), 0u) << text;
  EXPECT_EQ(static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')), recs[0].frames.size());
  EXPECT_NE(core::tracking_report(*tr).find("  #0 "), std::string::npos);
  tr->deallocate(p, 128, 0, 0);
}

TEST(Tracking, RefusedFreesChangeNothing) {
  auto host = core::make_host_resource();
  auto tr = core::make_tracking_adaptor(host, false);
  void* p = tr->allocate(100, 0, 0);
  void* direct = host->allocate(100, 0, 0);
  const auto before = core::tracking_outstanding(*tr);
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { tr->deallocate(direct, 100, 0, 0); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { tr->deallocate(p, 101, 0, 0); }));   // upstream refuses
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { host->deallocate(p, 100, 0, 0); }));
  const auto after = core::tracking_outstanding(*tr);
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0].ptr, p);
  EXPECT_EQ(after[0].sequence, before[0].sequence);
  tr->deallocate(p, 100, 0, 0);
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { tr->deallocate(p, 100, 0, 0); }));  // twice
  host->deallocate(direct, 100, 0, 0);
  EXPECT_TRUE(fails_with(TETHER_ERROR_NOT_SUPPORTED, [&] { core::tracking_outstanding(*host); }));
}

TEST(Tracking, ADependentsChunksAreTracked) {
  auto tr = core::make_tracking_adaptor(core::make_host_resource(), false);
  auto pool = core::make_pool_resource(tr, {});
  void* p = pool->allocate(10, 0, 0);
  EXPECT_EQ(core::tracking_outstanding(*tr).size(), 1u);  // the pool's chunk
  pool->deallocate(p, 10, 0, 0);
  pool->trim();
  EXPECT_TRUE(core::tracking_outstanding(*tr).empty());
}

TEST(Tracking, ThreadsAllocateAndFreeConcurrently) {
  auto tr = core::make_tracking_adaptor(core::make_host_resource(), false);
  constexpr int kThreads = 8, kKeep = 50;
  std::vector<std::vector<void*>> kept(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        void* p = tr->allocate(64, 0, 0);
        if (i < kKeep) kept[t].push_back(p);
        else tr->deallocate(p, 64, 0, 0);
      }
    });
  }
  for (auto& t : threads) t.join();
  const auto recs = core::tracking_outstanding(*tr);
  ASSERT_EQ(recs.size(), static_cast<std::size_t>(kThreads * kKeep));
  std::set<std::uint64_t> seqs, tids;
  for (const auto& r : recs) {
    seqs.insert(r.sequence);
    tids.insert(r.thread_id);
  }
  EXPECT_EQ(seqs.size(), recs.size());  // every sequence number once
  EXPECT_EQ(tids.size(), static_cast<std::size_t>(kThreads));
  for (auto& v : kept)
    for (void* p : v) tr->deallocate(p, 64, 0, 0);
  EXPECT_TRUE(core::tracking_outstanding(*tr).empty());
}

}  // namespace
