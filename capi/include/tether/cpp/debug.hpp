// tether/cpp/debug.hpp - diagnostics (tether/debug.h).
// Part of the header-only C++ wrapper: include tether/tether.hpp (this file
// includes what it needs, so it also compiles alone).
#ifndef TETHER_CPP_DEBUG_HPP
#define TETHER_CPP_DEBUG_HPP

#include <cstddef>

#include "tether/tether.h"

namespace tether {

/// Live handles of `type` in the process (see tether/debug.h).
inline std::size_t live_objects(tether_object_type_t type = TETHER_OBJECT_ANY) noexcept {
  return tether_debug_live_objects(type);
}

}  // namespace tether

#endif  // TETHER_CPP_DEBUG_HPP
