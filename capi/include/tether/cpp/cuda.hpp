// tether/cpp/cuda.hpp - the CUDA resources and driver queries (tether/cuda.h).
// Part of the header-only C++ wrapper: include tether/tether.hpp (this file
// includes what it needs, so it also compiles alone).
#ifndef TETHER_CPP_CUDA_HPP
#define TETHER_CPP_CUDA_HPP

#include <cstddef>
#include <cstdint>
#include <string>

#include "tether/cpp/kinds.hpp"
#include "tether/cpp/resource.hpp"
#include "tether/tether.h"

namespace tether {

/// Stream-ordered device memory of `device` from a CUDA memory pool someone else owns
/// (a CUmemoryPool / cudaMemPool_t; nullptr: the device's current pool), which must
/// outlive the resource (tether_async_view_resource_create). Throws no_device_error without a GPU.
inline resource async_view_resource(int device = 0, void* pool = nullptr) {
  tether_async_view_options_t o = TETHER_ASYNC_VIEW_OPTIONS_INIT;
  o.pool = pool;
  return detail::make_resource(
      [&](tether_resource_t** out) { return tether_async_view_resource_create(device, &o, out); });
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
