// tether/cpp/pool.hpp - pool_options and pool_resource() (tether/pool.h).
// Part of the header-only C++ wrapper: include tether/tether.hpp (this file
// includes what it needs, so it also compiles alone).
#ifndef TETHER_CPP_POOL_HPP
#define TETHER_CPP_POOL_HPP

#include <cstddef>

#include "tether/cpp/resource.hpp"
#include "tether/tether.h"

namespace tether {

/// Options of pool_resource(); 0 means "the library's default" for each field.
struct pool_options {
  /// Bytes taken from upstream when the pool is created.
  std::size_t initial_size = 0;
  /// The pool never holds more than this from upstream (0: no limit).
  std::size_t maximum_size = 0;
  /// Smallest chunk the pool asks upstream for when it grows (0: 1 MiB).
  std::size_t growth_size = 0;
};

/// A new coalescing pool over `upstream` (which the pool keeps alive).
/// Throws invalid_argument_error if initial_size > maximum_size,
/// out_of_memory_error if initial_size cannot be obtained.
inline resource pool_resource(const resource& upstream, const pool_options& options = {}) {
  tether_pool_options_t o = TETHER_POOL_OPTIONS_INIT;
  o.initial_size = options.initial_size;
  o.maximum_size = options.maximum_size;
  o.growth_size = options.growth_size;
  return detail::make_resource(
      [&](tether_resource_t** out) { return tether_pool_resource_create(upstream.get(), &o, out); });
}

}  // namespace tether

#endif  // TETHER_CPP_POOL_HPP
