// The pool's standing replay-and-verify test: a seeded run of random
// operations - allocations of random sizes and alignments, frees on the
// allocating stream or another, frees with uses on other streams
// (deallocate_after), streams finishing their work, trims - from several
// threads (half of the allocations and frees try the quick path first,
// try_allocate_quick/try_deallocate_quick, and fall back where it refuses),
// threads, each on its own stream plus shared ones, over the pretend CUDA
// upstream (OrderedUpstream). Every block handed out is checked against a
// shadow map of the live blocks (no overlap, the alignment asked for, usable
// for its whole size: a pattern written at allocation is intact at the free)
// and against the stream rules (the upstream's vector clocks: no block is
// used on a stream before that stream has waited for every earlier use).
//
// Every pool change must pass it, in Release and under ASan and TSan (ctest
// runs all three in CI). TETHER_REPLAY_OPS overrides the operation count
// (default 2,000,000; fewer under the sanitizers, see CMakeLists.txt), and
// TETHER_REPLAY_SEED the seed, to replay a failure.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "fakes.hpp"
#include "tether_core/host.hpp"
#include "tether_core/pool.hpp"
#include "tether_core/statistics.hpp"
#include "test_util.hpp"

#ifndef TETHER_REPLAY_DEFAULT_OPS
#define TETHER_REPLAY_DEFAULT_OPS 2000000
#endif

namespace {

using namespace tether;
using core::stream_t;

std::uint64_t env_or(const char* name, std::uint64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 10) : fallback;
}

// The live blocks of every thread, by address.
class Shadow {
 public:
  // A new block: aligned as asked and overlapping no live block.
  ::testing::AssertionResult add(const void* p, std::size_t n, std::size_t alignment) {
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    if (a % alignment != 0) return ::testing::AssertionFailure() << std::hex << a << " not aligned to " << alignment;
    std::lock_guard<std::mutex> lock(m_);
    auto next = live_.lower_bound(a);
    if (next != live_.end() && next->first < a + n)
      return ::testing::AssertionFailure() << std::hex << a << "+" << n << " overlaps live " << next->first;
    if (next != live_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second > a)
        return ::testing::AssertionFailure() << std::hex << a << " overlaps live " << prev->first << "+"
                                             << prev->second;
    }
    live_.emplace(a, n);
    return ::testing::AssertionSuccess();
  }
  void remove(const void* p) {
    std::lock_guard<std::mutex> lock(m_);
    live_.erase(reinterpret_cast<std::uintptr_t>(p));
  }

 private:
  std::mutex m_;
  std::map<std::uintptr_t, std::size_t> live_;
};

// The stream rules are about the memory a block spans: the pool hands out
// whole 256-byte granules, and a caller's use of its block (or a free on
// another stream, which the caller orders) covers them all. Stamping only the
// requested bytes would leave stale stamps on the rest of the granule.
std::size_t granules(std::size_t n) { return (n + 255) & ~std::size_t{255}; }

struct Live {
  void* p;
  std::size_t n;
  std::size_t alignment;
  stream_t stream;
  unsigned char tag;
};

// Fill the first and last bytes of a block (the whole block is too slow).
void stamp(const Live& b) {
  const std::size_t k = std::min<std::size_t>(b.n, 16);
  std::memset(b.p, b.tag, k);
  std::memset(static_cast<unsigned char*>(b.p) + b.n - k, b.tag, k);
}
bool intact(const Live& b) {
  const std::size_t k = std::min<std::size_t>(b.n, 16);
  const auto* c = static_cast<const unsigned char*>(b.p);
  for (std::size_t i = 0; i < k; ++i)
    if (c[i] != b.tag || c[b.n - k + i] != b.tag) return false;
  return true;
}

// `up`: the pretend CUDA upstream whose stream rules are checked, or nullptr
// for a host pool (streams are all one; only the shadow map is checked).
void replay(core::Resource& mr, test::OrderedUpstream* up, std::uint64_t ops, std::uint64_t seed, int threads,
            std::atomic<int>& failures) {
  Shadow shadow;
  const stream_t shared[] = {1000, 1001, 1002};
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      std::mt19937_64 rng(seed * 7919 + static_cast<std::uint64_t>(t));
      const stream_t own = 10 + static_cast<stream_t>(t);
      std::vector<Live> live;
      auto fail = [&](const std::string& what) {
        if (failures.fetch_add(1) < 10) ADD_FAILURE() << "thread " << t << ": " << what << " (seed " << seed << ")";
      };
      auto free_one = [&](std::size_t i) {
        Live b = live[i];
        live[i] = live.back();
        live.pop_back();
        if (!intact(b)) fail("a live block was overwritten");
        shadow.remove(b.p);
        const unsigned kind = rng() % 8;
        if (kind < 2) {  // uses on other streams: the free waits for them
          stream_t uses[3];
          std::size_t n = 1 + rng() % 3;
          for (std::size_t u = 0; u < n; ++u) {
            uses[u] = rng() % 2 ? shared[rng() % 3] : own;
            if (up != nullptr) up->used(b.p, granules(b.n), uses[u]);
          }
          if (up != nullptr) up->freed(b.p, granules(b.n), b.stream);
          mr.deallocate_after(b.p, b.n, b.alignment, b.stream, uses, n);
        } else if (kind < 3) {  // freed on another stream than it was allocated on
          const stream_t s = shared[rng() % 3];
          if (up != nullptr) up->freed(b.p, granules(b.n), s);
          // The quick path first, half the time: it refuses another arena's block.
          if (rng() % 2 == 0 || !mr.try_deallocate_quick(b.p, b.n, b.alignment, s))
            mr.deallocate(b.p, b.n, b.alignment, s);
        } else {
          if (up != nullptr) up->freed(b.p, granules(b.n), b.stream);
          // Half the time the quick path (Python's, with the GIL held), else or when it refuses the normal one.
          if (rng() % 2 == 0 || !mr.try_deallocate_quick(b.p, b.n, b.alignment, b.stream))
            mr.deallocate(b.p, b.n, b.alignment, b.stream);
        }
      };
      const std::uint64_t mine = ops / static_cast<std::uint64_t>(threads);
      for (std::uint64_t i = 0; i < mine && failures.load(std::memory_order_relaxed) == 0; ++i) {
        const unsigned r = rng() % 100;
        if (r < 52 || live.empty()) {
          if (live.size() >= 300) {
            free_one(rng() % live.size());
            continue;
          }
          // Sizes 1 B - 64 KiB, log-uniform, and one in eight of four fixed
          // larger sizes, which repeat (the quick cache's larger-size slot);
          // one in eight over-aligned.
          static constexpr std::size_t kRepeated[4] = {20 << 10, 64 << 10, 300 << 10, 1 << 20};
          const std::size_t n = std::size_t{1} << (rng() % 17);
          const std::size_t size = rng() % 8 == 0 ? kRepeated[rng() % 4] : n + rng() % n;
          const std::size_t alignment = rng() % 8 == 0 ? std::size_t{512} << (rng() % 5) : 0;
          const stream_t s = rng() % 10 == 0 ? shared[rng() % 3] : own;
          void* p = nullptr;
          try {
            // Half the time the quick path first (it refuses what needs more than the arena at hand).
            if (rng() % 2 == 0) p = mr.try_allocate_quick(size, alignment, s);
            if (p == nullptr) p = mr.allocate(size, alignment, s);
          } catch (const core::OutOfMemory&) {
            continue;  // bounded pools run out now and then: allowed, nothing handed out
          }
          if (up != nullptr) up->allocated(p, granules(size), s);
          const std::size_t al = alignment == 0 ? core::kDefaultAlignment : alignment;
          if (::testing::AssertionResult ok = shadow.add(p, size, al); !ok) fail(ok.message());
          Live b{p, size, alignment, s, static_cast<unsigned char>(rng())};
          stamp(b);
          live.push_back(b);
        } else if (r < 97) {
          free_one(rng() % live.size());
        } else if (r < 99) {
          if (up != nullptr) up->complete(rng() % 2 ? own : shared[rng() % 3]);  // that stream's work finished
        } else if (rng() % 50 == 0) {
          mr.trim();
        }
      }
      while (!live.empty()) free_one(live.size() - 1);
    });
  }
  for (auto& t : ts) t.join();
}

struct Config {
  const char* name;
  std::size_t initial, maximum;
  bool statistics;  // the frees through an adaptor over the pool
  bool host = false;  // a host pool (over the host resource): one arena, no stream rules
};

class PoolReplay : public ::testing::TestWithParam<Config> {};

TEST_P(PoolReplay, RandomOperationsKeepEveryBlockAndStreamRule) {
  const Config& c = GetParam();
  const std::uint64_t ops = env_or("TETHER_REPLAY_OPS", TETHER_REPLAY_DEFAULT_OPS);
  const std::uint64_t seed = env_or("TETHER_REPLAY_SEED", 20261204);
  auto up = std::make_shared<test::OrderedUpstream>();
  core::PoolOptions o;
  o.initial_size = c.initial;
  o.maximum_size = c.maximum;
  core::ResourcePtr upstream = c.host ? core::make_host_resource() : core::ResourcePtr(up);
  core::ResourcePtr pool = core::make_pool_resource(upstream, o);
  core::ResourcePtr mr = c.statistics ? core::make_statistics_adaptor(pool) : pool;
  std::atomic<int> failures{0};
  replay(*mr, c.host ? nullptr : up.get(), ops / 4, seed, 4, failures);  // each configuration a quarter of the operations
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(up->violations(), 0u) << "a block was used on a stream before it waited for an earlier use";
  mr->finish_deferred_frees(true);
  EXPECT_EQ(mr->outstanding_count(), 0u);
  EXPECT_EQ(pool->outstanding_count(), 0u);
  mr.reset();
  pool.reset();
  EXPECT_EQ(up->outstanding_count(), 0u) << "the pool did not give every chunk back";
  EXPECT_EQ(upstream->outstanding_count(), 0u) << "the pool did not give every chunk back";
}

INSTANTIATE_TEST_SUITE_P(Core, PoolReplay,
                         ::testing::Values(Config{"grows", 0, 0, false}, Config{"initial", 8 << 20, 0, false},
                                           Config{"bounded", 4 << 20, 4 << 20, false},
                                           Config{"statistics", 0, 0, true},
                                           // The host pool's quick cache and lock, from four threads at once.
                                           Config{"host", 0, 0, false, true}),
                         [](const ::testing::TestParamInfo<Config>& i) { return std::string(i.param.name); });

}  // namespace
