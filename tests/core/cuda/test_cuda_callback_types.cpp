// The conformance suite over the user-callback types with CUDA upstreams:
// logging and failure-callback adaptors over device memory, and a callback
// resource whose functions forward to a CUDA resource (device memory handed
// out by "user code"). Skipped, with the reason, where there is no device.
#include <vector>

#include "conformance.hpp"
#include "cuda_test_support.hpp"
#include "tether_core/callback.hpp"
#include "tether_core/failure_callback.hpp"
#include "tether_core/logging.hpp"
#include "tether_core/pool.hpp"
#include "test_util.hpp"

namespace {

using namespace tether;
using test::ResourceFactory;
using test::cuda::device_access;
using test::cuda::gpu_skip_reason;
namespace cu = tether::core::cuda;

core::ResourcePtr logging(core::ResourcePtr up) {
  core::LoggingOptions o;
  o.sink = [](const char*, std::size_t) {};
  return core::make_logging_adaptor(std::move(up), std::move(o));
}

core::ResourcePtr failure(core::ResourcePtr up) {
  core::FailureCallbackOptions o;
  o.callback = [](std::size_t) { return false; };
  return core::make_failure_callback_adaptor(std::move(up), std::move(o));
}

// Device memory from user functions that forward to a CUDA resource.
core::ResourcePtr callback_over_cuda() {
  core::ResourcePtr device = cu::make_cuda_resource(0);
  core::CallbackFunctions f;
  f.allocate = [device](std::size_t n, std::size_t a, core::stream_t s) { return device->allocate(n, a, s); };
  f.deallocate = [device](void* p, std::size_t n, std::size_t a, core::stream_t s) { device->deallocate(p, n, a, s); };
  core::CallbackProperties props;
  props.device = 0;
  props.device_accessible = true;
  props.host_accessible = false;
  return core::make_callback_resource(std::move(f), props);
}

std::vector<ResourceFactory> cuda_callback_factories() {
  const auto skip = [] { return gpu_skip_reason(); };
  const test::MemoryAccess dev = device_access();
  return {
      {"logging_cuda", [] { return logging(cu::make_cuda_resource(0)); }, skip, dev},
      {"failure_callback_cuda", [] { return failure(cu::make_cuda_resource(0)); }, skip, dev},
      {"pool_logging_async",
       [] { return core::make_pool_resource(logging(cu::make_async_resource(0, {})), {}); }, skip, dev},
      {"callback_cuda", [] { return callback_over_cuda(); }, skip, dev},
      {"pool_callback_cuda", [] { return core::make_pool_resource(callback_over_cuda(), {}); }, skip, dev},
  };
}

TETHER_INSTANTIATE_CONFORMANCE(CudaCallbacks, cuda_callback_factories());

}  // namespace
