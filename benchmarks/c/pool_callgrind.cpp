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
// `ordered` before the mode (bench_pool_callgrind ordered random N) runs it on
// a stream-ordered pool over host memory with events that cost nothing
// (free_events.hpp), on one stream other than 0: the path a pool over CUDA
// takes in bench_gpu_alloc, less the driver's calls, so that the count beside
// the host pool's is what stream order adds to the bookkeeping.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "free_events.hpp"
#include "random_pattern.h"
#include "replay.hpp"
#include "tether_core/host.hpp"
#include "tether_core/pool.hpp"

namespace {

using namespace tether;

using Live = BenchLive;

// Replays `pat` on stream s (frees what is left at the end).
void replay(core::Resource& mr, const bench_pattern& pat, std::vector<Live>& live, core::stream_t s) {
  bench_replay(
      pat, live.data(), [&](std::size_t size) { return mr.allocate(size, 0, s); },
      [&](void* p, std::size_t size) { mr.deallocate(p, size, 0, s); });
}

}  // namespace

// The measured part (callgrind --toggle-collect=measured): kept out of line.
extern "C" __attribute__((noinline)) void measured(int mode, core::Resource* mr, const bench_pattern* pat,
                                                   const bench_steady* st, std::vector<Live>* live, std::size_t n,
                                                   core::stream_t s) {
  if (mode == 0) {
    replay(*mr, *pat, *live, s);
  } else if (mode == 1) {
    for (std::size_t i = 0; i < n; ++i) mr->deallocate(mr->allocate(256, 0, s), 256, 0, s);
  } else {
    for (std::size_t i = 0; i < st->pairs; ++i) {
      Live& l = (*live)[st->slot[i]];
      mr->deallocate(l.p, l.size, 0, s);
      l = Live{mr->allocate(st->size[i], 0, s), st->size[i]};
    }
  }
}

int main(int argc, char** argv) {
  const char* program = argv[0];
  const bool ordered = argc > 1 && std::strcmp(argv[1], "ordered") == 0;
  if (ordered) {
    --argc;
    ++argv;
  }
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s [ordered] random N | hot256 N | steady LIVE N\n", program);
    return 2;
  }
  const char* mode = argv[1];
  // Stream 1 when ordered: a stream of its own, as bench_gpu_alloc's threads have.
  const core::stream_t s = ordered ? 1 : 0;
  const char* const on = ordered ? "a stream-ordered pool over host memory" : "a host pool";
  auto pool = core::make_pool_resource(
      ordered ? core::ResourcePtr(std::make_shared<FreeEventsUpstream>()) : core::make_host_resource(),
      core::PoolOptions{});
  std::vector<Live> live(BENCH_MAX_LIVE);
  if (std::strcmp(mode, "random") == 0) {
    const std::size_t pairs = std::strtoull(argv[2], nullptr, 10);
    bench_pattern pat;
    // About two ops per pair (the last live ones are freed after the pattern).
    if (bench_make_pattern(&pat, 2 * pairs, 20240601u) != 0) return 1;
    replay(*pool, pat, live, s);  // warm-up: the pool reaches its size
    measured(0, pool.get(), &pat, nullptr, &live, 0, s);
    std::printf("random: %zu pairs on %s\n", pat.n_allocs, on);
    std::free(pat.ops);
  } else if (std::strcmp(mode, "hot256") == 0) {
    const std::size_t n = std::strtoull(argv[2], nullptr, 10);
    std::vector<void*> others;
    for (int i = 0; i < 100; ++i) others.push_back(pool->allocate(4096, 0, s));
    measured(1, pool.get(), nullptr, nullptr, nullptr, n, s);
    for (void* o : others) pool->deallocate(o, 4096, 0, s);
    std::printf("hot256: %zu pairs on %s\n", n, on);
  } else if (std::strcmp(mode, "steady") == 0 && argc >= 4) {
    const std::size_t l = std::strtoull(argv[2], nullptr, 10), n = std::strtoull(argv[3], nullptr, 10);
    bench_steady st;
    if (bench_make_steady(&st, l, n, 256.0, 65536.0, 0x5eedu) != 0) return 1;
    live.resize(l);
    for (std::size_t i = 0; i < l; ++i) live[i] = Live{pool->allocate(st.fill[i], 0, s), st.fill[i]};
    measured(2, pool.get(), nullptr, &st, &live, n, s);
    for (std::size_t i = 0; i < l; ++i) pool->deallocate(live[i].p, live[i].size, 0, s);
    std::printf("steady: %zu live, %zu pairs on %s\n", l, n, on);
    bench_free_steady(&st);
  } else {
    std::fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
  }
  return 0;
}
