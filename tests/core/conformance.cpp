// The conformance suite (see conformance.hpp): behaviour every resource owes
// its users, whatever it is built on.
#include "conformance.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "tether_core/statistics.hpp"
#include "test_util.hpp"

namespace tether::test {

namespace {

using core::ResourcePtr;

bool aligned_to(const void* p, std::size_t a) { return reinterpret_cast<std::uintptr_t>(p) % a == 0; }

struct Allocation {
  void* p;
  std::size_t size;
  std::size_t alignment;
  unsigned char byte;
};

}  // namespace

std::string factory_name(const ::testing::TestParamInfo<ResourceFactory>& info) { return info.param.name; }

void ResourceConformance::SetUp() {
  const ResourceFactory& f = GetParam();
  const std::string reason = f.skip_reason ? f.skip_reason() : std::string();
  if (!reason.empty()) GTEST_SKIP() << reason;
  mr = f.make();
  ASSERT_NE(mr, nullptr);
  can_touch_ = mr->properties().host_accessible || (f.access.fill && f.access.read);
}

void ResourceConformance::TearDown() {
  if (!mr) return;
  EXPECT_EQ(mr->outstanding_count(), 0u) << "a test leaked allocations";
  EXPECT_EQ(mr->outstanding_bytes(), 0u);
}

void ResourceConformance::fill(void* p, unsigned char byte, std::size_t n) const {
  if (!can_touch_ || n == 0) return;
  if (GetParam().access.fill) {
    GetParam().access.fill(p, byte, n);
  } else {
    std::memset(p, byte, n);
  }
}

::testing::AssertionResult ResourceConformance::holds(const void* p, unsigned char byte, std::size_t n) const {
  if (!can_touch_) return ::testing::AssertionSuccess();
  std::vector<unsigned char> copy;
  const unsigned char* bytes = static_cast<const unsigned char*>(p);
  if (GetParam().access.read) {
    copy.resize(n);
    GetParam().access.read(copy.data(), p, n);
    bytes = copy.data();
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (bytes[i] != byte) {
      return ::testing::AssertionFailure() << "byte " << i << " of " << n << " at " << p << " is "
                                           << int(bytes[i]) << ", expected " << int(byte);
    }
  }
  return ::testing::AssertionSuccess();
}

TEST_P(ResourceConformance, DescribesItself) {
  const core::Properties& p = mr->properties();
  // A kind is a nonzero tether_resource_kind_t value; no upper bound: new kinds are appended.
  EXPECT_GE(p.kind, TETHER_RESOURCE_KIND_HOST);
  EXPECT_TRUE(p.host_accessible || p.device_accessible);
  // The name is the kind's lowercase identifier ("pool", "fixed_size", ...).
  const std::string name = mr->name();
  EXPECT_FALSE(name.empty());
  EXPECT_EQ(name.find_first_not_of("abcdefghijklmnopqrstuvwxyz_"), std::string::npos) << name;
  EXPECT_TRUE(mr->is_equal(*mr));
  if (const auto* up = mr->upstream()) {
    ASSERT_NE(*up, nullptr);
    EXPECT_NE(up->get(), mr.get());
  }
}

TEST_P(ResourceConformance, ZeroSizeGivesNull) {
  EXPECT_EQ(mr->allocate(0, 0, 0), nullptr);
  EXPECT_EQ(mr->allocate(0, 4096, 0), nullptr);
  EXPECT_NO_THROW(mr->deallocate(nullptr, 0, 0, 0));
  EXPECT_EQ(mr->outstanding_count(), 0u);
}

TEST_P(ResourceConformance, ManySizesHoldTheirContents) {
  std::vector<std::size_t> sizes = {1, 255, 256, 257, 4 * KiB, 1 * MiB, 5 * MiB};
  std::mt19937_64 rng(42);
  for (int i = 0; i < 24; ++i) sizes.push_back(1 + rng() % (2 * MiB));
  std::vector<Allocation> live;
  std::uint64_t bytes = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    void* p = mr->allocate(sizes[i], 0, 0);
    ASSERT_NE(p, nullptr) << sizes[i];
    EXPECT_TRUE(aligned_to(p, core::kDefaultAlignment)) << p;
    const auto byte = static_cast<unsigned char>(i * 37 + 1);
    fill(p, byte, sizes[i]);
    live.push_back({p, sizes[i], 0, byte});
    bytes += sizes[i];
    EXPECT_EQ(mr->outstanding_count(), live.size());
    EXPECT_EQ(mr->outstanding_bytes(), bytes);
  }
  for (const Allocation& a : live) EXPECT_TRUE(holds(a.p, a.byte, a.size));
  std::shuffle(live.begin(), live.end(), rng);
  for (const Allocation& a : live) {
    ASSERT_TRUE(holds(a.p, a.byte, a.size));
    mr->deallocate(a.p, a.size, a.alignment, 0);
  }
}

TEST_P(ResourceConformance, HonoursAlignment) {
  std::vector<Allocation> live;
  unsigned char byte = 1;
  for (std::size_t alignment = 1; alignment <= 4096; alignment *= 2) {
    for (std::size_t size : {std::size_t{1}, std::size_t{100}, std::size_t{256}, std::size_t{5000}}) {
      void* p = mr->allocate(size, alignment, 0);
      ASSERT_NE(p, nullptr);
      EXPECT_TRUE(aligned_to(p, alignment)) << p << " alignment " << alignment;
      fill(p, byte, size);
      live.push_back({p, size, alignment, byte++});
    }
  }
  for (const Allocation& a : live) {
    EXPECT_TRUE(holds(a.p, a.byte, a.size));
    mr->deallocate(a.p, a.size, a.alignment, 0);
  }
}

TEST_P(ResourceConformance, NeighboursAreNotClobbered) {
  std::mt19937_64 rng(7);
  const std::size_t alignments[] = {0, 1, 8, 64, 256, 512, 4096};
  std::vector<Allocation> live;
  unsigned char byte = 1;
  auto add = [&] {
    const std::size_t size = 1 + rng() % 3000;
    const std::size_t alignment = alignments[rng() % 7];
    void* p = mr->allocate(size, alignment, 0);
    fill(p, byte, size);
    live.push_back({p, size, alignment, byte});
    byte = static_cast<unsigned char>(byte % 250 + 1);
  };
  for (int i = 0; i < 64; ++i) add();
  for (const Allocation& a : live) ASSERT_TRUE(holds(a.p, a.byte, a.size));
  // Free every other one, fill the holes with new allocations, check all again.
  std::vector<Allocation> kept;
  for (std::size_t i = 0; i < live.size(); ++i) {
    if (i % 2 == 0) {
      mr->deallocate(live[i].p, live[i].size, live[i].alignment, 0);
    } else {
      kept.push_back(live[i]);
    }
  }
  live = kept;
  for (int i = 0; i < 32; ++i) add();
  for (const Allocation& a : live) {
    EXPECT_TRUE(holds(a.p, a.byte, a.size));
    mr->deallocate(a.p, a.size, a.alignment, 0);
  }
}

TEST_P(ResourceConformance, RejectsBadAlignment) {
  for (std::size_t bad : {std::size_t{3}, std::size_t{48}, std::size_t{1} << 31, core::kMaxAlignment + 1}) {
    EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { mr->allocate(64, bad, 0); })) << bad;
  }
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { mr->allocate(0, 3, 0); }));
  EXPECT_NE(error_message([&] { mr->allocate(64, 3, 0); }).find("alignment"), std::string::npos);
  EXPECT_EQ(mr->outstanding_count(), 0u);
}

TEST_P(ResourceConformance, HugeSizesAreOutOfMemoryAndHarmless) {
  void* before = mr->allocate(1000, 0, 0);
  fill(before, 0x5a, 1000);
  for (std::size_t huge : {SIZE_MAX, SIZE_MAX / 2, SIZE_MAX - 255}) {
    EXPECT_THROW(mr->allocate(huge, 0, 0), core::OutOfMemory) << huge;
    EXPECT_THROW(mr->allocate(huge, 4096, 0), core::OutOfMemory) << huge;
  }
  EXPECT_EQ(mr->outstanding_count(), 1u);
  EXPECT_EQ(mr->outstanding_bytes(), 1000u);
  void* after = mr->allocate(64 * KiB, 0, 0);
  ASSERT_NE(after, nullptr);
  fill(after, 0x33, 64 * KiB);
  EXPECT_TRUE(holds(before, 0x5a, 1000));
  EXPECT_TRUE(holds(after, 0x33, 64 * KiB));
  mr->deallocate(after, 64 * KiB, 0, 0);
  mr->deallocate(before, 1000, 0, 0);
}

TEST_P(ResourceConformance, WrongSizeOrAlignmentFreeIsRejected) {
  void* p = mr->allocate(1000, 0, 0);
  fill(p, 0x11, 1000);
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { mr->deallocate(p, 999, 0, 0); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { mr->deallocate(p, 1001, 0, 0); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { mr->deallocate(p, 1000, 4096, 0); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { mr->deallocate(p, 1000, 3, 0); }));
  EXPECT_EQ(mr->outstanding_count(), 1u);
  EXPECT_TRUE(holds(p, 0x11, 1000));
  EXPECT_NO_THROW(mr->deallocate(p, 1000, 0, 0));
}

TEST_P(ResourceConformance, ForeignPointerFreeIsRejected) {
  // Memory this resource never handed out: inside a host buffer of ours (so
  // a header read before it is harmless), and inside one of its own blocks.
  std::vector<unsigned char> host(64 * KiB, 0);
  void* foreign = host.data() + 4096 + (256 - reinterpret_cast<std::uintptr_t>(host.data()) % 256);
  void* p = mr->allocate(8 * KiB, 0, 0);
  fill(p, 0x22, 8 * KiB);
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { mr->deallocate(foreign, 100, 0, 0); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT,
                         [&] { mr->deallocate(static_cast<char*>(p) + 256, 1000, 0, 0); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { mr->deallocate(nullptr, 100, 0, 0); }));
  EXPECT_TRUE(fails_with(TETHER_ERROR_INVALID_ARGUMENT, [&] { mr->deallocate(p, 0, 0, 0); }));
  EXPECT_TRUE(std::all_of(host.begin(), host.end(), [](unsigned char c) { return c == 0; }));
  EXPECT_EQ(mr->outstanding_count(), 1u);
  EXPECT_TRUE(holds(p, 0x22, 8 * KiB));
  EXPECT_NO_THROW(mr->deallocate(p, 8 * KiB, 0, 0));
}

TEST_P(ResourceConformance, CountersTrackOutstandingAllocations) {
  std::vector<Allocation> live;
  std::uint64_t bytes = 0;
  for (std::size_t size : {std::size_t{10}, std::size_t{300}, std::size_t{70000}, std::size_t{3}}) {
    live.push_back({mr->allocate(size, 0, 0), size, 0, 0});
    bytes += size;
  }
  EXPECT_EQ(mr->outstanding_count(), 4u);
  EXPECT_EQ(mr->outstanding_bytes(), bytes);
  bool counted = true;
  core::Statistics s{};
  try {
    s = core::statistics_of(*mr);
  } catch (const core::Error&) {
    counted = false;  // not a statistics adaptor
  }
  if (counted) {
    EXPECT_EQ(s.current_bytes, bytes);
    EXPECT_EQ(s.current_count, 4u);
  }
  mr->deallocate(live[1].p, live[1].size, 0, 0);
  EXPECT_EQ(mr->outstanding_count(), 3u);
  EXPECT_EQ(mr->outstanding_bytes(), bytes - 300);
  for (std::size_t i : {0, 2, 3}) mr->deallocate(live[i].p, live[i].size, 0, 0);
  if (counted) {
    EXPECT_EQ(core::statistics_of(*mr).current_bytes, 0u);
    EXPECT_EQ(core::statistics_of(*mr).total_count, 4u);
  }
}

TEST_P(ResourceConformance, ConcurrentThreadsKeepTheirContents) {
  constexpr int kThreads = 8;
  constexpr int kOps = 3000;
  constexpr std::size_t kMaxLive = 32;
  std::atomic<int> errors{0};
  std::atomic<int> done{0};
  auto work = [&](int tid) {
    std::mt19937_64 rng(1000 + tid);
    const std::size_t alignments[] = {0, 16, 64, 256, 1024};
    std::vector<Allocation> live;
    unsigned counter = 0;
    auto release = [&](std::size_t i) {
      Allocation a = live[i];
      if (!holds(a.p, a.byte, a.size)) errors.fetch_add(1);
      mr->deallocate(a.p, a.size, a.alignment, 0);
      live[i] = live.back();
      live.pop_back();
    };
    try {
      for (int op = 0; op < kOps; ++op) {
        if (live.empty() || (live.size() < kMaxLive && rng() % 2 == 0)) {
          const std::size_t size = 1 + rng() % 8192;
          const std::size_t alignment = alignments[rng() % 5];
          void* p = mr->allocate(size, alignment, 0);
          if (!aligned_to(p, alignment == 0 ? core::kDefaultAlignment : alignment)) errors.fetch_add(1);
          const auto byte = static_cast<unsigned char>(tid * 31 + ++counter);
          fill(p, byte, size);
          live.push_back({p, size, alignment, byte});
        } else {
          release(rng() % live.size());
        }
      }
      while (!live.empty()) release(live.size() - 1);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "thread " << tid << ": " << e.what();
      errors.fetch_add(1);
    }
    done.fetch_add(1);
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(work, t);
  for (auto& t : threads) t.join();
  EXPECT_EQ(done.load(), kThreads);
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(mr->outstanding_count(), 0u);
  EXPECT_EQ(mr->outstanding_bytes(), 0u);
}

}  // namespace tether::test
