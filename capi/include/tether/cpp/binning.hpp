// tether/cpp/binning.hpp - the binning resource in the C++ wrapper (tether/binning.h).
// Part of the header-only C++ wrapper: include tether/tether.hpp (this file
// includes what it needs, so it also compiles alone).
#ifndef TETHER_CPP_BINNING_HPP
#define TETHER_CPP_BINNING_HPP

#include <cstddef>
#include <vector>

#include "tether/cpp/kinds.hpp"
#include "tether/cpp/resource.hpp"
#include "tether/tether.h"

namespace tether {

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
