// tether/cpp/arena.hpp - the arena resource in the C++ wrapper (tether/arena.h).
// Part of the header-only C++ wrapper: include tether/tether.hpp (this file
// includes what it needs, so it also compiles alone).
#ifndef TETHER_CPP_ARENA_HPP
#define TETHER_CPP_ARENA_HPP

#include <cstddef>

#include "tether/cpp/kinds.hpp"
#include "tether/cpp/resource.hpp"
#include "tether/tether.h"

namespace tether {

/// What an arena resource holds; throws not_supported_error for other resources.
inline tether_arena_info_t arena_info(const resource& arena) {
  tether_arena_info_t info = TETHER_ARENA_INFO_INIT;
  check(tether_arena_get_info(arena.get(), &info));
  return info;
}

}  // namespace tether

#endif  // TETHER_CPP_ARENA_HPP
