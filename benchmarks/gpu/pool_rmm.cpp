// pool_rmm: RMM's figures beside tether's for the two pool measures of issue 22
// that bench_gpu_alloc (gpu_alloc.c) takes for tether alone, in one run and on
// the same op sequences (benchmarks/c/random_pattern.h):
//
//   live-allocation sweep  one thread on its own non-blocking stream, steady state with
//                          1,000 / 10,000 / 100,000 live allocations, sizes log-uniform
//                          256 B - 64 KiB, 200,000 timed free+allocate pairs per level:
//                          cudaMallocAsync (default pool, release threshold raised), tether's
//                          pool over the CUDA resource with 8 GiB initial (the C ABI), RMM's
//                          pool and arena over cuda_memory_resource with 8 GiB, as RMM users
//                          size them. ns/pair and 100k / 1k.
//   footprint              a fresh pool with no initial size replays the random pattern 3
//                          times, for the 8 seeds bench_gpu_alloc uses: bytes held from
//                          upstream / peak bytes live. tether: default options; RMM:
//                          pool_memory_resource(cuda, 0), which grows by what each miss needs.
//
// Not built by CMake (it needs librmm): examples/cpp_rmm/build.sh compiles it against the
// librmm / rapids_logger wheels and an installed tether (SRC=this file,
// CXXFLAGS_EXTRA=-Ibenchmarks/c); ci/gpu.sh runs it in its bench step.
// usage: bench_pool_rmm [reps (default 5)] [pattern ops (default 20000)] [sections (default sweep,footprint)]
//                       [only: sweep rows whose name contains this]
// RMM's pool is slow at 100k live (its free list is searched in address order): the whole run
// takes about 4 minutes with 5 reps.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <rmm/mr/arena_memory_resource.hpp>
#include <rmm/mr/cuda_memory_resource.hpp>
#include <rmm/mr/pool_memory_resource.hpp>

#include <tether/tether.h>

#include "random_pattern.h"
#include "replay.hpp"

namespace {

constexpr std::size_t kAlign = 256;

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "bench_pool_rmm: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}
void check_tether(tether_status_t s, const char* what) {
  if (s != TETHER_OK) {
    std::fprintf(stderr, "bench_pool_rmm: %s failed: %s: %s\n", what, tether_status_name(s),
                 tether_last_error_message());
    std::exit(1);
  }
}

// One allocator under test: allocate(bytes, stream) and deallocate(p, bytes, stream);
// owner keeps what they call alive, if anything must be.
struct Contender {
  std::string name;
  std::function<void*(std::size_t, cudaStream_t)> allocate;
  std::function<void(void*, std::size_t, cudaStream_t)> deallocate;
  std::shared_ptr<void> owner;
};

template <class MR>
Contender rmm_contender(std::string name, std::shared_ptr<MR> mr) {
  return {std::move(name),
          [mr](std::size_t n, cudaStream_t s) { return mr->allocate(cuda::stream_ref{s}, n, kAlign); },
          [mr](void* p, std::size_t n, cudaStream_t s) { mr->deallocate(cuda::stream_ref{s}, p, n, kAlign); },
          nullptr};
}

Contender tether_contender(std::string name, tether_resource_t* r) {
  return {std::move(name),
          [r](std::size_t n, cudaStream_t s) {
            void* p = nullptr;
            check_tether(tether_resource_allocate(r, n, kAlign, reinterpret_cast<tether_stream_t>(s), &p),
                         "tether_resource_allocate");
            return p;
          },
          [r](void* p, std::size_t n, cudaStream_t s) {
            check_tether(tether_resource_deallocate(r, p, n, kAlign, reinterpret_cast<tether_stream_t>(s)),
                         "tether_resource_deallocate");
          },
          nullptr};
}

// ns per free+allocate pair of the timed part of one steady-state run.
double steady_once(const Contender& c, const bench_steady& p, cudaStream_t s, std::vector<BenchLive>& live) {
  const double t = bench_steady_run(p, live.data(), [&](std::size_t n) { return c.allocate(n, s); },
                                    [&](void* q, std::size_t n) { c.deallocate(q, n, s); });
  check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  return t;
}

void sweep(std::vector<Contender> cs, cudaStream_t s, int reps, const std::string& only) {
  if (!only.empty()) {  // keep the reference row
    std::vector<Contender> kept{cs[0]};
    for (std::size_t i = 1; i < cs.size(); ++i)
      if (cs[i].name.find(only) != std::string::npos) kept.push_back(cs[i]);
    cs = std::move(kept);
  }
  constexpr int kLevels = 3;
  const std::size_t lives[kLevels] = {1000, 10000, 100000};
  const std::size_t pairs = 200000;
  // A level whose warm-up took over this is timed once, not `reps` times: RMM's
  // pool at 100,000 live (about 72 us a pair on an H100) would take some 90 s a
  // level, past the GPU script's limit for this step.
  constexpr double kSlowSeconds = 3.0;
  bench_steady pat[kLevels];
  std::vector<BenchLive> live(100000);
  for (int l = 0; l < kLevels; ++l)  // the seeds of bench_gpu_alloc's sweep: the same sequences
    if (bench_make_steady(&pat[l], lives[l], pairs, 256.0, 65536.0, 0x5eedull + static_cast<std::uint64_t>(l)) != 0)
      std::exit(1);
  std::printf("live-allocation sweep: 1 thread, own stream, steady state, sizes log-uniform 256 B - 64 KiB, %zu "
              "timed free+allocate pairs per level, median of %d (ns/pair)\n",
              pairs, reps);
  std::printf("%-40s %12s %12s %12s %11s\n", "allocator", "1,000 live", "10,000 live", "100,000 live", "100k / 1k");
  std::vector<std::vector<double>> ns(cs.size(), std::vector<double>(kLevels));
  for (std::size_t i = 0; i < cs.size(); ++i) {
    std::printf("%-40s", cs[i].name.c_str());
    std::fflush(stdout);
    bool cut = false;
    for (int l = 0; l < kLevels; ++l) {
      // warm-up: the pools reach their size.
      const double warm = steady_once(cs[i], pat[l], s, live);
      const bool slow = warm * static_cast<double>(pairs) * 1e-9 > kSlowSeconds;
      cut = cut || slow;
      std::vector<double> v(slow ? 1 : static_cast<std::size_t>(reps));
      for (auto& x : v) x = steady_once(cs[i], pat[l], s, live);
      ns[i][l] = bench_median(v.data(), v.size());
      std::printf(" %11.1f%s", ns[i][l], slow ? "*" : " ");
      std::fflush(stdout);
    }
    std::printf(" %10.3fx\n", ns[i][kLevels - 1] / ns[i][0]);
    if (cut) std::printf("%-40s (*: over %.0f s a run, so timed once after the warm-up)\n", "", kSlowSeconds);
  }
  std::printf("ratio to %s at the same live count:\n", cs[0].name.c_str());
  for (std::size_t i = 1; i < cs.size(); ++i) {
    std::printf("%-40s", cs[i].name.c_str());
    for (int l = 0; l < kLevels; ++l) std::printf(" %11.3fx", ns[i][l] / ns[0][l]);
    std::printf("\n");
  }
  for (auto& p : pat) bench_free_steady(&p);
}

// Replays `pat` 3 times through c on s; returns the peak bytes live.
std::size_t replay(const Contender& c, const bench_pattern& pat, cudaStream_t s) {
  std::vector<BenchLive> live(BENCH_MAX_LIVE);
  std::size_t bytes = 0, peak = 0;
  for (int r = 0; r < 3; ++r)
    bench_replay(
        pat, live.data(),
        [&](std::size_t n) {
          bytes += n;
          peak = std::max(peak, bytes);
          return c.allocate(n, s);
        },
        [&](void* q, std::size_t n) {
          c.deallocate(q, n, s);
          bytes -= n;
        });
  check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  return peak;
}

// held / peak of a fresh pool per seed: make() returns the contender and a function that
// reports the bytes it holds from upstream.
void footprint(const char* name, const std::function<std::pair<Contender, std::function<std::size_t()>>()>& make,
               std::size_t ops, cudaStream_t s) {
  std::vector<double> r;
  std::printf("  %-40s", name);
  for (std::uint64_t seed : {std::uint64_t{0x7e7be5}, std::uint64_t{1}, std::uint64_t{2}, std::uint64_t{3},
                             std::uint64_t{4}, std::uint64_t{5}, std::uint64_t{6}, std::uint64_t{7}}) {
    bench_pattern pat;
    if (bench_make_pattern(&pat, ops, seed) != 0) std::exit(1);
    auto [c, held] = make();
    const std::size_t peak = replay(c, pat, s);
    r.push_back(static_cast<double>(held()) / static_cast<double>(peak));
    std::printf(" %.3f", r.back());
    std::fflush(stdout);
    std::free(pat.ops);
  }
  double max = 0;
  for (double x : r) max = x > max ? x : max;
  const double med = bench_median(r.data(), r.size());
  std::printf("  median %.3f, max %.3f\n", med, max);
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 5;
  const std::size_t ops = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 20000;
  const std::string sections = argc > 3 ? argv[3] : "sweep,footprint";
  const std::string only = argc > 4 ? argv[4] : "";
  const std::size_t big = std::size_t{8} << 30;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("bench_pool_rmm: skipped: no usable CUDA device\n");
    return 0;
  }
  check_cuda(cudaSetDevice(0), "cudaSetDevice");
  cudaStream_t s = nullptr;
  check_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  cudaMemPool_t def = nullptr;
  check_cuda(cudaDeviceGetDefaultMemPool(&def, 0), "cudaDeviceGetDefaultMemPool");
  std::uint64_t keep = std::numeric_limits<std::uint64_t>::max();
  check_cuda(cudaMemPoolSetAttribute(def, cudaMemPoolAttrReleaseThreshold, &keep), "cudaMemPoolSetAttribute");

  tether_resource_t* cuda = nullptr;
  tether_resource_t* pool = nullptr;
  check_tether(tether_cuda_resource_create(0, &cuda), "tether_cuda_resource_create");
  tether_pool_options_t po = TETHER_POOL_OPTIONS_INIT;
  po.initial_size = big;
  if (sections.find("sweep") != std::string::npos) {
    std::vector<Contender> cs;
    cs.push_back({"cudaMallocAsync (default pool)",
                  [](std::size_t n, cudaStream_t st) {
                    void* p = nullptr;
                    check_cuda(cudaMallocAsync(&p, n, st), "cudaMallocAsync");
                    return p;
                  },
                  [](void* p, std::size_t, cudaStream_t st) { check_cuda(cudaFreeAsync(p, st), "cudaFreeAsync"); },
                  nullptr});
    check_tether(tether_pool_resource_create(cuda, &po, &pool), "tether_pool_resource_create");
    cs.push_back(tether_contender("tether pool(cuda), 8 GiB initial", pool));
    cs.push_back(rmm_contender("rmm pool(cuda), 8 GiB initial",
                               std::make_shared<rmm::mr::pool_memory_resource>(rmm::mr::cuda_memory_resource{}, big)));
    cs.push_back(rmm_contender("rmm arena(cuda), 8 GiB",
                               std::make_shared<rmm::mr::arena_memory_resource>(rmm::mr::cuda_memory_resource{}, big)));
    sweep(cs, s, reps, only);
    tether_resource_release(pool);
  }  // the RMM pools give their memory back here
  if (sections.find("footprint") == std::string::npos) {
    tether_resource_release(cuda);
    return 0;
  }

  std::printf("\nfootprint: a fresh pool, no initial size, 1 thread, the random pattern (%zu ops) 3 times, for 8 seeds "
              "(0x7e7be5, 1 ... 7); bytes held from upstream / peak bytes live\n",
              ops);
  footprint(
      "tether pool(cuda), default options",
      [cuda] {
        tether_resource_t* p = nullptr;
        check_tether(tether_pool_resource_create(cuda, nullptr, &p), "tether_pool_resource_create");
        Contender c = tether_contender("tether", p);
        c.owner = std::shared_ptr<tether_resource_t>(p, tether_resource_release);
        return std::make_pair(c, std::function<std::size_t()>([p] {
                                tether_pool_info_t info = TETHER_POOL_INFO_INIT;
                                check_tether(tether_resource_get_pool_info(p, &info), "get_pool_info");
                                return static_cast<std::size_t>(info.pool_size);
                              }));
      },
      ops, s);
  footprint(
      "rmm pool(cuda), initial size 0",
      [] {
        auto mr = std::make_shared<rmm::mr::pool_memory_resource>(rmm::mr::cuda_memory_resource{}, 0);
        return std::make_pair(rmm_contender("rmm", mr), std::function<std::size_t()>([mr] { return mr->pool_size(); }));
      },
      ops, s);
  tether_resource_release(cuda);
  check_cuda(cudaStreamDestroy(s), "cudaStreamDestroy");
  return 0;
}
