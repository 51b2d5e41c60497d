// tether/cpp/cuda.hpp - the CUDA resources and driver queries (tether/cuda.h).
// Part of the header-only C++ wrapper: include tether/tether.hpp (this file
// includes what it needs, so it also compiles alone).
#ifndef TETHER_CPP_CUDA_HPP
#define TETHER_CPP_CUDA_HPP

#include <cstddef>
#include <cstdint>
#include <string>

#include "tether/cpp/resource.hpp"
#include "tether/tether.h"

namespace tether {

/// Options of async_resource(); see tether_async_options_t.
struct async_options {
  /// Allocate from the device's default memory pool (the other fields are ignored).
  bool use_default_pool = false;
  /// Bytes the owned pool reserves at creation.
  std::size_t initial_pool_size = 0;
  /// Bytes the owned pool keeps when idle.
  std::size_t release_threshold = 0;
  /// Upper bound of the owned pool (0: no limit).
  std::size_t maximum_pool_size = 0;
  /// TETHER_IPC_HANDLE_NONE or TETHER_IPC_HANDLE_POSIX_FD.
  std::uint32_t ipc_handle_type = TETHER_IPC_HANDLE_NONE;
};

/// Device memory of `device` (cuMemAlloc). Throws no_device_error without a GPU.
inline resource cuda_resource(int device = 0) {
  return detail::make_resource([&](tether_resource_t** out) { return tether_cuda_resource_create(device, out); });
}

/// Stream-ordered device memory from a CUDA memory pool of `device`.
/// Throws no_device_error without a GPU.
inline resource async_resource(int device = 0, const async_options& options = {}) {
  tether_async_options_t o = TETHER_ASYNC_OPTIONS_INIT;
  o.use_default_pool = options.use_default_pool ? 1 : 0;
  o.initial_pool_size = options.initial_pool_size;
  o.release_threshold = options.release_threshold;
  o.maximum_pool_size = options.maximum_pool_size;
  o.ipc_handle_type = options.ipc_handle_type;
  return detail::make_resource(
      [&](tether_resource_t** out) { return tether_async_resource_create(device, &o, out); });
}

/// Stream-ordered device memory of `device` from a CUDA memory pool someone else owns
/// (a CUmemoryPool / cudaMemPool_t; nullptr: the device's current pool), which must
/// outlive the resource (tether_async_view_resource_create). Throws no_device_error without a GPU.
inline resource async_view_resource(int device = 0, void* pool = nullptr) {
  tether_async_view_options_t o = TETHER_ASYNC_VIEW_OPTIONS_INIT;
  o.pool = pool;
  return detail::make_resource(
      [&](tether_resource_t** out) { return tether_async_view_resource_create(device, &o, out); });
}

/// malloc'd (pageable) memory for a device with pageable memory access (tether_system_resource_create).
/// Throws no_device_error without a GPU.
inline resource system_resource(int device = 0) {
  return detail::make_resource([&](tether_resource_t** out) { return tether_system_resource_create(device, out); });
}

/// Options of sam_headroom_resource(); see tether_sam_headroom_options_t.
struct sam_headroom_options {
  /// Bytes of device memory kept free: only what the free memory above it covers prefers the device.
  std::size_t headroom = 0;
};

/// malloc'd memory for a device with pageable memory access, each allocation advised to prefer
/// the device as far as its free memory above `options.headroom` covers it
/// (tether_sam_headroom_resource_create). Throws no_device_error without a GPU.
inline resource sam_headroom_resource(int device = 0, const sam_headroom_options& options = {}) {
  tether_sam_headroom_options_t o = TETHER_SAM_HEADROOM_OPTIONS_INIT;
  o.headroom = options.headroom;
  return detail::make_resource(
      [&](tether_resource_t** out) { return tether_sam_headroom_resource_create(device, &o, out); });
}

/// Stream-ordered managed memory from the device's default managed memory pool (CUDA 13;
/// tether_managed_async_resource_create). Throws no_device_error without a GPU.
inline resource managed_async_resource(int device = 0) {
  return detail::make_resource(
      [&](tether_resource_t** out) { return tether_managed_async_resource_create(device, out); });
}

/// Managed (unified) memory (cuMemAllocManaged). Throws no_device_error without a GPU.
inline resource managed_resource(int device = 0) {
  return detail::make_resource(
      [&](tether_resource_t** out) { return tether_managed_resource_create(device, out); });
}

/// Page-locked, device-mapped host memory allocated in `device`'s primary context.
/// Throws no_device_error without a GPU.
inline resource pinned_host_resource(int device = 0) {
  return detail::make_resource(
      [&](tether_resource_t** out) { return tether_pinned_host_resource_create(device, out); });
}

/// Number of CUDA devices; throws no_device_error without a usable driver.
inline int cuda_device_count() {
  int n = 0;
  check(tether_cuda_get_device_count(&n));
  return n;
}
/// The name of `device` as the driver reports it (e.g. "NVIDIA H200"); throws
/// no_device_error without a driver, invalid_argument_error for a bad id.
inline std::string cuda_device_name(int device = 0) {
  std::size_t needed = 0;
  check(tether_cuda_get_device_name(device, nullptr, 0, &needed));
  std::string name(needed, '\0');
  check(tether_cuda_get_device_name(device, name.data(), name.size(), &needed));
  name.resize(std::char_traits<char>::length(name.c_str()));
  return name;
}
/// The CUDA driver's version (e.g. 13000); throws no_device_error without a driver.
inline int cuda_driver_version() {
  int v = 0;
  check(tether_cuda_get_driver_version(&v));
  return v;
}
/// The calling thread's current CUDA device.
inline int cuda_current_device() {
  int d = 0;
  check(tether_cuda_get_current_device(&d));
  return d;
}
/// Wait for all work on `stream` of `device`.
inline void cuda_stream_synchronize(int device, tether_stream_t stream) {
  check(tether_cuda_stream_synchronize(device, stream));
}

}  // namespace tether

#endif  // TETHER_CPP_CUDA_HPP
