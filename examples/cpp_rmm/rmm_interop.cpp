// rmm_interop.cpp - RMM-based C++ code allocates from a tether pool.
//
// tether::device_resource (tether/tether.hpp) satisfies CCCL's cuda::mr
// resource concepts, so it binds to the resource references RMM takes
// (rmm::device_async_resource_ref): rmm::device_buffer, rmm::device_uvector
// and everything built on them (cuDF, cuML, cuVS) then allocate from tether.
// A resource_ref does not own what it refers to: keep the tether object alive
// while RMM may use the reference. RMM's current device resource (26.x) is an
// owning cuda::mr::any_resource: it holds a copy, which for tether is one more
// reference to the same pool (copy = retain), released when RMM lets it go.
//
// Built and run by ci/gpu.sh against the librmm wheel (examples/cpp_rmm/build.sh).
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <utility>

#include <rmm/cuda_stream_view.hpp>
#include <rmm/device_buffer.hpp>
#include <rmm/mr/per_device_resource.hpp>
#include <rmm/resource_ref.hpp>

#include <tether/tether.hpp>

#define CHECK(cond)                                                   \
  do {                                                                \
    if (!(cond)) {                                                    \
      std::fprintf(stderr, "rmm_interop: check failed: %s\n", #cond); \
      return 1;                                                       \
    }                                                                 \
  } while (0)

int run() {
  tether::pool_options options;
  options.initial_size = 64u << 20;
  tether::resource stats = tether::statistics_adaptor(tether::pool_resource(tether::async_resource(0), options));
  tether::device_resource device_stats(stats);  // checked: device-accessible memory

  // 1. Pass it where RMM takes a resource reference.
  rmm::device_async_resource_ref ref{device_stats};
  {
    rmm::device_buffer buf(1 << 20, cuda::stream_ref{cudaStream_t{nullptr}}, ref);
    CHECK(buf.data() != nullptr);
    CHECK(stats.statistics().current_bytes == (1u << 20));
  }
  CHECK(stats.statistics().current_bytes == 0);

  // 2. Make it RMM's current device resource: code that never heard of tether allocates from it.
  auto previous = rmm::mr::set_current_device_resource(device_stats);  // RMM keeps a copy (+1)
  {
    rmm::device_buffer a(4096, cuda::stream_ref{cudaStream_t{nullptr}});
    rmm::device_buffer b(12345, cuda::stream_ref{cudaStream_t{nullptr}});
    CHECK(stats.statistics().current_bytes == 4096 + 12345);
    CHECK(stats.statistics().total_count == 3);
  }
  rmm::mr::set_current_device_resource(std::move(previous));  // RMM drops its reference
  CHECK(stats.statistics().current_bytes == 0);
  std::printf("rmm_interop: RMM allocated %llu bytes in %llu allocations from a tether pool; 0 bytes left\n",
              static_cast<unsigned long long>(stats.statistics().total_bytes),
              static_cast<unsigned long long>(stats.statistics().total_count));
  return 0;
}

int main() {
  try {
    return run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rmm_interop: %s\n", e.what());
    return 1;
  }
}
