// tether/cpp/binning.hpp - the binning resource in the C++ wrapper (tether/binning.h).
// Part of the header-only C++ wrapper: include tether/tether.hpp (this file
// includes what it needs, so it also compiles alone).
#ifndef TETHER_CPP_BINNING_HPP
#define TETHER_CPP_BINNING_HPP

#include <cstddef>
#include <vector>

#include "tether/cpp/resource.hpp"
#include "tether/tether.h"

namespace tether {

/// Options of binning_resource().
struct binning_options {
  /// Fixed-size bins of 2^min_size_exponent .. 2^max_size_exponent bytes (both 0: no bins).
  unsigned min_size_exponent = 0;
  unsigned max_size_exponent = 0;
  /// Blocks per upstream chunk of the fixed-size bins created (0: 128).
  std::size_t blocks_to_preallocate = 0;
  /// Serves requests above every bin (empty: the upstream); kept alive by the binning resource.
  resource fallback = resource();
};

/// A new binning resource over `upstream`: requests go to the smallest bin of
/// at least their size that honours their alignment, others to the fallback. The
/// binning resource keeps the upstream, the fallback and every bin alive.
inline resource binning_resource(const resource& upstream, const binning_options& options = {}) {
  tether_binning_options_t o = TETHER_BINNING_OPTIONS_INIT;
  o.min_size_exponent = options.min_size_exponent;
  o.max_size_exponent = options.max_size_exponent;
  o.blocks_to_preallocate = options.blocks_to_preallocate;
  o.fallback = options.fallback.get();
  return detail::make_resource(
      [&](tether_resource_t** out) { return tether_binning_resource_create(upstream.get(), &o, out); });
}

/// Add a bin to `binning` for requests up to `size` bytes, served by `bin`
/// (kept alive by the binning resource) or, if `bin` is empty, by a new
/// fixed-size resource over the upstream. Throws invalid_argument_error for
/// size 0 or a size that already has a bin, not_supported_error if `binning`
/// is not a binning resource.
inline void add_bin(const resource& binning, std::size_t size, const resource& bin = resource()) {
  check(tether_binning_resource_add_bin(binning.get(), size, bin.get()));
}

/// The bin sizes of a binning resource, ascending.
inline std::vector<std::size_t> bin_sizes(const resource& binning) {
  std::size_t count = 0;
  check(tether_binning_get_bin_sizes(binning.get(), nullptr, 0, &count));
  std::vector<std::size_t> sizes(count);
  check(tether_binning_get_bin_sizes(binning.get(), sizes.data(), sizes.size(), &count));
  sizes.resize(count < sizes.size() ? count : sizes.size());
  return sizes;
}

/// What a binning resource routes; throws not_supported_error for other resources.
inline tether_binning_info_t binning_info(const resource& binning) {
  tether_binning_info_t info = TETHER_BINNING_INFO_INIT;
  check(tether_binning_get_info(binning.get(), &info));
  return info;
}

}  // namespace tether

#endif  // TETHER_CPP_BINNING_HPP
