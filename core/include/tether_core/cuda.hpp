// CUDA through the driver API, loaded at run time (libcuda.so.1 is never a
// link-time dependency). Every function throws Error(NO_DEVICE, reason) when
// no usable driver or device is present (the reason says which: no driver,
// no device, or a driver too old), and Error(CUDA, "<call> failed: <name>")
// when a driver call fails. All work happens in the device's primary context.
#pragma once

#include <cstddef>

#include "tether_core/resource.hpp"

namespace tether::core::cuda {

// Number of devices. Throws NO_DEVICE.
int device_count();
// The driver's CUDA version (cuDriverGetVersion). Throws NO_DEVICE.
int driver_version();
// The calling thread's current context's device, else 0. Throws NO_DEVICE.
int current_device();
// Throws INVALID_ARGUMENT if device is not in [0, device_count()), NO_DEVICE if none.
void check_device(int device);
// Wait for all work on `stream` (stream 0: the legacy default stream of device's primary context).
void stream_synchronize(int device, stream_t stream);

ResourcePtr make_cuda_resource(int device);

struct AsyncOptions {
  bool use_default_pool = false;
  std::size_t initial_pool_size = 0;
  std::size_t release_threshold = 0;
  std::size_t maximum_pool_size = 0;
  unsigned ipc_handle_type = 0;  // TETHER_IPC_HANDLE_*
};
ResourcePtr make_async_resource(int device, const AsyncOptions& options);
ResourcePtr make_managed_resource(int device);
ResourcePtr make_pinned_host_resource(int device);

// Copy n bytes between any host, pinned, managed or device pointers, ordered on
// `stream` of `device`'s primary context; if synchronous, returns once done.
void copy(void* dst, const void* src, std::size_t n, int device, stream_t stream, bool synchronous);

}  // namespace tether::core::cuda
