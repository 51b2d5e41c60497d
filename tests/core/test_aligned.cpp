// AlignedAdaptor: the alignment rule on the way in and on the way out.
#include <gtest/gtest.h>

#include <cstdint>
#include <thread>
#include <vector>

#include "tether_core/aligned.hpp"
#include "tether_core/host.hpp"
#include "tether_core/pool.hpp"
#include "test_util.hpp"

namespace {

using namespace tether;
using test::fails_with;

core::ResourcePtr aligned(core::ResourcePtr up, std::size_t alignment, std::size_t threshold) {
  core::AlignedOptions o;
  o.alignment = alignment;
  o.threshold = threshold;
  return core::make_aligned_adaptor(std::move(up), o);
}

bool is_aligned(const void* p, std::size_t a) { return reinterpret_cast<std::uintptr_t>(p) % a == 0; }

TEST(Aligned, LargeAllocationsGetTheAlignmentSmallOnesKeepTheirs) {
  auto host = core::make_host_resource();
  auto a = aligned(host, 1 << 16, 4096);
  std::vector<void*> big;
  for (int i = 0; i < 16; ++i) {
    big.push_back(a->allocate(4096 + i, 0, 0));
    EXPECT_TRUE(is_aligned(big.back(), 1 << 16)) << big.back();
  }
  // Below the threshold: the caller's alignment; a caller's larger one wins above it.
  void* small = a->allocate(100, 64, 0);
  EXPECT_TRUE(is_aligned(small, 64));
  void* larger = a->allocate(8192, 1 << 20, 0);
  EXPECT_TRUE(is_aligned(larger, 1 << 20));
  a->deallocate(larger, 8192, 1 << 20, 0);
  a->deallocate(small, 100, 64, 0);
  for (int i = 0; i < 16; ++i) a->deallocate(big[i], 4096 + i, 0, 0);
  EXPECT_EQ(host->outstanding_count(), 0u);
}

TEST(Aligned, OverAPoolToo) {
  auto a = aligned(core::make_pool_resource(core::make_host_resource(), {}), 8192, 0);
  void* p = a->allocate(10, 0, 0);
  void* q = a->allocate(10, 0, 0);
  EXPECT_TRUE(is_aligned(p, 8192));
  EXPECT_TRUE(is_aligned(q, 8192));
  a->deallocate(p, 10, 0, 0);
  a->deallocate(q, 10, 0, 0);
}

TEST(Aligned, RejectsBadAlignmentAndForeignFrees) {
  auto host = core::make_host_resource();
  for (std::size_t bad : {std::size_t{0}, std::size_t{3}, std::size_t{1} << 31}) {
    const std::string m = test::error_message([&] { aligned(host, bad, 0); });
    EXPECT_NE(m.find("alignment"), std::string::npos) << m;
  }
  auto a = aligned(host, 4096, 0);
  void* direct = host->allocate(64, 0, 0);
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { a->deallocate(direct, 64, 0, 0); }));
  void* p = a->allocate(64, 0, 0);
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { host->deallocate(p, 64, 4096, 0); }));
  EXPECT_EQ(a->outstanding_count(), 1u);
  a->deallocate(p, 64, 0, 0);
  host->deallocate(direct, 64, 0, 0);
  EXPECT_EQ(core::aligned_options(*a).alignment, 4096u);
  EXPECT_TRUE(fails_with(TETHER_ERROR_NOT_SUPPORTED, [&] { core::aligned_options(*host); }));
}

// At or above the threshold every caller alignment up to `alignment` becomes
// `alignment`: a free may name any of them (they cannot be told apart), but
// not a larger one, and below the threshold the caller's alignment must match.
TEST(Aligned, FreeAlignmentFollowsTheRule) {
  auto a = aligned(core::make_host_resource(), 4096, 1024);
  void* big = a->allocate(2000, 0, 0);
  EXPECT_NO_THROW(a->deallocate(big, 2000, 4096, 0));
  big = a->allocate(2000, 0, 0);
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { a->deallocate(big, 2000, 8192, 0); }));
  a->deallocate(big, 2000, 64, 0);
  void* small = a->allocate(100, 0, 0);
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { a->deallocate(small, 100, 4096, 0); }));
  a->deallocate(small, 100, 0, 0);
}

TEST(Aligned, Threads) {
  auto host = core::make_host_resource();
  auto a = aligned(host, 4096, 256);
  std::vector<std::thread> threads;
  std::atomic<int> misaligned{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        const std::size_t n = 1 + static_cast<std::size_t>((i * 37 + t) % 2048);
        void* p = a->allocate(n, 0, 0);
        if (n >= 256 && !is_aligned(p, 4096)) ++misaligned;
        a->deallocate(p, n, 0, 0);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(misaligned.load(), 0);
  EXPECT_EQ(host->outstanding_count(), 0u);
}

}  // namespace
