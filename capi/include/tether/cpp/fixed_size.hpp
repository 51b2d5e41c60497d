// tether/cpp/fixed_size.hpp - the fixed-size resource in the C++ wrapper (tether/fixed_size.h).
// Part of the header-only C++ wrapper: include tether/tether.hpp (this file
// includes what it needs, so it also compiles alone).
#ifndef TETHER_CPP_FIXED_SIZE_HPP
#define TETHER_CPP_FIXED_SIZE_HPP

#include <cstddef>

#include "tether/cpp/kinds.hpp"
#include "tether/cpp/resource.hpp"
#include "tether/tether.h"

namespace tether {

/// What a fixed-size resource holds; throws not_supported_error for other resources.
inline tether_fixed_size_info_t fixed_size_info(const resource& fixed_size) {
  tether_fixed_size_info_t info = TETHER_FIXED_SIZE_INFO_INIT;
  check(tether_fixed_size_get_info(fixed_size.get(), &info));
  return info;
}

}  // namespace tether

#endif  // TETHER_CPP_FIXED_SIZE_HPP
