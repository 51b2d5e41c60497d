// The C ABI of tether/cuda.h: device queries and the CUDA resources.
#include <string>

#include "internal.hpp"
#include "spec.hpp"
#include "tether_core/cuda.hpp"

namespace tether::capi {
namespace {

// A device argument of a CUDA resource: an id or TETHER_DEVICE_CURRENT.
// With no driver every id (even a bad one) reports NO_DEVICE, so a caller
// learns the real problem first.
int cuda_device(int device) {
  if (device == TETHER_DEVICE_CURRENT) return core::cuda::current_device();
  (void)core::cuda::device_count();  // NO_DEVICE before INVALID_ARGUMENT
  if (device == TETHER_DEVICE_HOST)
    core::throw_invalid_argument("a CUDA resource needs a device id, not TETHER_DEVICE_HOST");
  core::cuda::check_device(device);
  return device;
}

}  // namespace
}  // namespace tether::capi

using namespace tether;
using namespace tether::capi;

extern "C" {

TETHER_API tether_status_t tether_cuda_get_device_count(int* out) {
  return guard("tether_cuda_get_device_count", [&] {
    require_out(out);
    *out = 0;
    *out = core::cuda::device_count();
  });
}

TETHER_API tether_status_t tether_cuda_get_driver_version(int* out) {
  return guard("tether_cuda_get_driver_version", [&] {
    require_out(out);
    *out = 0;
    *out = core::cuda::driver_version();
  });
}

TETHER_API tether_status_t tether_cuda_get_current_device(int* out) {
  return guard("tether_cuda_get_current_device", [&] {
    require_out(out);
    *out = 0;
    *out = core::cuda::current_device();
  });
}

TETHER_API tether_status_t tether_cuda_get_memory_info(int device, size_t* out_free, size_t* out_total) {
  return guard("tether_cuda_get_memory_info", [&] {
    require_out(out_free, "out_free");
    require_out(out_total, "out_total");
    *out_free = 0;
    *out_total = 0;
    core::cuda::memory_info(cuda_device(device), out_free, out_total);
  });
}

TETHER_API tether_status_t tether_cuda_get_device_name(int device, char* buffer, size_t capacity,
                                                       size_t* out_needed) {
  return guard("tether_cuda_get_device_name", [&] {
    require_out(out_needed, "out_needed");
    *out_needed = 0;
    if (buffer == nullptr && capacity > 0) core::throw_invalid_argument("buffer must not be NULL when capacity > 0");
    if (capacity > 0) buffer[0] = '\0';
    write_text(core::cuda::device_name(cuda_device(device)), buffer, capacity, out_needed);
  });
}

TETHER_API tether_status_t tether_cuda_stream_synchronize(int device, tether_stream_t stream) {
  return guard("tether_cuda_stream_synchronize",
               [&] { core::cuda::stream_synchronize(cuda_device(device), stream); });
}

TETHER_API tether_status_t tether_cuda_resource_create(int device, tether_resource_t** out) {
  return guard("tether_cuda_resource_create", [&] {
    require_out(out);
    *out = nullptr;
    const int d = cuda_device(device);
    *out = make_resource_handle(core::cuda::make_cuda_resource(d), nullptr, "device=" + std::to_string(d));
  });
}

TETHER_API tether_status_t tether_async_resource_create(int device, const tether_async_options_t* options,
                                                        tether_resource_t** out) {
  return guard("tether_async_resource_create", [&] {
    require_out(out);
    *out = nullptr;
    const tether_async_options_t o = read_options(options, kAsyncDefaults, "options");
    core::cuda::AsyncOptions co;
    co.use_default_pool = o.use_default_pool != 0;
    co.initial_pool_size = o.initial_pool_size;
    co.release_threshold = o.release_threshold;
    co.maximum_pool_size = o.maximum_pool_size;
    co.ipc_handle_type = o.ipc_handle_type;
    const int d = cuda_device(device);
    std::string args = "device=" + std::to_string(d);
    const std::string opts = spec::format_options("async", &o, nullptr);
    if (!opts.empty()) args += ", " + opts;
    *out = make_resource_handle(core::cuda::make_async_resource(d, co), nullptr, std::move(args));
  });
}

TETHER_API tether_status_t tether_async_view_resource_create(int device, const tether_async_view_options_t* options,
                                                             tether_resource_t** out) {
  return guard("tether_async_view_resource_create", [&] {
    require_out(out);
    *out = nullptr;
    const tether_async_view_options_t o = read_options(options, kAsyncViewDefaults, "options");
    const int d = cuda_device(device);
    // A spec names the device's current pool; a pool given by handle has no name.
    std::string args, refusal;
    if (o.pool == nullptr)
      args = "device=" + std::to_string(d);
    else
      refusal = "an async_view of a pool given by its handle cannot be named in a spec (a handle means nothing "
                "outside this process); async_view(device=N) names the view of a device's current pool";
    *out = make_resource_handle(core::cuda::make_async_view_resource(d, o.pool), nullptr, std::move(args),
                                std::move(refusal));
  });
}

TETHER_API tether_status_t tether_managed_resource_create(int device, tether_resource_t** out) {
  return guard("tether_managed_resource_create", [&] {
    require_out(out);
    *out = nullptr;
    const int d = cuda_device(device);
    *out = make_resource_handle(core::cuda::make_managed_resource(d), nullptr, "device=" + std::to_string(d));
  });
}

TETHER_API tether_status_t tether_system_resource_create(int device, tether_resource_t** out) {
  return guard("tether_system_resource_create", [&] {
    require_out(out);
    *out = nullptr;
    const int d = cuda_device(device);
    *out = make_resource_handle(core::cuda::make_system_resource(d), nullptr, "device=" + std::to_string(d));
  });
}

TETHER_API tether_status_t tether_managed_async_resource_create(int device, tether_resource_t** out) {
  return guard("tether_managed_async_resource_create", [&] {
    require_out(out);
    *out = nullptr;
    const int d = cuda_device(device);
    *out = make_resource_handle(core::cuda::make_managed_async_resource(d), nullptr, "device=" + std::to_string(d));
  });
}

TETHER_API tether_status_t tether_sam_headroom_resource_create(int device, const tether_sam_headroom_options_t* options,
                                                               tether_resource_t** out) {
  return guard("tether_sam_headroom_resource_create", [&] {
    require_out(out);
    *out = nullptr;
    const tether_sam_headroom_options_t o = read_options(options, kSamHeadroomDefaults, "options");
    const int d = cuda_device(device);
    std::string args = "device=" + std::to_string(d);
    const std::string opts = spec::format_options("sam_headroom", &o, nullptr);
    if (!opts.empty()) args += ", " + opts;
    *out = make_resource_handle(core::cuda::make_sam_headroom_resource(d, o.headroom), nullptr, std::move(args));
  });
}

TETHER_API tether_status_t tether_pinned_host_resource_create(int device, tether_resource_t** out) {
  return guard("tether_pinned_host_resource_create", [&] {
    require_out(out);
    *out = nullptr;
    const int d = cuda_device(device);
    *out = make_resource_handle(core::cuda::make_pinned_host_resource(d), nullptr, "device=" + std::to_string(d));
  });
}

}  // extern "C"
