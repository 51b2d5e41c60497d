// Every free is validated: a resource accepts only memory it handed out
// itself, to the one it handed it to, and rejects everything else with
// INVALID_ARGUMENT without touching the memory or changing any counter.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "tether_core/free_check.hpp"
#include "tether_core/host.hpp"
#include "tether_core/pool.hpp"
#include "tether_core/statistics.hpp"
#include "test_util.hpp"

namespace {

using namespace tether;
using test::fails_with;
using test::MiB;

std::size_t page_size() { return static_cast<std::size_t>(sysconf(_SC_PAGESIZE)); }

// The resource's books, to check a rejected free changed nothing.
struct Books {
  std::uint64_t count, bytes;
  explicit Books(const core::Resource& r) : count(r.outstanding_count()), bytes(r.outstanding_bytes()) {}
  bool operator==(const Books& o) const { return count == o.count && bytes == o.bytes; }
};

// ---- 1. foreign pointers into a host resource --------------------------------

TEST(Frees, HostRejectsPointersItNeverHandedOut) {
  auto host = core::make_host_resource();
  void* mine = host->allocate(100, 0, 0);
  const Books before(*host);
  // An address in the first page, never mapped.
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT,
                         [&] { host->deallocate(reinterpret_cast<void*>(std::uintptr_t{4096}), 1, 0, 0); }));
  // The start of an mmap'd page (the header of old would be in the page before).
  const std::size_t ps = page_size();
  void* page = mmap(nullptr, ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(page, MAP_FAILED);
  std::memset(page, 0x5a, ps);
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { host->deallocate(page, 64, 0, 0); }));
  for (std::size_t i = 0; i < ps; ++i) ASSERT_EQ(static_cast<unsigned char*>(page)[i], 0x5a) << "touched at " << i;
  munmap(page, ps);
  // The page right after a PROT_NONE page.
  char* two = static_cast<char*>(mmap(nullptr, 2 * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(static_cast<void*>(two), MAP_FAILED);
  ASSERT_EQ(mprotect(two, ps, PROT_NONE), 0);
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { host->deallocate(two + ps, 64, 256, 0); }));
  munmap(two, 2 * ps);
  // Another allocator's memory (what numpy's data pointer is), and the stack.
  void* theirs = std::malloc(4096);
  std::memset(theirs, 0x33, 4096);
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { host->deallocate(theirs, 4096, 0, 0); }));
  EXPECT_EQ(static_cast<unsigned char*>(theirs)[0], 0x33);
  std::free(theirs);
  alignas(256) char local[512];
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { host->deallocate(local + 256, 64, 0, 0); }));
  EXPECT_TRUE(Books(*host) == before);
  host->deallocate(mine, 100, 0, 0);
  EXPECT_EQ(host->outstanding_count(), 0u);
}

TEST(Frees, HostRejectionNamesThePointer) {
  auto host = core::make_host_resource();
  const std::string m =
      test::error_message([&] { host->deallocate(reinterpret_cast<void*>(std::uintptr_t{0x1000}), 1, 0, 0); });
  EXPECT_NE(m.find("0x1000"), std::string::npos) << m;
}

TEST(Frees, DoubleFreeOfALargeBlockIsRejectedWithoutTouchingIt) {
  // Large enough that malloc gives it back to the system at free: a header
  // read on the second free would fault (and AddressSanitizer sees any read).
  auto host = core::make_host_resource();
  for (std::size_t alignment : {std::size_t{8}, std::size_t{256}, std::size_t{4096}}) {
    void* p = host->allocate(64 * MiB, alignment, 0);
    host->deallocate(p, 64 * MiB, alignment, 0);
    EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { host->deallocate(p, 64 * MiB, alignment, 0); }));
  }
  EXPECT_EQ(host->outstanding_count(), 0u);
  EXPECT_EQ(host->outstanding_bytes(), 0u);
}

TEST(Frees, HostMismatchedSizeOrAlignmentKeepsTheAllocation) {
  auto host = core::make_host_resource();
  void* p = host->allocate(1000, 512, 0);
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { host->deallocate(p, 999, 512, 0); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { host->deallocate(p, 1000, 256, 0); }));
  EXPECT_EQ(host->outstanding_count(), 1u);
  host->deallocate(p, 1000, 512, 0);
}

TEST(Frees, HostTableSurvivesManyLiveAllocationsAndThreads) {
  auto host = core::make_host_resource();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&host, t] {
      std::vector<void*> live;
      for (int i = 0; i < 5000; ++i) live.push_back(host->allocate(16 + (i % 7) * 40, std::size_t{8} << (i % 6), 0));
      for (int i = 0; i < 5000; i += 2) host->deallocate(live[i], 16 + (i % 7) * 40, std::size_t{8} << (i % 6), 0);
      for (int i = 1; i < 5000; i += 2) host->deallocate(live[i], 16 + (i % 7) * 40, std::size_t{8} << (i % 6), 0);
      (void)t;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(host->outstanding_count(), 0u);
}

// ---- 2. an upstream refuses a caller's free of a dependent's memory ----------

TEST(Frees, HostRefusesAPoolsChunk) {
  auto host = core::make_host_resource();
  core::PoolOptions o;
  o.initial_size = MiB;
  auto pool = core::make_pool_resource(host, o);
  void* p = pool->allocate(4096, 0, 0);  // at the start of the pool's only chunk
  const Books before(*host);
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { host->deallocate(p, MiB, 256, 0); }));
  EXPECT_TRUE(Books(*host) == before);
  // The chunk is still the pool's: the next allocation is elsewhere, and
  // trim and the destructor give the chunk back.
  void* q = pool->allocate(4096, 0, 0);
  EXPECT_NE(p, q);
  pool->deallocate(q, 4096, 0, 0);
  pool->deallocate(p, 4096, 0, 0);
  pool->trim();
  EXPECT_EQ(host->outstanding_count(), 0u);
}

TEST(Frees, APoolRefusesAPoolOverItsChunk) {
  auto host = core::make_host_resource();
  auto lower = core::make_pool_resource(host, core::PoolOptions{});
  core::PoolOptions o;
  o.initial_size = MiB;
  auto upper = core::make_pool_resource(lower, o);
  void* p = upper->allocate(4096, 0, 0);  // the start of upper's chunk, a block of lower
  const Books before(*lower);
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { lower->deallocate(p, MiB, 256, 0); }));
  EXPECT_TRUE(Books(*lower) == before);
  // lower does not hand the chunk out again.
  void* other = lower->allocate(MiB, 256, 0);
  EXPECT_NE(other, p);
  lower->deallocate(other, MiB, 256, 0);
  upper->deallocate(p, 4096, 0, 0);
  upper.reset();  // gives its chunk back through the dependent's path
  EXPECT_EQ(lower->outstanding_count(), 0u);
}

TEST(Frees, DependentsGiveTheirChunksBackOnTrimAndDestruction) {
  auto host = core::make_host_resource();
  auto stats = core::make_statistics_adaptor(host);
  {
    auto pool = core::make_pool_resource(stats, core::PoolOptions{});
    std::vector<void*> v;
    for (int i = 0; i < 64; ++i) v.push_back(pool->allocate(64 * 1024, 0, 0));
    EXPECT_GT(host->outstanding_count(), 0u);
    EXPECT_EQ(host->caller_outstanding_count(), 0u) << "the chunks are the adaptor's dependent's, not a caller's";
    for (void* p : v) pool->deallocate(p, 64 * 1024, 0, 0);
    pool->trim();
    EXPECT_EQ(core::statistics_of(*stats).current_count, 0u);
    void* last = pool->allocate(100, 0, 0);  // a new chunk, given back by the destructor
    pool->deallocate(last, 100, 0, 0);
  }
  EXPECT_EQ(core::statistics_of(*stats).current_count, 0u);
  EXPECT_EQ(host->outstanding_count(), 0u);
}

// ---- 3. wrong-resource frees --------------------------------------------------

TEST(Frees, AnAdaptorRejectsWhatDidNotComeThroughIt) {
  auto host = core::make_host_resource();
  auto stats = core::make_statistics_adaptor(host);
  void* direct = host->allocate(64, 0, 0);
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { stats->deallocate(direct, 64, 0, 0); }));
  const core::Statistics s = core::statistics_of(*stats);
  EXPECT_EQ(s.current_bytes, 0u) << "wrapped below zero";
  EXPECT_EQ(s.current_count, 0u);
  EXPECT_EQ(stats->outstanding_count(), 0u);
  EXPECT_EQ(host->outstanding_count(), 1u);
  host->deallocate(direct, 64, 0, 0);
}

TEST(Frees, AnUpstreamRejectsAnAdaptorsMemory) {
  auto host = core::make_host_resource();
  auto stats = core::make_statistics_adaptor(host);
  void* p = stats->allocate(64, 0, 0);
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { host->deallocate(p, 64, 0, 0); }));
  EXPECT_EQ(core::statistics_of(*stats).current_bytes, 64u);
  EXPECT_EQ(host->outstanding_count(), 1u);
  stats->deallocate(p, 64, 0, 0);
  EXPECT_EQ(core::statistics_of(*stats).current_bytes, 0u);
  EXPECT_EQ(stats->outstanding_count(), 0u);
  EXPECT_EQ(host->outstanding_count(), 0u);
}

TEST(Frees, TwoAdaptorsOverOneUpstreamKeepTheirOwn) {
  auto pool = core::make_pool_resource(core::make_host_resource(), core::PoolOptions{});
  auto a = core::make_statistics_adaptor(pool);
  auto b = core::make_statistics_adaptor(pool);
  auto over_a = core::make_statistics_adaptor(a);  // a chain forwards in its caller's name
  void* pa = a->allocate(64, 0, 0);
  void* po = over_a->allocate(64, 0, 0);
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { b->deallocate(pa, 64, 0, 0); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { a->deallocate(po, 64, 0, 0); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { over_a->deallocate(pa, 64, 0, 0); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { pool->deallocate(po, 64, 0, 0); }));
  EXPECT_EQ(core::statistics_of(*b).current_count, 0u);
  EXPECT_EQ(core::statistics_of(*a).current_count, 2u);  // its own and the one through it
  over_a->deallocate(po, 64, 0, 0);
  a->deallocate(pa, 64, 0, 0);
  EXPECT_EQ(core::statistics_of(*a).current_count, 0u);
  EXPECT_EQ(core::statistics_of(*over_a).current_count, 0u);
  EXPECT_EQ(pool->outstanding_count(), 0u);
}

TEST(Frees, AHostResourceRejectsAnotherHostResourcesPointer) {
  auto a = core::make_host_resource();
  auto b = core::make_host_resource();
  EXPECT_TRUE(a->is_equal(*b));  // equality is for comparison only
  void* p = a->allocate(1000, 512, 0);
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { b->deallocate(p, 1000, 512, 0); }));
  EXPECT_EQ(a->outstanding_count(), 1u);
  EXPECT_EQ(b->outstanding_count(), 0u);
  a->deallocate(p, 1000, 512, 0);
  EXPECT_EQ(a->outstanding_count(), 0u);
}

TEST(Frees, OwnersAreCheckedOnTheDependentPathToo) {
  auto host = core::make_host_resource();
  void* p = host->allocate(256, 0, 0);
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { host->deallocate_for(12345, p, 256, 0, 0); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { host->allocate_for(core::kCaller, 256, 0, 0); }));
  host->deallocate(p, 256, 0, 0);
  EXPECT_EQ(host->outstanding_count(), 0u);
}

// ---- the one free-time check (free_check.hpp) ----------------------------------

TEST(FreeCheck, PointerTextIsHexWithPrefix) {
  EXPECT_EQ(core::pointer_text(nullptr), "0x0");
  EXPECT_EQ(core::pointer_text(std::uintptr_t{0x1000}), "0x1000");
  EXPECT_EQ(core::pointer_text(reinterpret_cast<void*>(std::uintptr_t{0x7f12a4000000})), "0x7f12a4000000");
  EXPECT_EQ(core::pointer_text(UINTPTR_MAX), "0xffffffffffffffff");
}

TEST(FreeCheck, ReportsTheFirstReasonInOrder) {
  const void* p = reinterpret_cast<void*>(std::uintptr_t{0xabc00});
  const core::Allocated a{core::kCaller, 1000, 512};
  EXPECT_TRUE(core::free_matches(a, core::kCaller, 1000, 512));
  EXPECT_NO_THROW(core::check_free("x", "this x", p, a, core::kCaller, 1000, 512));
  auto message = [&](core::owner_t by, std::size_t bytes, std::size_t alignment) {
    EXPECT_FALSE(core::free_matches(a, by, bytes, alignment));
    EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { core::check_free("x", "this x", p, a, by, bytes, alignment); }));
    return test::error_message([&] { core::check_free("x", "this x", p, a, by, bytes, alignment); });
  };
  // The wrong party wins over a wrong size and alignment.
  EXPECT_EQ(message(7, 1, 8), "x: pointer 0xabc00 was allocated directly from this x, not through the resource it was "
                              "freed into; free it into this x");
  EXPECT_EQ(message(core::kCaller, 999, 8), "x: size mismatch freeing 0xabc00: allocated 1000 bytes, freed with 999 bytes");
  EXPECT_EQ(message(core::kCaller, 1000, 256),
            "x: alignment mismatch freeing 0xabc00: allocated with alignment 512, freed with 256");
  const core::Allocated held{5, 1000, 512};
  EXPECT_NE(test::error_message([&] { core::check_free("x", "this x", p, held, core::kCaller, 1000, 512); })
                .find("is held by a resource over this one"),
            std::string::npos);
  EXPECT_NE(test::error_message([&] { core::check_free("x", "this x", p, held, 6, 1000, 512); })
                .find("handed out through another resource over this one"),
            std::string::npos);
  EXPECT_EQ(test::error_message([&] { core::throw_not_allocated("x", "this x", p); }),
            "x: pointer 0xabc00 was not allocated by this x (or was already freed)");
  // Misuse (a matching free) is a bug, not an argument error.
  EXPECT_TRUE(fails_with(TETHER_ERROR_INTERNAL,
                         [&] { core::throw_free_mismatch("x", "this x", p, a, core::kCaller, 1000, 512); }));
}

TEST(FreeCheck, TheHostResourceUsesTheSharedCheck) {
  auto host = core::make_host_resource();
  void* p = host->allocate(1000, 512, 0);
  const std::string text = core::pointer_text(p);
  EXPECT_EQ(test::error_message([&] { host->deallocate(p, 999, 512, 0); }),
            "host: size mismatch freeing " + text + ": allocated 1000 bytes, freed with 999 bytes");
  host->deallocate(p, 1000, 512, 0);
}

}  // namespace
