// Thrust and CUB with their memory from tether (tether/thrust.hpp), on a GPU.
//
// Sorts N keys (default 10M) three ways and checks each result:
//   1. thrust::device_vector<int, tether::thrust_allocator<int>> and
//      thrust::sort(thrust::cuda::par_nosync(alloc).on(stream), ...): the vector
//      and Thrust's temporaries come from a tether pool, ordered on `stream`;
//   2. CUB's two-phase cub::DeviceRadixSort::SortKeys with its temporary storage
//      in a tether::buffer;
//   3. the same sort's time with Thrust's default allocator (cudaMalloc/cudaFree
//      per temporary) and, built with -DTETHER_EXAMPLE_WITH_RMM, RMM's
//      rmm::mr::thrust_allocator over an RMM pool - the median of RUNS sorts each,
//      interleaved, in one run.
// A statistics adaptor under the allocator shows what the temporaries took.
//
// usage: thrust_sort [N (10000000)] [RUNS (15)]     (build: examples/cpp_thrust/build.sh)
#include <cuda_runtime.h>

#include <thrust/device_vector.h>
#include <thrust/execution_policy.h>
#include <thrust/functional.h>
#include <thrust/sort.h>
#include <thrust/tabulate.h>

#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "tether/thrust.hpp"

#ifdef TETHER_EXAMPLE_WITH_RMM
#include <cuda/stream_ref>
#include <rmm/mr/cuda_memory_resource.hpp>
#include <rmm/mr/pool_memory_resource.hpp>
#include <rmm/mr/thrust_allocator_adaptor.hpp>
#endif

namespace {

#define CHECK_CUDA(call)                                                                          \
  do {                                                                                            \
    cudaError_t e_ = (call);                                                                      \
    if (e_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)

// Keys that are not sorted: a 32-bit mix of the index.
struct scrambled {
  __host__ __device__ int operator()(int i) const {
    unsigned x = static_cast<unsigned>(i) * 2654435761u;
    x ^= x >> 16;
    x *= 0x45d9f3bu;
    x ^= x >> 16;
    return static_cast<int>(x & 0x7fffffff);
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class F>
double time_ms(cudaStream_t s, F&& f) {
  CHECK_CUDA(cudaStreamSynchronize(s));
  const auto t0 = std::chrono::steady_clock::now();
  f();
  CHECK_CUDA(cudaStreamSynchronize(s));
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

template <class Vec, class Policy>
bool sorted(const Policy& policy, const Vec& v) {
  return thrust::is_sorted(policy, v.begin(), v.end());
}

int sort_three_ways(int n, int runs, cudaStream_t stream);

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 10000000;
  const int runs = argc > 2 ? std::atoi(argv[2]) : 15;
  if (n <= 0 || runs <= 0) {
    std::fprintf(stderr, "usage: thrust_sort [N > 0] [RUNS > 0]\n");
    return 2;
  }
  CHECK_CUDA(cudaSetDevice(0));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const int failures = sort_three_ways(n, runs, stream);  // everything on `stream` is freed inside
  CHECK_CUDA(cudaStreamDestroy(stream));
  std::printf("%s\n", failures == 0 ? "thrust_sort: all results correct" : "thrust_sort: WRONG RESULTS");
  return failures == 0 ? 0 : 1;
}

namespace {
int sort_three_ways(int n, int runs, cudaStream_t stream) {
  int failures = 0;

  // A pool over device 0 (1 GiB to start), counted by a statistics adaptor.
  tether::pool_options options;
  options.initial_size = std::size_t(1) << 30;
  tether::resource pool = tether::pool_resource(tether::cuda_resource(0), options);
  tether::resource stats = tether::statistics_adaptor(pool);
  tether::thrust_allocator<int> alloc(stats, stream);
  auto on_tether = thrust::cuda::par_nosync(alloc).on(stream);

  // ---- 1. a tether-backed device_vector, sorted with tether temporaries -------------
  using tether_vector = thrust::device_vector<int, tether::thrust_allocator<int>>;
  tether_vector input(static_cast<std::size_t>(n), alloc);
  thrust::tabulate(on_tether, input.begin(), input.end(), scrambled{});
  tether_vector keys(input, alloc);
  const tether_statistics_t before = stats.statistics();
  stats.reset_peak_statistics();
  thrust::sort(on_tether, keys.begin(), keys.end());
  CHECK_CUDA(cudaStreamSynchronize(stream));
  const tether_statistics_t after = stats.statistics();
  const bool ok1 = sorted(on_tether, keys);
  failures += !ok1;
  std::printf("thrust::sort of %d keys, vectors and temporaries from tether: %s\n", n, ok1 ? "sorted" : "NOT SORTED");
  std::printf("  two vectors: %.1f MiB; the sort's temporaries: %llu allocation(s), peak %.1f MiB above the vectors\n",
              before.current_bytes / 1048576.0, static_cast<unsigned long long>(after.total_count - before.total_count),
              (after.peak_bytes - before.current_bytes) / 1048576.0);

  // ---- 2. CUB's two-phase call, its temporary storage a tether::buffer --------------
  {
    tether_vector out(static_cast<std::size_t>(n), alloc);
    std::size_t temp_bytes = 0;
    CHECK_CUDA(cub::DeviceRadixSort::SortKeys(nullptr, temp_bytes, thrust::raw_pointer_cast(input.data()),
                                              thrust::raw_pointer_cast(out.data()), n, 0, 32, stream));
    tether::buffer temp(stats, temp_bytes, reinterpret_cast<tether_stream_t>(stream));
    CHECK_CUDA(cub::DeviceRadixSort::SortKeys(temp.data(), temp_bytes, thrust::raw_pointer_cast(input.data()),
                                              thrust::raw_pointer_cast(out.data()), n, 0, 32, stream));
    const bool ok2 = sorted(on_tether, out) && thrust::equal(on_tether, out.begin(), out.end(), keys.begin());
    failures += !ok2;
    std::printf("cub::DeviceRadixSort::SortKeys, %.1f MiB of temporary storage in a tether::buffer: %s\n",
                temp_bytes / 1048576.0, ok2 ? "sorted, equal to thrust::sort's" : "WRONG");
  }

  // ---- 3. the sort's time: tether pool vs Thrust's default allocator (vs RMM) ------------
  thrust::device_vector<int> plain_input(input.begin(), input.end());
  thrust::device_vector<int> plain_keys(static_cast<std::size_t>(n));
  auto on_default = thrust::cuda::par_nosync.on(stream);
#ifdef TETHER_EXAMPLE_WITH_RMM
  rmm::mr::cuda_memory_resource rmm_cuda;
  rmm::mr::pool_memory_resource rmm_pool(rmm_cuda, std::size_t(1) << 30);
  rmm::mr::thrust_allocator<char> rmm_alloc(cuda::stream_ref(stream), rmm_pool);
  auto on_rmm = thrust::cuda::par_nosync(rmm_alloc).on(stream);
#endif
  std::vector<double> t_tether, t_default, t_rmm;
  for (int r = 0; r < runs; ++r) {  // interleaved, so drift hits every row alike
    thrust::copy(on_tether, input.begin(), input.end(), keys.begin());
    t_tether.push_back(time_ms(stream, [&] { thrust::sort(on_tether, keys.begin(), keys.end()); }));
    thrust::copy(on_default, plain_input.begin(), plain_input.end(), plain_keys.begin());
    t_default.push_back(time_ms(stream, [&] { thrust::sort(on_default, plain_keys.begin(), plain_keys.end()); }));
#ifdef TETHER_EXAMPLE_WITH_RMM
    thrust::copy(on_default, plain_input.begin(), plain_input.end(), plain_keys.begin());
    t_rmm.push_back(time_ms(stream, [&] { thrust::sort(on_rmm, plain_keys.begin(), plain_keys.end()); }));
#endif
  }
  const bool ok3 = sorted(on_tether, keys) && sorted(on_default, plain_keys);
  failures += !ok3;
  const double tt = median(t_tether), td = median(t_default);
  std::printf("sort of %d keys, median of %d runs (ms):\n", n, runs);
  std::printf("  tether::thrust_allocator over a tether pool   %8.3f   (ratio %.3f)\n", tt, tt / td);
  std::printf("  Thrust's default allocator (cudaMalloc)       %8.3f   (ratio 1.000)\n", td);
#ifdef TETHER_EXAMPLE_WITH_RMM
  const double tr = median(t_rmm);
  std::printf("  rmm::mr::thrust_allocator over an RMM pool    %8.3f   (ratio %.3f)\n", tr, tr / td);
#else
  std::printf("  rmm::mr::thrust_allocator: not built (build.sh adds it when the librmm wheel is unpacked)\n");
#endif
  CHECK_CUDA(cudaStreamSynchronize(stream));
  return failures;
}
}  // namespace
