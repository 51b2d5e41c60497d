// FixedSizeResource: one block per request, batches from upstream, checked
// frees, trim, stream order over a pretend CUDA upstream.
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "fakes.hpp"
#include "tether_core/fixed_size.hpp"
#include "tether_core/host.hpp"
#include "tether_core/statistics.hpp"
#include "test_util.hpp"

namespace {

using namespace tether;
using test::fails_with;
using test::KiB;
using test::MiB;

core::ResourcePtr fixed(core::ResourcePtr up, std::size_t block, std::size_t batch) {
  core::FixedSizeOptions o;
  o.block_size = block;
  o.blocks_to_preallocate = batch;
  return core::make_fixed_size_resource(std::move(up), o);
}

TEST(FixedSize, PreallocatesOneBatchAndRefillsInBatches) {
  auto stats = core::make_statistics_adaptor(core::make_host_resource());
  auto r = fixed(stats, 4 * KiB, 8);
  EXPECT_EQ(core::statistics_of(*stats).current_count, 1u);
  EXPECT_EQ(core::statistics_of(*stats).current_bytes, 32 * KiB);
  std::vector<void*> live;
  std::set<void*> distinct;
  for (int i = 0; i < 9; ++i) {
    live.push_back(r->allocate(100 + i, 0, 0));
    distinct.insert(live.back());
  }
  EXPECT_EQ(distinct.size(), 9u);
  EXPECT_EQ(core::statistics_of(*stats).current_count, 2u);  // a second batch for the 9th block
  const core::FixedSizeInfo info = core::fixed_size_info(*r);
  EXPECT_EQ(info.total_blocks, 16u);
  EXPECT_EQ(info.free_blocks, 7u);
  EXPECT_EQ(info.chunk_count, 2u);
  EXPECT_EQ(r->outstanding_count(), 9u);
  for (int i = 0; i < 9; ++i) r->deallocate(live[i], 100 + i, 0, 0);
  EXPECT_EQ(r->outstanding_count(), 0u);
  r->trim();
  EXPECT_EQ(core::statistics_of(*stats).current_count, 0u);
  EXPECT_EQ(core::fixed_size_info(*r).total_blocks, 0u);
  void* again = r->allocate(4 * KiB, 0, 0);  // grows again after a trim
  r->deallocate(again, 4 * KiB, 0, 0);
}

TEST(FixedSize, LargerRequestsAreOutOfMemoryAndNameTheSize) {
  auto r = fixed(core::make_host_resource(), 4 * KiB, 2);
  EXPECT_TRUE(fails_with(TETHER_ERROR_OUT_OF_MEMORY, [&] { r->allocate(4 * KiB + 1, 0, 0); }));
  EXPECT_NE(test::error_message([&] { r->allocate(5000, 0, 0); }).find("5000"), std::string::npos);
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { r->allocate(64, 8192, 0); }));
  EXPECT_EQ(r->outstanding_count(), 0u);
  void* p = r->allocate(4 * KiB, 4096, 0);  // a whole block, at the blocks' alignment
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 4096, 0u);
  r->deallocate(p, 4 * KiB, 4096, 0);
}

TEST(FixedSize, BlockSizeIsRoundedAndValidated) {
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [] { fixed(core::make_host_resource(), 0, 1); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [] { fixed(nullptr, 256, 1); }));
  auto r = fixed(core::make_host_resource(), 1000, 1);
  EXPECT_EQ(core::fixed_size_info(*r).block_size, 1024u);
  EXPECT_EQ(r->properties().kind, TETHER_RESOURCE_KIND_FIXED_SIZE);
  EXPECT_STREQ(r->name(), "fixed_size");
  EXPECT_TRUE(fails_with(TETHER_ERROR_NOT_SUPPORTED, [] { core::fixed_size_info(*core::make_host_resource()); }));
}

TEST(FixedSize, FreesAreChecked) {
  auto host = core::make_host_resource();
  auto r = fixed(host, 1 * KiB, 4);
  void* p = r->allocate(600, 0, 0);
  void* foreign = host->allocate(600, 0, 0);
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { r->deallocate(foreign, 600, 0, 0); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { r->deallocate(p, 601, 0, 0); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { r->deallocate(static_cast<char*>(p) + 256, 100, 0, 0); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { r->deallocate(p, 600, 512, 0); }));
  EXPECT_EQ(r->outstanding_count(), 1u);
  r->deallocate(p, 600, 0, 0);
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { r->deallocate(p, 600, 0, 0); }));  // double free
  host->deallocate(foreign, 600, 0, 0);
}

TEST(FixedSize, UpstreamExhaustionIsOutOfMemoryAndHarmless) {
  auto up = std::make_shared<test::LimitedUpstream>(10 * KiB);
  auto r = fixed(up, 4 * KiB, 2);  // 8 KiB up front; a second batch does not fit, one more block does not either
  void* a = r->allocate(1, 0, 0);
  void* b = r->allocate(1, 0, 0);
  EXPECT_THROW(r->allocate(1, 0, 0), core::OutOfMemory);
  EXPECT_EQ(r->outstanding_count(), 2u);
  r->deallocate(a, 1, 0, 0);
  void* c = r->allocate(1, 0, 0);
  EXPECT_EQ(c, a);
  r->deallocate(b, 1, 0, 0);
  r->deallocate(c, 1, 0, 0);
}

TEST(FixedSize, ConcurrentThreadsGetDistinctBlocks) {
  auto r = fixed(core::make_host_resource(), 512, 16);
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      std::vector<unsigned char*> live;
      for (int i = 0; i < 2000; ++i) {
        if (live.size() < 20 && (i % 3 != 2)) {
          auto* p = static_cast<unsigned char*>(r->allocate(512, 0, 0));
          std::fill(p, p + 512, static_cast<unsigned char>(t));
          live.push_back(p);
        } else if (!live.empty()) {
          unsigned char* p = live.back();
          live.pop_back();
          for (int k = 0; k < 512; ++k)
            if (p[k] != t) ++errors;
          r->deallocate(p, 512, 0, 0);
        }
      }
      for (auto* p : live) r->deallocate(p, 512, 0, 0);
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors, 0);
  EXPECT_EQ(r->outstanding_count(), 0u);
  EXPECT_EQ(core::fixed_size_info(*r).free_blocks, core::fixed_size_info(*r).total_blocks);
}

TEST(FixedSizeStreams, ABlockGoesToAnotherStreamOnlyAfterTheDeviceWasSynchronised) {
  auto up = std::make_shared<test::OrderedUpstream>();
  up->set_limit(2 * KiB);
  {
    auto r = fixed(up, 1 * KiB, 2);
    EXPECT_NE(r->stream_order(), nullptr);
    void* a = r->allocate(KiB, 0, 1);
    up->allocated(a, KiB, 1);
    up->freed(a, KiB, 1);
    r->deallocate(a, KiB, 0, 1);
    void* again = r->allocate(KiB, 0, 1);  // same stream: at once, no sync
    EXPECT_EQ(again, a);
    EXPECT_EQ(up->device_syncs(), 0u);
    up->allocated(again, KiB, 1);
    void* b = r->allocate(KiB, 0, 2);  // the other preallocated block
    up->allocated(b, KiB, 2);
    up->freed(again, KiB, 1);
    r->deallocate(again, KiB, 0, 1);
    void* c = r->allocate(KiB, 0, 2);  // upstream full: stream 1's block after one device sync
    up->allocated(c, KiB, 2);
    EXPECT_EQ(c, a);
    EXPECT_EQ(up->device_syncs(), 1u);
    up->freed(b, KiB, 2);
    r->deallocate(b, KiB, 0, 2);
    up->freed(c, KiB, 2);
    r->deallocate(c, KiB, 0, 2);
  }
  EXPECT_EQ(up->violations(), 0u);
  EXPECT_EQ(up->outstanding_count(), 0u);
}

}  // namespace
