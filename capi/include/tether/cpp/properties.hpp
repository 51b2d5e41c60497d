// tether/cpp/properties.hpp - CCCL property tags and resource_with<Properties...>.
// Part of the header-only C++ wrapper: include tether/tether.hpp (this file
// includes what it needs, so it also compiles alone).
#ifndef TETHER_CPP_PROPERTIES_HPP
#define TETHER_CPP_PROPERTIES_HPP

#include <string>
#include <type_traits>
#include <utility>

#include "tether/cpp/resource.hpp"
#include "tether/tether.h"
// CCCL interop is on when <cuda/memory_resource> (and the CUDA runtime header it
// needs) can be included. Define TETHER_CCCL_INTEROP to 0 to keep CCCL out, or to
// 1 to insist on it.
#ifndef TETHER_CCCL_INTEROP
#  if defined(__has_include)
#    if __has_include(<cuda/memory_resource>) && __has_include(<cuda_runtime_api.h>)
#      define TETHER_CCCL_INTEROP 1
#    endif
#  endif
#  ifndef TETHER_CCCL_INTEROP
#    define TETHER_CCCL_INTEROP 0
#  endif
#endif

#if TETHER_CCCL_INTEROP
// CCCL 3.0 (CUDA 13.0) hides the memory-resource API behind this macro; later
// versions ignore it.
#  ifndef LIBCUDACXX_ENABLE_EXPERIMENTAL_MEMORY_RESOURCE
#    define LIBCUDACXX_ENABLE_EXPERIMENTAL_MEMORY_RESOURCE
#  endif
#  include <cuda/memory_resource>
#  include <cuda/stream_ref>
#endif


namespace tether {

// With CCCL the tags are CCCL's own, so get_property() satisfies its concepts.
#if TETHER_CCCL_INTEROP
/// Property tag: kernels may access the memory (cuda::mr::device_accessible).
using device_accessible = ::cuda::mr::device_accessible;
/// Property tag: host code may access the memory (cuda::mr::host_accessible).
using host_accessible = ::cuda::mr::host_accessible;
#else
/// Property tag: kernels may access the memory.
struct device_accessible {};
/// Property tag: host code may access the memory.
struct host_accessible {};
#endif

namespace detail {
template <class P>
struct property_check {
  static_assert(sizeof(P) == 0, "tether::resource_with: unknown property");
};
template <>
struct property_check<device_accessible> {
  static bool holds(const tether_resource_properties_t& p) noexcept { return p.device_accessible != 0; }
  static const char* name() noexcept { return "device_accessible"; }
};
template <>
struct property_check<host_accessible> {
  static bool holds(const tether_resource_properties_t& p) noexcept { return p.host_accessible != 0; }
  static const char* name() noexcept { return "host_accessible"; }
};
template <class P, class... Ps>
inline constexpr bool contains_v = (std::is_same_v<P, Ps> || ...);
}  // namespace detail

/// A tether::resource checked, when constructed, to have every property in
/// `Properties` (device_accessible, host_accessible), and which advertises them
/// statically through get_property() - what cuda::mr::resource_ref<...> and the
/// cuda::mr::*_with concepts need. Everything else is tether::resource.
template <class... Properties>
class resource_with : public resource {
 public:
  /// Check and keep a reference to `res`; throws invalid_argument_error if its
  /// memory lacks one of the properties.
  explicit resource_with(resource res) : resource(std::move(res)) {
    const tether_resource_properties_t p = properties();
    (require<Properties>(p), ...);
  }
  /// Advertise each property in Properties (found by argument-dependent lookup).
  template <class P, std::enable_if_t<detail::contains_v<P, Properties...>, int> = 0>
  friend constexpr void get_property(const resource_with&, P) noexcept {}

 private:
  template <class P>
  void require(const tether_resource_properties_t& p) const {
    if (!detail::property_check<P>::holds(p))
      throw invalid_argument_error(TETHER_ERROR_INVALID_ARGUMENT,
                                   std::string("tether::resource_with: resource '") + name() +
                                       "' is not " + detail::property_check<P>::name());
  }
};

/// A resource checked to give device-accessible memory.
using device_resource = resource_with<device_accessible>;
/// A resource checked to give host-accessible memory.
using host_accessible_resource = resource_with<host_accessible>;

}  // namespace tether

#endif  // TETHER_CPP_PROPERTIES_HPP
