// tether/cpp/fixed_size.hpp - the fixed-size resource in the C++ wrapper (tether/fixed_size.h).
// Part of the header-only C++ wrapper: include tether/tether.hpp (this file
// includes what it needs, so it also compiles alone).
#ifndef TETHER_CPP_FIXED_SIZE_HPP
#define TETHER_CPP_FIXED_SIZE_HPP

#include <cstddef>

#include "tether/cpp/resource.hpp"
#include "tether/tether.h"

namespace tether {

/// Options of fixed_size_resource(). The defaults are TETHER_FIXED_SIZE_OPTIONS_INIT's
/// (read from the macro, so they cannot drift from the C contract).
struct fixed_size_options {
  /// Bytes of every block (rounded up to a multiple of 256).
  std::size_t block_size = tether_fixed_size_options_t TETHER_FIXED_SIZE_OPTIONS_INIT.block_size;
  /// Blocks per chunk taken from upstream, at creation and at every refill (0: 1).
  std::size_t blocks_to_preallocate = tether_fixed_size_options_t TETHER_FIXED_SIZE_OPTIONS_INIT.blocks_to_preallocate;
};

/// A new fixed-size resource over `upstream` (kept alive by it): one block per
/// request; larger requests throw out_of_memory_error naming the size.
inline resource fixed_size_resource(const resource& upstream, const fixed_size_options& options = {}) {
  tether_fixed_size_options_t o = TETHER_FIXED_SIZE_OPTIONS_INIT;
  o.block_size = options.block_size;
  o.blocks_to_preallocate = options.blocks_to_preallocate;
  return detail::make_resource(
      [&](tether_resource_t** out) { return tether_fixed_size_resource_create(upstream.get(), &o, out); });
}

/// What a fixed-size resource holds; throws not_supported_error for other resources.
inline tether_fixed_size_info_t fixed_size_info(const resource& fixed_size) {
  tether_fixed_size_info_t info = TETHER_FIXED_SIZE_INFO_INIT;
  check(tether_fixed_size_get_info(fixed_size.get(), &info));
  return info;
}

}  // namespace tether

#endif  // TETHER_CPP_FIXED_SIZE_HPP
