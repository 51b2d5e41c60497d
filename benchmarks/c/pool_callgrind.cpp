// pool_callgrind: fixed, untimed workloads on a core host pool, for
// valgrind's callgrind/cachegrind (instruction and miss counts per pair are
// the evidence on a shared CPU, where timings are noise). Only the function
// `measured` does the work, so
//   valgrind --tool=callgrind --toggle-collect=measured bench_pool_callgrind MODE N
// counts the workload alone (set-up, fill and tear-down excluded); divide
// the total by N pairs.
//   random N   the random pattern of random_pattern.h (N allocate+free pairs,
//              256 B - 4 MiB, <= 1000 live), after one untimed warm-up replay
//   hot256 N   allocate+free of 256 B, N times, with 100 other blocks live
//   steady L N the live sweep's steady state: L live (256 B - 64 KiB), N
//              free+allocate pairs
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "random_pattern.h"
#include "replay.hpp"
#include "tether_core/host.hpp"
#include "tether_core/pool.hpp"

namespace {

using namespace tether;

using Live = BenchLive;

// Replays `pat` (frees what is left at the end).
void replay(core::Resource& mr, const bench_pattern& pat, std::vector<Live>& live) {
  bench_replay(
      pat, live.data(), [&](std::size_t size) { return mr.allocate(size, 0, 0); },
      [&](void* p, std::size_t size) { mr.deallocate(p, size, 0, 0); });
}

}  // namespace

// The measured part (callgrind --toggle-collect=measured): kept out of line.
extern "C" __attribute__((noinline)) void measured(int mode, core::Resource* mr, const bench_pattern* pat,
                                                   const bench_steady* st, std::vector<Live>* live, std::size_t n) {
  if (mode == 0) {
    replay(*mr, *pat, *live);
  } else if (mode == 1) {
    for (std::size_t i = 0; i < n; ++i) mr->deallocate(mr->allocate(256, 0, 0), 256, 0, 0);
  } else {
    for (std::size_t i = 0; i < st->pairs; ++i) {
      Live& l = (*live)[st->slot[i]];
      mr->deallocate(l.p, l.size, 0, 0);
      l = Live{mr->allocate(st->size[i], 0, 0), st->size[i]};
    }
  }
}

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s random N | hot256 N | steady LIVE N\n", argv[0]);
    return 2;
  }
  const char* mode = argv[1];
  auto pool = core::make_pool_resource(core::make_host_resource(), core::PoolOptions{});
  std::vector<Live> live(BENCH_MAX_LIVE);
  if (std::strcmp(mode, "random") == 0) {
    const std::size_t pairs = std::strtoull(argv[2], nullptr, 10);
    bench_pattern pat;
    // About two ops per pair (the last live ones are freed after the pattern).
    if (bench_make_pattern(&pat, 2 * pairs, 20240601u) != 0) return 1;
    replay(*pool, pat, live);  // warm-up: the pool reaches its size
    measured(0, pool.get(), &pat, nullptr, &live, 0);
    std::printf("random: %zu pairs\n", pat.n_allocs);
    std::free(pat.ops);
  } else if (std::strcmp(mode, "hot256") == 0) {
    const std::size_t n = std::strtoull(argv[2], nullptr, 10);
    std::vector<void*> others;
    for (int i = 0; i < 100; ++i) others.push_back(pool->allocate(4096, 0, 0));
    measured(1, pool.get(), nullptr, nullptr, nullptr, n);
    for (void* o : others) pool->deallocate(o, 4096, 0, 0);
    std::printf("hot256: %zu pairs\n", n);
  } else if (std::strcmp(mode, "steady") == 0 && argc >= 4) {
    const std::size_t l = std::strtoull(argv[2], nullptr, 10), n = std::strtoull(argv[3], nullptr, 10);
    bench_steady st;
    if (bench_make_steady(&st, l, n, 256.0, 65536.0, 0x5eedu) != 0) return 1;
    live.resize(l);
    for (std::size_t i = 0; i < l; ++i) live[i] = Live{pool->allocate(st.fill[i], 0, 0), st.fill[i]};
    measured(2, pool.get(), nullptr, &st, &live, n);
    for (std::size_t i = 0; i < l; ++i) pool->deallocate(live[i].p, live[i].size, 0, 0);
    std::printf("steady: %zu live, %zu pairs\n", l, n);
    bench_free_steady(&st);
  } else {
    std::fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
  }
  return 0;
}
