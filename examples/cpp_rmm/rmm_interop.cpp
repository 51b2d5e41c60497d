// rmm_interop.cpp - RMM-based C++ code allocates from a tether pool.
//
// tether::device_resource (tether/tether.hpp) satisfies CCCL's cuda::mr
// resource concepts, so it binds to the resource references RMM takes
// (rmm::device_async_resource_ref): rmm::device_buffer, rmm::device_uvector
// and everything built on them (cuDF, cuML, cuVS) then allocate from tether.
// RMM stores a non-owning reference: keep the tether object alive while RMM
// may use it (tether keeps the pool alive for its own buffers; RMM's are RMM's).
//
// Built and run by ci/gpu.sh against the librmm wheel (examples/cpp_rmm/build.sh).
#include <cstdio>
#include <cstdlib>

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

int main() {
  tether::pool_options options;
  options.initial_size = 64u << 20;
  tether::resource stats = tether::statistics_adaptor(tether::pool_resource(tether::async_resource(0), options));
  tether::device_resource device_stats(stats);  // checked: device-accessible memory

  // 1. Pass it where RMM takes a resource reference.
  rmm::device_async_resource_ref ref{device_stats};
  {
    rmm::device_buffer buf(1 << 20, rmm::cuda_stream_default, ref);
    CHECK(buf.data() != nullptr);
    CHECK(stats.statistics().current_bytes == (1u << 20));
  }
  CHECK(stats.statistics().current_bytes == 0);

  // 2. Make it RMM's current device resource: code that never heard of tether allocates from it.
  auto previous = rmm::mr::set_current_device_resource_ref(ref);
  {
    rmm::device_buffer a(4096, rmm::cuda_stream_default);
    rmm::device_buffer b(12345, rmm::cuda_stream_default);
    CHECK(stats.statistics().current_bytes == 4096 + 12345);
    CHECK(stats.statistics().total_count == 3);
  }
  rmm::mr::set_current_device_resource_ref(previous);
  CHECK(stats.statistics().current_bytes == 0);
  std::printf("rmm_interop: RMM allocated %llu bytes in %llu allocations from a tether pool; 0 bytes left\n",
              static_cast<unsigned long long>(stats.statistics().total_bytes),
              static_cast<unsigned long long>(stats.statistics().total_count));
  return 0;
}
